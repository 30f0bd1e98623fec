/*
 * ALUA: standard INQUIRY TPGS, REPORT TARGET PORT GROUPS for a local LUN and for a
 * replicated LUN in each role, allocation-length truncation, the extended header, and the
 * ASYMMETRIC ACCESS STATE CHANGED unit attention.
 */
#include "test_scsi_harness.h"

static const uint8_t tur[6] = {0};

static struct scsi_task *rtpg_on(struct scsi_nexus *nx, uint8_t format, uint32_t alloc)
{
        uint8_t cdb[12] = {0xa3, (uint8_t)(format << 5 | 0x0a)};
        put_be32(cdb + 6, alloc);
        return h_run_on(nx, cdb, 12, NULL, 0, alloc);
}

static struct scsi_task *rtpg(uint8_t format, uint32_t alloc)
{
        return rtpg_on(&h.nx, format, alloc);
}

/* A descriptor as the test expects it: group id, state, supported bits, status, port. */
struct want_group {
        uint16_t id;
        uint8_t state;
        uint8_t supported;
        uint8_t status;
        uint16_t port;
};

static void assert_group(const uint8_t *p, const struct want_group *w)
{
        ck_assert_msg(p[0] == w->state, "group %u: byte 0 %02x, want %02x (PREF 0)", w->id, p[0],
                      w->state);
        ck_assert_int_eq(p[1], w->supported);
        ck_assert_uint_eq(get_be16(p + 2), w->id);
        ck_assert_int_eq(p[4], 0);
        ck_assert_msg(p[5] == w->status, "group %u: status code %02x, want %02x", w->id, p[5],
                      w->status);
        ck_assert_int_eq(p[6], 0);
        ck_assert_int_eq(p[7], 1); /* one target port */
        ck_assert_uint_eq(get_be16(p + 8), 0);
        ck_assert_uint_eq(get_be16(p + 10), w->port);
}

/* Length-only format with the given groups, whole reply. */
static void assert_rtpg(const struct want_group *groups, unsigned n)
{
        struct scsi_task *t = rtpg(0, 1024);
        h_assert_good(t);
        ck_assert_uint_eq(t->xfer_len, 4 + 12 * n);
        ck_assert_uint_eq(get_be32(t->data_in), 12 * n);
        for (unsigned i = 0; i < n; i++)
                assert_group(t->data_in + 4 + 12 * i, &groups[i]);
}

enum { AO = 0x0, S = 0x2, U = 0x3 };
#define SUP_REPL 0x0d /* AO_SUP | S_SUP | U_SUP */

/* The medium's access state, as a replicator publishes it. */
static void set_access(uint8_t local, uint16_t local_id, uint16_t peer_id, uint8_t peer)
{
        bool explicit_alua = tdm_medium_access(h.lun->medium).explicit_alua;
        struct tdm_access a = {.local_state = local,
                               .local_id = local_id,
                               .peer_id = peer_id,
                               .peer_state = peer,
                               .explicit_alua = explicit_alua};
        tdm_medium_set_access(h.lun->medium, &a);
}

/* This node's state only (the peer's as it is). */
static void set_local(uint8_t local)
{
        struct tdm_access a = tdm_medium_access(h.lun->medium);
        set_access(local, a.local_id, a.peer_id, a.peer_state);
}

static void set_peer(uint8_t peer)
{
        struct tdm_access a = tdm_medium_access(h.lun->medium);
        set_access(a.local_state, a.local_id, a.peer_id, peer);
}

/* A LUN built on a medium in this state: the initial states raise nothing. */
static void make_pair(uint8_t local, uint16_t local_id, uint16_t peer_id, uint8_t peer)
{
        set_access(local, local_id, peer_id, peer);
        scsi_lun_alua_init(h.lun);
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
}

/* This node is node 1 (Primary), the peer node 2 (Secondary, connected). */
static void make_primary_of_pair(void)
{
        make_pair(TDM_ACCESS_ACTIVE, 1, 2, TDM_ACCESS_STANDBY);
}

/* This node is node 2 (Secondary), the peer node 1 (Primary, connected). */
static void make_secondary_of_pair(void)
{
        make_pair(TDM_ACCESS_STANDBY, 2, 1, TDM_ACCESS_ACTIVE);
}

