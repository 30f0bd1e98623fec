/*
 * The persistent reservation state machine alone (daemon/scsi/pr_model.c), driven by test
 * vectors: every PERSISTENT RESERVE OUT service action x every reservation type (and none) x
 * the caller being a non-registrant, a registrant that does not hold the reservation, or the
 * holder, with the outcome SPC-4 5.13.7-5.13.11 and 6.17 give: status, generation change,
 * the reservation and the registrations after, the unit attentions owed (2A/03 reservations
 * preempted, 2A/04 released, 2A/05 registrations preempted) and the nexuses PREEMPT AND ABORT
 * aborts. Then the edge cases, the conflict table (SPC-4 table 5-13, SBC-4 table 13), the
 * RESERVE/RELEASE exceptions, the record codec and the TransportIDs.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scsi/pr_model.h"
#include "tandem/byteorder.h"

/* ---- the setup every vector starts from ---- */

enum role { NONREG, REG, HOLDER, N_ROLES };
static const char *const role_name[N_ROLES] = {"non-registrant", "registrant", "holder"};
static const unsigned types[] = {0, 1, 3, 5, 6, 7, 8};
#define N_TYPES (sizeof(types) / sizeof(types[0]))

/*
 * Registrations B (key 0xb) and C (0xc), plus the caller A (0xa) unless it is a non-registrant
 * (then the caller is N). A reservation of type t is held by A when the caller is the holder,
 * else by B (all-registrants types: by every registrant).
 */
static void add_reg(struct pr_state *st, const char *name, uint64_t key, bool holder)
{
        struct pr_reg *r = &st->regs[st->nregs++];
        memset(r, 0, sizeof(*r));
        snprintf(r->name, sizeof(r->name), "%s", name);
        r->key = key;
        r->holder = holder;
}

static void setup(struct pr_state *st, enum role role, unsigned type)
{
        memset(st, 0, sizeof(*st));
        st->generation = 100;
        st->type = (uint8_t)type;
        bool single = type != 0 && !pr_type_all_registrants(type);
        if (role != NONREG)
                add_reg(st, "A", 0xa, single && role == HOLDER);
        add_reg(st, "B", 0xb, single && role != HOLDER);
        add_reg(st, "C", 0xc, false);
}

/* ---- the vectors ---- */

enum sa_variant {
        V_REGISTER,      /* REGISTER, key = own (0 when unregistered), SARK 0xaa */
        V_UNREGISTER,    /* REGISTER, key = own, SARK 0 */
        V_REG_IGNORE,    /* REGISTER AND IGNORE EXISTING KEY, key 0x999, SARK 0xaa */
        V_RESERVE,       /* RESERVE, key 0xa, type = the reservation's (WE if none) */
        V_RELEASE,       /* RELEASE, key 0xa, type likewise */
        V_CLEAR,         /* CLEAR, key 0xa */
        V_PREEMPT,       /* PREEMPT, key 0xa, SARK 0xb, type EA */
        V_PREEMPT_ABORT, /* PREEMPT AND ABORT, likewise */
        V_PREEMPT_ZERO,  /* PREEMPT, key 0xa, SARK 0, type EA */
        V_REGISTER_MOVE, /* REGISTER AND MOVE, key 0xa, SARK 0xdd, to D */
        N_VARIANTS
};
static const char *const variant_name[N_VARIANTS] = {"REGISTER",
                                                     "REGISTER(unregister)",
                                                     "REGISTER AND IGNORE",
                                                     "RESERVE",
                                                     "RELEASE",
                                                     "CLEAR",
                                                     "PREEMPT",
                                                     "PREEMPT AND ABORT",
                                                     "PREEMPT(SARK 0)",
                                                     "REGISTER AND MOVE"};

static void params(struct pr_out_params *p, enum sa_variant v, enum role role, unsigned type)
{
        memset(p, 0, sizeof(*p));
        uint64_t own = role == NONREG ? 0 : 0xa;
        unsigned rtype = type ? type : PR_TYPE_WE;
        switch (v) {
        case V_REGISTER:
                *p = (struct pr_out_params){.sa = PR_OUT_REGISTER, .key = own, .sa_key = 0xaa};
                break;
        case V_UNREGISTER:
                *p = (struct pr_out_params){.sa = PR_OUT_REGISTER, .key = own, .sa_key = 0};
                break;
        case V_REG_IGNORE:
                *p = (struct pr_out_params){
                    .sa = PR_OUT_REGISTER_IGNORE, .key = 0x999, .sa_key = 0xaa};
                break;
        case V_RESERVE:
                *p = (struct pr_out_params){
                    .sa = PR_OUT_RESERVE, .key = 0xa, .type = (uint8_t)rtype};
                break;
        case V_RELEASE:
                *p = (struct pr_out_params){
                    .sa = PR_OUT_RELEASE, .key = 0xa, .type = (uint8_t)rtype};
                break;
        case V_CLEAR:
                *p = (struct pr_out_params){.sa = PR_OUT_CLEAR, .key = 0xa};
                break;
        case V_PREEMPT:
        case V_PREEMPT_ABORT:
                *p = (struct pr_out_params){.sa = v == V_PREEMPT ? PR_OUT_PREEMPT
                                                                 : PR_OUT_PREEMPT_ABORT,
                                            .key = 0xa,
                                            .sa_key = 0xb,
                                            .type = PR_TYPE_EA};
                break;
        case V_PREEMPT_ZERO:
                *p = (struct pr_out_params){
                    .sa = PR_OUT_PREEMPT, .key = 0xa, .sa_key = 0, .type = PR_TYPE_EA};
                break;
        default:
                *p = (struct pr_out_params){.sa = PR_OUT_REGISTER_MOVE, .key = 0xa, .sa_key = 0xdd};
                snprintf(p->move_to, sizeof(p->move_to), "D");
                break;
        }
}

