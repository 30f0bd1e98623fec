/* SPC: INQUIRY and VPD, REPORT LUNS, unit attentions, MODE SENSE/SELECT, removal. */
#include "test_scsi_harness.h"
#include "tandem/scsi_nexus.h"

static struct scsi_task *inquiry(bool evpd, uint8_t page, uint16_t alloc)
{
        uint8_t cdb[6] = {0x12, evpd ? 1 : 0, page, 0, 0, 0};
        put_be16(cdb + 3, alloc);
        return h_run(cdb, 6, NULL, 0, alloc);
}

static const uint8_t tur[6] = {0};

START_TEST(inquiry_standard_data)
{
        struct scsi_task *t = inquiry(false, 0, 255);
        h_assert_good(t);
        ck_assert_uint_eq(t->xfer_len, 96);
        const uint8_t *d = t->data_in;
        ck_assert_int_eq(d[0], 0x00);
        ck_assert_int_eq(d[2], 0x06);
        ck_assert_int_eq(d[3] & 0x0f, 2);
        ck_assert_int_eq(d[4], 91);
        ck_assert_mem_eq(d + 8, "TANDEM  ", 8);
        ck_assert_mem_eq(d + 16, "VIRTUAL-DISK    ", 16);
        ck_assert_int_eq(get_be16(d + 58), 0x00a0);
        ck_assert_int_eq(get_be16(d + 64), 0x04c0); /* SBC-3 */
        for (int i = 74; i < 96; i++)
                ck_assert_int_eq(d[i], 0);
        /* A short allocation length truncates; INQUIRY does not consume the POWER ON. */
        t = inquiry(false, 0, 5);
        h_assert_good(t);
        ck_assert_uint_eq(t->xfer_len, 5);
        ck_assert_uint_eq(t->data_in_len, 5);
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x29, 0x00);
}
END_TEST

START_TEST(inquiry_invalid_page)
{
        h_assert_invalid_cdb(inquiry(false, 1, 255), 2, -1);
        h_assert_invalid_cdb(inquiry(true, 0x99, 255), 2, -1);
        uint8_t cmddt[6] = {0x12, 0x02, 0, 0, 255, 0};
        h_assert_invalid_cdb(h_run(cmddt, 6, NULL, 0, 255), 1, 1);
}
END_TEST

START_TEST(inquiry_without_lun)
{
        struct scsi_task *t = &h.task;
        scsi_task_release(t);
        memset(t, 0, sizeof(*t));
        uint8_t cdb[6] = {0x12, 0, 0, 0, 96, 0};
        memcpy(t->cdb, cdb, 6);
        t->nexus = &h.nx;
        t->target = h.target;
        t->lun_id = 7;
        t->expected_len = 96;
        scsi_task_execute(t);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[0], 0x7f);
        memset(t->cdb, 0, sizeof(t->cdb)); /* TEST UNIT READY */
        scsi_task_execute(t);
        h_assert_sense(t, 0x5, 0x25, 0x00);
}
END_TEST

START_TEST(vpd_pages)
{
        struct scsi_task *t = inquiry(true, 0x00, 255);
        h_assert_good(t);
        const uint8_t pages[] = {0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2};
        ck_assert_int_eq(get_be16(t->data_in + 2), sizeof(pages));
        ck_assert_mem_eq(t->data_in + 4, pages, sizeof(pages));
        for (size_t i = 0; i < sizeof(pages); i++) {
                t = inquiry(true, pages[i], 255);
                h_assert_good(t);
                ck_assert_int_eq(t->data_in[1], pages[i]);
                ck_assert_uint_eq(t->xfer_len, get_be16(t->data_in + 2) + 4u);
        }
        t = inquiry(true, 0x80, 255);
        ck_assert_mem_eq(t->data_in + 4, h.lun->serial, strlen(h.lun->serial));
}
END_TEST