/* The ids the VPD 0x83 designators report. */
static uint16_t vpd_port_id(void)
{
        uint8_t cdb[6] = {0x12, 0x01, 0x83, 0x04, 0x00, 0};
        struct scsi_task *t = h_run(cdb, 6, NULL, 0, 1024);
        h_assert_good(t);
        const uint8_t *d = t->data_in;
        uint32_t end = 4 + get_be16(d + 2);
        uint16_t port = 0, group = 0;
        for (uint32_t off = 4; off < end; off += 4 + d[off + 3]) {
                if ((d[off + 1] & 0x3f) == 0x14)
                        port = get_be16(d + off + 6);
                if ((d[off + 1] & 0x3f) == 0x15)
                        group = get_be16(d + off + 6);
        }
        ck_assert_uint_eq(port, group);
        return port;
}

START_TEST(inquiry_reports_implicit_alua)
{
        uint8_t cdb[6] = {0x12, 0, 0, 0, 96, 0};
        struct scsi_task *t = h_run(cdb, 6, NULL, 0, 96);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[5] & 0x30, 0x10); /* TPGS 01b */
}
END_TEST

START_TEST(local_lun_one_active_group)
{
        h_clear_ua(&h.nx);
        struct want_group g = {1, AO, 0x01, 0x00, 1};
        assert_rtpg(&g, 1);
        /* The VPD 0x83 port designators name the same group and port. */
        ck_assert_uint_eq(vpd_port_id(), 1);
}
END_TEST

START_TEST(primary_of_pair)
{
        make_primary_of_pair();
        ck_assert_uint_eq(vpd_port_id(), 1);
        struct want_group g[2] = {{1, AO, SUP_REPL, 0, 1}, {2, S, SUP_REPL, 0, 2}};
        assert_rtpg(g, 2);
        /* Nothing was raised for the initial states. */
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        h_assert_good(h_read10(0, 1));
}
END_TEST

START_TEST(secondary_of_pair)
{
        make_secondary_of_pair();
        ck_assert_uint_eq(vpd_port_id(), 2);
        /* Lowest group id first: the peer's. RTPG works in standby. */
        struct want_group g[2] = {{1, AO, SUP_REPL, 0, 1}, {2, S, SUP_REPL, 0, 2}};
        assert_rtpg(g, 2);
        h_assert_sense(h_read10(0, 1), 0x2, 0x04, 0x0b);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
}
END_TEST

START_TEST(peer_not_connected_is_unavailable)
{
        make_primary_of_pair();
        set_peer(TDM_ACCESS_UNAVAILABLE);
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x06);
        struct want_group g[2] = {{1, AO, SUP_REPL, 0, 1}, {2, U, SUP_REPL, 0x02, 2}};
        assert_rtpg(g, 2);
}
END_TEST

START_TEST(allocation_length_truncates)
{
        make_primary_of_pair();
        struct scsi_task *t = rtpg(0, 1024);
        h_assert_good(t);
        uint8_t full[28];
        ck_assert_uint_eq(t->xfer_len, sizeof(full));
        memcpy(full, t->data_in, sizeof(full));
        const uint32_t lens[] = {0, 2, 4, 5, 16, 27, 28, 29};
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
                t = rtpg(0, lens[i]);
                h_assert_good(t);
                uint32_t want = lens[i] < sizeof(full) ? lens[i] : (uint32_t)sizeof(full);
                ck_assert_uint_eq(t->xfer_len, want);
                ck_assert_uint_eq(t->data_in_len, want);
                if (want)
                        ck_assert_mem_eq(t->data_in, full, want);
        }
}
END_TEST

START_TEST(extended_header)
{
        make_secondary_of_pair();
        struct scsi_task *t = rtpg(1, 1024);
        h_assert_good(t);
        const uint8_t *d = t->data_in;
        ck_assert_uint_eq(t->xfer_len, 8 + 24);
        ck_assert_uint_eq(get_be32(d), 4 + 24); /* everything after the length field */
        ck_assert_int_eq(d[4], 0x10);           /* FORMAT TYPE 001b */
        ck_assert_int_eq(d[5], 10);             /* IMPLICIT TRANSITION TIME */
        ck_assert_int_eq(d[6], 0);
        ck_assert_int_eq(d[7], 0);
        struct want_group g[2] = {{1, AO, SUP_REPL, 0, 1}, {2, S, SUP_REPL, 0, 2}};
        assert_group(d + 8, &g[0]);
        assert_group(d + 20, &g[1]);
        t = rtpg(1, 6);
        h_assert_good(t);
        ck_assert_uint_eq(t->xfer_len, 6);
        ck_assert_int_eq(t->data_in[5], 10);
}
END_TEST