/* Type masks of rows. */
#define T(t)  (1u << (t))
#define TNONE T(0)
#define TX    (T(1) | T(3))
#define TRO   (T(5) | T(6))
#define TAR   (T(7) | T(8))
#define TALL  (TNONE | TX | TRO | TAR)
#define THELD (TX | TRO | TAR)
#define RN    (1u << NONREG)
#define RR    (1u << REG)
#define RH    (1u << HOLDER)
#define RREG  (RR | RH)
#define RALL  (RN | RR | RH)

/*
 * One outcome for the (variant, role, type) combinations in its masks.
 * resv: "=" unchanged, "" none, "<type>:<holder>" where type "T" is the row's type and
 * holder "*" means all registrants. regs: name=key(hex) after, sorted ("=" unchanged). uas:
 * name:ASCQ of 2Ah in order given (sorted for comparison). aborts: names.
 */
struct vec {
        enum sa_variant v;
        unsigned roles, tmask;
        enum scsi_reason reason;
        int gen;
        const char *resv, *regs, *uas, *aborts;
};

#define OK       SCSI_OK
#define CONFLICT SR_RESERVATION_CONFLICT
#define BADCDB   SR_INVALID_FIELD_CDB
#define BADPARAM SR_INVALID_FIELD_PARAM
#define SAME     "=", "=", "", ""

