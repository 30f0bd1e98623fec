/* Unit tests of the generation-id decision table, split-brain policies and transitions
 * (replicator/genid.c). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../../replicator/genid.h"

#define JC  REPL_GEN_JUST_CREATED
#define X   0x1111111111111110ull
#define Y   0x2222222222222220ull
#define Z   0x3333333333333330ull
#define W   0x4444444444444440ull
#define V   0x5555555555555550ull
#define H   0x6666666666666660ull
#define UTD REPL_DISK_UPTODATE
#define OUT REPL_DISK_OUTDATED
#define INC REPL_DISK_INCONSISTENT
#define PRI REPL_ROLE_PRIMARY
#define SEC REPL_ROLE_SECONDARY

/* A side: generations, disk, role, crashed primary, dirty bits, node id. */
#define SIDE(cur, bm, h0, h1, dsk, rl, crashed, bits, id)                                          \
        {                                                                                          \
                .gen = {.current = (cur), .bitmap = (bm), .history = {(h0), (h1)}}, .disk = (dsk), \
                .role = (rl), .crashed_primary = (crashed), .dirty_bits = (bits), .node_id = (id)  \
        }

struct vector {
        const char *name;
        struct repl_side a, b;
        enum repl_decision expect; /* as seen from a */
};

static struct vector vectors[] = {
    {"in sync", SIDE(X, 0, 0, 0, UTD, PRI, 0, 0, 1), SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 2),
     REPL_DECIDE_IN_SYNC},
    {"same gen, Primary has bits", SIDE(X, 0, 0, 0, UTD, PRI, 0, 9, 2),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 1), REPL_DECIDE_SOURCE_BITMAP},
    {"same gen, peer crashed primary", SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 1),
     SIDE(X, 0, 0, 0, UTD, SEC, 1, 5, 2), REPL_DECIDE_TARGET_BITMAP},
    {"same gen, crashed primary beats current Primary", SIDE(X, 0, 0, 0, UTD, SEC, 1, 3, 2),
     SIDE(X, 0, 0, 0, UTD, PRI, 0, 4, 1), REPL_DECIDE_SOURCE_BITMAP},
    {"same gen, crashed primary without bits still resyncs", SIDE(X, 0, 0, 0, UTD, SEC, 1, 0, 2),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 1), REPL_DECIDE_SOURCE_BITMAP},
    {"same gen, UpToDate beats Outdated", SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 2),
     SIDE(X, 0, 0, 0, OUT, SEC, 0, 7, 1), REPL_DECIDE_SOURCE_BITMAP},
    {"same gen, lower node id is source", SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 1),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 7, 2), REPL_DECIDE_SOURCE_BITMAP},
    {"same gen, higher node id is target", SIDE(X, 0, 0, 0, UTD, SEC, 0, 7, 3),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_TARGET_BITMAP},
    {"same gen, Inconsistent side is target", SIDE(X, 0, 0, 0, INC, SEC, 0, 4, 1),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_TARGET_BITMAP},
    {"same gen, crashed primary Inconsistent", SIDE(X, 0, 0, 0, INC, SEC, 1, 4, 1),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_NO_GOOD_DATA},
    {"same gen, equal node ids", SIDE(X, 0, 0, 0, UTD, SEC, 0, 4, 1),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 4, 1), REPL_DECIDE_UNRELATED},
    {"both new", SIDE(JC, 0, 0, 0, INC, SEC, 0, 0, 1), SIDE(JC, 0, 0, 0, INC, SEC, 0, 0, 2),
     REPL_DECIDE_BOTH_NEW},
    {"self new, peer has data", SIDE(JC, 0, 0, 0, INC, SEC, 0, 0, 1),
     SIDE(X, 0, 0, 0, UTD, PRI, 0, 0, 2), REPL_DECIDE_TARGET_FULL},
    {"self new, peer Outdated", SIDE(JC, 0, 0, 0, INC, SEC, 0, 0, 1),
     SIDE(X, Y, 0, 0, OUT, SEC, 0, 0, 2), REPL_DECIDE_TARGET_FULL},
    {"self new, peer Inconsistent", SIDE(JC, 0, 0, 0, INC, SEC, 0, 0, 1),
     SIDE(X, 0, 0, 0, INC, SEC, 0, 0, 2), REPL_DECIDE_NO_GOOD_DATA},
    {"self moved on from peer's current", SIDE(Y, X, 0, 0, UTD, PRI, 0, 12, 1),
     SIDE(X, 0, 0, 0, OUT, SEC, 0, 0, 2), REPL_DECIDE_SOURCE_BITMAP},
    {"old primary returns after failover", SIDE(X, 0, 0, 0, UTD, SEC, 1, 3, 1),
     SIDE(Y, X, 0, 0, UTD, PRI, 0, 8, 2), REPL_DECIDE_TARGET_BITMAP},
    {"interrupted resync target", SIDE(Y, X, W, 0, UTD, PRI, 0, 12, 1),
     SIDE(X, 0, W, 0, INC, SEC, 0, 5, 2), REPL_DECIDE_SOURCE_BITMAP},
    {"bitmap source Inconsistent", SIDE(Y, X, 0, 0, INC, SEC, 0, 12, 1),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_NO_GOOD_DATA},
    {"both moved on from the same point", SIDE(Y, X, 0, 0, UTD, PRI, 0, 3, 1),
     SIDE(Z, X, 0, 0, UTD, PRI, 0, 4, 2), REPL_DECIDE_SPLIT_BRAIN},
    {"equal bitmaps checked before history", SIDE(Y, X, Z, 0, UTD, PRI, 0, 3, 1),
     SIDE(Z, X, 0, 0, UTD, PRI, 0, 4, 2), REPL_DECIDE_SPLIT_BRAIN},
    {"peer current in history[0]", SIDE(Y, 0, X, 0, UTD, SEC, 0, 0, 1),
     SIDE(X, 0, 0, 0, OUT, SEC, 0, 0, 2), REPL_DECIDE_SOURCE_FULL},
    {"peer current in history[1]", SIDE(Y, 0, Z, X, UTD, SEC, 0, 0, 2),
     SIDE(X, 0, 0, 0, OUT, SEC, 0, 0, 1), REPL_DECIDE_SOURCE_FULL},
    {"self behind a full generation, peer also moved", SIDE(W, 0, 0, 0, UTD, SEC, 0, 0, 1),
     SIDE(Y, X, W, 0, UTD, PRI, 0, 2, 2), REPL_DECIDE_TARGET_FULL},
    {"bitmap rule before history rule", SIDE(Y, X, Z, 0, UTD, PRI, 0, 2, 1),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_SOURCE_BITMAP},
    {"full sync source Inconsistent", SIDE(Y, 0, X, 0, INC, SEC, 0, 0, 1),
     SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_NO_GOOD_DATA},
    {"common history id", SIDE(Y, Z, W, 0, UTD, PRI, 0, 1, 1), SIDE(V, H, W, 0, UTD, PRI, 0, 1, 2),
     REPL_DECIDE_SPLIT_BRAIN},
    {"bitmap id in peer history", SIDE(Y, Z, 0, 0, UTD, PRI, 0, 1, 1),
     SIDE(V, 0, Z, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_SPLIT_BRAIN},
    {"history[1] shared", SIDE(Y, 0, Z, W, UTD, SEC, 0, 0, 1), SIDE(V, 0, H, W, UTD, SEC, 0, 0, 2),
     REPL_DECIDE_SPLIT_BRAIN},
    {"unrelated", SIDE(Y, Z, W, 0, UTD, SEC, 0, 0, 1), SIDE(V, H, X, 0, UTD, SEC, 0, 0, 2),
     REPL_DECIDE_UNRELATED},
    {"contradictory bitmaps", SIDE(Y, X, 0, 0, UTD, SEC, 0, 0, 1),
     SIDE(X, Y, 0, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_SPLIT_BRAIN},
    {"contradictory histories", SIDE(Y, 0, X, 0, UTD, SEC, 0, 0, 1),
     SIDE(X, 0, Y, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_SPLIT_BRAIN},
    {"JUST_CREATED never counts as common history", SIDE(Y, JC, 0, 0, UTD, SEC, 0, 0, 1),
     SIDE(Z, 0, JC, 0, UTD, SEC, 0, 0, 2), REPL_DECIDE_UNRELATED},
    {"zero current", SIDE(0, 0, 0, 0, UTD, SEC, 0, 0, 1), SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 2),
     REPL_DECIDE_UNRELATED},
};

/* Rows that set want_discard (rule 0), kept apart so the table above stays readable. */
static void discard_rows(void)
{
        struct vector extra[] = {
            {"discard on an in-sync pair", SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 1),
             SIDE(X, 0, 0, 0, UTD, PRI, 0, 0, 2), REPL_DECIDE_TARGET_FULL},
            {"discard on both", SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 1),
             SIDE(X, 0, 0, 0, UTD, PRI, 0, 0, 2), REPL_DECIDE_NO_GOOD_DATA},
            {"discard, peer Inconsistent", SIDE(X, 0, 0, 0, UTD, SEC, 0, 0, 1),
             SIDE(X, 0, 0, 0, INC, SEC, 0, 0, 2), REPL_DECIDE_NO_GOOD_DATA},
            {"discard beats split brain", SIDE(Y, X, 0, 0, UTD, SEC, 0, 3, 1),
             SIDE(Z, X, 0, 0, UTD, PRI, 0, 4, 2), REPL_DECIDE_TARGET_FULL},
            {"peer discards, peer is new", SIDE(X, 0, 0, 0, UTD, PRI, 0, 0, 1),
             SIDE(JC, 0, 0, 0, INC, SEC, 0, 0, 2), REPL_DECIDE_SOURCE_FULL},
        };
        for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
                extra[i].a.want_discard = i != 4;
                extra[i].b.want_discard = i == 1 || i == 4;
                const char *why = NULL;
                enum repl_decision ab = repl_gen_decide(&extra[i].a, &extra[i].b, &why);
                enum repl_decision ba = repl_gen_decide(&extra[i].b, &extra[i].a, NULL);
                ck_assert_msg(ab == extra[i].expect, "%s: got %s want %s", extra[i].name,
                              repl_decision_name(ab), repl_decision_name(extra[i].expect));
                ck_assert_msg(ba == repl_decision_mirror(ab), "%s: not symmetric", extra[i].name);
                ck_assert_ptr_nonnull(why);
        }
}

