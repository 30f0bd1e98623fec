/* PDU helpers: LUN codec, CRC32C known answers, serial number arithmetic. */
#include <check.h>
#include <stdlib.h>

#include "tandem/iscsi_pdu.h"

START_TEST(crc32c_known_answers)
{
        /* RFC 3720 B.4 test vectors and the classic "123456789" check value. */
        uint8_t zeros[32] = {0};
        uint8_t ones[32];
        memset(ones, 0xff, sizeof(ones));
        const void *b[1];
        size_t l[1] = {32};
        b[0] = zeros;
        ck_assert_uint_eq(iscsi_crc32c_iov(b, l, 1), 0x8a9136aa);
        b[0] = ones;
        ck_assert_uint_eq(iscsi_crc32c_iov(b, l, 1), 0x62a8ab43);
        b[0] = "123456789";
        l[0] = 9;
        ck_assert_uint_eq(iscsi_crc32c_iov(b, l, 1), 0xe3069283);
}
END_TEST

START_TEST(crc32c_split_equals_whole)
{
        const char *text = "tandem replicates every write";
        size_t n = strlen(text);
        const void *whole[1] = {text};
        size_t wl[1] = {n};
        const void *parts[3] = {text, text + 5, text + 11};
        size_t pl[3] = {5, 6, n - 11};
        ck_assert_uint_eq(iscsi_crc32c_iov(whole, wl, 1), iscsi_crc32c_iov(parts, pl, 3));
}
END_TEST

START_TEST(lun_codec_round_trip)
{
        uint8_t f[8];
        uint64_t lun;
        for (uint64_t v = 0; v < 16384; v += 97) {
                iscsi_lun_encode(f, v);
                ck_assert(iscsi_lun_decode(f, &lun));
                ck_assert_uint_eq(lun, v);
        }
        iscsi_lun_encode(f, 5);
        ck_assert_uint_eq(f[0], 0);
        ck_assert_uint_eq(f[1], 5);
        iscsi_lun_encode(f, 300);
        ck_assert_uint_eq(f[0], 0x41);
        ck_assert_uint_eq(f[1], 300 & 0xff);
}
END_TEST

START_TEST(lun_decode_rejects_multilevel)
{
        uint8_t f[8] = {0, 1, 0, 2, 0, 0, 0, 0};
        uint64_t lun;
        ck_assert(!iscsi_lun_decode(f, &lun));
        uint8_t ext[8] = {0xc0, 0, 0, 0, 0, 0, 0, 0};
        ck_assert(!iscsi_lun_decode(ext, &lun));
}
END_TEST

START_TEST(serial_number_arithmetic)
{
        ck_assert(iscsi_sn_lt(1, 2));
        ck_assert(!iscsi_sn_lt(2, 2));
        ck_assert(iscsi_sn_lt(0xfffffff0u, 5));
        ck_assert(!iscsi_sn_lt(5, 0xfffffff0u));
        ck_assert(iscsi_sn_le(7, 7));
}
END_TEST

START_TEST(bhs_field_accessors)
{
        uint8_t bhs[48] = {0};
        bhs[0] = 0x40 | ISCSI_OP_SCSI_CMD;
        bhs[1] = 0x80;
        bhs[4] = 2;
        iscsi_bhs_set_dsl(bhs, 0x123456);
        put_be32(bhs + 16, 0xdeadbeef);
        ck_assert_uint_eq(iscsi_bhs_opcode(bhs), ISCSI_OP_SCSI_CMD);
        ck_assert(iscsi_bhs_immediate(bhs));
        ck_assert(iscsi_bhs_final(bhs));
        ck_assert_uint_eq(iscsi_bhs_ahs_len(bhs), 8);
        ck_assert_uint_eq(iscsi_bhs_dsl(bhs), 0x123456);
        ck_assert_uint_eq(iscsi_bhs_itt(bhs), 0xdeadbeef);
        ck_assert_uint_eq(iscsi_pad4(5), 3);
        ck_assert_uint_eq(iscsi_pad4(8), 0);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("iscsi_pdu");
        TCase *tc = tcase_create("pdu");
        tcase_add_test(tc, crc32c_known_answers);
        tcase_add_test(tc, crc32c_split_equals_whole);
        tcase_add_test(tc, lun_codec_round_trip);
        tcase_add_test(tc, lun_decode_rejects_multilevel);
        tcase_add_test(tc, serial_number_arithmetic);
        tcase_add_test(tc, bhs_field_accessors);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