static const struct vec vectors[] = {
    /* REGISTER: a non-registrant with key 0 registers; a registrant changes its key. */
    {V_REGISTER, RN, TALL, OK, 1, "=", "B=b,C=c,N=aa", "", ""},
    {V_REGISTER, RREG, TALL, OK, 1, "=", "A=aa,B=b,C=c", "", ""},
    /* Unregistering: nothing for a non-registrant; a holder takes its reservation along
     * (registrants-only types tell the others), all-registrants ones stay with the rest. */
    {V_UNREGISTER, RN, TALL, OK, 0, SAME},
    {V_UNREGISTER, RR, TALL, OK, 1, "=", "B=b,C=c", "", ""},
    {V_UNREGISTER, RH, TNONE | TAR, OK, 1, "=", "B=b,C=c", "", ""},
    {V_UNREGISTER, RH, TX, OK, 1, "", "B=b,C=c", "", ""},
    {V_UNREGISTER, RH, TRO, OK, 1, "", "B=b,C=c", "B:04,C:04", ""},
    /* REGISTER AND IGNORE EXISTING KEY: the same, whatever the key says. */
    {V_REG_IGNORE, RN, TALL, OK, 1, "=", "B=b,C=c,N=aa", "", ""},
    {V_REG_IGNORE, RREG, TALL, OK, 1, "=", "A=aa,B=b,C=c", "", ""},
    /* RESERVE: registrants only; the holder again with the same type changes nothing. */
    {V_RESERVE, RN, TALL, CONFLICT, 0, SAME},
    {V_RESERVE, RREG, TNONE, OK, 0, "1:A", "=", "", ""},
    {V_RESERVE, RR, TX | TRO, CONFLICT, 0, SAME},
    {V_RESERVE, RR | RH, TAR, OK, 0, SAME},
    {V_RESERVE, RH, TX | TRO, OK, 0, SAME},
    /* RELEASE: a no-op unless the caller holds it; registrants-only and all-registrants
     * types owe RESERVATIONS RELEASED to the other registrants. No generation change. */
    {V_RELEASE, RN, TALL, CONFLICT, 0, SAME},
    {V_RELEASE, RREG, TNONE, OK, 0, SAME},
    {V_RELEASE, RR, TX | TRO, OK, 0, SAME},
    {V_RELEASE, RH, TX, OK, 0, "", "=", "", ""},
    {V_RELEASE, RH, TRO, OK, 0, "", "=", "B:04,C:04", ""},
    {V_RELEASE, RR | RH, TAR, OK, 0, "", "=", "B:04,C:04", ""},
    /* CLEAR: everything goes; the others' reservations are preempted. */
    {V_CLEAR, RN, TALL, CONFLICT, 0, SAME},
    {V_CLEAR, RREG, TALL, OK, 1, "", "", "B:03,C:03", ""},
    /* PREEMPT of B's key. No reservation, or the key names no holder: B's registration
     * goes. The key names the holder: the caller gets the reservation (EA), and a change
     * of type tells the remaining registrants the old one was released. */
    {V_PREEMPT, RN, TALL, CONFLICT, 0, SAME},
    {V_PREEMPT, RREG, TNONE, OK, 1, "=", "A=a,C=c", "B:05", ""},
    {V_PREEMPT, RR, T(1) | TRO, OK, 1, "3:A", "A=a,C=c", "B:05,C:04", ""},
    {V_PREEMPT, RR, T(3), OK, 1, "3:A", "A=a,C=c", "B:05", ""},
    {V_PREEMPT, RH, TX | TRO, OK, 1, "=", "A=a,C=c", "B:05", ""},
    {V_PREEMPT, RR | RH, TAR, OK, 1, "=", "A=a,C=c", "B:05", ""},
    /* PREEMPT AND ABORT: the same, and the preempted nexuses' tasks are aborted. */
    {V_PREEMPT_ABORT, RN, TALL, CONFLICT, 0, SAME},
    {V_PREEMPT_ABORT, RREG, TNONE, OK, 1, "=", "A=a,C=c", "B:05", "B"},
    {V_PREEMPT_ABORT, RR, T(1) | TRO, OK, 1, "3:A", "A=a,C=c", "B:05,C:04", "B"},
    {V_PREEMPT_ABORT, RR, T(3), OK, 1, "3:A", "A=a,C=c", "B:05", "B"},
    {V_PREEMPT_ABORT, RH, TX | TRO, OK, 1, "=", "A=a,C=c", "B:05", "B"},
    {V_PREEMPT_ABORT, RR | RH, TAR, OK, 1, "=", "A=a,C=c", "B:05", "B"},
    /* PREEMPT with SARK 0: only against an all-registrants reservation, which it takes,
     * removing every other registration. */
    {V_PREEMPT_ZERO, RN, TALL, CONFLICT, 0, SAME},
    {V_PREEMPT_ZERO, RREG, TNONE | TX | TRO, BADPARAM, 0, SAME},
    {V_PREEMPT_ZERO, RREG, TAR, OK, 1, "3:A", "A=a", "B:05,C:05", ""},
    /* REGISTER AND MOVE: only the holder of a single-holder reservation moves it. */
    {V_REGISTER_MOVE, RN, TALL, CONFLICT, 0, SAME},
    {V_REGISTER_MOVE, RREG, TNONE, BADCDB, 0, SAME},
    {V_REGISTER_MOVE, RR, TX | TRO, CONFLICT, 0, SAME},
    {V_REGISTER_MOVE, RREG, TAR, CONFLICT, 0, SAME},
    {V_REGISTER_MOVE, RH, TX | TRO, OK, 1, "T:D", "A=a,B=b,C=c,D=dd", "", ""},
};
#define N_VECTORS (sizeof(vectors) / sizeof(vectors[0]))

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A comma-separated list, sorted, back into one string. */
static void sorted(const char *in, char *out, size_t cap)
{
        char buf[1024];
        char *items[64];
        unsigned n = 0;
        snprintf(buf, sizeof(buf), "%s", in);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < 64;
             t = strtok_r(NULL, ",", &save))
                items[n++] = t;
        qsort(items, n, sizeof(items[0]), cmp_str);
        out[0] = '\0';
        for (unsigned i = 0; i < n; i++) {
                strncat(out, items[i], cap - strlen(out) - 1);
                if (i + 1 < n)
                        strncat(out, ",", cap - strlen(out) - 1);
        }
}

static void describe_regs(const struct pr_state *st, char *out, size_t cap)
{
        char tmp[1024] = "";
        for (unsigned i = 0; i < st->nregs; i++) {
                char one[300];
                snprintf(one, sizeof(one), "%s%s=%llx", i ? "," : "", st->regs[i].name,
                         (unsigned long long)st->regs[i].key);
                strncat(tmp, one, sizeof(tmp) - strlen(tmp) - 1);
        }
        sorted(tmp, out, cap);
}

static void describe_resv(const struct pr_state *st, char *out, size_t cap)
{
        if (st->type == PR_TYPE_NONE) {
                out[0] = '\0';
                return;
        }
        const char *holder = "*";
        if (!pr_type_all_registrants(st->type)) {
                holder = "?";
                for (unsigned i = 0; i < st->nregs; i++)
                        if (st->regs[i].holder)
                                holder = st->regs[i].name;
        }
        snprintf(out, cap, "%u:%s", st->type, holder);
}

static void describe_uas(const struct pr_effects *fx, char *out, size_t cap)
{
        char tmp[1024] = "";
        for (unsigned i = 0; i < fx->nuas; i++) {
                unsigned ascq = fx->uas[i].reason == SR_UA_RESERVATIONS_PREEMPTED    ? 3
                                : fx->uas[i].reason == SR_UA_RESERVATIONS_RELEASED   ? 4
                                : fx->uas[i].reason == SR_UA_REGISTRATIONS_PREEMPTED ? 5
                                                                                     : 99;
                char one[300];
                snprintf(one, sizeof(one), "%s%s:%02u", i ? "," : "", fx->uas[i].name, ascq);
                strncat(tmp, one, sizeof(tmp) - strlen(tmp) - 1);
        }
        sorted(tmp, out, cap);
}

