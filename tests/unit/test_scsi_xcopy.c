/*
 * EXTENDED COPY: the parameter list's limits and descriptor checks (xcopy_parse, as the
 * standard names the errors), copies within a LUN and between two LUNs of the target, the
 * segment that reaches past the end, RECEIVE COPY RESULTS for a finished copy.
 */
#include "scsi/xcopy.h"
#include "test_scsi_harness.h"

static void setup(void)
{
        h_setup();
        h_clear_ua(&h.nx);
}

/* A parameter list: header, n_tgt identification descriptors naming naa, the segments. */
struct plist {
        uint8_t b[2048];
        uint32_t len;
        uint32_t n_tgt, seg_bytes;
};

static void pl_target(struct plist *p, const uint8_t naa[16])
{
        uint8_t *d = p->b + 16 + 32 * p->n_tgt++;
        memset(d, 0, 32);
        d[0] = 0xe4;
        d[4] = 0x01; /* binary */
        d[5] = 0x03; /* LU, NAA */
        d[7] = 16;
        memcpy(d + 8, naa, 16);
        put_be24(d + 29, H_BS);
}

static void pl_segment(struct plist *p, uint16_t src, uint16_t dst, uint16_t blocks,
                       uint64_t src_lba, uint64_t dst_lba)
{
        uint8_t *d = p->b + 16 + 32 * p->n_tgt + p->seg_bytes;
        memset(d, 0, 28);
        d[0] = 0x02;
        put_be16(d + 2, 0x18);
        put_be16(d + 4, src);
        put_be16(d + 6, dst);
        put_be16(d + 10, blocks);
        put_be64(d + 12, src_lba);
        put_be64(d + 20, dst_lba);
        p->seg_bytes += 28;
}

static void pl_finish(struct plist *p, uint8_t list_id)
{
        p->b[0] = list_id;
        put_be16(p->b + 2, (uint16_t)(32 * p->n_tgt));
        put_be32(p->b + 8, p->seg_bytes);
        p->len = 16 + 32 * p->n_tgt + p->seg_bytes;
}

static enum scsi_reason parse(struct plist *p, uint32_t len)
{
        struct xcopy_plan plan;
        struct scsi_field_ptr f;
        return xcopy_parse(p->b, len, &plan, &f);
}

START_TEST(parse_limits_and_types)
{
        struct plist p = {0};
        pl_target(&p, h.lun->naa);
        pl_segment(&p, 0, 0, 8, 0, 100);
        pl_finish(&p, 1);
        ck_assert_int_eq(parse(&p, p.len), SCSI_OK);
        /* The list length cuts a descriptor: PARAMETER LIST LENGTH ERROR. */
        ck_assert_int_eq(parse(&p, p.len - 1), SR_PARAM_LIST_LENGTH_ERROR);
        ck_assert_int_eq(parse(&p, 15), SR_PARAM_LIST_LENGTH_ERROR);
        /* Three target descriptors, one more than we take. */
        struct plist q = {0};
        for (int i = 0; i < 3; i++)
                pl_target(&q, h.lun->naa);
        pl_segment(&q, 0, 0, 8, 0, 100);
        pl_finish(&q, 1);
        ck_assert_int_eq(parse(&q, q.len), SR_TOO_MANY_TARGET_DESC);
        /* Thirty-three segments. */
        struct plist r = {0};
        pl_target(&r, h.lun->naa);
        for (int i = 0; i < 33; i++)
                pl_segment(&r, 0, 0, 1, 0, 100);
        pl_finish(&r, 1);
        ck_assert_int_eq(parse(&r, r.len), SR_TOO_MANY_SEGMENT_DESC);
        /* Descriptors beyond the MAXIMUM DESCRIPTOR LIST LENGTH. */
        struct plist s = {0};
        pl_target(&s, h.lun->naa);
        for (int i = 0; i < 40; i++)
                pl_segment(&s, 0, 0, 1, 0, 100);
        pl_finish(&s, 1);
        ck_assert_int_eq(parse(&s, s.len), SR_PARAM_LIST_LENGTH_ERROR);
        /* Unsupported target (FC N_Port_Name, E0h) and segment (stream to stream, 03h) types. */
        p.b[16] = 0xe0;
        ck_assert_int_eq(parse(&p, p.len), SR_UNSUPPORTED_TARGET_DESC);
        p.b[16] = 0xe4;
        p.b[48] = 0x03;
        ck_assert_int_eq(parse(&p, p.len), SR_UNSUPPORTED_SEGMENT_DESC);
        p.b[48] = 0x02;
        /* Inline data is not taken. */
        put_be32(p.b + 12, 4);
        ck_assert_int_eq(parse(&p, p.len + 4), SR_INVALID_FIELD_PARAM);
}
END_TEST