START_TEST(test_decision_table)
{
        size_t n = sizeof(vectors) / sizeof(vectors[0]);
        ck_assert_uint_ge(n, 25);
        for (size_t i = 0; i < n; i++) {
                const struct vector *v = &vectors[i];
                const char *why_ab = NULL, *why_ba = NULL;
                enum repl_decision ab = repl_gen_decide(&v->a, &v->b, &why_ab);
                enum repl_decision ba = repl_gen_decide(&v->b, &v->a, &why_ba);
                ck_assert_msg(ab == v->expect, "row %zu (%s): got %s want %s (%s)", i, v->name,
                              repl_decision_name(ab), repl_decision_name(v->expect), why_ab);
                ck_assert_msg(ba == repl_decision_mirror(v->expect),
                              "row %zu (%s) mirrored: got %s want %s (%s)", i, v->name,
                              repl_decision_name(ba),
                              repl_decision_name(repl_decision_mirror(v->expect)), why_ba);
                ck_assert_ptr_nonnull(why_ab);
                ck_assert_int_gt(strlen(why_ab), 0);
        }
}
END_TEST

START_TEST(test_discard_rows)
{
        discard_rows();
}
END_TEST

START_TEST(test_decision_names)
{
        ck_assert_str_eq(repl_decision_name(REPL_DECIDE_IN_SYNC), "InSync");
        ck_assert_str_eq(repl_decision_name(REPL_DECIDE_NO_GOOD_DATA), "NoGoodData");
        ck_assert_str_eq(repl_decision_name((enum repl_decision)99), "?");
        ck_assert_int_eq(repl_decision_mirror(REPL_DECIDE_SOURCE_FULL), REPL_DECIDE_TARGET_FULL);
        ck_assert_int_eq(repl_decision_mirror(REPL_DECIDE_SPLIT_BRAIN), REPL_DECIDE_SPLIT_BRAIN);
}
END_TEST

