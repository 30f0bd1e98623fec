/*
 * COMPARE AND WRITE: limits and data-out size, the miscompare and its offset (nothing
 * written), the resend of an applied command (GOOD, not a false miscompare), FUA and the
 * write cache, and atomicity against an overlapping command in flight.
 */
#include <pthread.h>
#include <time.h>

#include "test_scsi_harness.h"

static void setup(void)
{
        h_setup();
        h_clear_ua(&h.nx);
}

static void cdb_caw(uint8_t *cdb, uint64_t lba, uint8_t nblocks, bool fua)
{
        memset(cdb, 0, 16);
        cdb[0] = 0x89;
        cdb[1] = fua ? 0x08 : 0;
        put_be64(cdb + 2, lba);
        cdb[13] = nblocks;
}

static struct scsi_task *caw(uint64_t lba, uint8_t n, const void *verify, const void *write,
                             bool fua)
{
        static uint8_t out[2 * 255 * H_BS];
        uint32_t len = n * H_BS;
        memcpy(out, verify, len);
        memcpy(out + len, write, len);
        uint8_t cdb[16];
        cdb_caw(cdb, lba, n, fua);
        return h_run(cdb, 16, out, 2 * len, 2 * len);
}

START_TEST(compare_equal_writes)
{
        void *a = h_pattern(4 * H_BS, 1), *b = h_pattern(4 * H_BS, 2);
        h_assert_good(h_write10(10, 4, a));
        h_assert_good(caw(10, 4, a, b, false));
        ck_assert_mem_eq(h_read10(10, 4)->data_in, b, 4 * H_BS);
        free(a);
        free(b);
}
END_TEST

/* MISCOMPARE, INFORMATION = offset of the first differing byte, and nothing written. */
START_TEST(miscompare_reports_offset_and_writes_nothing)
{
        uint8_t *a = h_pattern(2 * H_BS, 3), *b = h_pattern(2 * H_BS, 4);
        h_assert_good(h_write10(20, 2, a));
        uint8_t *expect = malloc(2 * H_BS);
        memcpy(expect, a, 2 * H_BS);
        expect[H_BS + 17] ^= 0x40; /* second block, byte 17 */
        struct scsi_task *t = caw(20, 2, expect, b, false);
        h_assert_sense(t, 0xe, 0x1d, 0x00);
        ck_assert(t->sense[0] & 0x80); /* VALID: INFORMATION holds the offset */
        ck_assert_uint_eq(get_be32(t->sense + 3), H_BS + 17);
        ck_assert_mem_eq(h_read10(20, 2)->data_in, a, 2 * H_BS);
        free(a);
        free(b);
        free(expect);
}
END_TEST

static struct scsi_task *caw_on(struct scsi_nexus *nx, uint64_t lba, const void *verify,
                                const void *write)
{
        static uint8_t out[2 * H_BS];
        memcpy(out, verify, H_BS);
        memcpy(out + H_BS, write, H_BS);
        uint8_t cdb[16];
        cdb_caw(cdb, lba, 1, false);
        return h_run_on(nx, cdb, 16, out, 2 * H_BS, 2 * H_BS);
}

/*
 * The same command again after it was applied, its status lost with the connection: it comes
 * on a new session (a new nexus here, same initiator), and is GOOD with nothing changed, even
 * after another initiator changed the blocks since. On the session that had its answer it is a
 * repeat, and miscompares (libiscsi's MultipathIO.CompareAndWrite).
 */
START_TEST(resend_of_applied_command_is_good)
{
        void *a = h_pattern(H_BS, 5), *b = h_pattern(H_BS, 6), *c = h_pattern(H_BS, 7);
        struct scsi_nexus fresh;
        scsi_nexus_init(&fresh, h.target, "iqn.2024-01.org.tandem:initiator-1");
        h_clear_ua(&fresh);
        h_assert_good(h_write10(30, 1, a));
        h_assert_good(caw(30, 1, a, b, false));
        h_assert_good(caw_on(&fresh, 30, a, b)); /* the resend, on the new session */
        ck_assert_mem_eq(h_read10(30, 1)->data_in, b, H_BS);
        /* On the session that was answered: a repeat, a real miscompare at byte 0. */
        h_assert_sense(caw(30, 1, a, b, false), 0xe, 0x1d, 0x00);
        /* ... and so is a second copy on the new session, now answered there too. */
        h_assert_sense(caw_on(&fresh, 30, a, b), 0xe, 0x1d, 0x00);
        /* Another initiator changes the blocks; the first one's resend is still GOOD. */
        struct scsi_nexus changer, again;
        scsi_nexus_init(&changer, h.target, "iqn.2024-01.org.tandem:initiator-2");
        h_clear_ua(&changer);
        h_assert_good(caw_on(&changer, 30, b, c));
        scsi_nexus_init(&again, h.target, "iqn.2024-01.org.tandem:initiator-1");
        h_clear_ua(&again);
        h_assert_good(caw_on(&again, 30, a, b)); /* applied before: GOOD, nothing written */
        ck_assert_mem_eq(h_read10(30, 1)->data_in, c, H_BS);
        h_assert_good(caw_on(&changer, 30, c, b)); /* back to b for what follows */
        /* A different write half is a real miscompare anywhere. */
        struct scsi_nexus other;
        scsi_nexus_init(&other, h.target, "iqn.2024-01.org.tandem:initiator-3");
        h_clear_ua(&other);
        h_assert_sense(caw_on(&other, 30, a, c), 0xe, 0x1d, 0x00);
        ck_assert_mem_eq(h_read10(30, 1)->data_in, b, H_BS);
        free(a);
        free(b);
        free(c);
}
END_TEST

