/* Sense building: exact bytes of fixed and descriptor format, status-only reasons. */
#include "test_scsi_harness.h"

static struct scsi_task task;

static void build(enum scsi_reason r)
{
        scsi_task_set_reason(&task, r);
}

static void reset_task(void)
{
        memset(&task, 0, sizeof(task));
}

START_TEST(lba_out_of_range_fixed)
{
        reset_task();
        build(SR_LBA_OUT_OF_RANGE);
        const uint8_t want[18] = {0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x21, 0x00};
        ck_assert_int_eq(task.status, SCSI_STATUS_CHECK_CONDITION);
        ck_assert_int_eq(task.sense_len, 18);
        ck_assert_mem_eq(task.sense, want, 18);
        ck_assert_int_eq(task.reason, SR_LBA_OUT_OF_RANGE);
}
END_TEST

START_TEST(invalid_field_in_cdb_pointer)
{
        reset_task();
        scsi_bad_cdb_field(&task, 7, -1);
        build(SR_INVALID_FIELD_CDB);
        const uint8_t want[18] = {0x70, 0, 0x05, 0,    0,    0, 0,    10, 0,
                                  0,    0, 0,    0x24, 0x00, 0, 0xc0, 0,  7};
        ck_assert_mem_eq(task.sense, want, 18);
        reset_task();
        scsi_bad_cdb_field(&task, 1, 3);
        build(SR_INVALID_FIELD_CDB);
        ck_assert_int_eq(task.sense[15], 0xcb); /* SKSV, C/D, BPV, bit 3 */
        ck_assert_int_eq(get_be16(task.sense + 16), 1);
}
END_TEST

START_TEST(invalid_field_in_parameter_list_pointer)
{
        reset_task();
        scsi_bad_param_field(&task, 0x102, 2);
        build(SR_INVALID_FIELD_PARAM);
        const uint8_t want[18] = {0x70, 0, 0x05, 0,    0,    0, 0,    10,   0,
                                  0,    0, 0,    0x26, 0x00, 0, 0x8a, 0x01, 0x02};
        ck_assert_mem_eq(task.sense, want, 18);
}
END_TEST

START_TEST(field_pointer_only_for_invalid_field)
{
        reset_task();
        task.field = (struct scsi_field_ptr){.byte = 9, .bit = 1, .bit_valid = true};
        build(SR_PARAM_LIST_LENGTH_ERROR);
        ck_assert_int_eq(task.sense[12], 0x1a);
        ck_assert_int_eq(task.sense[15], 0);
        ck_assert_int_eq(task.sense[17], 0);
}
END_TEST

START_TEST(miscompare_information)
{
        reset_task();
        task.info = 0x1234;
        task.info_valid = true;
        build(SR_MISCOMPARE_VERIFY);
        const uint8_t want[18] = {0xf0, 0, 0x0e, 0, 0, 0x12, 0x34, 10, 0, 0, 0, 0, 0x1d, 0x00};
        ck_assert_mem_eq(task.sense, want, 18);
}
END_TEST

START_TEST(unit_attention_and_not_ready)
{
        reset_task();
        build(SR_UA_POWER_ON_RESET);
        ck_assert_int_eq(task.sense[2], 0x06);
        ck_assert_int_eq(task.sense[12], 0x29);
        ck_assert_int_eq(task.sense[13], 0x00);
        build(SR_UA_LUNS_CHANGED);
        ck_assert_int_eq(task.sense[12], 0x3f);
        ck_assert_int_eq(task.sense[13], 0x0e);
        build(SR_NOT_READY_STANDBY);
        ck_assert_int_eq(task.sense[2], 0x02);
        ck_assert_int_eq(task.sense[12], 0x04);
        ck_assert_int_eq(task.sense[13], 0x0b);
        build(SR_SPACE_ALLOC_FAILED);
        ck_assert_int_eq(task.sense[2], 0x07);
        ck_assert_int_eq(task.sense[12], 0x27);
        ck_assert_int_eq(task.sense[13], 0x07);
}
END_TEST

START_TEST(status_only_reasons)
{
        reset_task();
        build(SR_RESERVATION_CONFLICT);
        ck_assert_int_eq(task.status, SCSI_STATUS_RESERVATION_CONFLICT);
        ck_assert_int_eq(task.sense_len, 0);
        build(SR_TASK_SET_FULL);
        ck_assert_int_eq(task.status, SCSI_STATUS_TASK_SET_FULL);
        build(SR_BUSY);
        ck_assert_int_eq(task.status, SCSI_STATUS_BUSY);
        ck_assert_int_eq(task.sense_len, 0);
        build(SCSI_OK);
        ck_assert_int_eq(task.status, SCSI_STATUS_GOOD);
        ck_assert_int_eq(task.sense_len, 0);
        build((enum scsi_reason)999); /* garbage maps to an internal error, not a crash */
        ck_assert_int_eq(task.sense[2], 0x04);
        ck_assert_int_eq(task.sense[12], 0x44);
}
END_TEST

START_TEST(every_reason_has_a_name_and_status)
{
        for (int r = 0; r < SR_COUNT; r++) {
                reset_task();
                build((enum scsi_reason)r);
                ck_assert_str_ne(scsi_reason_name((enum scsi_reason)r), "UNKNOWN");
                if (r != SCSI_OK && task.status == SCSI_STATUS_CHECK_CONDITION)
                        ck_assert_msg(task.sense[2] != 0, "%s has no sense key",
                                      scsi_reason_name((enum scsi_reason)r));
        }
        ck_assert_str_eq(scsi_reason_name(SR_COUNT), "UNKNOWN");
}
END_TEST

