/*
 * Generation ids: which node's data is newer when two nodes meet, decided only from ids that
 * change when data diverges (never from clocks or counters a crash can reset). The scheme is
 * DRBD's: `current` names the data as it is now, `bitmap` names the data as it was when this
 * node started recording changes in its dirty bitmap (0 when it records none since the last
 * sync), `history` names older generations a full sync could still start from.
 *
 * Ids 0 ("none") and REPL_GEN_JUST_CREATED are special: they never match anything in the
 * bitmap/history comparisons, because every brand-new disk carries the same JUST_CREATED and
 * that says nothing about common data.
 */
#ifndef TANDEM_REPL_GENID_H
#define TANDEM_REPL_GENID_H

#include <stdbool.h>
#include <stdint.h>

#include "tandem/repl.h"

#define REPL_GEN_JUST_CREATED 4ull /* current id of a brand-new, never synced disk */

struct repl_gen {
        uint64_t current, bitmap, history[2];
};

struct repl_side { /* one node's view at connect time */
        struct repl_gen gen;
        enum repl_disk_state disk; /* UpToDate/Outdated/Inconsistent */
        enum repl_role role;       /* now */
        bool crashed_primary;      /* was Primary and did not shut down cleanly */
        uint64_t dirty_bits;       /* bits set in its bitmap */
        uint64_t promote_epoch;    /* Lamport count of promotions */
        uint32_t node_id;
        const char *node_name;
        bool want_discard; /* admin ran invalidate/resolve-split-brain here */
};

enum repl_decision {
        REPL_DECIDE_IN_SYNC,       /* nothing to resync */
        REPL_DECIDE_SOURCE_BITMAP, /* self sends the blocks in (self bitmap | peer bitmap) */
        REPL_DECIDE_TARGET_BITMAP,
        REPL_DECIDE_SOURCE_FULL, /* self sends every block */
        REPL_DECIDE_TARGET_FULL,
        REPL_DECIDE_BOTH_NEW, /* both JUST_CREATED: wait for promote --force or skip-initial-sync */
        REPL_DECIDE_SPLIT_BRAIN,
        REPL_DECIDE_UNRELATED,    /* no common history: refuse */
        REPL_DECIDE_NO_GOOD_DATA, /* the rules would sync from an Inconsistent disk: refuse */
};

const char *repl_decision_name(enum repl_decision d);

/* The same decision seen from the other side (SOURCE_x <-> TARGET_x, others unchanged). */
enum repl_decision repl_decision_mirror(enum repl_decision d);

/*
 * The decision as seen from self; *why (may be NULL) gets a static human-readable reason.
 * Symmetric: decide(a,b) and decide(b,a) are mirror images. Rules, first match wins:
 *  0. want_discard on exactly one side: that side is TARGET_FULL (both: NO_GOOD_DATA).
 *  1. both current JUST_CREATED: BOTH_NEW; exactly one: the other is SOURCE_FULL.
 *  2. equal current: IN_SYNC when neither has dirty bits nor crashed as Primary; otherwise a
 *     bitmap resync whose source is the crashed Primary (if exactly one), else the Primary
 *     (if exactly one), else the better disk (UpToDate > Outdated > other), else the lower
 *     node id (equal node ids: UNRELATED, a configuration error).
 *  3. one side's bitmap id is the other's current: that side is the bitmap source.
 *  4. equal bitmap ids: both moved on from the same point: SPLIT_BRAIN.
 *  5. one side's current is in the other's history: the other is SOURCE_FULL.
 *  6. any common id among bitmap/history of both: SPLIT_BRAIN.
 *  7. UNRELATED (also when a current id is 0).
 * Where a rule matches in both directions at once (histories that contradict each other) the
 * result is SPLIT_BRAIN. Finally, a chosen source whose disk is neither UpToDate nor
 * Outdated turns the result into NO_GOOD_DATA.
 */
enum repl_decision repl_gen_decide(const struct repl_side *self, const struct repl_side *peer,
                                   const char **why);

/*
 * Split brain under a policy: returns SOURCE_BITMAP/TARGET_BITMAP when the policy picks a
 * victim (the target), SPLIT_BRAIN when it does not. discard_node = the NAME of
 * discard-node-NAME (ignored by the other policies). Also SPLIT_BRAIN when the side that
 * would be the source has no good data (Inconsistent).
 */
enum repl_decision repl_split_brain_resolve(enum repl_sb_policy policy, const char *discard_node,
                                            const struct repl_side *self,
                                            const struct repl_side *peer, const char **why);

/*
 * Transitions (pure: the engine persists the result).
 *
 * new_current: a Primary loses its peer or is promoted while disconnected: if bitmap == 0 then
 * bitmap = current; current = fresh. A JUST_CREATED current is never moved into bitmap (it
 * names no data a bitmap resync could start from; a new disk's peer gets a full sync anyway).
 * fresh must come from repl_gen_fresh().
 */
void repl_gen_new_current(struct repl_gen *g, uint64_t fresh);
/* After a completed resync as source: history[1] = history[0]; history[0] = bitmap; bitmap = 0
 * (history shifts only when bitmap was nonzero). */
void repl_gen_sync_source_done(struct repl_gen *g);
/* After a completed resync as target: adopt the source's current and history, bitmap = 0. */
void repl_gen_sync_target_done(struct repl_gen *g, const struct repl_gen *source_after);
/* Random 64-bit id (OpenSSL RAND_bytes, getrandom as fallback), never 0 or JUST_CREATED. All
 * 64 bits are random: no bit is reserved for flags. */
uint64_t repl_gen_fresh(void);

#endif