START_TEST(vpd_device_identification)
{
        memcpy(h.lun->naa, "\x60\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", 16);
        struct tdm_access a = {.local_state = TDM_ACCESS_ACTIVE, .local_id = 0x1234};
        tdm_medium_set_access(h.lun->medium, &a);
        struct scsi_task *t = inquiry(true, 0x83, 1024);
        h_assert_good(t);
        const uint8_t *d = t->data_in;
        uint32_t end = 4 + get_be16(d + 2);
        bool naa = false, t10 = false, port = false, tpg = false, name = false;
        for (uint32_t off = 4; off < end; off += 4 + d[off + 3]) {
                const uint8_t *p = d + off;
                switch (p[1] & 0x3f) {
                case 0x03: /* LU, NAA */
                        naa =
                            p[3] == 16 && memcmp(p + 4, h.lun->naa, 16) == 0 && (p[0] & 0x0f) == 1;
                        break;
                case 0x01: /* LU, T10 vendor id */
                        t10 = memcmp(p + 4, "TANDEM  ", 8) == 0 && (p[0] & 0x0f) == 2;
                        break;
                case 0x14: /* target port, relative port */
                        port = get_be16(p + 6) == 0x1234 && (p[1] & 0x80);
                        break;
                case 0x15: /* target port, port group */
                        tpg = get_be16(p + 6) == 0x1234;
                        break;
                case 0x28: /* target device, SCSI name string */
                        name = strcmp((const char *)p + 4, h.target->iqn) == 0 && p[3] % 4 == 0;
                        break;
                }
        }
        ck_assert(naa && t10 && port && tpg && name);
        ck_assert_uint_eq(end, t->xfer_len);
}
END_TEST

START_TEST(vpd_block_limits_and_provisioning)
{
        struct scsi_task *t = inquiry(true, 0xb0, 255);
        h_assert_good(t);
        const uint8_t *d = t->data_in;
        ck_assert_int_eq(get_be16(d + 2), 0x3c);
        ck_assert_int_eq(d[4] & 1, 0); /* WSNZ: 0 blocks mean "to the end" */
        uint32_t max_xfer = get_be32(d + 8), opt_xfer = get_be32(d + 12);
        ck_assert_uint_gt(max_xfer, 0);
        ck_assert_uint_le(opt_xfer, max_xfer);
        ck_assert_uint_eq(opt_xfer % get_be16(d + 6), 0);
        ck_assert_uint_ge(get_be32(d + 20), 1); /* MAXIMUM UNMAP LBA COUNT */
        ck_assert_uint_le(get_be32(d + 20), 1024 * 1024);
        ck_assert_uint_ge(get_be32(d + 24), 1);   /* MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT */
        ck_assert_uint_ge(get_be64(d + 36), 256); /* MAXIMUM WRITE SAME LENGTH */
        ck_assert_uint_le(get_be64(d + 36), max_xfer);
        /* Without a journal: one 512-byte block is atomic (a device sector), nothing more. */
        ck_assert_uint_eq(get_be32(d + 44), 1); /* MAXIMUM ATOMIC TRANSFER LENGTH */
        ck_assert_uint_eq(get_be32(d + 48), 1); /* ATOMIC ALIGNMENT */
        ck_assert_uint_eq(get_be32(d + 52), 1); /* ATOMIC TRANSFER LENGTH GRANULARITY */
        ck_assert_uint_eq(get_be32(d + 56), 0); /* no ATOMIC BOUNDARY support */
        ck_assert_uint_eq(get_be32(d + 60), 0);
        t = inquiry(true, 0xb2, 255);
        ck_assert_int_eq(t->data_in[5], 0xe4); /* LBPU, LBPWS, LBPWS10, LBPRZ */
        ck_assert_int_eq(t->data_in[6] & 0x07, 0x02);
}
END_TEST

/*
 * OPTIMAL TRANSFER LENGTH GRANULARITY and UNMAP GRANULARITY follow the physical block once
 * it is larger than a page, and OPTIMAL TRANSFER LENGTH stays a multiple of them.
 */
START_TEST(vpd_block_limits_physical_block)
{
        const struct {
                uint32_t physical, granularity;
        } cases[] = {{0, 8}, {1024, 8}, {4096, 8}, {16384, 32}, {65536, 128}};
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                ck_assert_int_eq(scsi_lun_set_physical_block_size(h.lun, cases[i].physical), 0);
                struct scsi_task *t = inquiry(true, 0xb0, 255);
                h_assert_good(t);
                const uint8_t *d = t->data_in;
                ck_assert_uint_eq(get_be16(d + 6), cases[i].granularity);
                ck_assert_uint_eq(get_be32(d + 28), cases[i].granularity); /* UNMAP GRANULARITY */
                ck_assert_uint_eq(get_be32(d + 12) % cases[i].granularity, 0);
                ck_assert_uint_eq(get_be32(d + 32), 0); /* no UGAVALID: alignment 0 (LBA 0) */
        }
}
END_TEST

START_TEST(vpd_thick_lun)
{
        struct scsi_task *t = inquiry(true, 0xb0, 255);
        ck_assert_uint_eq(get_be32(t->data_in + 20), 0);
        ck_assert_uint_eq(get_be32(t->data_in + 24), 0);
        t = inquiry(true, 0xb2, 255);
        ck_assert_int_eq(t->data_in[5], 0);
        ck_assert_int_eq(t->data_in[6], 0);
}
END_TEST