START_TEST(limits_and_sizes)
{
        void *a = h_pattern(255 * H_BS, 8);
        uint8_t cdb[16];
        /* The Block Limits page advertises what the command takes. */
        uint8_t inq[6] = {0x12, 0x01, 0xb0, 0, 64, 0};
        struct scsi_task *t = h_run(inq, 6, NULL, 0, 64);
        h_assert_good(t);
        ck_assert_uint_eq(t->data_in[5], 255);
        /* Data-out not exactly twice the blocks: rejected, nothing written. */
        cdb_caw(cdb, 0, 2, false);
        h_assert_invalid_cdb(h_run(cdb, 16, a, 3 * H_BS, 3 * H_BS), 13, -1);
        h_assert_invalid_cdb(h_run(cdb, 16, a, 2 * H_BS, 2 * H_BS), 13, -1);
        /* No blocks and no data: nothing to do. */
        cdb_caw(cdb, 0, 0, false);
        h_assert_good(h_run(cdb, 16, NULL, 0, 0));
        /* Past the end. */
        cdb_caw(cdb, H_BLOCKS - 1, 2, false);
        h_assert_sense(h_run(cdb, 16, a, 4 * H_BS, 4 * H_BS), 0x5, 0x21, 0x00);
        /* The largest: 255 blocks. */
        void *b = h_pattern(255 * H_BS, 9);
        h_assert_good(h_write10(100, 255, a));
        h_assert_good(caw(100, 255, a, b, false));
        ck_assert_mem_eq(h_read10(100, 255)->data_in, b, 255 * H_BS);
        free(a);
        free(b);
}
END_TEST

/* FUA, or the write cache off, makes the write durable before GOOD. */
START_TEST(fua_and_write_cache)
{
        void *a = h_pattern(H_BS, 10), *b = h_pattern(H_BS, 11);
        h_assert_good(h_write10(40, 1, a));
        uint64_t f0 = h_dev()->flush_count;
        h_assert_good(caw(40, 1, a, b, false));
        ck_assert_uint_eq(h_dev()->flush_count, f0); /* cache on, no FUA */
        h_assert_good(caw(40, 1, b, a, true));
        ck_assert_uint_gt(h_dev()->flush_count, f0);
        free(a);
        free(b);
}
END_TEST

/* While another command holds the blocks, the CAW waits: it never compares a half-done write. */
struct caw_thread {
        pthread_t tid;
        struct scsi_task task;
        uint8_t out[2 * H_BS];
        atomic_bool done;
};

static void *caw_main(void *arg)
{
        struct caw_thread *c = arg;
        c->task.lun = scsi_target_get_lun(h.target, 0);
        scsi_task_execute(&c->task);
        scsi_lun_put(c->task.lun);
        atomic_store(&c->done, true);
        return NULL;
}

START_TEST(waits_for_overlapping_command)
{
        void *a = h_pattern(H_BS, 12), *b = h_pattern(H_BS, 13);
        h_assert_good(h_write10(50, 1, a));
        struct tdm_range held = {.off = 50 * H_BS, .len = H_BS};
        tdm_range_lock_wait(h.lun->medium, &held);
        static struct caw_thread c;
        memset(&c, 0, sizeof(c));
        memcpy(c.out, a, H_BS);
        memcpy(c.out + H_BS, b, H_BS);
        cdb_caw(c.task.cdb, 50, 1, false);
        c.task.cdb_len = 16;
        c.task.nexus = &h.nx;
        c.task.target = h.target;
        c.task.data_out = c.out;
        c.task.data_out_len = c.task.expected_len = 2 * H_BS;
        c.task.dir = SCSI_DIR_WRITE;
        ck_assert_int_eq(pthread_create(&c.tid, NULL, caw_main, &c), 0);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        ck_assert(!atomic_load(&c.done));
        tdm_range_unlock(h.lun->medium, &held);
        pthread_join(c.tid, NULL);
        h_assert_good(&c.task);
        scsi_task_release(&c.task);
        ck_assert_mem_eq(h_read10(50, 1)->data_in, b, H_BS);
        free(a);
        free(b);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("scsi_caw");
        TCase *tc = tcase_create("caw");
        tcase_add_checked_fixture(tc, setup, h_teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, compare_equal_writes);
        tcase_add_test(tc, miscompare_reports_offset_and_writes_nothing);
        tcase_add_test(tc, resend_of_applied_command_is_good);
        tcase_add_test(tc, limits_and_sizes);
        tcase_add_test(tc, fua_and_write_cache);
        tcase_add_test(tc, waits_for_overlapping_command);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