static void describe_aborts(const struct pr_effects *fx, char *out, size_t cap)
{
        char tmp[1024] = "";
        for (unsigned i = 0; i < fx->naborts; i++) {
                strncat(tmp, i ? "," : "", sizeof(tmp) - strlen(tmp) - 1);
                strncat(tmp, fx->aborts[i], sizeof(tmp) - strlen(tmp) - 1);
        }
        sorted(tmp, out, cap);
}

static const struct vec *find_vector(enum sa_variant v, enum role role, unsigned type)
{
        const struct vec *found = NULL;
        for (size_t i = 0; i < N_VECTORS; i++) {
                const struct vec *x = &vectors[i];
                if (x->v != v || !(x->roles & (1u << role)) || !(x->tmask & T(type)))
                        continue;
                ck_assert_msg(!found, "%s / %s / type %u: two vectors", variant_name[v],
                              role_name[role], type);
                found = x;
        }
        ck_assert_msg(found, "%s / %s / type %u: no vector", variant_name[v], role_name[role],
                      type);
        return found;
}

START_TEST(service_action_vectors)
{
        static struct pr_state before, st;
        static struct pr_effects fx;
        unsigned checked = 0;
        for (int v = 0; v < N_VARIANTS; v++)
                for (int role = 0; role < N_ROLES; role++)
                        for (size_t ti = 0; ti < N_TYPES; ti++) {
                                unsigned type = types[ti];
                                const struct vec *x = find_vector(v, role, type);
                                setup(&before, role, type);
                                st = before;
                                struct pr_out_params p;
                                params(&p, v, role, type);
                                struct scsi_field_ptr field = {0};
                                const char *me = role == NONREG ? "N" : "A";
                                enum scsi_reason r = pr_out_apply(&st, me, &p, true, &fx, &field);
                                char what[128];
                                snprintf(what, sizeof(what), "%s / %s / type %u", variant_name[v],
                                         role_name[role], type);
                                ck_assert_msg(r == x->reason, "%s: reason %d, want %d", what, r,
                                              x->reason);
                                if (r != SCSI_OK)
                                        st = before; /* the caller keeps the old state */
                                ck_assert_msg(st.generation == before.generation + (uint32_t)x->gen,
                                              "%s: generation +%d, want +%d", what,
                                              (int)(st.generation - before.generation), x->gen);
                                char got[1024], want[1024], tmp[1024];
                                describe_resv(&st, got, sizeof(got));
                                if (strcmp(x->resv, "=") == 0)
                                        describe_resv(&before, want, sizeof(want));
                                else if (x->resv[0] == 'T')
                                        snprintf(want, sizeof(want), "%u%s", type, x->resv + 1);
                                else
                                        snprintf(want, sizeof(want), "%s", x->resv);
                                ck_assert_msg(strcmp(got, want) == 0,
                                              "%s: reservation '%s', want '%s'", what, got, want);
                                describe_regs(&st, got, sizeof(got));
                                if (strcmp(x->regs, "=") == 0)
                                        describe_regs(&before, want, sizeof(want));
                                else
                                        sorted(x->regs, want, sizeof(want));
                                ck_assert_msg(strcmp(got, want) == 0,
                                              "%s: registrations '%s', want '%s'", what, got, want);
                                if (r == SCSI_OK) {
                                        describe_uas(&fx, got, sizeof(got));
                                        sorted(x->uas, want, sizeof(want));
                                        ck_assert_msg(strcmp(got, want) == 0,
                                                      "%s: attentions '%s', want '%s'", what, got,
                                                      want);
                                        describe_aborts(&fx, got, sizeof(got));
                                        sorted(x->aborts, tmp, sizeof(tmp));
                                        ck_assert_msg(strcmp(got, tmp) == 0,
                                                      "%s: aborts '%s', want '%s'", what, got, tmp);
                                        ck_assert_msg(fx.changed ==
                                                          (memcmp(&st, &before, sizeof(st)) != 0),
                                                      "%s: changed flag", what);
                                }
                                checked++;
                        }
        ck_assert_uint_eq(checked, N_VARIANTS * N_ROLES * N_TYPES);
}
END_TEST

/* ---- edge cases of single service actions ---- */

static struct pr_state st;
static struct pr_effects fx;

static enum scsi_reason run(const char *me, struct pr_out_params p)
{
        struct scsi_field_ptr field = {0};
        return pr_out_apply(&st, me, &p, true, &fx, &field);
}

START_TEST(wrong_key_conflicts_everywhere)
{
        const enum pr_out_sa sas[] = {PR_OUT_REGISTER,     PR_OUT_RESERVE, PR_OUT_RELEASE,
                                      PR_OUT_CLEAR,        PR_OUT_PREEMPT, PR_OUT_PREEMPT_ABORT,
                                      PR_OUT_REGISTER_MOVE};
        for (size_t i = 0; i < sizeof(sas) / sizeof(sas[0]); i++) {
                setup(&st, HOLDER, PR_TYPE_WE);
                struct pr_out_params p = {
                    .sa = sas[i], .key = 0x77, .sa_key = 0xb, .type = PR_TYPE_WE};
                snprintf(p.move_to, sizeof(p.move_to), "D");
                ck_assert_int_eq(run("A", p), SR_RESERVATION_CONFLICT);
        }
}
END_TEST