static struct scsi_task *report_luns(struct scsi_nexus *nx)
{
        uint8_t cdb[12] = {0xa0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0};
        return h_run_on(nx, cdb, 12, NULL, 0, 4096);
}

START_TEST(report_luns_and_luns_changed)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        struct scsi_task *t = report_luns(&h.nx);
        h_assert_good(t);
        ck_assert_uint_eq(get_be32(t->data_in), 8);
        ck_assert_uint_eq(get_be64(t->data_in + 8), 0);
        struct scsi_lun *l5 = h_make_lun(5, 64, 512, true);
        ck_assert_int_eq(scsi_target_add_lun(h.target, l5), 0);
        ck_assert_int_eq(scsi_target_add_lun(h.target, l5), -EEXIST);
        /* nexus 2 learns of the change at its next command, once */
        h_assert_sense(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x6, 0x3f, 0x0e);
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
        /* nexus 1 reads REPORT LUNS first, which clears it */
        t = report_luns(&h.nx);
        h_assert_good(t);
        ck_assert_uint_eq(get_be32(t->data_in), 16);
        ck_assert_int_eq(t->data_in[16 + 1], 5);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        ck_assert_int_eq(scsi_target_del_lun(h.target, 5), 0);
        ck_assert_int_eq(scsi_target_del_lun(h.target, 5), -ENOENT);
        scsi_lun_put(l5);
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x3f, 0x0e);
}
END_TEST

START_TEST(ua_power_on_once_per_nexus)
{
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x29, 0x00);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        h_assert_sense(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x6, 0x29, 0x00);
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
        /* Raised before a nexus existed: the POWER ON subsumes it. */
        scsi_lun_raise_ua(h.lun, SCSI_UA_CAPACITY_CHANGED, 0);
        struct scsi_nexus nx3;
        scsi_nexus_init(&nx3, h.target, "iqn.late");
        h_assert_sense(h_run_on(&nx3, tur, 6, NULL, 0, 0), 0x6, 0x29, 0x00);
        h_assert_good(h_run_on(&nx3, tur, 6, NULL, 0, 0));
        ck_assert_uint_ne(nx3.id, h.nx.id);
}
END_TEST

START_TEST(ua_lun_reset_and_precedence)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        scsi_lun_raise_ua(h.lun, SCSI_UA_MODE_CHANGED, 0);
        scsi_lun_raise_ua(h.lun, SCSI_UA_CAPACITY_CHANGED, 0);
        atomic_store(&h.lun->removal_prevented, true);
        scsi_nexus_lun_reset(&h.nx, h.lun);
        ck_assert(!atomic_load(&h.lun->removal_prevented));
        /* 29/03 first (the requester too), then 2A/09, then 2A/01, then GOOD. */
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x29, 0x03);
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x09);
        h_assert_sense(h_run(tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x01);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        h_assert_sense(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x6, 0x29, 0x03);
        /* REPORT LUNS and INQUIRY run without consuming it. */
        h_assert_good(report_luns(&h.nx2));
        h_assert_sense(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x09);
        /* The nexus that caused a change gets no attention for it. */
        scsi_lun_raise_ua(h.lun, SCSI_UA_ALUA_CHANGED, h.nx.id);
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
}
END_TEST

static struct scsi_task *mode_sense6(struct scsi_nexus *nx, uint8_t dbd, uint8_t pc, uint8_t page,
                                     uint8_t subpage, uint8_t alloc)
{
        uint8_t cdb[6] = {0x1a, dbd ? 0x08 : 0, (uint8_t)(pc << 6 | page), subpage, alloc, 0};
        return h_run_on(nx, cdb, 6, NULL, 0, alloc);
}

static const uint8_t *find_page(const struct scsi_task *t, unsigned hdr, uint8_t code)
{
        unsigned off = hdr + (hdr == 4 ? t->data_in[3] : get_be16(t->data_in + 6));
        while (off < t->xfer_len) {
                if ((t->data_in[off] & 0x3f) == code)
                        return t->data_in + off;
                off += 2 + t->data_in[off + 1];
        }
        return NULL;
}