START_TEST(bad_parameter_data_format)
{
        h_clear_ua(&h.nx);
        for (uint8_t f = 2; f < 8; f++)
                h_assert_invalid_cdb(rtpg(f, 1024), 1, 7);
        /* A reserved CDB byte. */
        uint8_t cdb[12] = {0xa3, 0x0a, 0x01, 0, 0, 0, 0, 0, 0x04, 0, 0, 0};
        h_assert_invalid_cdb(h_run(cdb, 12, NULL, 0, 1024), 2, 0);
}
END_TEST

START_TEST(rtpg_needs_a_lun)
{
        struct scsi_task *t = &h.task;
        scsi_task_release(t);
        memset(t, 0, sizeof(*t));
        uint8_t cdb[12] = {0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
        memcpy(t->cdb, cdb, 12);
        t->nexus = &h.nx;
        t->target = h.target;
        t->lun_id = 9;
        t->expected_len = 256;
        scsi_task_execute(t);
        h_assert_sense(t, 0x5, 0x25, 0x00);
}
END_TEST

/* A role change (this node's group goes standby) reaches every nexus once. */
START_TEST(ua_once_after_local_change)
{
        make_primary_of_pair();
        set_local(TDM_ACCESS_STANDBY); /* demoted: the replicator publishes it */
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x06);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        h_assert_sense(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x06);
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
        /* Reads now get standby; the group that changed says so (02h: implicit). */
        h_assert_sense(h_read10(0, 1), 0x2, 0x04, 0x0b);
        struct want_group g[2] = {{1, S, SUP_REPL, 0x02, 1}, {2, S, SUP_REPL, 0, 2}};
        assert_rtpg(g, 2);
        /* The peer is promoted: one more attention, then quiet. */
        set_peer(TDM_ACCESS_ACTIVE);
        set_peer(TDM_ACCESS_ACTIVE);
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x06);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        struct want_group g2[2] = {{1, S, SUP_REPL, 0x02, 1}, {2, AO, SUP_REPL, 0x02, 2}};
        assert_rtpg(g2, 2);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
}
END_TEST

/* Several changes before a nexus looks: one attention (the latest state is what counts). */
START_TEST(ua_once_for_changes_in_a_row)
{
        make_primary_of_pair();
        set_peer(TDM_ACCESS_UNAVAILABLE);
        set_local(TDM_ACCESS_STANDBY);
        set_peer(TDM_ACCESS_ACTIVE);
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x06);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        /* Back and forth to the published states again raises nothing new. */
        set_peer(TDM_ACCESS_ACTIVE);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
}
END_TEST

/* The published states do not change: no attention, whatever is called. */
START_TEST(no_ua_without_change)
{
        h_clear_ua(&h.nx);
        h_assert_good(rtpg(0, 1024));
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        make_primary_of_pair();
        set_peer(TDM_ACCESS_STANDBY);
        h_assert_good(rtpg(0, 1024));
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
}
END_TEST

/* The medium is asked to publish its state before the groups are reported. */
static uint8_t refreshed_state;
static int refresh_calls;
static struct tdm_medium_ops refreshing_ops;

static void test_refresh(struct tdm_medium *m)
{
        (void)m;
        refresh_calls++;
        set_peer(refreshed_state);
}

START_TEST(refresh_before_report)
{
        const struct tdm_medium_ops *plain = h.lun->medium->ops;
        refreshing_ops = *plain;
        refreshing_ops.refresh_access = test_refresh;
        h.lun->medium->ops = &refreshing_ops;
        make_primary_of_pair();
        refresh_calls = 0;
        refreshed_state = TDM_ACCESS_STANDBY;
        struct want_group g[2] = {{1, AO, SUP_REPL, 0, 1}, {2, S, SUP_REPL, 0, 2}};
        assert_rtpg(g, 2);
        ck_assert_int_ge(refresh_calls, 1);
        refreshed_state = TDM_ACCESS_UNAVAILABLE;
        struct want_group g2[2] = {{1, AO, SUP_REPL, 0, 1}, {2, U, SUP_REPL, 0x02, 2}};
        assert_rtpg(g2, 2);
        /* The attention is raised for the nexus too (it ran RTPG before the change showed). */
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x06);
        h.lun->medium->ops = plain;
        refresh_calls = 0;
        assert_rtpg(g2, 2);
        ck_assert_int_eq(refresh_calls, 0);
}
END_TEST