/* Resolves from both sides and checks the two answers mirror each other. */
static enum repl_decision resolve2(enum repl_sb_policy pol, const char *node, struct repl_side *a,
                                   struct repl_side *b)
{
        const char *why = NULL;
        enum repl_decision ab = repl_split_brain_resolve(pol, node, a, b, &why);
        enum repl_decision ba = repl_split_brain_resolve(pol, node, b, a, NULL);
        ck_assert_ptr_nonnull(why);
        ck_assert_msg(ba == repl_decision_mirror(ab), "policy %d not symmetric: %s vs %s", pol,
                      repl_decision_name(ab), repl_decision_name(ba));
        ck_assert(ab == REPL_DECIDE_SOURCE_BITMAP || ab == REPL_DECIDE_TARGET_BITMAP ||
                  ab == REPL_DECIDE_SPLIT_BRAIN);
        return ab;
}

START_TEST(test_sb_policies)
{
        struct repl_side a = SIDE(Y, X, 0, 0, UTD, PRI, 0, 0, 1);
        struct repl_side b = SIDE(Z, X, 0, 0, UTD, PRI, 0, 5, 2);
        a.node_name = "alpha";
        b.node_name = "beta";

        /* discard-zero-changes */
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_ZERO_CHANGES, NULL, &a, &b),
                         REPL_DECIDE_TARGET_BITMAP);
        b.dirty_bits = 0;
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_ZERO_CHANGES, NULL, &a, &b),
                         REPL_DECIDE_SOURCE_BITMAP); /* both unchanged: higher id (b) loses */
        a.dirty_bits = 3;
        b.dirty_bits = 4;
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_ZERO_CHANGES, NULL, &a, &b),
                         REPL_DECIDE_SPLIT_BRAIN);

        /* discard-younger-primary */
        a.promote_epoch = 7;
        b.promote_epoch = 4;
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_YOUNGER_PRIMARY, NULL, &a, &b),
                         REPL_DECIDE_TARGET_BITMAP);
        b.promote_epoch = 9;
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_YOUNGER_PRIMARY, NULL, &a, &b),
                         REPL_DECIDE_SOURCE_BITMAP);
        b.promote_epoch = 7;
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_YOUNGER_PRIMARY, NULL, &a, &b),
                         REPL_DECIDE_SPLIT_BRAIN);

        /* discard-node-NAME */
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_NODE, "beta", &a, &b), REPL_DECIDE_SOURCE_BITMAP);
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_NODE, "alpha", &a, &b),
                         REPL_DECIDE_TARGET_BITMAP);
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_NODE, "gamma", &a, &b), REPL_DECIDE_SPLIT_BRAIN);
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_NODE, NULL, &a, &b), REPL_DECIDE_SPLIT_BRAIN);
        b.node_name = NULL;
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_NODE, "alpha", &a, &b),
                         REPL_DECIDE_TARGET_BITMAP);
        b.node_name = "beta";

        /* disconnect never picks */
        ck_assert_int_eq(resolve2(REPL_SB_DISCONNECT, "beta", &a, &b), REPL_DECIDE_SPLIT_BRAIN);

        /* a survivor without good data resolves nothing */
        a.disk = INC;
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_NODE, "beta", &a, &b), REPL_DECIDE_SPLIT_BRAIN);
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_NODE, "alpha", &a, &b),
                         REPL_DECIDE_TARGET_BITMAP);
}
END_TEST

