/*
 * Unit attentions, per I_T nexus and LUN. Two kinds:
 *
 * - LUN-wide: a LUN bumps a generation counter per kind when a condition arises; each nexus
 *   remembers the generation it last reported. A new nexus first reports POWER ON RESET (or,
 *   where the LU carries on from another node after a failover, I_T NEXUS LOSS OCCURRED),
 *   which subsumes everything raised before it.
 * - Owed by name (persistent reservations: 2A/03, 2A/04, 2A/05): a table of the LUN, kept
 *   in its attention record (SCSI_STATE_UA), so a nexus that is not logged in gets them at
 *   its next command, on this node or, after a failover, on the other. Taking one changes
 *   the record: the command stores it before it reports the attention, so a promoted peer
 *   never reports one twice.
 *
 * One condition is reported per command, highest precedence first: 29h, then what is owed
 * by name, then the other 2Ah, then 2Fh, then 3Fh. Attentions owed by name wait while this node's
 * port group is not active (the record cannot change on a Secondary).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"

static const enum scsi_reason ua_reason[SCSI_UA_KINDS] = {
    [SCSI_UA_LUN_RESET] = SR_UA_BUS_DEVICE_RESET,
    [SCSI_UA_MODE_CHANGED] = SR_UA_MODE_PARAMS_CHANGED,
    [SCSI_UA_CAPACITY_CHANGED] = SR_UA_CAPACITY_CHANGED,
    [SCSI_UA_ALUA_CHANGED] = SR_UA_ALUA_STATE_CHANGED,
    [SCSI_UA_CLEARED_BY_OTHER] = SR_UA_CLEARED_BY_OTHER,
};

/* Reporting order after POWER ON RESET; what is owed by name comes after the first. */
static const enum scsi_ua_kind ua_order[SCSI_UA_KINDS] = {
    SCSI_UA_LUN_RESET,    SCSI_UA_CAPACITY_CHANGED, SCSI_UA_MODE_CHANGED,
    SCSI_UA_ALUA_CHANGED, SCSI_UA_CLEARED_BY_OTHER,
};

/* Attentions that may be owed by name, as the record spells them (ASC/ASCQ). */
static const struct {
        enum scsi_reason reason;
        uint8_t asc, ascq;
} named_codes[] = {
    {SR_UA_RESERVATIONS_PREEMPTED, 0x2a, 0x03},
    {SR_UA_RESERVATIONS_RELEASED, 0x2a, 0x04},
    {SR_UA_REGISTRATIONS_PREEMPTED, 0x2a, 0x05},
};
#define N_NAMED_CODES (sizeof(named_codes) / sizeof(named_codes[0]))

static void ua_sync_all(struct scsi_nexus *nx, struct scsi_lun *lun)
{
        for (int k = 0; k < SCSI_UA_KINDS; k++)
                nx->ua_seen[lun->id][k] =
                    atomic_load_explicit(&lun->ua_gen[k], memory_order_acquire);
}

/* The generation kind k changed since this nexus looked: report it unless it caused it. */
static enum scsi_reason take_kind(struct scsi_nexus *nx, struct scsi_lun *lun, enum scsi_ua_kind k)
{
        unsigned gen = atomic_load_explicit(&lun->ua_gen[k], memory_order_acquire);
        if (gen == nx->ua_seen[lun->id][k])
                return SCSI_OK;
        nx->ua_seen[lun->id][k] = gen;
        /*
         * The nexus that caused a change knows about it: no attention for it. Origin 0 is no
         * nexus (the admin plane, a LUN reset): everyone gets it, even a nexus whose id was
         * never set.
         */
        uint64_t origin = atomic_load_explicit(&lun->ua_origin[k], memory_order_relaxed);
        return origin == 0 || origin != nx->id ? ua_reason[k] : SCSI_OK;
}

static enum scsi_reason take_named(struct scsi_nexus *nx, struct scsi_lun *lun, bool *store)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        if (!(atomic_load_explicit(&priv->res_summary, memory_order_acquire) &
              SCSI_RES_NAMED_UAS) ||
            !(scsi_nexus_res_flags(nx, lun) & SCSI_NX_UA_PENDING) || !scsi_lun_active(lun))
                return SCSI_OK;
        pthread_mutex_lock(&priv->state_lock);
        enum scsi_reason r = scsi_ua_take_named_locked(lun, nx->port_name);
        if (r != SCSI_OK)
                scsi_lun_state_changed_locked(lun);
        pthread_mutex_unlock(&priv->state_lock);
        *store = r != SCSI_OK;
        return r;
}

