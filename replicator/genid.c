/* Generation-id comparison and transitions (see genid.h for the rules). */
#include <string.h>
#include <sys/random.h>

#include <openssl/rand.h>

#include "genid.h"

/* Which side a rule picks: the decision is computed once as a winner and mapped to a verdict. */
enum side_pick { PICK_NONE = 0, PICK_SELF, PICK_PEER, PICK_BOTH };

const char *repl_decision_name(enum repl_decision d)
{
        static const char *const names[] = {
            "InSync",  "SourceBitmap", "TargetBitmap", "SourceFull", "TargetFull",
            "BothNew", "SplitBrain",   "Unrelated",    "NoGoodData",
        };
        return (unsigned)d < sizeof(names) / sizeof(names[0]) ? names[d] : "?";
}

enum repl_decision repl_decision_mirror(enum repl_decision d)
{
        switch (d) {
        case REPL_DECIDE_SOURCE_BITMAP:
                return REPL_DECIDE_TARGET_BITMAP;
        case REPL_DECIDE_TARGET_BITMAP:
                return REPL_DECIDE_SOURCE_BITMAP;
        case REPL_DECIDE_SOURCE_FULL:
                return REPL_DECIDE_TARGET_FULL;
        case REPL_DECIDE_TARGET_FULL:
                return REPL_DECIDE_SOURCE_FULL;
        default:
                return d;
        }
}

/* An id that names real data (0 and JUST_CREATED are shared by unrelated disks). */
static bool real_id(uint64_t id)
{
        return id != 0 && id != REPL_GEN_JUST_CREATED;
}

static bool has_good_data(enum repl_disk_state d)
{
        return d == REPL_DISK_UPTODATE || d == REPL_DISK_OUTDATED;
}

static int disk_rank(enum repl_disk_state d)
{
        return d == REPL_DISK_UPTODATE ? 2 : d == REPL_DISK_OUTDATED ? 1 : 0;
}

static enum side_pick pick(bool self, bool peer)
{
        return self && peer ? PICK_BOTH : self ? PICK_SELF : peer ? PICK_PEER : PICK_NONE;
}

static bool in_history(const struct repl_gen *g, uint64_t id)
{
        return real_id(id) && (g->history[0] == id || g->history[1] == id);
}

static bool share_old_id(const struct repl_gen *a, const struct repl_gen *b)
{
        const uint64_t ia[3] = {a->bitmap, a->history[0], a->history[1]};
        const uint64_t ib[3] = {b->bitmap, b->history[0], b->history[1]};
        for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                        if (real_id(ia[i]) && ia[i] == ib[j])
                                return true;
        return false;
}

/* Source of a bitmap resync between two sides on the same current generation. */
static enum side_pick bitmap_source_same_gen(const struct repl_side *s, const struct repl_side *p,
                                             const char **why)
{
        enum side_pick w = pick(s->crashed_primary, p->crashed_primary);
        if (w == PICK_SELF || w == PICK_PEER) {
                *why = "same generation; the crashed Primary's recent writes are resynced";
                return w;
        }
        w = pick(s->role == REPL_ROLE_PRIMARY, p->role == REPL_ROLE_PRIMARY);
        if (w == PICK_SELF || w == PICK_PEER) {
                *why = "same generation with changes; the Primary is the source";
                return w;
        }
        if (disk_rank(s->disk) != disk_rank(p->disk)) {
                *why = "same generation with changes; the better disk is the source";
                return disk_rank(s->disk) > disk_rank(p->disk) ? PICK_SELF : PICK_PEER;
        }
        if (s->node_id != p->node_id) {
                *why = "same generation with changes; the lower node id is the source";
                return s->node_id < p->node_id ? PICK_SELF : PICK_PEER;
        }
        *why = "both sides claim the same node id";
        return PICK_NONE;
}