START_TEST(mode_sense_pages)
{
        h_clear_ua(&h.nx);
        struct scsi_task *t = mode_sense6(&h.nx, 0, 0, 0x3f, 0, 255);
        h_assert_good(t);
        const uint8_t *d = t->data_in;
        ck_assert_uint_eq(d[0] + 1u, t->xfer_len);
        ck_assert_int_eq(d[2], 0x10); /* DPOFUA, not write protected */
        ck_assert_int_eq(d[3], 8);
        ck_assert_uint_eq(get_be32(d + 4), H_BLOCKS);
        ck_assert_uint_eq(get_be24(d + 9), 512);
        const uint8_t *caching = find_page(t, 4, 0x08);
        const uint8_t *control = find_page(t, 4, 0x0a);
        const uint8_t *iec = find_page(t, 4, 0x1c);
        ck_assert(caching && control && iec);
        ck_assert_int_eq(caching[1], 0x12);
        ck_assert_int_eq(caching[2] & 0x04, 0x04); /* WCE */
        ck_assert_int_eq(control[1], 0x0a);
        ck_assert_int_eq(control[2] & 0x04, 0); /* D_SENSE off */
        ck_assert_uint_eq(t->xfer_len, 4 + 8 + 20 + 12 + 12);
        /* DBD, one page, truncated allocation length */
        t = mode_sense6(&h.nx, 1, 0, 0x0a, 0, 255);
        h_assert_good(t);
        ck_assert_uint_eq(t->xfer_len, 4 + 12);
        ck_assert_int_eq(t->data_in[3], 0);
        ck_assert_int_eq(t->data_in[4], 0x0a);
        t = mode_sense6(&h.nx, 0, 0, 0x3f, 0, 4);
        ck_assert_uint_eq(t->xfer_len, 4);
        /* changeable: only WCE */
        t = mode_sense6(&h.nx, 1, 1, 0x08, 0, 255);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[4 + 2], 0x04);
        for (int i = 3; i < 20; i++)
                ck_assert_int_eq(t->data_in[4 + i], 0);
        t = mode_sense6(&h.nx, 1, 1, 0x0a, 0, 255);
        for (int i = 2; i < 12; i++) /* only D_SENSE and SWP */
                ck_assert_int_eq(t->data_in[4 + i], i == 2 ? 0x04 : i == 4 ? 0x08 : 0);
        h_assert_sense(mode_sense6(&h.nx, 0, 3, 0x08, 0, 255), 0x5, 0x39, 0x00);
        h_assert_invalid_cdb(mode_sense6(&h.nx, 0, 0, 0x19, 0, 255), 2, 5);
        h_assert_invalid_cdb(mode_sense6(&h.nx, 0, 0, 0x08, 0x01, 255), 3, -1);
        h_assert_good(mode_sense6(&h.nx, 0, 0, 0x3f, 0xff, 255));
}
END_TEST

START_TEST(mode_sense10_long_lba)
{
        h_clear_ua(&h.nx);
        uint8_t cdb[10] = {0x5a, 0x10, 0x08, 0, 0, 0, 0, 0, 255, 0};
        struct scsi_task *t = h_run(cdb, 10, NULL, 0, 255);
        h_assert_good(t);
        const uint8_t *d = t->data_in;
        ck_assert_uint_eq(get_be16(d) + 2u, t->xfer_len);
        ck_assert_int_eq(d[4] & 1, 1);
        ck_assert_int_eq(get_be16(d + 6), 16);
        ck_assert_uint_eq(get_be64(d + 8), H_BLOCKS);
        ck_assert_uint_eq(get_be32(d + 8 + 12), 512);
        ck_assert_int_eq(d[8 + 16], 0x08);
}
END_TEST

static struct scsi_task *mode_select6(struct scsi_nexus *nx, const uint8_t *param, uint8_t len,
                                      uint8_t byte1)
{
        uint8_t cdb[6] = {0x15, byte1, 0, 0, len, 0};
        return h_run_on(nx, cdb, 6, param, len, len);
}