/* The next condition to report for this nexus and LUN, marked as reported. */
enum scsi_reason scsi_ua_take(struct scsi_nexus *nx, struct scsi_lun *lun, bool *store)
{
        *store = false;
        if (lun->id >= SCSI_MAX_LUNS)
                return SCSI_OK;
        if (nx->power_on_pending[lun->id]) {
                nx->power_on_pending[lun->id] = false;
                ua_sync_all(nx, lun);
                return tdm_medium_access(lun->medium).continued ? SR_UA_NEXUS_LOSS
                                                                : SR_UA_POWER_ON_RESET;
        }
        for (int i = 0; i < SCSI_UA_KINDS; i++) {
                enum scsi_reason r = take_kind(nx, lun, ua_order[i]);
                if (r == SCSI_OK && i == 0)
                        r = take_named(nx, lun, store);
                if (r != SCSI_OK)
                        return r;
        }
        if (nx->target) {
                unsigned gen = atomic_load_explicit(&nx->target->luns_gen, memory_order_acquire);
                if (gen != nx->luns_gen_seen) {
                        nx->luns_gen_seen = gen;
                        return SR_UA_LUNS_CHANGED;
                }
        }
        return SCSI_OK;
}

/* REPORT LUNS clears REPORTED LUNS DATA HAS CHANGED for the nexus that sent it. */
void scsi_ua_clear_luns_changed(struct scsi_nexus *nx)
{
        if (nx->target)
                nx->luns_gen_seen =
                    atomic_load_explicit(&nx->target->luns_gen, memory_order_acquire);
}

/* origin_nexus: the nexus whose command caused the change, 0 when none did. */
void scsi_lun_raise_ua(struct scsi_lun *lun, enum scsi_ua_kind kind, uint64_t origin_nexus)
{
        if ((unsigned)kind >= SCSI_UA_KINDS)
                return;
        atomic_store_explicit(&lun->ua_origin[kind], origin_nexus, memory_order_relaxed);
        atomic_fetch_add_explicit(&lun->ua_gen[kind], 1, memory_order_release);
}

/* ---- attentions owed by name ---- */

static struct scsi_named_ua *named_find(const struct scsi_lun *lun, const char *name)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        for (unsigned i = 0; i < priv->n_named_uas; i++)
                if (strcmp(priv->named_uas[i].name, name) == 0)
                        return &priv->named_uas[i];
        return NULL;
}

bool scsi_ua_owed_locked(const struct scsi_lun *lun, const char *name)
{
        return named_find(lun, name) != NULL;
}

void scsi_ua_owe_locked(struct scsi_lun *lun, const char *name, enum scsi_reason reason)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        struct scsi_named_ua *u = named_find(lun, name);
        if (!u) {
                if (priv->n_named_uas >= SCSI_NAMED_UA_MAX) {
                        log_warn("LUN %llu: too many nexuses with attentions owed; %s loses one",
                                 (unsigned long long)lun->id, name);
                        return;
                }
                u = &priv->named_uas[priv->n_named_uas++];
                memset(u, 0, sizeof(*u));
                snprintf(u->name, sizeof(u->name), "%s", name);
        }
        for (unsigned i = 0; i < u->n; i++)
                if (u->reasons[i] == reason)
                        return; /* owed already: a condition is reported once */
        if (u->n < SCSI_NAMED_UA_DEPTH)
                u->reasons[u->n++] = (uint8_t)reason;
}

enum scsi_reason scsi_ua_take_named_locked(struct scsi_lun *lun, const char *name)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        struct scsi_named_ua *u = named_find(lun, name);
        if (!u)
                return SCSI_OK;
        enum scsi_reason r = (enum scsi_reason)u->reasons[0];
        memmove(u->reasons, u->reasons + 1, --u->n);
        if (u->n == 0) /* order among nexuses does not matter */
                *u = priv->named_uas[--priv->n_named_uas];
        return r;
}

enum scsi_reason scsi_ua_store_taken(struct scsi_task *task)
{
        struct scsi_lun_private *priv = scsi_lun_private(task->lun);
        pthread_mutex_lock(&priv->state_op_lock);
        scsi_lun_state_store_locked(task->lun, 1u << SCSI_STATE_UA);
        pthread_mutex_unlock(&priv->state_op_lock);
        return (enum scsi_reason)task->op_flags;
}