START_TEST(reserve_other_type_and_release_mismatch)
{
        setup(&st, HOLDER, PR_TYPE_WE);
        ck_assert_int_eq(
            run("A", (struct pr_out_params){.sa = PR_OUT_RESERVE, .key = 0xa, .type = PR_TYPE_EA}),
            SR_RESERVATION_CONFLICT);
        ck_assert_int_eq(
            run("A", (struct pr_out_params){.sa = PR_OUT_RELEASE, .key = 0xa, .type = PR_TYPE_EA}),
            SR_INVALID_RELEASE_OF_PR);
        ck_assert_uint_eq(st.type, PR_TYPE_WE);
        /* A bad TYPE or SCOPE is a CDB error, before anything else. */
        struct scsi_field_ptr f = {0};
        struct pr_out_params p = {.sa = PR_OUT_RESERVE, .key = 0xa, .type = 2};
        ck_assert_int_eq(pr_out_apply(&st, "A", &p, true, &fx, &f), SR_INVALID_FIELD_CDB);
        ck_assert_uint_eq(f.byte, 2);
        ck_assert_uint_eq(f.bit, 3);
        p.type = PR_TYPE_WE;
        p.scope = 1;
        ck_assert_int_eq(pr_out_apply(&st, "A", &p, true, &fx, &f), SR_INVALID_FIELD_CDB);
        ck_assert_uint_eq(f.bit, 7);
}
END_TEST

START_TEST(preempt_edges)
{
        /* A key nobody holds: RESERVATION CONFLICT, nothing changes. */
        setup(&st, REG, PR_TYPE_WE);
        struct pr_state before = st;
        ck_assert_int_eq(run("A", (struct pr_out_params){.sa = PR_OUT_PREEMPT,
                                                         .key = 0xa,
                                                         .sa_key = 0x55,
                                                         .type = PR_TYPE_WE}),
                         SR_RESERVATION_CONFLICT);
        ck_assert_mem_eq(&st, &before, sizeof(st));
        /* The holder preempting its own key: new type, registration kept, no attentions. */
        setup(&st, HOLDER, PR_TYPE_WE);
        ck_assert_int_eq(run("A", (struct pr_out_params){.sa = PR_OUT_PREEMPT,
                                                         .key = 0xa,
                                                         .sa_key = 0xa,
                                                         .type = PR_TYPE_WE}),
                         SCSI_OK);
        ck_assert_int_eq(pr_find(&st, "A"), 0);
        ck_assert(pr_is_holder(&st, "A"));
        ck_assert_uint_eq(fx.nuas, 0);
        /* Without a reservation a key shared with the caller removes the caller too (the
         * stale registrations of an old I_T nexus, as fence_scsi does after a relogin). */
        setup(&st, REG, PR_TYPE_NONE);
        st.regs[1].key = 0xa; /* B shares A's key */
        ck_assert_int_eq(run("A", (struct pr_out_params){.sa = PR_OUT_PREEMPT,
                                                         .key = 0xa,
                                                         .sa_key = 0xa,
                                                         .type = PR_TYPE_WE}),
                         SCSI_OK);
        ck_assert_uint_eq(st.nregs, 1);
        ck_assert_str_eq(st.regs[0].name, "C");
        ck_assert_uint_eq(fx.nuas, 1);
        ck_assert_str_eq(fx.uas[0].name, "B");
        /* Several registrations with the holder's key: all but the caller's go. */
        setup(&st, REG, PR_TYPE_EA);
        st.regs[2].key = 0xb; /* C shares the holder B's key */
        ck_assert_int_eq(run("A", (struct pr_out_params){.sa = PR_OUT_PREEMPT_ABORT,
                                                         .key = 0xa,
                                                         .sa_key = 0xb,
                                                         .type = PR_TYPE_EA}),
                         SCSI_OK);
        ck_assert_uint_eq(st.nregs, 1);
        ck_assert(pr_is_holder(&st, "A"));
        ck_assert_uint_eq(fx.naborts, 2);
}
END_TEST