START_TEST(mode_select_wce)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        struct scsi_task *t = mode_sense6(&h.nx, 1, 0, 0x08, 0, 255);
        uint8_t param[24];
        memcpy(param, t->data_in, 24);
        param[0] = 0; /* MODE DATA LENGTH is reserved in MODE SELECT */
        param[4 + 2] &= (uint8_t)~0x04;
        uint8_t *buf = h_pattern(512, 1);
        h_assert_good(h_write10(0, 1, buf)); /* cached: not flushed yet */
        uint64_t flushes = h_dev()->flush_count;
        h_assert_good(mode_select6(&h.nx, param, 24, 0x10));
        ck_assert(!atomic_load(&h.lun->wce));
        ck_assert_uint_gt(h_dev()->flush_count, flushes); /* cached data made durable */
        t = mode_sense6(&h.nx, 1, 0, 0x08, 0, 255);
        ck_assert_int_eq(t->data_in[4 + 2] & 0x04, 0);
        /* The other nexus is told; the one that changed it is not. */
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        h_assert_sense(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x01);
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
        /* With the cache off every write is flushed before GOOD. */
        flushes = h_dev()->flush_count;
        h_assert_good(h_write10(0, 1, buf));
        ck_assert_uint_eq(h_dev()->flush_count, flushes + 1);
        free(buf);
        /* Setting the same value again changes nothing and raises nothing. */
        h_assert_good(mode_select6(&h.nx2, param, 24, 0x10));
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
}
END_TEST

/*
 * The values are the LU's mode record on the medium (so the peer has them), and a record
 * that arrives from the other copy becomes current and tells every nexus.
 */
START_TEST(mode_record_stored_and_reloaded)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        uint8_t rec[8];
        ck_assert_uint_eq(tdm_medium_state_get(h.lun->medium, SCSI_STATE_MODE, rec, 8, NULL), 0);
        struct scsi_task *t = mode_sense6(&h.nx, 1, 0, 0x08, 0, 255);
        uint8_t param[24];
        memcpy(param, t->data_in, 24);
        param[0] = 0;
        param[4 + 2] &= (uint8_t)~0x04;
        h_assert_good(mode_select6(&h.nx, param, 24, 0x10));
        ck_assert_uint_eq(tdm_medium_state_get(h.lun->medium, SCSI_STATE_MODE, rec, 8, NULL), 4);
        ck_assert_int_eq(rec[0], 'M');
        ck_assert_int_eq(rec[1], 1);
        ck_assert_int_eq(rec[2], 0); /* WCE off, D_SENSE off, SWP off */
        h_clear_ua(&h.nx2);

        /* The peer's record: WCE on. Current at once; both nexuses told. */
        const uint8_t peer[4] = {'M', 1, 0x1, 0};
        ck_assert_int_eq(tdm_medium_state_put(h.lun->medium, SCSI_STATE_MODE, peer, 4, 0), 0);
        scsi_lun_state_changed(h.lun, SCSI_STATE_MODE);
        ck_assert(atomic_load(&h.lun->wce));
        h_assert_sense(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x01);
        h_assert_sense(h_run_on(&h.nx, tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x01);

        /* A malformed record changes nothing and tells nobody. */
        const uint8_t bad[4] = {'M', 9, 0x0, 0};
        ck_assert_int_eq(tdm_medium_state_put(h.lun->medium, SCSI_STATE_MODE, bad, 4, 0), 0);
        scsi_lun_state_changed(h.lun, SCSI_STATE_MODE);
        ck_assert(atomic_load(&h.lun->wce));
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
}
END_TEST

START_TEST(mode_select_rejects)
{
        h_clear_ua(&h.nx);
        struct scsi_task *t = mode_sense6(&h.nx, 1, 0, 0x0a, 0, 255);
        uint8_t param[16];
        memcpy(param, t->data_in, 16);
        param[0] = 0;
        param[4 + 3] |= 0x02; /* QERR is not changeable */
        t = mode_select6(&h.nx, param, 16, 0x10);
        h_assert_sense(t, 0x5, 0x26, 0x00);
        h_assert_field(t, false, 7, 1);
        param[4 + 3] &= (uint8_t)~0x02;
        param[4 + 1] = 0x0b; /* wrong page length */
        t = mode_select6(&h.nx, param, 16, 0x10);
        h_assert_sense(t, 0x5, 0x26, 0x00);
        h_assert_field(t, false, 5, -1);
        param[4 + 1] = 0x0a;
        h_assert_good(mode_select6(&h.nx, param, 16, 0x10));
        /* truncated page, SP set, PF clear, a short header */
        h_assert_sense(mode_select6(&h.nx, param, 10, 0x10), 0x5, 0x1a, 0x00);
        h_assert_invalid_cdb(mode_select6(&h.nx, param, 16, 0x11), 1, 0);
        h_assert_invalid_cdb(mode_select6(&h.nx, param, 16, 0x00), 1, 4);
        h_assert_sense(mode_select6(&h.nx, param, 3, 0x10), 0x5, 0x1a, 0x00);
        /* unknown page */
        param[4] = 0x19;
        t = mode_select6(&h.nx, param, 16, 0x10);
        h_assert_sense(t, 0x5, 0x26, 0x00);
        h_assert_field(t, false, 4, 5);
        /* a block descriptor with another block size */
        uint8_t bd[12] = {0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0x10, 0x00};
        t = mode_select6(&h.nx, bd, 12, 0x10);
        h_assert_sense(t, 0x5, 0x26, 0x00);
        h_assert_field(t, false, 9, -1);
        bd[10] = 0x02; /* 512: accepted */
        h_assert_good(mode_select6(&h.nx, bd, 12, 0x10));
        h_assert_good(mode_select6(&h.nx, NULL, 0, 0x10));
}
END_TEST