START_TEST(test_transitions)
{
        struct repl_gen g = {.current = X};
        repl_gen_new_current(&g, Y);
        ck_assert_uint_eq(g.current, Y);
        ck_assert_uint_eq(g.bitmap, X);
        repl_gen_new_current(&g, Z); /* bitmap already tracks changes since X: kept */
        ck_assert_uint_eq(g.current, Z);
        ck_assert_uint_eq(g.bitmap, X);

        struct repl_gen fresh = {.current = JC};
        repl_gen_new_current(&fresh, W);
        ck_assert_uint_eq(fresh.current, W);
        ck_assert_uint_eq(fresh.bitmap, 0); /* JUST_CREATED names no data */

        g.history[0] = V;
        repl_gen_sync_source_done(&g);
        ck_assert_uint_eq(g.current, Z);
        ck_assert_uint_eq(g.bitmap, 0);
        ck_assert_uint_eq(g.history[0], X);
        ck_assert_uint_eq(g.history[1], V);
        repl_gen_sync_source_done(&g); /* nothing to shift */
        ck_assert_uint_eq(g.history[0], X);
        ck_assert_uint_eq(g.history[1], V);

        struct repl_gen t = {.current = H, .bitmap = W, .history = {1234, 5678}};
        repl_gen_sync_target_done(&t, &g);
        ck_assert_uint_eq(t.current, Z);
        ck_assert_uint_eq(t.bitmap, 0);
        ck_assert_uint_eq(t.history[0], X);
        ck_assert_uint_eq(t.history[1], V);
}
END_TEST

