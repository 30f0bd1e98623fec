/*
 * Implicit ALUA (SPC-5 5.16): the target port groups of a LUN, their states, REPORT TARGET
 * PORT GROUPS, and the ASYMMETRIC ACCESS STATE CHANGED unit attention.
 *
 * Each node is one target port group with one target port. A local LUN has only this
 * node's group, always active/optimized. A replicated LUN is exported by both nodes under
 * the same identity, so it also lists the peer node's group: the Primary's group is
 * active/optimized, the Secondary's standby, and a peer this node is not connected to is
 * unavailable (as far as this node can tell). Transitions are the replicator's, and with
 * explicit ALUA also an initiator's (SET TARGET PORT GROUPS, alua_stpg.c); while a move it
 * asked for is under way this node's group is transitioning.
 *
 * The states come from the medium (the replicator keeps them current). The states last
 * reported are kept in one atomic word per LUN; whoever first sees that the current states
 * differ from it (the medium telling of a change, an RTPG) swaps the word and raises the
 * attention, so each change is raised once however many threads notice it.
 */
#include "scsi_internal.h"

/* The published word: local state, peer state, and "changed since start-up" per group. */
#define ALUA_PUB_LOCAL_MASK    0x000fu
#define ALUA_PUB_PEER_SHIFT    4
#define ALUA_PUB_PEER_MASK     0x00f0u
#define ALUA_PUB_STATES        (ALUA_PUB_LOCAL_MASK | ALUA_PUB_PEER_MASK)
#define ALUA_PUB_LOCAL_CHANGED 0x0100u
#define ALUA_PUB_PEER_CHANGED  0x0200u
#define ALUA_PUB_BY_STPG       0x0400u /* the last change was one an initiator asked for */

/* REPORT TARGET PORT GROUPS. */
#define RTPG_FORMAT_LENGTH   0 /* PARAMETER DATA FORMAT 000b: length-only header */
#define RTPG_FORMAT_EXTENDED 1 /* 001b: extended header */
#define RTPG_DESC_LEN        8 /* target port group descriptor without its port descriptors */
#define RTPG_PORT_DESC_LEN   4
/*
 * IMPLICIT TRANSITION TIME (extended header), in seconds: a switchover ends within the
 * 10 s I/O hold bound (ARCHITECTURE.md 5). Only a move an initiator asked for (explicit
 * ALUA) shows as transitioning.
 */
#define RTPG_IMPLICIT_TRANSITION_S 10
/* Supported-state bits of a descriptor (byte 1): T_SUP 80h O_SUP 40h LBD_SUP 10h U_SUP 08h
 * S_SUP 04h AN_SUP 02h AO_SUP 01h. A replicated LUN's groups take active/optimized, standby
 * and unavailable (and transitioning with explicit ALUA); a local LUN's one group is only
 * ever active/optimized. */
#define RTPG_SUP_AO 0x01
#define RTPG_SUP_S  0x04
#define RTPG_SUP_U  0x08
#define RTPG_SUP_T  0x80
/* STATUS CODE: 00h no status, 01h altered by SET TARGET PORT GROUPS, 02h altered by
 * implicit asymmetric access behavior. */
#define RTPG_STATUS_NONE     0x00
#define RTPG_STATUS_STPG     0x01
#define RTPG_STATUS_IMPLICIT 0x02

/* The states now, from the medium, as the published word's low byte. */
static unsigned alua_states_now(const struct scsi_lun *lun)
{
        struct tdm_access a = tdm_medium_access(lun->medium);
        unsigned states = a.local_state & ALUA_PUB_LOCAL_MASK;
        if (a.peer_id)
                states |= (unsigned)(a.peer_state & 0x0f) << ALUA_PUB_PEER_SHIFT;
        return states;
}

/* Publishes the current states; the thread whose swap records a change raises the UA. */
static unsigned alua_publish(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        unsigned now = alua_states_now(lun);
        unsigned old = atomic_load_explicit(&priv->alua_published, memory_order_acquire);
        uint64_t requester = atomic_load_explicit(&priv->alua_requester, memory_order_acquire);
        unsigned pub;
        do {
                if ((old & ALUA_PUB_STATES) == now)
                        return old;
                unsigned diff = (old ^ now) & ALUA_PUB_STATES;
                pub = now | (old & (ALUA_PUB_LOCAL_CHANGED | ALUA_PUB_PEER_CHANGED));
                if (requester)
                        pub |= ALUA_PUB_BY_STPG;
                if (diff & ALUA_PUB_LOCAL_MASK)
                        pub |= ALUA_PUB_LOCAL_CHANGED;
                if (diff & ALUA_PUB_PEER_MASK)
                        pub |= ALUA_PUB_PEER_CHANGED;
        } while (!atomic_compare_exchange_weak_explicit(
            &priv->alua_published, &old, pub, memory_order_acq_rel, memory_order_acquire));
        /* Every nexus but the one whose SET TARGET PORT GROUPS asked for it (SPC-5 5.16.6);
         * an implicit change is the node's, not a command's. */
        scsi_lun_raise_ua(lun, SCSI_UA_ALUA_CHANGED, requester);
        return pub;
}