START_TEST(report_supported_opcodes_lists_rtpg)
{
        h_clear_ua(&h.nx);
        uint8_t cdb[12] = {0xa3, 0x0c, 0x02, 0xa3, 0x00, 0x0a, 0, 0, 0, 64, 0, 0};
        struct scsi_task *t = h_run(cdb, 12, NULL, 0, 64);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[1] & 0x07, 0x03); /* supported per the standard */
        ck_assert_uint_eq(get_be16(t->data_in + 2), 12);
        const uint8_t usage[12] = {0xa3, 0xea, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0};
        ck_assert_mem_eq(t->data_in + 4, usage, 12);
}
END_TEST

/* ---- explicit ALUA: SET TARGET PORT GROUPS ---- */

static struct scsi_task *stpg_on(struct scsi_nexus *nx, const uint8_t *param, uint32_t len)
{
        uint8_t cdb[12] = {0xa4, 0x0a};
        put_be32(cdb + 6, len);
        return h_run_on(nx, cdb, 12, param, len, 0);
}

/* A parameter list of n descriptors {state, group id}. */
static uint32_t stpg_list(uint8_t *p, const uint16_t (*desc)[2], unsigned n)
{
        memset(p, 0, 4 + 4 * n);
        for (unsigned i = 0; i < n; i++) {
                p[4 + 4 * i] = (uint8_t)desc[i][0];
                put_be16(p + 4 + 4 * i + 2, desc[i][1]);
        }
        return 4 + 4 * n;
}

static struct scsi_task *stpg(const uint16_t (*desc)[2], unsigned n)
{
        static uint8_t param[64];
        return stpg_on(&h.nx, param, stpg_list(param, desc, n));
}

/* The medium under test: request_active records the call and answers move_result; with
 * 0 it makes this node's group active first (as the replicator does once promoted). */
static struct tdm_medium_ops explicit_ops;
static const struct tdm_medium_ops *plain_ops;
static int move_calls, move_result;

static void test_request_active(struct tdm_medium *m, struct tdm_mio *io)
{
        (void)m;
        move_calls++;
        set_local(TDM_ACCESS_TRANSITIONING);
        if (move_result == 0) {
                struct tdm_access a = tdm_medium_access(h.lun->medium);
                set_access(TDM_ACCESS_ACTIVE, a.local_id, a.peer_id, TDM_ACCESS_STANDBY);
        } else {
                set_local(TDM_ACCESS_STANDBY);
        }
        tdm_mio_complete(io, move_result);
}

/* This node (2) is the Secondary of an explicit-ALUA pair whose medium moves on request. */
static void make_explicit_secondary(void)
{
        plain_ops = h.lun->medium->ops;
        explicit_ops = *plain_ops;
        explicit_ops.request_active = test_request_active;
        h.lun->medium->ops = &explicit_ops;
        struct tdm_access a = {.local_state = TDM_ACCESS_STANDBY,
                               .local_id = 2,
                               .peer_id = 1,
                               .peer_state = TDM_ACCESS_ACTIVE,
                               .explicit_alua = true};
        tdm_medium_set_access(h.lun->medium, &a);
        scsi_lun_alua_init(h.lun);
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        move_calls = 0;
        move_result = 0;
}

static void restore_ops(void)
{
        h.lun->medium->ops = plain_ops;
}

START_TEST(stpg_refused_with_implicit_alua)
{
        make_secondary_of_pair();
        const uint16_t d[1][2] = {{AO, 2}};
        h_assert_sense(stpg(d, 1), 0x5, 0x20, 0x00);
}
END_TEST

START_TEST(inquiry_reports_explicit_alua)
{
        make_explicit_secondary();
        uint8_t cdb[6] = {0x12, 0, 0, 0, 96, 0};
        struct scsi_task *t = h_run(cdb, 6, NULL, 0, 96);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[5] & 0x30, 0x30); /* TPGS 11b */
        /* RTPG: transitioning is among the supported states. */
        struct want_group g[2] = {{1, AO, SUP_REPL | 0x80, 0, 1}, {2, S, SUP_REPL | 0x80, 0, 2}};
        assert_rtpg(g, 2);
        restore_ops();
}
END_TEST