/* Rules 0-7 of genid.h without the final good-data check. */
static enum repl_decision decide_direction(const struct repl_side *s, const struct repl_side *p,
                                           const char **why)
{
        const struct repl_gen *sg = &s->gen, *pg = &p->gen;
        enum side_pick w;

        w = pick(s->want_discard, p->want_discard);
        if (w == PICK_BOTH) {
                *why = "both sides asked to discard their data";
                return REPL_DECIDE_NO_GOOD_DATA;
        }
        if (w != PICK_NONE) {
                *why = "the admin asked to discard one side's data: full resync to it";
                return w == PICK_SELF ? REPL_DECIDE_TARGET_FULL : REPL_DECIDE_SOURCE_FULL;
        }

        w = pick(sg->current == REPL_GEN_JUST_CREATED, pg->current == REPL_GEN_JUST_CREATED);
        if (w == PICK_BOTH) {
                *why = "both disks are new: promote one with --force or skip the initial sync";
                return REPL_DECIDE_BOTH_NEW;
        }
        if (w != PICK_NONE) {
                *why = "one disk is new: full sync to it";
                return w == PICK_SELF ? REPL_DECIDE_TARGET_FULL : REPL_DECIDE_SOURCE_FULL;
        }

        if (sg->current == 0 || pg->current == 0) {
                *why = "a side has no current generation id";
                return REPL_DECIDE_UNRELATED;
        }

        if (sg->current == pg->current) {
                if (!s->dirty_bits && !p->dirty_bits && !s->crashed_primary &&
                    !p->crashed_primary) {
                        *why = "same generation, nothing out of sync";
                        return REPL_DECIDE_IN_SYNC;
                }
                w = bitmap_source_same_gen(s, p, why);
                if (w == PICK_NONE)
                        return REPL_DECIDE_UNRELATED;
                return w == PICK_SELF ? REPL_DECIDE_SOURCE_BITMAP : REPL_DECIDE_TARGET_BITMAP;
        }

        w = pick(real_id(sg->bitmap) && sg->bitmap == pg->current,
                 real_id(pg->bitmap) && pg->bitmap == sg->current);
        if (w == PICK_BOTH) {
                *why = "each side's bitmap id is the other's current: contradictory histories";
                return REPL_DECIDE_SPLIT_BRAIN;
        }
        if (w != PICK_NONE) {
                *why = "one side changed data since the other's current generation";
                return w == PICK_SELF ? REPL_DECIDE_SOURCE_BITMAP : REPL_DECIDE_TARGET_BITMAP;
        }

        if (real_id(sg->bitmap) && sg->bitmap == pg->bitmap) {
                *why = "both sides changed data since the same generation";
                return REPL_DECIDE_SPLIT_BRAIN;
        }

        w = pick(in_history(sg, pg->current), in_history(pg, sg->current));
        if (w == PICK_BOTH) {
                *why = "each side's current is in the other's history: contradictory histories";
                return REPL_DECIDE_SPLIT_BRAIN;
        }
        if (w != PICK_NONE) {
                *why = "one side is more than a resync behind: full sync";
                return w == PICK_SELF ? REPL_DECIDE_SOURCE_FULL : REPL_DECIDE_TARGET_FULL;
        }

        if (share_old_id(sg, pg)) {
                *why = "the sides share an old generation but both moved on";
                return REPL_DECIDE_SPLIT_BRAIN;
        }
        *why = "no common generation: unrelated data";
        return REPL_DECIDE_UNRELATED;
}

/* NO_GOOD_DATA instead of a sync whose source has no good data. */
static enum repl_decision check_source(enum repl_decision d, const struct repl_side *s,
                                       const struct repl_side *p, const char **why)
{
        const struct repl_side *src = NULL;
        if (d == REPL_DECIDE_SOURCE_BITMAP || d == REPL_DECIDE_SOURCE_FULL)
                src = s;
        else if (d == REPL_DECIDE_TARGET_BITMAP || d == REPL_DECIDE_TARGET_FULL)
                src = p;
        if (src && !has_good_data(src->disk)) {
                *why = "the sync source's disk is not UpToDate or Outdated";
                return REPL_DECIDE_NO_GOOD_DATA;
        }
        return d;
}