/* The medium's access state changed (any thread). */
static void alua_access_changed(void *arg)
{
        alua_publish(arg);
}

void scsi_lun_alua_init(struct scsi_lun *lun)
{
        atomic_init(&scsi_lun_private(lun)->alua_published, alua_states_now(lun));
        lun->medium->access_arg = lun;
        lun->medium->access_changed = alua_access_changed;
        lun->medium->state_changed = scsi_lun_state_changed;
        lun->medium->forwarded = scsi_lun_forwarded;
        lun->medium->size_changed = scsi_lun_medium_grew;
}

bool scsi_target_served_elsewhere(struct scsi_target *t)
{
        for (uint64_t id = 0; id < SCSI_MAX_LUNS; id++) {
                struct scsi_lun *lun = scsi_target_get_lun(t, id);
                if (!lun)
                        continue;
                struct tdm_access a = tdm_medium_access(lun->medium);
                scsi_lun_put(lun);
                if (a.peer_id == 0 && a.local_state != TDM_ACCESS_ACTIVE)
                        return true;
        }
        return false;
}

uint16_t scsi_alua_local_group(const struct tdm_access *a)
{
        return a->local_id ? a->local_id : 1;
}

/* ---- REPORT TARGET PORT GROUPS ---- */

struct rtpg_group {
        uint16_t id;
        uint16_t rel_port_id;
        enum scsi_alua_state state;
        bool changed;
        bool by_stpg;
};

static uint8_t *put_group(uint8_t *p, const struct rtpg_group *g, uint8_t supported)
{
        p[0] = (uint8_t)g->state; /* PREF 0 */
        p[1] = supported;
        put_be16(p + 2, g->id);
        p[5] = !g->changed  ? RTPG_STATUS_NONE
               : g->by_stpg ? RTPG_STATUS_STPG
                            : RTPG_STATUS_IMPLICIT;
        p[7] = 1; /* TARGET PORT COUNT */
        put_be16(p + RTPG_DESC_LEN + 2, g->rel_port_id);
        return p + RTPG_DESC_LEN + RTPG_PORT_DESC_LEN;
}

/* The LUN's groups as last published, lowest id first (both nodes list them alike). */
static unsigned alua_groups(struct scsi_lun *lun, struct rtpg_group g[2])
{
        if (lun->medium->ops->refresh_access)
                lun->medium->ops->refresh_access(lun->medium);
        unsigned pub = alua_publish(lun);
        struct tdm_access a = tdm_medium_access(lun->medium);
        uint16_t id = scsi_alua_local_group(&a);
        bool by_stpg = (pub & ALUA_PUB_BY_STPG) != 0;
        g[0] = (struct rtpg_group){id, id, (enum scsi_alua_state)(pub & ALUA_PUB_LOCAL_MASK),
                                   (pub & ALUA_PUB_LOCAL_CHANGED) != 0, by_stpg};
        if (!a.peer_id)
                return 1;
        g[1] = (struct rtpg_group){
            a.peer_id, a.peer_id,
            (enum scsi_alua_state)((pub & ALUA_PUB_PEER_MASK) >> ALUA_PUB_PEER_SHIFT),
            (pub & ALUA_PUB_PEER_CHANGED) != 0, by_stpg};
        if (g[1].id < g[0].id) {
                struct rtpg_group tmp = g[0];
                g[0] = g[1];
                g[1] = tmp;
        }
        return 2;
}

enum scsi_reason spc_report_target_port_groups(struct scsi_task *task)
{
        const uint8_t *cdb = task->cdb;
        unsigned format = cdb[1] >> 5;
        if (format > RTPG_FORMAT_EXTENDED)
                return scsi_bad_cdb_field(task, 1, 7);
        struct rtpg_group groups[2];
        unsigned n = alua_groups(task->lun, groups);
        uint8_t supported = n == 2 ? RTPG_SUP_AO | RTPG_SUP_S | RTPG_SUP_U : RTPG_SUP_AO;
        if (n == 2 && tdm_medium_access(task->lun->medium).explicit_alua)
                supported |= RTPG_SUP_T;
        uint32_t header = format == RTPG_FORMAT_EXTENDED ? 8 : 4;
        uint32_t len = header + n * (RTPG_DESC_LEN + RTPG_PORT_DESC_LEN);
        uint8_t *d = scsi_data_in_alloc(task, len);
        put_be32(d, len - 4); /* RETURN DATA LENGTH: the bytes after this field */
        if (format == RTPG_FORMAT_EXTENDED) {
                d[4] = RTPG_FORMAT_EXTENDED << 4; /* FORMAT TYPE */
                d[5] = RTPG_IMPLICIT_TRANSITION_S;
        }
        uint8_t *p = d + header;
        for (unsigned i = 0; i < n; i++)
                p = put_group(p, &groups[i], supported);
        scsi_data_in_limit(task, get_be32(cdb + 6));
        return SCSI_OK;
}