START_TEST(prevent_allow_and_start_stop)
{
        h_clear_ua(&h.nx);
        uint8_t prevent[6] = {0x1e, 0, 0, 0, 0x01, 0};
        uint8_t eject[6] = {0x1b, 0, 0, 0, 0x02, 0};
        uint8_t load[6] = {0x1b, 0, 0, 0, 0x03, 0};
        uint8_t stop[6] = {0x1b, 0, 0, 0, 0x00, 0};
        h_assert_good(h_run(prevent, 6, NULL, 0, 0));
        h_assert_sense(h_run(eject, 6, NULL, 0, 0), 0x5, 0x53, 0x02);
        h_assert_good(h_run(load, 6, NULL, 0, 0));
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
        prevent[4] = 0;
        h_assert_good(h_run(prevent, 6, NULL, 0, 0));
        h_assert_good(h_run(eject, 6, NULL, 0, 0));
        uint64_t flushes = h_dev()->flush_count;
        uint8_t *buf = h_pattern(512, 3);
        h_assert_good(h_write10(1, 1, buf));
        free(buf);
        h_assert_good(h_run(stop, 6, NULL, 0, 0)); /* stop flushes the cache */
        ck_assert_uint_gt(h_dev()->flush_count, flushes);
        h_assert_good(h_run(tur, 6, NULL, 0, 0)); /* a virtual disk stays ready */
        prevent[4] = 0x04;
        h_assert_invalid_cdb(h_run(prevent, 6, NULL, 0, 0), 4, 2);
}
END_TEST

/* Writes the control page with SWP / D_SENSE set as given, from nexus nx. */
static void set_control(struct scsi_nexus *nx, bool swp, bool d_sense)
{
        struct scsi_task *t = mode_sense6(nx, 1, 0, 0x0a, 0, 255);
        h_assert_good(t);
        uint8_t param[16];
        memcpy(param, t->data_in, 16);
        param[0] = 0;
        param[2] = 0;
        param[4 + 2] = (uint8_t)((param[4 + 2] & ~0x04) | (d_sense ? 0x04 : 0));
        param[4 + 4] = (uint8_t)((param[4 + 4] & ~0x08) | (swp ? 0x08 : 0));
        h_assert_good(mode_select6(nx, param, 16, 0x10));
}

START_TEST(software_write_protect)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        set_control(&h.nx, true, false);
        struct scsi_task *t = mode_sense6(&h.nx, 1, 0, 0x0a, 0, 255);
        ck_assert_int_eq(t->data_in[2], 0x90); /* WP + DPOFUA */
        ck_assert_int_eq(t->data_in[4 + 4] & 0x08, 0x08);
        uint8_t *buf = h_pattern(512, 4);
        h_assert_good(h_read10(0, 1));
        h_assert_sense(h_write10(0, 1, buf), 0x7, 0x27, 0x00);
        uint8_t unmap_cdb[10] = {0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        h_assert_sense(h_run(unmap_cdb, 10, NULL, 0, 0), 0x7, 0x27, 0x00);
        /* the other nexus sees the change, then the protection */
        h_assert_sense(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x6, 0x2a, 0x01);
        uint8_t cdb[10];
        cdb_rw10(cdb, 0x2a, 0, 1);
        h_assert_sense(h_run_on(&h.nx2, cdb, 10, buf, 512, 512), 0x7, 0x27, 0x00);
        set_control(&h.nx, false, false);
        h_assert_good(h_write10(0, 1, buf));
        free(buf);
}
END_TEST

/* A CDB of entry e with every field zero (transfer length 0) but its service action. */
static void cdb_of_entry(uint8_t *cdb, const struct scsi_opcode_entry *e)
{
        memset(cdb, 0, SCSI_CDB_MAX);
        cdb[0] = e->opcode;
        if (e->has_service_action)
                cdb[1] = (uint8_t)e->service_action;
}

