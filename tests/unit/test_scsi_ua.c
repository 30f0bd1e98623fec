/*
 * Unit attentions that come from where the LU has been and from task management: a new
 * nexus's first attention (POWER ON, or I_T NEXUS LOSS where the LU carries on from another
 * node), CLEAR TASK SET (COMMANDS CLEARED BY ANOTHER INITIATOR to the others only) and LUN
 * RESET (BUS DEVICE RESET to everyone, the SPC-2 reservation gone).
 */
#include "test_scsi_harness.h"

static const uint8_t tur[6] = {0};

static struct scsi_task *tur_on(struct scsi_nexus *nx)
{
        return h_run_on(nx, tur, 6, NULL, 0, 0);
}

static void set_continued(bool continued)
{
        struct tdm_access a = tdm_medium_access(h.lun->medium);
        a.continued = continued;
        tdm_medium_set_access(h.lun->medium, &a);
}

START_TEST(new_nexus_gets_power_on)
{
        struct scsi_nexus nx;
        scsi_nexus_init(&nx, h.target, "iqn.2024-01.org.tandem:fresh");
        h_assert_sense(tur_on(&nx), 0x6, 0x29, 0x00);
        h_assert_good(tur_on(&nx));
}
END_TEST

/* Promoted with the state handed over: the nexus was lost, nothing was powered on. */
START_TEST(new_nexus_after_failover_gets_nexus_loss)
{
        h_clear_ua(&h.nx);
        set_continued(true);
        struct scsi_nexus nx;
        scsi_nexus_init(&nx, h.target, "iqn.2024-01.org.tandem:fresh");
        h_assert_sense(tur_on(&nx), 0x6, 0x29, 0x07);
        h_assert_good(tur_on(&nx));
        /* A nexus that was there before gets nothing new from it. */
        h_assert_good(tur_on(&h.nx));
}
END_TEST

START_TEST(clear_task_set_tells_the_other_nexuses)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        scsi_nexus_clear_task_set(&h.nx, h.lun);
        h_assert_good(tur_on(&h.nx));
        h_assert_sense(tur_on(&h.nx2), 0x6, 0x2f, 0x00);
        h_assert_good(tur_on(&h.nx2));
}
END_TEST

START_TEST(lun_reset_tells_everyone_and_ends_reserve)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        const uint8_t reserve6[6] = {0x16}, write10[10] = {0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0};
        h_assert_good(h_run_on(&h.nx2, reserve6, 6, NULL, 0, 0));
        void *block = h_pattern(H_BS, 9);
        struct scsi_task *t = h_run_on(&h.nx, write10, 10, block, H_BS, H_BS);
        ck_assert_int_eq(t->status, SCSI_STATUS_RESERVATION_CONFLICT);
        scsi_nexus_lun_reset(&h.nx, h.lun);
        h_assert_sense(tur_on(&h.nx), 0x6, 0x29, 0x03);
        h_assert_sense(tur_on(&h.nx2), 0x6, 0x29, 0x03);
        h_assert_good(h_run_on(&h.nx, write10, 10, block, H_BS, H_BS));
        free(block);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("scsi_ua");
        TCase *tc = tcase_create("scsi_ua");
        tcase_add_checked_fixture(tc, h_setup, h_teardown);
        tcase_add_test(tc, new_nexus_gets_power_on);
        tcase_add_test(tc, new_nexus_after_failover_gets_nexus_loss);
        tcase_add_test(tc, clear_task_set_tells_the_other_nexuses);
        tcase_add_test(tc, lun_reset_tells_everyone_and_ends_reserve);
        suite_add_tcase(s, tc);
        SRunner *r = srunner_create(s);
        srunner_run_all(r, CK_NORMAL);
        int failed = srunner_ntests_failed(r);
        srunner_free(r);
        return failed ? 1 : 0;
}