START_TEST(test_fresh_ids)
{
        uint64_t prev = 0;
        int repeats = 0;
        for (int i = 0; i < 2000; i++) {
                uint64_t id = repl_gen_fresh();
                ck_assert_uint_ne(id, 0);
                ck_assert_uint_ne(id, JC);
                repeats += id == prev;
                prev = id;
        }
        ck_assert_int_eq(repeats, 0);
}
END_TEST

static enum repl_decision decide2(const struct repl_side *a, const struct repl_side *b)
{
        enum repl_decision ab = repl_gen_decide(a, b, NULL);
        ck_assert_int_eq(repl_gen_decide(b, a, NULL), repl_decision_mirror(ab));
        return ab;
}

/* Resync done in direction src -> dst: generations move, bitmaps empty, both UpToDate. */
static void sync_done(struct repl_side *src, struct repl_side *dst)
{
        repl_gen_sync_source_done(&src->gen);
        repl_gen_sync_target_done(&dst->gen, &src->gen);
        src->dirty_bits = dst->dirty_bits = 0;
        src->crashed_primary = dst->crashed_primary = false;
        dst->disk = UTD;
}

START_TEST(test_scenario)
{
        struct repl_side a = SIDE(JC, 0, 0, 0, INC, SEC, 0, 0, 1);
        struct repl_side b = SIDE(JC, 0, 0, 0, INC, SEC, 0, 0, 2);
        a.node_name = "alpha";
        b.node_name = "beta";
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_BOTH_NEW);

        /* promote --force on a: its data becomes the truth, b gets a full sync */
        repl_gen_new_current(&a.gen, repl_gen_fresh());
        a.disk = UTD;
        a.role = PRI;
        a.promote_epoch = 1;
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_SOURCE_FULL);
        sync_done(&a, &b);
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_IN_SYNC);
        uint64_t x = a.gen.current;

        /* the Primary loses its peer and keeps writing */
        repl_gen_new_current(&a.gen, repl_gen_fresh());
        a.dirty_bits = 40;
        b.disk = OUT;
        ck_assert_uint_eq(a.gen.bitmap, x);
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_SOURCE_BITMAP);
        sync_done(&a, &b);
        ck_assert_uint_eq(a.gen.history[0], x);
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_IN_SYNC);

        /* kill the Primary, promote the Secondary, the old Primary returns */
        a.role = SEC;
        a.crashed_primary = true;
        a.dirty_bits = 1024; /* its activity log */
        repl_gen_new_current(&b.gen, repl_gen_fresh());
        b.role = PRI;
        b.promote_epoch = a.promote_epoch + 1;
        b.dirty_bits = 17;
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_TARGET_BITMAP);
        sync_done(&b, &a);
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_IN_SYNC);

        /* both promoted while apart */
        repl_gen_new_current(&b.gen, repl_gen_fresh());
        b.dirty_bits = 5;
        repl_gen_new_current(&a.gen, repl_gen_fresh());
        a.role = PRI;
        a.promote_epoch = b.promote_epoch + 1;
        a.dirty_bits = 6;
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_SPLIT_BRAIN);
        ck_assert_int_eq(resolve2(REPL_SB_DISCARD_YOUNGER_PRIMARY, NULL, &a, &b),
                         REPL_DECIDE_TARGET_BITMAP);
        a.role = SEC;
        sync_done(&b, &a);
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_IN_SYNC);

        /* the same split brain resolved by hand: discard on a, full sync to it */
        repl_gen_new_current(&b.gen, repl_gen_fresh());
        repl_gen_new_current(&a.gen, repl_gen_fresh());
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_SPLIT_BRAIN);
        a.want_discard = true;
        ck_assert_int_eq(decide2(&a, &b), REPL_DECIDE_TARGET_FULL);
}
END_TEST

static Suite *genid_suite(void)
{
        Suite *s = suite_create("repl_genid");
        TCase *tc = tcase_create("core");
        tcase_add_test(tc, test_decision_table);
        tcase_add_test(tc, test_discard_rows);
        tcase_add_test(tc, test_decision_names);
        tcase_add_test(tc, test_sb_policies);
        tcase_add_test(tc, test_transitions);
        tcase_add_test(tc, test_fresh_ids);
        tcase_add_test(tc, test_scenario);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(genid_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