START_TEST(read_only_lun)
{
        h.lun->read_only = true;
        h_clear_ua(&h.nx);
        /* WP in the device-specific parameter of MODE SENSE(6) and (10) */
        struct scsi_task *t = mode_sense6(&h.nx, 1, 0, 0x3f, 0, 255);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[2], 0x90); /* WP + DPOFUA */
        uint8_t ms10[10] = {0x5a, 0x08, 0x3f, 0, 0, 0, 0, 0, 255, 0};
        t = h_run(ms10, 10, NULL, 0, 255);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[3], 0x90);
        t = mode_sense6(&h.nx, 1, 1, 0x3f, 0, 255); /* changeable values: WP is not */
        ck_assert_int_eq(t->data_in[2], 0);
        /* every command of the table that changes the medium: DATA PROTECT, WRITE PROTECTED */
        unsigned checked = 0;
        for (size_t i = 0; i < scsi_opcode_table_len; i++) {
                const struct scsi_opcode_entry *e = &scsi_opcode_table[i];
                if (!(e->flags & SCSI_F_WRITES_MEDIUM))
                        continue;
                uint8_t cdb[SCSI_CDB_MAX];
                cdb_of_entry(cdb, e);
                ck_assert_msg(h_run(cdb, e->cdb_len, NULL, 0, 0)->reason == SR_WRITE_PROTECTED,
                              "%s is not refused", e->name);
                h_assert_sense(&h.task, 0x7, 0x27, 0x00);
                checked++;
        }
        /* WRITE x4, AND VERIFY x3, ORWRITE, SAME x2, UNMAP, ATOMIC, COMPARE AND WRITE, XCOPY */
        ck_assert_uint_eq(checked, 14);
        /* and with real data nothing reaches the medium; reads still work */
        uint8_t *buf = h_pattern(8 * 512, 5);
        h_assert_sense(h_write10(0, 8, buf), 0x7, 0x27, 0x00);
        t = h_read10(0, 8);
        h_assert_good(t);
        ck_assert(h_all_zero(t->data_in, 8 * 512));
        /* clearing SWP does not lift a configured write protection */
        set_control(&h.nx, false, false);
        h_assert_sense(h_write10(0, 8, buf), 0x7, 0x27, 0x00);
        h.lun->read_only = false;
        h_assert_good(h_write10(0, 8, buf));
        free(buf);
}
END_TEST

/* A read-only backing store is opened O_RDONLY: it can be neither written nor created. */
START_TEST(read_only_backstore)
{
        char path[64];
        snprintf(path, sizeof(path), "/tmp/tandem-ro-test-XXXXXX");
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
        close(fd);
        struct bs_dev *bs = NULL;
        struct bs_open_opts ro = {.read_only = true, .must_exist = true};
        ck_assert_int_eq(bs_open(path, &ro, &bs), 0);
        uint8_t blk[512] = {1};
        ck_assert_int_eq(bs_write(bs, blk, sizeof(blk), 0), -EBADF);
        ck_assert_int_eq(bs_read(bs, blk, sizeof(blk), 0), 0);
        ck_assert_uint_eq(bs->size, 1 << 20);
        bs_close(bs);
        struct bs_open_opts grow = {.read_only = true, .create_size = 2 << 20};
        ck_assert_int_eq(bs_open(path, &grow, &bs), -EINVAL);
        unlink(path);
}
END_TEST

START_TEST(descriptor_sense_with_d_sense)
{
        h_clear_ua(&h.nx);
        set_control(&h.nx, false, true);
        struct scsi_task *t = h_read10(H_BLOCKS, 1);
        ck_assert_int_eq(t->status, SCSI_STATUS_CHECK_CONDITION);
        ck_assert_int_eq(t->sense[0], 0x72);
        ck_assert_int_eq(t->sense[1], 0x05);
        ck_assert_int_eq(t->sense[2], 0x21);
        uint8_t bad[6] = {0x12, 0, 1, 0, 255, 0};
        t = h_run(bad, 6, NULL, 0, 255);
        ck_assert_int_eq(t->sense_len, 16);
        ck_assert_int_eq(t->sense[8], 0x02); /* sense key specific descriptor */
        ck_assert_int_eq(t->sense[12], 0xc0);
        ck_assert_int_eq(get_be16(t->sense + 13), 2);
        set_control(&h.nx, false, false);
        h_assert_sense(h_read10(H_BLOCKS, 1), 0x5, 0x21, 0x00);
}
END_TEST

static struct scsi_task *reserve(struct scsi_nexus *nx, bool release, bool ten)
{
        uint8_t cdb[10] = {(uint8_t)((ten ? 0x56 : 0x16) + (release ? 1 : 0))};
        return h_run_on(nx, cdb, ten ? 10 : 6, NULL, 0, 0);
}