START_TEST(stpg_moves_the_primary_here)
{
        make_explicit_secondary();
        const uint16_t d[2][2] = {{AO, 2}, {S, 1}}; /* as Windows MPIO lists them */
        h_assert_good(stpg(d, 2));
        ck_assert_int_eq(move_calls, 1);
        /* Status 01h: altered by SET TARGET PORT GROUPS. */
        struct want_group g[2] = {{1, S, SUP_REPL | 0x80, 0x01, 1},
                                  {2, AO, SUP_REPL | 0x80, 0x01, 2}};
        assert_rtpg(g, 2);
        /* The requester gets no attention for the change it asked; the other nexus does. */
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        h_assert_sense(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x06);
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
        /* Asking for what is already so changes nothing. */
        const uint16_t again[1][2] = {{AO, 2}};
        h_assert_good(stpg(again, 1));
        ck_assert_int_eq(move_calls, 1);
        /* A later implicit change is reported as implicit (02h) again. */
        set_peer(TDM_ACCESS_UNAVAILABLE);
        h_clear_ua(&h.nx);
        struct want_group g2[2] = {{1, U, SUP_REPL | 0x80, 0x02, 1},
                                   {2, AO, SUP_REPL | 0x80, 0x02, 2}};
        assert_rtpg(g2, 2);
        restore_ops();
}
END_TEST

START_TEST(stpg_failure_is_reported)
{
        make_explicit_secondary();
        move_result = -ETIMEDOUT;
        const uint16_t d[1][2] = {{AO, 2}};
        h_assert_sense(stpg(d, 1), 0x4, 0x67, 0x0a);
        ck_assert_int_eq(move_calls, 1);
        /* Back where it was; this node's group went through transitioning at its asking. */
        struct want_group g[2] = {{1, AO, SUP_REPL | 0x80, 0, 1}, {2, S, SUP_REPL | 0x80, 0x01, 2}};
        assert_rtpg(g, 2);
        restore_ops();
}
END_TEST

START_TEST(stpg_empty_list_changes_nothing)
{
        make_explicit_secondary();
        h_assert_good(stpg(NULL, 0));
        uint8_t cdb[12] = {0xa4, 0x0a};
        h_assert_good(h_run(cdb, 12, NULL, 0, 0)); /* PARAMETER LIST LENGTH 0 */
        ck_assert_int_eq(move_calls, 0);
        restore_ops();
}
END_TEST

/* Lists tandem refuses, with the byte the field pointer names. */
START_TEST(stpg_bad_lists)
{
        make_explicit_secondary();
        uint8_t p[16];
        /* Not a whole number of descriptors. */
        memset(p, 0, sizeof(p));
        h_assert_sense(stpg_on(&h.nx, p, 6), 0x5, 0x1a, 0x00);
        h_assert_sense(stpg_on(&h.nx, p, 2), 0x5, 0x1a, 0x00);
        struct {
                uint16_t desc[2][2];
                unsigned n;
                unsigned byte;
        } bad[] = {
            {{{AO, 9}}, 1, 6},           /* no such group */
            {{{0x1, 2}}, 1, 4},          /* active/non-optimized: not a state tandem has */
            {{{0xe, 2}}, 1, 4},          /* offline */
            {{{S, 1}}, 1, 4},            /* the serving node to standby, nobody active */
            {{{AO, 2}, {AO, 2}}, 2, 10}, /* one group twice */
        };
        for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct scsi_task *t = stpg_on(&h.nx, p, stpg_list(p, bad[i].desc, bad[i].n));
                h_assert_sense(t, 0x5, 0x26, 0x00);
                h_assert_field(t, false, bad[i].byte, -1);
        }
        /* Reserved bits of a descriptor. */
        const uint16_t d[1][2] = {{AO, 2}};
        uint32_t len = stpg_list(p, d, 1);
        p[4] |= 0x40;
        h_assert_field(stpg_on(&h.nx, p, len), false, 4, 7);
        p[4] = AO;
        p[5] = 1;
        h_assert_field(stpg_on(&h.nx, p, len), false, 5, 7);
        /* The other node's group active while it is not: asked on that node's port. */
        set_peer(TDM_ACCESS_UNAVAILABLE);
        h_clear_ua(&h.nx);
        const uint16_t other[1][2] = {{AO, 1}};
        h_assert_field(stpg(other, 1), false, 4, -1);
        ck_assert_int_eq(move_calls, 0);
        restore_ops();
}
END_TEST

