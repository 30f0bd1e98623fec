/*
 * Unit tests of how the configuration writes names and values (daemon/config/names.c,
 * values.c): iSCSI names, LUN identities and serials, instance names, sizes, host:port.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tandem/config.h"

/* ---------------------------------------------------------------- host:port */

START_TEST(test_hostport)
{
        char host[128];
        uint16_t port;
        ck_assert_int_eq(tdm_parse_hostport("1.2.3.4:3260", host, sizeof(host), &port), 0);
        ck_assert_str_eq(host, "1.2.3.4");
        ck_assert_uint_eq(port, 3260);
        ck_assert_int_eq(tdm_parse_hostport("[::1]:3261", host, sizeof(host), &port), 0);
        ck_assert_str_eq(host, "::1");
        ck_assert_uint_eq(port, 3261);
        ck_assert_int_eq(tdm_parse_hostport("storage.example.org", host, sizeof(host), &port), 0);
        ck_assert_str_eq(host, "storage.example.org");
        ck_assert_uint_eq(port, 3260);
        ck_assert_int_eq(tdm_parse_hostport("[fe80::1:2]", host, sizeof(host), &port), 0);
        ck_assert_str_eq(host, "fe80::1:2");
        ck_assert_uint_eq(port, 3260);
        ck_assert_int_eq(tdm_parse_hostport("2001:db8::7", host, sizeof(host), &port), 0);
        ck_assert_str_eq(host, "2001:db8::7");
        ck_assert_uint_eq(port, 3260);
        ck_assert_int_eq(tdm_parse_hostport("0.0.0.0:65535", host, sizeof(host), &port), 0);
        ck_assert_uint_eq(port, 65535);

        static const char *const bad[] = {
            "",
            ":3260",
            "1.2.3.4:",
            "1.2.3.4:0",
            "1.2.3.4:65536",
            "1.2.3.4:32x",
            "[::1",
            "[::1]x",
            "[::1]:",
            "[zz::1]:1",
            "[]:3260",
            "a b:1",
            "1.2.3.4:-1",
            "1:2:3:4:5:6:7:8:9",
            "host:+80",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(tdm_parse_hostport(bad[i], host, sizeof(host), &port) == -EINVAL,
                              "accepted \"%s\"", bad[i]);
        char tiny[4];
        ck_assert_int_eq(tdm_parse_hostport("10.0.0.1:1", tiny, sizeof(tiny), &port), -EINVAL);
}
END_TEST

/* ---------------------------------------------------------------- iSCSI names */

START_TEST(test_iscsi_names)
{
        static const char *const good[] = {
            "iqn.2024-01.org.example:t1",
            "iqn.1993-08.org.debian:01:abcdef123",
            "iqn.1991-05.com.microsoft:host-1.domain.local",
            "iqn.2001-04.com.example",
            "iqn.2001-04.com.example:storage:diskarrays-sn-a8675309",
            "IQN.2001-04.COM.EXAMPLE:Upper",
            "eui.02004567A425678D",
            "naa.52004567BA64678D",
            "naa.62004567BA64678D0123456789ABCDEF",
        };
        static const char *const bad[] = {
            "",
            "iqn.",
            "iqn.2024-1.org.example",
            "iqn.24-01.org.example",
            "iqn.2024-00.org.example",
            "iqn.2024-13.org.example",
            "iqn.2024-01",
            "iqn.2024-01.",
            "iqn.2024-01..org",
            "iqn.2024-01.org..example",
            "iqn.2024-01.org.example.:x",
            "iqn.2024-01.org.example:",
            "iqn.2024-01.org_ex.example",
            "iqn.2024-01.org.example:with space",
            "iqn.2024-01.org.example:under_score",
            "eui.02004567A425678",
            "eui.02004567A425678DX",
            "eui.02004567A425678G",
            "naa.52004567BA64678",
            "naa.62004567BA64678D0123456789ABCDE",
            "foo.2024-01.org.example",
            "ALL",
        };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                ck_assert_msg(tdm_iscsi_name_valid(good[i]), "refused %s", good[i]);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(!tdm_iscsi_name_valid(bad[i]), "accepted %s", bad[i]);
        ck_assert(!tdm_iscsi_name_valid(NULL));
        /* 223 characters is the limit. */
        char longname[300] = "iqn.2024-01.org.example:";
        while (strlen(longname) < 223)
                strcat(longname, "a");
        ck_assert(tdm_iscsi_name_valid(longname));
        strcat(longname, "a");
        ck_assert(!tdm_iscsi_name_valid(longname));
        ck_assert(tdm_iscsi_name_equal("IQN.2024-01.Org.Example:X", "iqn.2024-01.org.example:x"));
        ck_assert(!tdm_iscsi_name_equal("iqn.2024-01.org.example:x", "iqn.2024-01.org.example:y"));
}
END_TEST

/* ---------------------------------------------------------------- identity */

START_TEST(test_identity_generation)
{
        struct tdm_lun_cfg a, b;
        tdm_lun_defaults(&a);
        tdm_lun_defaults(&b);
        tdm_lun_identity_generate(&a);
        tdm_lun_identity_generate(&b);
        ck_assert_uint_eq(strlen(a.naa), 32);
        ck_assert(tdm_naa_valid(a.naa));
        /* NAA 6, then the company id 0x7A6E64 spread over the next 24 bits. */
        ck_assert_int_eq(strncmp(a.naa, "67a6e64", 7), 0);
        ck_assert_int_eq(strncmp(b.naa, "67a6e64", 7), 0);
        for (int i = 0; i < 32; i++)
                ck_assert(strchr("0123456789abcdef", a.naa[i]) != NULL);
        ck_assert_uint_eq(strlen(a.serial), 16);
        for (int i = 0; i < 16; i++)
                ck_assert(strchr("0123456789abcdef", a.serial[i]) != NULL);
        ck_assert_str_ne(a.naa, b.naa);
        ck_assert_str_ne(a.serial, b.serial);
        uint8_t bytes[16];
        ck_assert_int_eq(tdm_naa_to_bytes(a.naa, bytes), 0);
        ck_assert_uint_eq(bytes[0], 0x67);
        ck_assert_uint_eq(bytes[1], 0xa6);
        ck_assert_uint_eq(bytes[2], 0xe6);
        ck_assert_uint_eq(bytes[3] >> 4, 0x4);
        ck_assert_int_eq(tdm_naa_to_bytes("67A6E640C3F1A2B4D5E6F708192A3B4C", bytes), 0);
        ck_assert_uint_eq(bytes[15], 0x4c);
        ck_assert_uint_eq(bytes[4], 0xc3);
        ck_assert_int_eq(tdm_naa_to_bytes("57a6e640c3f1a2b4d5e6f708192a3b4c", bytes), -EINVAL);
        ck_assert_int_eq(tdm_naa_to_bytes("67a6e640", bytes), -EINVAL);
}
END_TEST

START_TEST(test_parse_size)
{
        uint64_t v;
        ck_assert_int_eq(tdm_parse_size("4096", &v), 0);
        ck_assert_uint_eq(v, 4096);
        ck_assert_int_eq(tdm_parse_size("4K", &v), 0);
        ck_assert_uint_eq(v, 4096);
        ck_assert_int_eq(tdm_parse_size("10G", &v), 0);
        ck_assert_uint_eq(v, 10ull << 30);
        ck_assert_int_eq(tdm_parse_size("10g", &v), 0);
        ck_assert_uint_eq(v, 10ull << 30);
        ck_assert_int_eq(tdm_parse_size("3MiB", &v), 0);
        ck_assert_uint_eq(v, 3ull << 20);
        ck_assert_int_eq(tdm_parse_size("2TiB", &v), 0);
        ck_assert_uint_eq(v, 2ull << 40);
        ck_assert_int_eq(tdm_parse_size("5GB", &v), 0);
        ck_assert_uint_eq(v, 5000000000ull);
        ck_assert_int_eq(tdm_parse_size("1P", &v), 0);
        ck_assert_uint_eq(v, 1ull << 50);
        ck_assert_int_eq(tdm_parse_size("512B", &v), 0);
        ck_assert_uint_eq(v, 512);
        ck_assert_int_eq(tdm_parse_size("", &v), -EINVAL);
        ck_assert_int_eq(tdm_parse_size("G", &v), -EINVAL);
        ck_assert_int_eq(tdm_parse_size("1.5G", &v), -EINVAL);
        ck_assert_int_eq(tdm_parse_size("-1", &v), -EINVAL);
        ck_assert_int_eq(tdm_parse_size("10X", &v), -EINVAL);
        ck_assert_int_eq(tdm_parse_size("10 G", &v), -EINVAL);
        ck_assert_int_eq(tdm_parse_size("99999999999999999999", &v), -ERANGE);
        ck_assert_int_eq(tdm_parse_size("16384P", &v), -ERANGE);
}
END_TEST

/* ---------------------------------------------------------------- instance names, serials */

START_TEST(test_plain_names)
{
        static const char *const good[] = {"default", "node-b", "a", "x_1.2", "A-Z.a-z_0-9"};
        static const char *const bad[] = {"", ".hidden", "a/b", "a b", "tandem:1", "ü"};
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                ck_assert_msg(tdm_instance_name_valid(good[i]), "refused %s", good[i]);
                ck_assert_msg(tdm_serial_valid(good[i]), "refused %s", good[i]);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(!tdm_instance_name_valid(bad[i]), "accepted %s", bad[i]);
        char name[80];
        memset(name, 'n', sizeof(name));
        name[63] = '\0';
        ck_assert(tdm_instance_name_valid(name)); /* 63 characters: the limit */
        name[63] = 'n';
        name[64] = '\0';
        ck_assert(!tdm_instance_name_valid(name));
        /* A serial may start with a dot; it has 32 characters at most. */
        ck_assert(tdm_serial_valid(".serial"));
        name[32] = '\0';
        ck_assert(tdm_serial_valid(name));
        name[32] = 'n';
        name[33] = '\0';
        ck_assert(!tdm_serial_valid(name));
        ck_assert(!tdm_serial_valid(""));
        ck_assert(!tdm_serial_valid("with space"));
}
END_TEST

static Suite *names_suite(void)
{
        Suite *s = suite_create("config names and values");
        TCase *tc = tcase_create("names");
        tcase_add_test(tc, test_iscsi_names);
        tcase_add_test(tc, test_identity_generation);
        tcase_add_test(tc, test_plain_names);
        tcase_add_test(tc, test_hostport);
        tcase_add_test(tc, test_parse_size);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(names_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