START_TEST(register_move_edges)
{
        struct scsi_field_ptr f = {0};
        struct pr_out_params p = {.sa = PR_OUT_REGISTER_MOVE, .key = 0xa, .sa_key = 0xdd};
        snprintf(p.move_to, sizeof(p.move_to), "A");
        setup(&st, HOLDER, PR_TYPE_WE);
        ck_assert_int_eq(pr_out_apply(&st, "A", &p, true, &fx, &f), SR_INVALID_FIELD_PARAM);
        ck_assert_uint_eq(f.byte, 24); /* the TransportID names the caller */
        snprintf(p.move_to, sizeof(p.move_to), "D");
        ck_assert_int_eq(pr_out_apply(&st, "A", &p, false, &fx, &f), SR_INVALID_FIELD_PARAM);
        ck_assert_uint_eq(f.byte, 18); /* no such relative target port */
        p.sa_key = 0;
        ck_assert_int_eq(pr_out_apply(&st, "A", &p, true, &fx, &f), SR_INVALID_FIELD_PARAM);
        ck_assert_uint_eq(f.byte, 8);
        /* To an existing registrant (key replaced), unregistering the source; APTPL taken. */
        p.sa_key = 0xbb;
        p.unreg = true;
        p.aptpl = true;
        snprintf(p.move_to, sizeof(p.move_to), "B");
        ck_assert_int_eq(pr_out_apply(&st, "A", &p, true, &fx, &f), SCSI_OK);
        ck_assert_int_eq(pr_find(&st, "A"), -1);
        ck_assert(pr_is_holder(&st, "B"));
        ck_assert_uint_eq(st.regs[pr_find(&st, "B")].key, 0xbb);
        ck_assert_uint_eq(st.type, PR_TYPE_WE);
        ck_assert(st.aptpl);
        ck_assert_uint_eq(st.generation, 101);
}
END_TEST

START_TEST(register_limits_and_aptpl)
{
        memset(&st, 0, sizeof(st));
        char name[32];
        for (unsigned i = 0; i < PR_MAX_REGS; i++) {
                snprintf(name, sizeof(name), "I%u", i);
                ck_assert_int_eq(run(name, (struct pr_out_params){.sa = PR_OUT_REGISTER_IGNORE,
                                                                  .sa_key = i + 1,
                                                                  .aptpl = i % 2}),
                                 SCSI_OK);
        }
        ck_assert_uint_eq(st.generation, PR_MAX_REGS);
        ck_assert(st.aptpl); /* the last APTPL bit received */
        ck_assert_int_eq(run("late", (struct pr_out_params){.sa = PR_OUT_REGISTER, .sa_key = 9}),
                         SR_INSUFFICIENT_REG_RESOURCES);
        /* Re-registering an existing nexus needs no room. */
        ck_assert_int_eq(
            run("I0", (struct pr_out_params){.sa = PR_OUT_REGISTER, .key = 1, .sa_key = 5}),
            SCSI_OK);
}
END_TEST

START_TEST(all_registrants_last_one_out)
{
        setup(&st, HOLDER, PR_TYPE_WE_AR);
        ck_assert_int_eq(run("A", (struct pr_out_params){.sa = PR_OUT_REGISTER, .key = 0xa}),
                         SCSI_OK);
        ck_assert_int_eq(run("B", (struct pr_out_params){.sa = PR_OUT_REGISTER, .key = 0xb}),
                         SCSI_OK);
        ck_assert_uint_eq(st.type, PR_TYPE_WE_AR);
        ck_assert(pr_is_holder(&st, "C"));
        ck_assert_int_eq(run("C", (struct pr_out_params){.sa = PR_OUT_REGISTER_IGNORE}), SCSI_OK);
        ck_assert_uint_eq(st.type, PR_TYPE_NONE);
        ck_assert_uint_eq(st.nregs, 0);
}
END_TEST

/* ---- the conflict table ---- */

START_TEST(conflict_table)
{
        const uint32_t ANY = SCSI_F_PR_ANY, READ = SCSI_F_PR_READ, CDB = SCSI_F_PR_CDB, NONE = 0;
        for (size_t ti = 1; ti < N_TYPES; ti++) {
                unsigned t = types[ti];
                bool we = t == 1 || t == 5 || t == 7, regs = t >= 5;
                /* the holder: never */
                ck_assert(!pr_conflicts(t, true, true, NONE, false));
                /* allowed for everybody under every type (INQUIRY, TUR, READ CAPACITY, ...) */
                ck_assert(!pr_conflicts(t, false, false, ANY, false));
                /* reads: allowed for everybody under Write Exclusive types */
                ck_assert(pr_conflicts(t, false, false, READ, false) == !we);
                ck_assert(pr_conflicts(t, true, false, READ, false) == (!we && !regs));
                /* writes: registrants under RO/AR types only */
                ck_assert(pr_conflicts(t, false, false, NONE, false));
                ck_assert(pr_conflicts(t, true, false, NONE, false) == !regs);
                /* PREVENT 0 / START 1: allowed; otherwise as writes */
                ck_assert(!pr_conflicts(t, false, false, CDB, true));
                ck_assert(pr_conflicts(t, false, false, CDB, false));
        }
        ck_assert(!pr_conflicts(PR_TYPE_NONE, false, false, NONE, false));
}
END_TEST

START_TEST(spc2_exceptions)
{
        memset(&st, 0, sizeof(st));
        ck_assert_int_eq(pr_spc2_check(&st, "A"), PR_SPC2_AS_SPC2);
        setup(&st, REG, PR_TYPE_NONE);
        ck_assert_int_eq(pr_spc2_check(&st, "A"), PR_SPC2_CONFLICT); /* registrations exist */
        ck_assert_int_eq(pr_spc2_check(&st, "N"), PR_SPC2_CONFLICT);
        setup(&st, HOLDER, PR_TYPE_WE);
        ck_assert_int_eq(pr_spc2_check(&st, "A"), PR_SPC2_NOOP);     /* the holder */
        ck_assert_int_eq(pr_spc2_check(&st, "B"), PR_SPC2_CONFLICT); /* registrant, WE */
        setup(&st, HOLDER, PR_TYPE_WE_RO);
        ck_assert_int_eq(pr_spc2_check(&st, "B"), PR_SPC2_NOOP); /* registrant, RO */
        ck_assert_int_eq(pr_spc2_check(&st, "N"), PR_SPC2_CONFLICT);
}
END_TEST

