/* The opcode table: invariants, lookup, reserved-bit checks, data-out sizes, RSOC. */
#include "test_scsi_harness.h"

static unsigned group_cdb_len(uint8_t opcode)
{
        switch (opcode >> 5) {
        case 0:
                return 6;
        case 1:
        case 2:
                return 10;
        case 4:
                return 16;
        case 5:
                return 12;
        }
        return 0;
}

START_TEST(table_sorted_and_unique)
{
        ck_assert_uint_gt(scsi_opcode_table_len, 10);
        ck_assert_uint_lt(scsi_opcode_table_len, 255);
        for (size_t i = 1; i < scsi_opcode_table_len; i++) {
                const struct scsi_opcode_entry *a = &scsi_opcode_table[i - 1];
                const struct scsi_opcode_entry *b = &scsi_opcode_table[i];
                uint32_t ka = (uint32_t)a->opcode << 16 | a->service_action;
                uint32_t kb = (uint32_t)b->opcode << 16 | b->service_action;
                ck_assert_msg(ka < kb, "rows %zu/%zu (%s, %s) out of order or duplicate", i - 1, i,
                              a->name, b->name);
                if (a->opcode == b->opcode)
                        ck_assert(a->has_service_action && b->has_service_action);
        }
}
END_TEST

START_TEST(table_rows_consistent)
{
        for (size_t i = 0; i < scsi_opcode_table_len; i++) {
                const struct scsi_opcode_entry *e = &scsi_opcode_table[i];
                ck_assert_ptr_nonnull(e->name);
                ck_assert_msg(e->handler != NULL, "%s has no handler", e->name);
                ck_assert_msg(e->usage[0] == e->opcode, "%s: usage[0]", e->name);
                ck_assert_msg(e->cdb_len == group_cdb_len(e->opcode), "%s: cdb_len %u", e->name,
                              e->cdb_len);
                ck_assert_msg(e->usage[e->cdb_len - 1] == 0, "%s: control byte usable", e->name);
                for (unsigned b = e->cdb_len; b < sizeof(e->usage); b++)
                        ck_assert_msg(e->usage[b] == 0, "%s: usage past the CDB", e->name);
                if (e->has_service_action)
                        ck_assert_msg((e->usage[1] & 0x1f) == e->service_action,
                                      "%s: usage[1] must carry the service action", e->name);
                else
                        ck_assert_int_eq(e->service_action, 0);
                uint32_t f = e->flags;
                ck_assert_msg(!((f & SCSI_F_DATA_IN) && (f & SCSI_F_DATA_OUT)), "%s: both ways",
                              e->name);
                if (f & SCSI_F_WRITES_MEDIUM)
                        ck_assert_msg(f & SCSI_F_DATA_OUT, "%s writes without data", e->name);
                if (f & SCSI_F_STAT_WRITE)
                        ck_assert_msg(f & SCSI_F_WRITES_MEDIUM, "%s", e->name);
                ck_assert_msg(!((f & SCSI_F_STAT_READ) && (f & SCSI_F_STAT_WRITE)), "%s", e->name);
                /* Commands that must work without a LUN or without consuming attentions. */
                if (f & SCSI_F_NO_UA)
                        ck_assert_msg(!(f & SCSI_F_NEEDS_LUN), "%s", e->name);
        }
}
END_TEST

START_TEST(lookup_finds_every_row)
{
        for (size_t i = 0; i < scsi_opcode_table_len; i++) {
                const struct scsi_opcode_entry *e = &scsi_opcode_table[i];
                uint8_t cdb[16] = {e->opcode, (uint8_t)e->service_action};
                ck_assert_ptr_eq(scsi_opcode_lookup(cdb), e);
                ck_assert(scsi_opcode_has_service_actions(e->opcode) == e->has_service_action);
        }
        uint8_t unknown[16] = {0xff};
        ck_assert_ptr_null(scsi_opcode_lookup(unknown));
        uint8_t bad_sa[16] = {0x9e, 0x1f};
        ck_assert_ptr_null(scsi_opcode_lookup(bad_sa));
}
END_TEST

START_TEST(unknown_opcode_and_service_action)
{
        h_clear_ua(&h.nx);
        uint8_t cdb[16] = {0xc5};
        h_assert_sense(h_run(cdb, 6, NULL, 0, 0), 0x5, 0x20, 0x00);
        ck_assert_int_eq(h.task.sense[15], 0); /* no field pointer for an opcode */
        uint8_t sa[16] = {0x9e, 0x1f};
        struct scsi_task *t = h_run(sa, 16, NULL, 0, 32);
        h_assert_invalid_cdb(t, 1, 4);
        ck_assert_uint_eq(t->data_in_len, 0);
}
END_TEST

START_TEST(reserved_bits_rejected_with_pointer)
{
        h_clear_ua(&h.nx);
        uint8_t cdb[10];
        cdb_rw10(cdb, 0x28, 0, 1);
        cdb[1] = 0x20; /* RDPROTECT 001b: no protection information here */
        struct scsi_task *t = h_run(cdb, 10, NULL, 0, 512);
        h_assert_invalid_cdb(t, 1, 5);
        const uint8_t want[18] = {0x70, 0, 0x05, 0,    0, 0, 0,    10, 0,
                                  0,    0, 0,    0x24, 0, 0, 0xcd, 0,  1};
        ck_assert_mem_eq(t->sense, want, 18);
        cdb[1] = 0;
        cdb[9] = 0x04; /* NACA in the control byte: ACA is not supported */
        h_assert_invalid_cdb(h_run(cdb, 10, NULL, 0, 512), 9, 2);
        cdb[9] = 0;
        cdb[1] = 0x18; /* DPO + FUA are allowed */
        h_assert_good(h_run(cdb, 10, NULL, 0, 512));
}
END_TEST

