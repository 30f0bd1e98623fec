/*
 * Unit attentions that come from where the LU has been and from task management: a new
 * nexus's first attention (POWER ON, or I_T NEXUS LOSS where the LU carries on from another
 * node), CLEAR TASK SET (COMMANDS CLEARED BY ANOTHER INITIATOR to the others only) and LUN
 * RESET (BUS DEVICE RESET to everyone, the SPC-2 reservation gone; counted in a record so the
 * other node's nexuses hear of it; on a standby node run by the serving node).
 */
#include "tandem/byteorder.h"
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

static uint64_t reset_record(void)
{
        uint8_t rec[16];
        size_t len = tdm_medium_state_get(h.lun->medium, SCSI_STATE_RESET, rec, sizeof(rec), NULL);
        if (len == 0)
                return 0;
        ck_assert_uint_eq(len, 8);
        return get_be64(rec);
}

/* The other copy's record arrives (what the replicator's state_changed does). */
static void peer_reset_record(const void *rec, size_t len)
{
        ck_assert_int_eq(tdm_medium_state_put(h.lun->medium, SCSI_STATE_RESET, rec, len, 0), 0);
        scsi_lun_state_changed(h.lun, SCSI_STATE_RESET);
}

/* Both halves of a LUN RESET from nx (the loop's, then the pool's); the record after it. */
static uint64_t reset_from(struct scsi_nexus *nx)
{
        ck_assert(scsi_nexus_lun_reset(nx, h.lun));
        scsi_lun_store_reset(h.lun);
        return reset_record();
}

/* The serving node counts each reset in the record it stores on every copy. */
START_TEST(lun_reset_is_counted_in_its_record)
{
        ck_assert_uint_eq(reset_record(), 0);
        ck_assert_uint_eq(reset_from(&h.nx), 1);
        ck_assert_uint_eq(reset_from(&h.nx2), 2);
}
END_TEST

/* A reset on the other node: this node's nexuses hear of it once, and of nothing older. */
START_TEST(reset_record_from_the_other_copy_tells_this_nodes_nexuses)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        uint8_t rec[8];
        put_be64(rec, 3);
        peer_reset_record(rec, sizeof(rec));
        h_assert_sense(tur_on(&h.nx), 0x6, 0x29, 0x03);
        h_assert_sense(tur_on(&h.nx2), 0x6, 0x29, 0x03);
        h_assert_good(tur_on(&h.nx));
        peer_reset_record(rec, sizeof(rec)); /* the same count again (a snapshot) */
        h_assert_good(tur_on(&h.nx));
        put_be64(rec, 2);
        peer_reset_record(rec, sizeof(rec));
        h_assert_good(tur_on(&h.nx2));
        peer_reset_record(rec, 3); /* malformed: ignored */
        h_assert_good(tur_on(&h.nx));
        /* The count carries on from the record when this node serves. */
        ck_assert_uint_eq(reset_from(&h.nx), 4);
}
END_TEST

/* On a standby node without a serving node to run it: this node's nexuses only, not counted. */
START_TEST(standby_reset_without_a_peer_stays_here)
{
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        struct tdm_access a = tdm_medium_access(h.lun->medium);
        a.local_state = TDM_ACCESS_STANDBY;
        tdm_medium_set_access(h.lun->medium, &a);
        h_clear_ua(&h.nx); /* the ALUA state change */
        h_clear_ua(&h.nx2);
        ck_assert(scsi_nexus_lun_reset(&h.nx, h.lun));
        h_assert_good(tur_on(&h.nx2)); /* nothing yet: the serving node's to run */
        scsi_lun_store_reset(h.lun);
        h_assert_sense(tur_on(&h.nx), 0x6, 0x29, 0x03);
        h_assert_sense(tur_on(&h.nx2), 0x6, 0x29, 0x03);
        ck_assert_uint_eq(reset_record(), 0);
}
END_TEST

/* What a standby node forwards: the serving node runs it and counts it; an unknown function is
 * refused. */
START_TEST(forwarded_reset_runs_on_the_serving_node)
{
        h_clear_ua(&h.nx);
        struct tdm_forward_cmd cmd = {.tmf = TDM_FORWARD_TMF_LU_RESET};
        struct tdm_forward_result res;
        scsi_lun_forwarded(h.lun, &cmd, &res);
        ck_assert_uint_eq(res.status, 0);
        ck_assert_uint_eq(reset_record(), 1);
        h_assert_sense(tur_on(&h.nx), 0x6, 0x29, 0x03);
        cmd.tmf = 7; /* no such function */
        scsi_lun_forwarded(h.lun, &cmd, &res);
        ck_assert_uint_eq(res.status, SCSI_STATUS_CHECK_CONDITION);
        ck_assert_uint_eq(res.asc, 0x20);
        ck_assert_uint_eq(reset_record(), 1);
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
        tcase_add_test(tc, lun_reset_is_counted_in_its_record);
        tcase_add_test(tc, reset_record_from_the_other_copy_tells_this_nodes_nexuses);
        tcase_add_test(tc, standby_reset_without_a_peer_stays_here);
        tcase_add_test(tc, forwarded_reset_runs_on_the_serving_node);
        suite_add_tcase(s, tc);
        SRunner *r = srunner_create(s);
        srunner_run_all(r, CK_NORMAL);
        int failed = srunner_ntests_failed(r);
        srunner_free(r);
        return failed ? 1 : 0;
}