/* ---- the record ---- */

START_TEST(record_round_trip_and_refusals)
{
        static struct pr_state a, b;
        static uint8_t buf[64 * 1024];
        setup(&a, HOLDER, PR_TYPE_EA_RO);
        a.aptpl = true;
        a.generation = 0xdeadbeef;
        size_t len = pr_state_encode(&a, buf, sizeof(buf));
        ck_assert_uint_gt(len, 16);
        ck_assert_uint_le(pr_state_record_max(), 64 * 1024);
        ck_assert(pr_state_decode(&b, buf, len));
        ck_assert_uint_eq(b.generation, 0xdeadbeef);
        ck_assert(b.aptpl);
        ck_assert_uint_eq(b.type, PR_TYPE_EA_RO);
        ck_assert_uint_eq(b.nregs, 3);
        ck_assert(pr_is_holder(&b, "A"));
        ck_assert_uint_eq(b.regs[2].key, 0xc);
        /* every truncation and any trailing byte is refused */
        for (size_t n = 1; n < len; n++)
                ck_assert_msg(!pr_state_decode(&b, buf, n), "%zu bytes accepted", n);
        ck_assert(!pr_state_decode(&b, buf, len + 1));
        ck_assert_uint_eq(b.nregs, 0);
        /* states the machine cannot make: two holders, a holder under all registrants */
        a.regs[1].holder = true;
        len = pr_state_encode(&a, buf, sizeof(buf));
        ck_assert(!pr_state_decode(&b, buf, len));
        setup(&a, HOLDER, PR_TYPE_WE_AR);
        a.regs[0].holder = true;
        len = pr_state_encode(&a, buf, sizeof(buf));
        ck_assert(!pr_state_decode(&b, buf, len));
        /* empty record: the empty state */
        ck_assert(pr_state_decode(&b, buf, 0));
        ck_assert_uint_eq(b.generation, 0);
        /* a full table fits */
        memset(&a, 0, sizeof(a));
        for (unsigned i = 0; i < PR_MAX_REGS; i++) {
                char name[SCSI_PORT_NAME_MAX];
                memset(name, 'x', sizeof(name) - 1);
                name[sizeof(name) - 1] = '\0';
                snprintf(name, 16, "n%03u", i);
                name[4] = 'x';
                add_reg(&a, name, i + 1, false);
        }
        len = pr_state_encode(&a, buf, sizeof(buf));
        ck_assert_uint_gt(len, 0);
        ck_assert(pr_state_decode(&b, buf, len));
        ck_assert_uint_eq(b.nregs, PR_MAX_REGS);
}
END_TEST

/* ---- TransportIDs ---- */

START_TEST(transport_ids)
{
        uint8_t buf[300];
        char name[SCSI_PORT_NAME_MAX];
        const uint8_t isid[6] = {0x80, 0x12, 0x34, 0x56, 0x00, 0x01};
        pr_port_name(name, "iqn.2026-01.io.example:host", isid);
        ck_assert_str_eq(name, "iqn.2026-01.io.example:host,i,0x801234560001");
        size_t n = pr_tid_encode(name, buf, sizeof(buf));
        ck_assert_uint_eq(n % 4, 0);
        ck_assert_uint_eq(buf[0], 0x45); /* format 01b, iSCSI */
        ck_assert_uint_eq(get_be16(buf + 2), n - 4);
        ck_assert_str_eq((const char *)buf + 4, name);
        char back[SCSI_PORT_NAME_MAX];
        size_t used = 0;
        struct scsi_field_ptr f = {0};
        ck_assert_int_eq(pr_tid_parse(buf, n, back, &used, &f), SCSI_OK);
        ck_assert_str_eq(back, name);
        ck_assert_uint_eq(used, n);
        /* upper-case separator and ISID, short ISID: normalized */
        memset(buf, 0, sizeof(buf));
        buf[0] = 0x45;
        put_be16(buf + 2, 32);
        strcpy((char *)buf + 4, "iqn.x:y,I,0XABC");
        ck_assert_int_eq(pr_tid_parse(buf, 36, back, &used, &f), SCSI_OK);
        ck_assert_str_eq(back, "iqn.x:y,i,0x000000000abc");
        /* refusals: other protocol, format 00b, no NUL, bad ISID, short buffer */
        buf[0] = 0x46;
        ck_assert_int_eq(pr_tid_parse(buf, 36, back, &used, &f), SR_INVALID_FIELD_PARAM);
        buf[0] = 0x05;
        ck_assert_int_eq(pr_tid_parse(buf, 36, back, &used, &f), SR_INVALID_FIELD_PARAM);
        buf[0] = 0x45;
        ck_assert_int_eq(pr_tid_parse(buf, 20, back, &used, &f), SR_PARAM_LIST_LENGTH_ERROR);
        strcpy((char *)buf + 4, "iqn.x:y,i,0xzz");
        ck_assert_int_eq(pr_tid_parse(buf, 36, back, &used, &f), SR_INVALID_FIELD_PARAM);
        memset(buf + 4, 'a', 32);
        ck_assert_int_eq(pr_tid_parse(buf, 36, back, &used, &f), SR_INVALID_FIELD_PARAM);
        ck_assert_uint_eq(f.byte, 4);
}
END_TEST