/* The serving node asked to stay active, with the other named standby: nothing to do. */
START_TEST(stpg_on_the_primary_changes_nothing)
{
        make_explicit_secondary();
        set_access(TDM_ACCESS_ACTIVE, 2, 1, TDM_ACCESS_STANDBY);
        h_clear_ua(&h.nx);
        const uint16_t d[2][2] = {{AO, 2}, {S, 1}};
        h_assert_good(stpg(d, 2));
        ck_assert_int_eq(move_calls, 0);
        restore_ops();
}
END_TEST

/*
 * A login is held while another node serves one of the target's LUNs behind the shared
 * portal: standby (or in transition) with no peer group. Per-node groups are standby paths
 * of their own, and a LUN of this node alone is always served here.
 */
START_TEST(served_elsewhere_only_behind_a_shared_port)
{
        ck_assert(!scsi_target_served_elsewhere(h.target)); /* a local LUN */
        set_access(TDM_ACCESS_STANDBY, 1, 0, 0);            /* Secondary, shared port */
        ck_assert(scsi_target_served_elsewhere(h.target));
        set_access(TDM_ACCESS_TRANSITIONING, 1, 0, 0);
        ck_assert(scsi_target_served_elsewhere(h.target));
        set_access(TDM_ACCESS_ACTIVE, 1, 0, 0); /* promoted */
        ck_assert(!scsi_target_served_elsewhere(h.target));
        make_secondary_of_pair(); /* per-node groups: an ALUA standby path */
        ck_assert(!scsi_target_served_elsewhere(h.target));
        /*
         * A second LUN: one still standby is enough, as while a node promotes a target's LUNs
         * one by one (a session let in after the first would meet 02/04/0B on the second).
         */
        set_access(TDM_ACCESS_ACTIVE, 1, 0, 0);
        struct scsi_lun *second = h_make_lun(1, 64, 512, false);
        ck_assert_int_eq(scsi_target_add_lun(h.target, second), 0);
        ck_assert(!scsi_target_served_elsewhere(h.target));
        struct tdm_access standby = {.local_state = TDM_ACCESS_STANDBY, .local_id = 1};
        tdm_medium_set_access(second->medium, &standby);
        ck_assert(scsi_target_served_elsewhere(h.target));
        set_access(TDM_ACCESS_STANDBY, 1, 0, 0); /* both standby */
        ck_assert(scsi_target_served_elsewhere(h.target));
        ck_assert_int_eq(scsi_target_del_lun(h.target, 0), 0);
        ck_assert(scsi_target_served_elsewhere(h.target)); /* the second alone */
        ck_assert_int_eq(scsi_target_del_lun(h.target, 1), 0);
        scsi_lun_put(second);
        ck_assert(!scsi_target_served_elsewhere(h.target)); /* no LUN at all */
}
END_TEST

int main(void)
{
        Suite *s = suite_create("alua");
        TCase *tc = tcase_create("alua");
        tcase_add_checked_fixture(tc, h_setup, h_teardown);
        tcase_add_test(tc, inquiry_reports_implicit_alua);
        tcase_add_test(tc, local_lun_one_active_group);
        tcase_add_test(tc, primary_of_pair);
        tcase_add_test(tc, secondary_of_pair);
        tcase_add_test(tc, peer_not_connected_is_unavailable);
        tcase_add_test(tc, allocation_length_truncates);
        tcase_add_test(tc, extended_header);
        tcase_add_test(tc, bad_parameter_data_format);
        tcase_add_test(tc, rtpg_needs_a_lun);
        tcase_add_test(tc, ua_once_after_local_change);
        tcase_add_test(tc, ua_once_for_changes_in_a_row);
        tcase_add_test(tc, no_ua_without_change);
        tcase_add_test(tc, refresh_before_report);
        tcase_add_test(tc, report_supported_opcodes_lists_rtpg);
        tcase_add_test(tc, stpg_refused_with_implicit_alua);
        tcase_add_test(tc, inquiry_reports_explicit_alua);
        tcase_add_test(tc, stpg_moves_the_primary_here);
        tcase_add_test(tc, stpg_failure_is_reported);
        tcase_add_test(tc, stpg_empty_list_changes_nothing);
        tcase_add_test(tc, stpg_bad_lists);
        tcase_add_test(tc, stpg_on_the_primary_changes_nothing);
        tcase_add_test(tc, served_elsewhere_only_behind_a_shared_port);
        suite_add_tcase(s, tc);
        return h_run_suite(s);
}