/*
 * Record: "TUA1" | count u16 | { name length u8 | name | n u8 | { ASC | ASCQ } * n } * count.
 */
#define UA_MAGIC   0x54554131u /* "TUA1" */
#define UA_HDR_LEN 6u

size_t scsi_ua_record_max(void)
{
        return UA_HDR_LEN +
               (size_t)SCSI_NAMED_UA_MAX * (2 + (SCSI_PORT_NAME_MAX - 1) + 2 * SCSI_NAMED_UA_DEPTH);
}

static bool code_of(enum scsi_reason r, uint8_t *asc, uint8_t *ascq)
{
        for (size_t i = 0; i < N_NAMED_CODES; i++)
                if (named_codes[i].reason == r) {
                        *asc = named_codes[i].asc;
                        *ascq = named_codes[i].ascq;
                        return true;
                }
        return false;
}

static enum scsi_reason reason_of(uint8_t asc, uint8_t ascq)
{
        for (size_t i = 0; i < N_NAMED_CODES; i++)
                if (named_codes[i].asc == asc && named_codes[i].ascq == ascq)
                        return named_codes[i].reason;
        return SCSI_OK;
}

size_t scsi_ua_encode_locked(const struct scsi_lun *lun, uint8_t *buf, size_t cap)
{
        const struct scsi_lun_private *priv = scsi_lun_private(lun);
        if (cap < UA_HDR_LEN)
                return 0;
        put_be32(buf, UA_MAGIC);
        size_t at = UA_HDR_LEN;
        unsigned count = 0;
        for (unsigned i = 0; i < priv->n_named_uas; i++) {
                const struct scsi_named_ua *u = &priv->named_uas[i];
                size_t n = strnlen(u->name, SCSI_PORT_NAME_MAX - 1);
                if (at + 2 + n + 2u * u->n > cap)
                        return 0;
                buf[at] = (uint8_t)n;
                memcpy(buf + at + 1, u->name, n);
                at += 1 + n;
                uint8_t *cnt = buf + at++;
                *cnt = 0;
                for (unsigned k = 0; k < u->n; k++)
                        if (code_of((enum scsi_reason)u->reasons[k], buf + at, buf + at + 1)) {
                                at += 2;
                                (*cnt)++;
                        }
                count++;
        }
        put_be16(buf + 4, (uint16_t)count);
        return at;
}

bool scsi_ua_decode_locked(struct scsi_lun *lun, const uint8_t *buf, size_t len)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        priv->n_named_uas = 0;
        if (len == 0)
                return true;
        if (len < UA_HDR_LEN || get_be32(buf) != UA_MAGIC)
                return false;
        unsigned count = get_be16(buf + 4);
        size_t at = UA_HDR_LEN;
        for (unsigned i = 0; i < count; i++) {
                if (at >= len)
                        goto bad;
                size_t n = buf[at];
                if (n == 0 || at + 2 + n > len || memchr(buf + at + 1, 0, n))
                        goto bad;
                char name[SCSI_PORT_NAME_MAX];
                memcpy(name, buf + at + 1, n);
                name[n] = '\0';
                at += 1 + n;
                unsigned k = buf[at++];
                if (at + 2u * k > len)
                        goto bad;
                for (; k > 0; k--, at += 2) {
                        enum scsi_reason r = reason_of(buf[at], buf[at + 1]);
                        if (r != SCSI_OK) /* a code this build does not know: not ours to report */
                                scsi_ua_owe_locked(lun, name, r);
                }
        }
        if (at == len)
                return true;
bad:
        priv->n_named_uas = 0;
        return false;
}

void scsi_ua_reload(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        size_t cap = scsi_ua_record_max();
        uint8_t *buf = malloc(cap);
        if (!buf)
                return;
        pthread_mutex_lock(&priv->state_op_lock);
        size_t len = scsi_lun_state_load(lun, SCSI_STATE_UA, buf, cap, NULL);
        pthread_mutex_lock(&priv->state_lock);
        if (len > cap || !scsi_ua_decode_locked(lun, buf, len))
                log_err("LUN %llu: the unit attention record is malformed: none owed",
                        (unsigned long long)lun->id);
        scsi_lun_state_changed_locked(lun);
        pthread_mutex_unlock(&priv->state_lock);
        pthread_mutex_unlock(&priv->state_op_lock);
        free(buf);
}