/* ---- the parameter list ---- */

static void prout_cdb(uint8_t *cdb, uint8_t sa, uint8_t scope_type, uint32_t len)
{
        memset(cdb, 0, 10);
        cdb[0] = 0x5f;
        cdb[1] = sa;
        cdb[2] = scope_type;
        put_be32(cdb + 5, len);
}

START_TEST(parameter_list)
{
        uint8_t cdb[10], param[512] = {0};
        struct pr_out_params p;
        struct scsi_field_ptr f = {0};
        put_be64(param, 0x1122334455667788ull);
        put_be64(param + 8, 0x99);
        param[20] = 0x05; /* ALL_TG_PT, APTPL */
        prout_cdb(cdb, PR_OUT_REGISTER, 0x00, 24);
        ck_assert_int_eq(pr_out_parse(cdb, param, 24, &p, &f), SCSI_OK);
        ck_assert_uint_eq(p.key, 0x1122334455667788ull);
        ck_assert_uint_eq(p.sa_key, 0x99);
        ck_assert(p.aptpl && p.all_tg_pt && !p.spec_i_pt);
        /* lengths other than 24, and less data than announced */
        prout_cdb(cdb, PR_OUT_REGISTER, 0, 28);
        ck_assert_int_eq(pr_out_parse(cdb, param, 28, &p, &f), SR_PARAM_LIST_LENGTH_ERROR);
        prout_cdb(cdb, PR_OUT_RESERVE, 0x01, 16);
        ck_assert_int_eq(pr_out_parse(cdb, param, 16, &p, &f), SR_PARAM_LIST_LENGTH_ERROR);
        prout_cdb(cdb, PR_OUT_RESERVE, 0x01, 24);
        ck_assert_int_eq(pr_out_parse(cdb, param, 20, &p, &f), SR_PARAM_LIST_LENGTH_ERROR);
        /* SPEC_I_PT is not offered */
        param[20] = 0x08;
        prout_cdb(cdb, PR_OUT_REGISTER, 0, 24);
        ck_assert_int_eq(pr_out_parse(cdb, param, 24, &p, &f), SR_INVALID_FIELD_PARAM);
        ck_assert_uint_eq(f.byte, 20);
        ck_assert_uint_eq(f.bit, 3);
        /* REGISTER AND MOVE: header + TransportID, lengths must agree */
        memset(param + 16, 0, 8);
        param[17] = 0x03; /* UNREG, APTPL */
        put_be16(param + 18, 1);
        size_t n = pr_tid_encode("iqn.x:dest,i,0x000000000001", param + 24, sizeof(param) - 24);
        put_be32(param + 20, (uint32_t)n);
        prout_cdb(cdb, PR_OUT_REGISTER_MOVE, 0, (uint32_t)(24 + n));
        ck_assert_int_eq(pr_out_parse(cdb, param, (uint32_t)(24 + n), &p, &f), SCSI_OK);
        ck_assert(p.unreg && p.aptpl);
        ck_assert_uint_eq(p.rtpi, 1);
        ck_assert_str_eq(p.move_to, "iqn.x:dest,i,0x000000000001");
        put_be32(param + 20, (uint32_t)n + 4);
        ck_assert_int_eq(pr_out_parse(cdb, param, (uint32_t)(24 + n), &p, &f),
                         SR_PARAM_LIST_LENGTH_ERROR);
        put_be32(param + 20, (uint32_t)n);
        param[24] = 0x01; /* FC */
        ck_assert_int_eq(pr_out_parse(cdb, param, (uint32_t)(24 + n), &p, &f),
                         SR_INVALID_FIELD_PARAM);
        ck_assert_uint_eq(f.byte, 24); /* pointing into the TransportID */
}
END_TEST

int main(void)
{
        Suite *s = suite_create("scsi_pr_model");
        TCase *tc = tcase_create("model");
        tcase_add_test(tc, service_action_vectors);
        tcase_add_test(tc, wrong_key_conflicts_everywhere);
        tcase_add_test(tc, reserve_other_type_and_release_mismatch);
        tcase_add_test(tc, preempt_edges);
        tcase_add_test(tc, register_move_edges);
        tcase_add_test(tc, register_limits_and_aptpl);
        tcase_add_test(tc, all_registrants_last_one_out);
        tcase_add_test(tc, conflict_table);
        tcase_add_test(tc, spc2_exceptions);
        tcase_add_test(tc, record_round_trip_and_refusals);
        tcase_add_test(tc, transport_ids);
        tcase_add_test(tc, parameter_list);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