START_TEST(data_out_lengths)
{
        uint8_t cdb[16];
        cdb_rw10(cdb, 0x2a, 0, 3);
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, h.lun), 3 * 512);
        cdb_rw16(cdb, 0x8a, 0, 0x10000);
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, h.lun), 0x10000u * 512);
        cdb_rw16(cdb, 0x8a, 0, 0xffffffff); /* would overflow 32 bits */
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, h.lun), UINT32_MAX);
        uint8_t w6[6] = {0x0a, 0, 0, 0, 0, 0}; /* 0 means 256 blocks */
        ck_assert_uint_eq(scsi_cdb_data_out_len(w6, h.lun), 256 * 512);
        cdb_rw10(cdb, 0x2f, 0, 4);
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, h.lun), 0); /* VERIFY, BYTCHK 0 */
        cdb[1] = 0x02;
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, h.lun), 4 * 512);
        cdb[1] = 0x06;
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, h.lun), 512);
        cdb_rw10(cdb, 0x41, 0, 100);
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, h.lun), 512);
        cdb_rw16(cdb, 0x93, 0, 100);
        cdb[1] = 0x01; /* NDOB */
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, h.lun), 0);
        cdb_rw10(cdb, 0x42, 0, 24);
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, NULL), 24);
        uint8_t ms6[6] = {0x15, 0x10, 0, 0, 28, 0};
        ck_assert_uint_eq(scsi_cdb_data_out_len(ms6, h.lun), 28);
        cdb_rw10(cdb, 0x28, 0, 8);
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, h.lun), 0);
        ck_assert_uint_eq(scsi_cdb_data_out_len(cdb, NULL), 0);
}
END_TEST

static struct scsi_task *rsoc(uint8_t options, bool rctd, uint8_t opcode, uint16_t sa)
{
        uint8_t cdb[12] = {0xa3, 0x0c, (uint8_t)(options | (rctd ? 0x80 : 0)), opcode};
        put_be16(cdb + 4, sa);
        put_be32(cdb + 6, 65535);
        return h_run(cdb, 12, NULL, 0, 65535);
}

START_TEST(rsoc_lists_the_table)
{
        h_clear_ua(&h.nx);
        struct scsi_task *t = rsoc(0, false, 0, 0);
        h_assert_good(t);
        ck_assert_uint_eq(t->xfer_len, 4 + 8 * scsi_opcode_table_len);
        ck_assert_uint_eq(get_be32(t->data_in), 8 * scsi_opcode_table_len);
        for (size_t i = 0; i < scsi_opcode_table_len; i++) {
                const uint8_t *d = t->data_in + 4 + 8 * i;
                const struct scsi_opcode_entry *e = &scsi_opcode_table[i];
                ck_assert_int_eq(d[0], e->opcode);
                ck_assert_int_eq(get_be16(d + 2), e->has_service_action ? e->service_action : 0);
                ck_assert_int_eq(d[5], e->has_service_action ? 0x01 : 0x00);
                ck_assert_int_eq(get_be16(d + 6), e->cdb_len);
        }
        t = rsoc(0, true, 0, 0);
        h_assert_good(t);
        ck_assert_uint_eq(t->xfer_len, 4 + 20 * scsi_opcode_table_len);
        ck_assert_int_eq(t->data_in[4 + 5] & 0x02, 0x02); /* CTDP */
        ck_assert_int_eq(get_be16(t->data_in + 4 + 8), 0x0a);
}
END_TEST

START_TEST(rsoc_one_command)
{
        h_clear_ua(&h.nx);
        struct scsi_task *t = rsoc(1, false, 0x28, 0);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[1] & 0x07, 0x03);
        ck_assert_int_eq(get_be16(t->data_in + 2), 10);
        ck_assert_int_eq(t->data_in[4], 0x28);
        ck_assert_int_eq(t->data_in[5] & 0x18, 0x18); /* DPO and FUA usable */
        ck_assert_mem_eq(t->data_in + 4, scsi_opcode_lookup((uint8_t[16]){0x28})->usage, 10);
        /* READ CAPACITY(16) has service actions: option 1 is wrong, option 2 right. */
        h_assert_invalid_cdb(rsoc(1, false, 0x9e, 0x10), 2, 2);
        t = rsoc(2, true, 0x9e, 0x10);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[1], 0x83);
        ck_assert_int_eq(t->data_in[4], 0x9e);
        ck_assert_int_eq(t->data_in[5], 0x10);
        ck_assert_int_eq(get_be16(t->data_in + 4 + 16), 0x0a);
        h_assert_invalid_cdb(rsoc(2, false, 0x28, 0), 2, 2);
        t = rsoc(1, false, 0xc5, 0); /* not supported */
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[1] & 0x07, 0x01);
        h_assert_invalid_cdb(rsoc(5, false, 0, 0), 2, 2);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("scsi_opcodes");
        TCase *tc = tcase_create("table");
        tcase_add_checked_fixture(tc, h_setup, h_teardown);
        tcase_add_test(tc, table_sorted_and_unique);
        tcase_add_test(tc, table_rows_consistent);
        tcase_add_test(tc, lookup_finds_every_row);
        tcase_add_test(tc, unknown_opcode_and_service_action);
        tcase_add_test(tc, reserved_bits_rejected_with_pointer);
        tcase_add_test(tc, data_out_lengths);
        tcase_add_test(tc, rsoc_lists_the_table);
        tcase_add_test(tc, rsoc_one_command);
        suite_add_tcase(s, tc);
        return h_run_suite(s);
}