enum repl_decision repl_gen_decide(const struct repl_side *self, const struct repl_side *peer,
                                   const char **why)
{
        const char *reason = "";
        enum repl_decision d = decide_direction(self, peer, &reason);
        d = check_source(d, self, peer, &reason);
        if (why)
                *why = reason;
        return d;
}

static enum side_pick sb_victim(enum repl_sb_policy policy, const char *discard_node,
                                const struct repl_side *s, const struct repl_side *p,
                                const char **why)
{
        enum side_pick w;
        switch (policy) {
        case REPL_SB_DISCARD_ZERO_CHANGES:
                w = pick(s->dirty_bits == 0, p->dirty_bits == 0);
                if (w == PICK_BOTH) {
                        if (s->node_id == p->node_id) {
                                *why = "split brain: no changes on either side, equal node ids";
                                return PICK_NONE;
                        }
                        *why = "split brain: neither side changed data; higher node id discarded";
                        return s->node_id > p->node_id ? PICK_SELF : PICK_PEER;
                }
                *why = w == PICK_NONE ? "split brain: both sides changed data"
                                      : "split brain: the side without changes is discarded";
                return w;
        case REPL_SB_DISCARD_YOUNGER_PRIMARY:
                if (s->promote_epoch == p->promote_epoch) {
                        *why = "split brain: equal promotion epochs";
                        return PICK_NONE;
                }
                *why = "split brain: the younger Primary's changes are discarded";
                return s->promote_epoch > p->promote_epoch ? PICK_SELF : PICK_PEER;
        case REPL_SB_DISCARD_NODE:
                w = pick(discard_node && s->node_name && strcmp(s->node_name, discard_node) == 0,
                         discard_node && p->node_name && strcmp(p->node_name, discard_node) == 0);
                *why = w == PICK_SELF || w == PICK_PEER
                           ? "split brain: the configured node's changes are discarded"
                           : "split brain: the configured discard node is not one of the pair";
                return w == PICK_BOTH ? PICK_NONE : w;
        case REPL_SB_DISCONNECT:
        default:
                *why = "split brain: policy disconnect, resolve by hand";
                return PICK_NONE;
        }
}

enum repl_decision repl_split_brain_resolve(enum repl_sb_policy policy, const char *discard_node,
                                            const struct repl_side *self,
                                            const struct repl_side *peer, const char **why)
{
        const char *reason = "";
        enum repl_decision d = REPL_DECIDE_SPLIT_BRAIN;
        enum side_pick victim = sb_victim(policy, discard_node, self, peer, &reason);
        if (victim == PICK_SELF || victim == PICK_PEER) {
                const struct repl_side *src = victim == PICK_SELF ? peer : self;
                if (has_good_data(src->disk)) {
                        d = victim == PICK_SELF ? REPL_DECIDE_TARGET_BITMAP
                                                : REPL_DECIDE_SOURCE_BITMAP;
                } else {
                        reason = "split brain: the surviving side's disk is not consistent";
                }
        }
        if (why)
                *why = reason;
        return d;
}

void repl_gen_new_current(struct repl_gen *g, uint64_t fresh)
{
        if (g->bitmap == 0 && g->current != REPL_GEN_JUST_CREATED)
                g->bitmap = g->current;
        g->current = fresh;
}

void repl_gen_sync_source_done(struct repl_gen *g)
{
        if (g->bitmap != 0) {
                g->history[1] = g->history[0];
                g->history[0] = g->bitmap;
        }
        g->bitmap = 0;
}

void repl_gen_sync_target_done(struct repl_gen *g, const struct repl_gen *source_after)
{
        g->current = source_after->current;
        g->bitmap = 0;
        g->history[0] = source_after->history[0];
        g->history[1] = source_after->history[1];
}

uint64_t repl_gen_fresh(void)
{
        uint64_t id = 0;
        while (!real_id(id)) {
                if (RAND_bytes((unsigned char *)&id, sizeof(id)) != 1 &&
                    getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
                        id = 0;
        }
        return id;
}