START_TEST(descriptor_format)
{
        uint8_t buf[32];
        struct scsi_field_ptr f = {.byte = 2, .bit = 5, .bit_valid = true};
        uint8_t len = scsi_sense_format(buf, sizeof(buf), SR_INVALID_FIELD_CDB, &f, 0, false, true);
        const uint8_t want[16] = {0x72, 0x05, 0x24, 0x00, 0,    0,    0,    8,
                                  0x02, 0x06, 0,    0,    0xcd, 0x00, 0x02, 0};
        ck_assert_int_eq(len, 16);
        ck_assert_mem_eq(buf, want, 16);
        len = scsi_sense_format(buf, sizeof(buf), SR_MISCOMPARE_VERIFY, NULL, 0x1122334455ull, true,
                                true);
        const uint8_t want2[20] = {0x72, 0x0e, 0x1d, 0x00, 0, 0,    0,    12,   0x00, 0x0a,
                                   0x80, 0,    0,    0,    0, 0x11, 0x22, 0x33, 0x44, 0x55};
        ck_assert_int_eq(len, 20);
        ck_assert_mem_eq(buf, want2, 20);
        /* Truncated to the caller's buffer. */
        ck_assert_int_eq(scsi_sense_format(buf, 8, SR_LBA_OUT_OF_RANGE, NULL, 0, false, false), 8);
}
END_TEST

START_TEST(last_sense_kept_per_nexus)
{
        reset_task();
        struct scsi_nexus nx;
        scsi_nexus_init(&nx, NULL, "iqn.x");
        task.nexus = &nx;
        build(SR_LBA_OUT_OF_RANGE);
        ck_assert_int_eq(nx.last_sense_len, 18);
        ck_assert_int_eq(nx.last_sense[12], 0x21);
}
END_TEST

static struct scsi_task *request_sense(struct scsi_nexus *nx, bool desc, uint8_t alloc)
{
        uint8_t cdb[6] = {0x03, desc ? 1 : 0, 0, 0, alloc, 0};
        return h_run_on(nx, cdb, 6, NULL, 0, alloc);
}

START_TEST(request_sense_reports_attention_then_no_sense)
{
        struct scsi_task *t = request_sense(&h.nx, false, 252);
        h_assert_good(t);
        ck_assert_uint_eq(t->xfer_len, 18);
        ck_assert_int_eq(t->data_in[0], 0x70);
        ck_assert_int_eq(t->data_in[2], 0x06);
        ck_assert_int_eq(t->data_in[12], 0x29); /* the POWER ON RESET, now consumed */
        t = request_sense(&h.nx, false, 252);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[2], 0x00);
        ck_assert_int_eq(t->data_in[12], 0x00);
        t = request_sense(&h.nx, true, 252);
        ck_assert_int_eq(t->data_in[0], 0x72);
        ck_assert_uint_eq(t->xfer_len, 8);
        t = request_sense(&h.nx, false, 4); /* allocation length bounds the transfer */
        ck_assert_uint_eq(t->xfer_len, 4);
        /* The TEST UNIT READY after it is GOOD: the attention went with REQUEST SENSE. */
        uint8_t tur[6] = {0};
        h_assert_good(h_run(tur, 6, NULL, 0, 0));
}
END_TEST

/* A forwarded command's answer crosses nodes as status and codes: every reason comes back
 * as itself (the codes are unique), with its field pointer. */
START_TEST(forwarded_answers_round_trip)
{
        for (unsigned r = 0; r < SR_COUNT; r++) {
                struct scsi_field_ptr field = {.byte = 17, .bit = 3, .bit_valid = true}, back = {0};
                struct tdm_forward_result res;
                scsi_reason_to_result((enum scsi_reason)r, &field, &res);
                ck_assert_msg(scsi_reason_from_result(&res, &back) == (enum scsi_reason)r,
                              "reason %u (%s) comes back as another", r,
                              scsi_reason_name((enum scsi_reason)r));
                if (r == SR_INVALID_FIELD_CDB || r == SR_INVALID_FIELD_PARAM) {
                        ck_assert(res.field_valid);
                        ck_assert_uint_eq(back.byte, 17);
                        ck_assert(back.bit_valid);
                        ck_assert_uint_eq(back.bit, 3);
                } else {
                        ck_assert(!res.field_valid);
                }
        }
        /* Codes this node has no reason for: an internal error, not GOOD. */
        struct tdm_forward_result odd = {.status = 0x02, .key = 0x9, .asc = 0x99, .field_bit = -1};
        struct scsi_field_ptr f = {0};
        ck_assert_int_eq(scsi_reason_from_result(&odd, &f), SR_INTERNAL_ERROR);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("scsi_sense");
        TCase *tc = tcase_create("bytes");
        tcase_add_test(tc, lba_out_of_range_fixed);
        tcase_add_test(tc, forwarded_answers_round_trip);
        tcase_add_test(tc, invalid_field_in_cdb_pointer);
        tcase_add_test(tc, invalid_field_in_parameter_list_pointer);
        tcase_add_test(tc, field_pointer_only_for_invalid_field);
        tcase_add_test(tc, miscompare_information);
        tcase_add_test(tc, unit_attention_and_not_ready);
        tcase_add_test(tc, status_only_reasons);
        tcase_add_test(tc, every_reason_has_a_name_and_status);
        tcase_add_test(tc, descriptor_format);
        tcase_add_test(tc, last_sense_kept_per_nexus);
        suite_add_tcase(s, tc);
        TCase *tc2 = tcase_create("request_sense");
        tcase_add_checked_fixture(tc2, h_setup, h_teardown);
        tcase_add_test(tc2, request_sense_reports_attention_then_no_sense);
        suite_add_tcase(s, tc2);
        return h_run_suite(s);
}