static struct scsi_task *xcopy(struct plist *p)
{
        uint8_t cdb[16] = {0x83};
        put_be32(cdb + 10, p->len);
        return h_run(cdb, 16, p->b, p->len, p->len);
}

START_TEST(copy_within_a_lun_and_status)
{
        void *a = h_pattern(64 * H_BS, 21);
        h_assert_good(h_write10(0, 64, a));
        struct plist p = {0};
        pl_target(&p, h.lun->naa);
        pl_segment(&p, 0, 0, 64, 0, 1000);
        pl_segment(&p, 0, 0, 8, 0, 2000);
        pl_finish(&p, 7);
        h_assert_good(xcopy(&p));
        ck_assert_mem_eq(h_read10(1000, 64)->data_in, a, 64 * H_BS);
        ck_assert_mem_eq(h_read10(2000, 8)->data_in, a, 8 * H_BS);
        /* COPY STATUS of list 7: done, two segments, 36 KiB. */
        uint8_t cdb[16] = {0x84, 0x00, 7};
        put_be32(cdb + 10, 64);
        struct scsi_task *t = h_run(cdb, 16, NULL, 0, 64);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[4], 0x01);
        ck_assert_uint_eq(get_be16(t->data_in + 5), 2);
        ck_assert_uint_eq(get_be32(t->data_in + 8), 72 * H_BS / 1024);
        /* An unknown list: INVALID FIELD IN CDB. */
        cdb[2] = 8;
        h_assert_invalid_cdb(h_run(cdb, 16, NULL, 0, 64), 2, -1);
        free(a);
}
END_TEST

START_TEST(copy_between_luns)
{
        struct scsi_lun *two = h_make_lun(1, H_BLOCKS, H_BS, true);
        two->naa[15] ^= 0x5a; /* a different identity */
        ck_assert_int_eq(scsi_target_add_lun(h.target, two), 0);
        h_clear_ua(&h.nx); /* REPORTED LUNS DATA HAS CHANGED */
        void *a = h_pattern(16 * H_BS, 22);
        h_assert_good(h_write10(50, 16, a));
        struct plist p = {0};
        pl_target(&p, h.lun->naa);
        pl_target(&p, two->naa);
        pl_segment(&p, 0, 1, 16, 50, 300);
        pl_finish(&p, 1);
        h_assert_good(xcopy(&p));
        uint8_t buf[16 * H_BS];
        ck_assert_int_eq(tdm_medium_read(two->medium, buf, sizeof(buf), 300 * H_BS), 0);
        ck_assert_mem_eq(buf, a, sizeof(buf));
        scsi_lun_put(two);
        free(a);
}
END_TEST

/* Copy targets that are not there, ranges past the end: COPY ABORTED, nothing written. */
START_TEST(unreachable_and_out_of_range)
{
        struct plist p = {0};
        pl_target(&p, h.lun->naa);
        pl_segment(&p, 0, 1, 8, 0, 100); /* descriptor 1 does not exist */
        pl_finish(&p, 1);
        h_assert_sense(xcopy(&p), 0xa, 0x0d, 0x02);
        struct plist q = {0};
        uint8_t other[16] = {0x60, 9};
        pl_target(&q, other); /* no LUN of this target has that NAA */
        pl_segment(&q, 0, 0, 8, 0, 100);
        pl_finish(&q, 1);
        h_assert_sense(xcopy(&q), 0xa, 0x0d, 0x02);
        struct plist r = {0};
        pl_target(&r, h.lun->naa);
        pl_segment(&r, 0, 0, 8, 0, H_BLOCKS - 1);
        pl_finish(&r, 1);
        h_assert_sense(xcopy(&r), 0xa, 0x00, 0x00);
        /* An empty parameter list does nothing. */
        struct plist e = {0};
        h_assert_good(xcopy(&e));
}
END_TEST

int main(void)
{
        Suite *s = suite_create("scsi_xcopy");
        TCase *tc = tcase_create("xcopy");
        tcase_add_checked_fixture(tc, setup, h_teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, parse_limits_and_types);
        tcase_add_test(tc, copy_within_a_lun_and_status);
        tcase_add_test(tc, copy_between_luns);
        tcase_add_test(tc, unreachable_and_out_of_range);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