static struct scsi_task *mode_sense_all(struct scsi_nexus *nx)
{
        return mode_sense6(nx, 0, 0, 0x3f, 0, 255);
}

START_TEST(reserve_release)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        h_assert_good(reserve(&h.nx, false, false));
        h_assert_good(reserve(&h.nx, false, false)); /* again by the holder */
        struct scsi_task *t = reserve(&h.nx2, false, false);
        ck_assert_int_eq(t->status, SCSI_STATUS_RESERVATION_CONFLICT);
        ck_assert_int_eq(t->sense_len, 0);
        h_assert_good(reserve(&h.nx2, true, false)); /* a no-op for a non-holder */
        h_assert_good(mode_sense_all(&h.nx));
        ck_assert_int_eq(mode_sense_all(&h.nx2)->status, SCSI_STATUS_RESERVATION_CONFLICT);
        ck_assert_int_eq(h_read10(0, 1)->status, SCSI_STATUS_GOOD);
        /* INQUIRY, REPORT LUNS, REQUEST SENSE and TEST UNIT READY still work */
        uint8_t inq[6] = {0x12, 0, 0, 0, 36, 0};
        h_assert_good(h_run_on(&h.nx2, inq, 6, NULL, 0, 36));
        h_assert_good(report_luns(&h.nx2));
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
        h_assert_good(reserve(&h.nx, true, false));
        h_assert_good(reserve(&h.nx2, false, true)); /* RESERVE(10) */
        ck_assert_int_eq(reserve(&h.nx, false, false)->status, SCSI_STATUS_RESERVATION_CONFLICT);
        h_assert_good(reserve(&h.nx2, true, true));
        h_assert_good(mode_sense_all(&h.nx));
}
END_TEST

START_TEST(reservation_ends_with_reset_and_nexus)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        h_assert_good(reserve(&h.nx, false, false));
        scsi_nexus_lun_reset(&h.nx2, h.lun);
        h_clear_ua(&h.nx2);
        h_assert_good(reserve(&h.nx2, false, false));
        ck_assert_int_eq(reserve(&h.nx, false, false)->status, SCSI_STATUS_CHECK_CONDITION);
        ck_assert_int_eq(reserve(&h.nx, false, false)->status, SCSI_STATUS_RESERVATION_CONFLICT);
        scsi_nexus_fini(&h.nx2);
        h_assert_good(reserve(&h.nx, false, false));
        scsi_nexus_fini(&h.nx2); /* not the holder: nothing changes */
        ck_assert_int_eq(reserve(&h.nx2, false, false)->status, SCSI_STATUS_RESERVATION_CONFLICT);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("scsi_spc");
        TCase *tc = tcase_create("thin");
        tcase_add_checked_fixture(tc, h_setup, h_teardown);
        tcase_add_test(tc, inquiry_standard_data);
        tcase_add_test(tc, inquiry_invalid_page);
        tcase_add_test(tc, inquiry_without_lun);
        tcase_add_test(tc, vpd_pages);
        tcase_add_test(tc, vpd_device_identification);
        tcase_add_test(tc, vpd_block_limits_and_provisioning);
        tcase_add_test(tc, vpd_block_limits_physical_block);
        tcase_add_test(tc, report_luns_and_luns_changed);
        tcase_add_test(tc, ua_power_on_once_per_nexus);
        tcase_add_test(tc, ua_lun_reset_and_precedence);
        tcase_add_test(tc, mode_sense_pages);
        tcase_add_test(tc, mode_sense10_long_lba);
        tcase_add_test(tc, mode_select_wce);
        tcase_add_test(tc, mode_select_rejects);
        tcase_add_test(tc, mode_record_stored_and_reloaded);
        tcase_add_test(tc, prevent_allow_and_start_stop);
        tcase_add_test(tc, software_write_protect);
        tcase_add_test(tc, read_only_lun);
        tcase_add_test(tc, read_only_backstore);
        tcase_add_test(tc, descriptor_sense_with_d_sense);
        tcase_add_test(tc, reserve_release);
        tcase_add_test(tc, reservation_ends_with_reset_and_nexus);
        suite_add_tcase(s, tc);
        TCase *tk = tcase_create("thick");
        tcase_add_checked_fixture(tk, h_setup_thick, h_teardown);
        tcase_add_test(tk, vpd_thick_lun);
        suite_add_tcase(s, tk);
        return h_run_suite(s);
}
