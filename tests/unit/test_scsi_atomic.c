/*
 * WRITE ATOMIC(16): the limits a LUN advertises with and without a journal, the checks of
 * the command, the journal's replay after a crash, and the exclusion between atomic
 * writes and the other commands on the same stripes.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "test_scsi_harness.h"

/* A directory of our own for backing files and journals (tmpfs when there is one: fast). */
static char dir[64];

static void dir_setup(void)
{
        snprintf(dir, sizeof(dir), "%s/tandem-atomic-XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void dir_teardown(void)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
}

static void setup(void)
{
        dir_setup();
        h_setup();
        h_clear_ua(&h.nx);
}

static void teardown(void)
{
        h_teardown();
        dir_teardown();
}

static void journal_path(char *out, size_t len, const char *name)
{
        snprintf(out, len, "%s/%s.atomic", dir, name);
}

static bool exists(const char *path)
{
        return access(path, F_OK) == 0;
}

/* A LUN on dir/name (kept across LUN objects, so a "crash" can be replayed). */
static struct scsi_lun *lun_on(const char *name, uint64_t blocks, uint32_t bs)
{
        char path[128];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        struct bs_open_opts opts = {.create_size = blocks * bs};
        struct bs_dev *dev = NULL;
        ck_assert_int_eq(bs_open(path, &opts, &dev), 0);
        struct tdm_medium *m = NULL;
        ck_assert_int_eq(bs_medium_create(dev, &m), 0);
        struct scsi_lun *lun = scsi_lun_create(0, m, bs, path);
        ck_assert_ptr_nonnull(lun);
        lun->thin = true;
        return lun;
}

/* Replaces the harness LUN (id 0 of h.target) with lun; the harness owns it from now on. */
static void use_lun(struct scsi_lun *lun)
{
        ck_assert_int_eq(scsi_target_del_lun(h.target, 0), 0);
        scsi_lun_put(h.lun);
        h.lun = lun;
        ck_assert_int_eq(scsi_target_add_lun(h.target, lun), 0);
        scsi_nexus_init(&h.nx, h.target, "iqn.2024-01.org.tandem:initiator-1");
        h_clear_ua(&h.nx);
}

static void cdb_atomic(uint8_t *cdb, uint64_t lba, uint16_t n, uint8_t byte1)
{
        memset(cdb, 0, 16);
        cdb[0] = 0x9c;
        cdb[1] = byte1;
        put_be64(cdb + 2, lba);
        put_be16(cdb + 12, n);
}

static struct scsi_task *write_atomic(uint64_t lba, uint16_t n, uint8_t byte1, const void *buf)
{
        uint8_t cdb[16];
        cdb_atomic(cdb, lba, n, byte1);
        uint32_t len = n * h.lun->block_size;
        return h_run(cdb, 16, buf, len, len);
}

static struct scsi_task *block_limits(void)
{
        uint8_t cdb[6] = {0x12, 1, 0xb0, 0, 255, 0};
        struct scsi_task *t = h_run(cdb, 6, NULL, 0, 255);
        h_assert_good(t);
        ck_assert_int_eq(get_be16(t->data_in + 2), 0x3c);
        return t;
}

static void assert_atomic_limits(uint32_t max)
{
        const uint8_t *d = block_limits()->data_in;
        ck_assert_uint_eq(get_be32(d + 44), max);         /* MAXIMUM ATOMIC TRANSFER LENGTH */
        ck_assert_uint_eq(get_be32(d + 48), max ? 1 : 0); /* ATOMIC ALIGNMENT */
        ck_assert_uint_eq(get_be32(d + 52), max ? 1 : 0); /* ATOMIC TRANSFER LENGTH GRANULARITY */
        ck_assert_uint_eq(get_be32(d + 56), 0);           /* no ATOMIC BOUNDARY */
        ck_assert_uint_eq(get_be32(d + 60), 0);
        ck_assert_uint_le(get_be32(d + 44), get_be32(d + 8)); /* within MAXIMUM TRANSFER LENGTH */
        ck_assert_uint_eq(scsi_atomic_max_blocks(h.lun), max);
}

/* Reads the backing file directly, behind the SCSI layer's back. */
static void read_backing(const char *name, uint64_t off, void *buf, size_t len)
{
        char path[128];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int fd = open(path, O_RDONLY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pread(fd, buf, len, (off_t)off), (ssize_t)len);
        close(fd);
}

START_TEST(without_journal_one_block)
{
        assert_atomic_limits(1);
        uint8_t *buf = h_pattern(2 * 512, 3);
        h_assert_good(write_atomic(7, 1, 0, buf));
        ck_assert_mem_eq(h_read10(7, 1)->data_in, buf, 512);
        /* more than the maximum: INVALID FIELD IN CDB at TRANSFER LENGTH */
        h_assert_invalid_cdb(write_atomic(7, 2, 0, buf), 12, -1);
        ck_assert(h_all_zero(h_read10(8, 1)->data_in, 512));
        /* FUA makes it durable even with the write cache on */
        uint64_t flushes = h_dev()->flush_count;
        h_assert_good(write_atomic(7, 1, 0x08, buf));
        ck_assert_uint_gt(h_dev()->flush_count, flushes);
        flushes = h_dev()->flush_count;
        h_assert_good(write_atomic(7, 1, 0x10, buf)); /* DPO: a hint */
        ck_assert_uint_eq(h_dev()->flush_count, flushes);
        free(buf);
}
END_TEST

START_TEST(command_checks)
{
        uint8_t blk[512];
        memset(blk, 0xa6, sizeof(blk));
        /* zero blocks: GOOD inside the medium, LBA OUT OF RANGE past it */
        h_assert_good(write_atomic(0, 0, 0, NULL));
        h_assert_good(write_atomic(H_BLOCKS, 0, 0, NULL));
        h_assert_sense(write_atomic(H_BLOCKS + 1, 0, 0, NULL), 0x5, 0x21, 0x00);
        h_assert_sense(write_atomic(0x8000000000000000ull, 0, 0, NULL), 0x5, 0x21, 0x00);
        h_assert_sense(write_atomic(0xffffffffffffffffull, 1, 0, blk), 0x5, 0x21, 0x00);
        /* the range is checked before the length: LBA OUT OF RANGE, not INVALID FIELD */
        h_assert_sense(write_atomic(H_BLOCKS - 1, 4, 0, NULL), 0x5, 0x21, 0x00);
        /* WRPROTECT without protection information, ATOMIC BOUNDARY without support */
        for (uint8_t wp = 1; wp < 8; wp++)
                h_assert_invalid_cdb(write_atomic(0, 1, (uint8_t)(wp << 5), blk), 1,
                                     wp & 4   ? 7
                                     : wp & 2 ? 6
                                              : 5);
        uint8_t cdb[16];
        cdb_atomic(cdb, 0, 1, 0);
        cdb[11] = 1;
        h_assert_invalid_cdb(h_run(cdb, 16, blk, 512, 512), 11, 0);
        /* REPORT SUPPORTED OPERATION CODES: DPO and FUA may be set, as MODE SENSE's DPOFUA says */
        uint8_t rsoc[12] = {0xa3, 0x0c, 0x01, 0x9c, 0, 0, 0, 0, 0, 64, 0, 0};
        struct scsi_task *t = h_run(rsoc, 12, NULL, 0, 64);
        h_assert_good(t);
        ck_assert_int_eq(t->data_in[1] & 0x07, 0x03);
        ck_assert_uint_eq(get_be16(t->data_in + 2), 16);
        ck_assert_int_eq(t->data_in[4 + 1], 0x18);
        ck_assert_int_eq(t->data_in[4 + 10] | t->data_in[4 + 11], 0);
        /* data shorter than the CDB says: the whole blocks sent, atomically */
        uint8_t *buf = h_pattern(4 * 512, 8);
        cdb_atomic(cdb, 40, 1, 0);
        h_assert_good(h_run(cdb, 16, buf, 512, 512));
        ck_assert_mem_eq(h_read10(40, 1)->data_in, buf, 512);
        free(buf);
}
END_TEST

/* Larger blocks straddle device sectors: without a journal nothing is atomic to offer. */
START_TEST(large_blocks_without_journal)
{
        use_lun(lun_on("big.img", 1024, 4096));
        assert_atomic_limits(0);
        uint8_t blk[4096] = {0};
        h_assert_sense(write_atomic(0, 1, 0, blk), 0x5, 0x20, 0x00);
}
END_TEST

START_TEST(journal_limits_and_life)
{
        char jpath[128];
        journal_path(jpath, sizeof(jpath), "j");
        struct scsi_lun *lun = lun_on("disk.img", H_BLOCKS, 512);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(lun, jpath, (lun)->medium), 0);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(lun, jpath, (lun)->medium), -EEXIST);
        use_lun(lun);
        ck_assert(exists(jpath));
        uint32_t max = SCSI_MAX_ATOMIC_BYTES / 512;
        assert_atomic_limits(max);
        uint8_t *buf = h_pattern(SCSI_MAX_ATOMIC_BYTES + 512, 11);
        uint64_t flushes = h_dev()->flush_count;
        h_assert_good(write_atomic(100, (uint16_t)max, 0, buf));
        ck_assert_uint_gt(h_dev()->flush_count, flushes); /* durable whatever WCE says */
        struct scsi_task *t = h_read10(100, (uint16_t)max);
        h_assert_good(t);
        ck_assert_mem_eq(t->data_in, buf, SCSI_MAX_ATOMIC_BYTES);
        h_assert_invalid_cdb(write_atomic(100, (uint16_t)(max + 1), 0, buf), 12, -1);
        h_assert_good(write_atomic(H_BLOCKS - 3, 3, 0, buf)); /* the end of the medium */
        ck_assert_mem_eq(h_read10(H_BLOCKS - 3, 3)->data_in, buf, 3 * 512);
        free(buf);
        /* a second LUN object may not use the same journal */
        struct scsi_lun *other = lun_on("other.img", 64, 512);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(other, jpath, (other)->medium), -EBUSY);
        scsi_lun_put(other);
        /* the last reference closes the journal: nothing pending, so the file goes */
        scsi_target_del_lun(h.target, 0);
        scsi_lun_put(h.lun);
        ck_assert(!exists(jpath));
        /* 4096-byte blocks: the same bytes, fewer blocks */
        h.lun = lun_on("big.img", 1024, 4096);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(h.lun, jpath, (h.lun)->medium), 0);
        ck_assert_int_eq(scsi_target_add_lun(h.target, h.lun), 0);
        scsi_nexus_init(&h.nx, h.target, "iqn.2024-01.org.tandem:initiator-1");
        h_clear_ua(&h.nx);
        assert_atomic_limits(SCSI_MAX_ATOMIC_BYTES / 4096);
}
END_TEST

/* A crash after the record was made durable: the next open writes it in place. */
START_TEST(journal_replay_after_crash)
{
        char jpath[128];
        journal_path(jpath, sizeof(jpath), "j");
        struct scsi_lun *lun = lun_on("disk.img", H_BLOCKS, 512);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(lun, jpath, (lun)->medium), 0);
        struct scsi_atomic_journal *j = scsi_lun_private(lun)->journal;
        uint8_t *a = h_pattern(8 * 512, 1), *b = h_pattern(2 * 512, 2), *c = h_pattern(512, 3);
        unsigned s0, s1, s2;
        ck_assert_int_eq(scsi_journal_log(j, 900, 1, c, &s0), 0); /* completed: retired */
        ck_assert_int_eq(scsi_journal_log(j, 10, 8, a, &s1), 0);  /* older, in slot 1 */
        ck_assert_int_eq(scsi_journal_retire(j, s0), 0);
        ck_assert_int_eq(scsi_journal_log(j, 12, 2, b, &s2), 0); /* newer, reuses slot 0 */
        ck_assert_uint_eq(s2, s0);
        /* "crash": the object goes without retiring; the journal file stays */
        scsi_lun_put(lun);
        ck_assert(exists(jpath));
        uint8_t medium[8 * 512];
        read_backing("disk.img", 10 * 512, medium, sizeof(medium));
        ck_assert(h_all_zero(medium, sizeof(medium))); /* never written in place */
        /* restart: replayed oldest first, so the newer record wins where they overlap */
        lun = lun_on("disk.img", H_BLOCKS, 512);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(lun, jpath, (lun)->medium), 0);
        use_lun(lun);
        struct scsi_task *t = h_read10(10, 8);
        h_assert_good(t);
        ck_assert_mem_eq(t->data_in, a, 2 * 512);
        ck_assert_mem_eq(t->data_in + 2 * 512, b, 2 * 512);
        ck_assert_mem_eq(t->data_in + 4 * 512, a + 4 * 512, 4 * 512);
        ck_assert(h_all_zero(h_read10(900, 1)->data_in, 512)); /* retired: not replayed */
        /* replayed once: a later write is not undone by another open */
        uint8_t *d = h_pattern(8 * 512, 4);
        h_assert_good(h_write10(10, 8, d));
        scsi_target_del_lun(h.target, 0);
        scsi_lun_put(h.lun);
        ck_assert(!exists(jpath));
        h.lun = lun_on("disk.img", H_BLOCKS, 512);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(h.lun, jpath, (h.lun)->medium), 0);
        ck_assert_int_eq(scsi_target_add_lun(h.target, h.lun), 0);
        read_backing("disk.img", 10 * 512, medium, sizeof(medium));
        ck_assert_mem_eq(medium, d, sizeof(medium));
        free(a);
        free(b);
        free(c);
        free(d);
}
END_TEST

/* A record torn while it was logged, or of another backing store, is not written. */
START_TEST(journal_ignores_torn_and_foreign_records)
{
        char jpath[128];
        journal_path(jpath, sizeof(jpath), "j");
        struct scsi_lun *lun = lun_on("disk.img", H_BLOCKS, 512);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(lun, jpath, (lun)->medium), 0);
        struct scsi_atomic_journal *j = scsi_lun_private(lun)->journal;
        uint8_t *a = h_pattern(4 * 512, 1);
        unsigned s0, s1;
        ck_assert_int_eq(scsi_journal_log(j, 20, 4, a, &s0), 0);
        ck_assert_int_eq(scsi_journal_log(j, 30, 4, a, &s1), 0);
        scsi_lun_put(lun);
        /* tear the first record's data: as if the crash hit before its fdatasync */
        int fd = open(jpath, O_RDWR);
        ck_assert_int_ge(fd, 0);
        uint8_t x = 0x5a;
        ck_assert_int_eq(pwrite(fd, &x, 1, 4096 + 700), 1);
        close(fd);
        /* another backing store opens the journal: the intact record is not its own */
        struct scsi_lun *other = lun_on("other.img", H_BLOCKS, 512);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(other, jpath, (other)->medium), 0);
        uint8_t medium[4 * 512];
        read_backing("other.img", 30 * 512, medium, sizeof(medium));
        ck_assert(h_all_zero(medium, sizeof(medium)));
        scsi_lun_put(other);
        read_backing("disk.img", 20 * 512, medium, sizeof(medium));
        ck_assert(h_all_zero(medium, sizeof(medium)));
        read_backing("disk.img", 30 * 512, medium, sizeof(medium));
        ck_assert(h_all_zero(medium, sizeof(medium)));
        free(a);
}
END_TEST

/* ---- exclusion between atomic writes and the other commands ---- */

/* A whole SCSI command on its own task, for a thread. */
struct cmd_thread {
        pthread_t tid;
        struct scsi_task task;
        atomic_bool done;
};

static void *cmd_main(void *arg)
{
        struct cmd_thread *c = arg;
        c->task.lun = scsi_target_get_lun(h.target, 0);
        scsi_task_execute(&c->task);
        scsi_lun_put(c->task.lun);
        atomic_store(&c->done, true);
        return NULL;
}

static void cmd_start(struct cmd_thread *c, struct scsi_nexus *nx, const uint8_t *cdb,
                      const void *out, uint32_t len)
{
        memset(c, 0, sizeof(*c));
        memcpy(c->task.cdb, cdb, 16);
        c->task.cdb_len = 16;
        c->task.nexus = nx;
        c->task.target = h.target;
        c->task.data_out = (uint8_t *)out;
        c->task.data_out_len = len;
        c->task.expected_len = len;
        c->task.dir = len ? SCSI_DIR_WRITE : SCSI_DIR_READ;
        ck_assert_int_eq(pthread_create(&c->tid, NULL, cmd_main, c), 0);
}

static void settle(void)
{
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
}

static void cmd_join_good(struct cmd_thread *c)
{
        pthread_join(c->tid, NULL);
        ck_assert(atomic_load(&c->done));
        h_assert_good(&c->task);
        scsi_task_release(&c->task);
}

/* A range held (as a command in flight holds it) holds off overlapping commands only. */
START_TEST(held_range_holds_off_overlapping_commands)
{
        scsi_nexus_init(&h.nx2, h.target, "iqn.2024-01.org.tandem:initiator-2");
        h_clear_ua(&h.nx2);
        struct tdm_range held = {.off = 4096, .len = 8192};
        tdm_range_lock_wait(h.lun->medium, &held);
        static uint8_t blk[512];
        memset(blk, 0x5a, sizeof(blk));
        uint8_t cdb[16];
        struct cmd_thread near_r, near_w, far_r, far_w;
        cdb_rw16(cdb, 0x88, 8, 8); /* READ(16) of 4096..8191 */
        cmd_start(&near_r, &h.nx2, cdb, NULL, 0);
        cdb_rw16(cdb, 0x8a, 20, 1); /* WRITE(16) at 10240 */
        cmd_start(&near_w, &h.nx2, cdb, blk, 512);
        cdb_rw16(cdb, 0x88, 2048, 8);
        cmd_start(&far_r, &h.nx2, cdb, NULL, 0);
        cdb_rw16(cdb, 0x8a, 2100, 1);
        cmd_start(&far_w, &h.nx2, cdb, blk, 512);
        cmd_join_good(&far_r);
        cmd_join_good(&far_w);
        settle();
        ck_assert(!atomic_load(&near_r.done));
        ck_assert(!atomic_load(&near_w.done));
        tdm_range_unlock(h.lun->medium, &held);
        cmd_join_good(&near_r);
        cmd_join_good(&near_w);
}
END_TEST

/* An atomic write waits for a write in flight on its blocks, and only for that. */
START_TEST(atomic_write_waits_for_plain_writes)
{
        scsi_nexus_init(&h.nx2, h.target, "iqn.2024-01.org.tandem:initiator-2");
        h_clear_ua(&h.nx2);
        struct tdm_range plain = {.off = 0, .len = 4096};
        tdm_range_lock_wait(h.lun->medium, &plain);
        uint8_t blk[512];
        memset(blk, 0x77, sizeof(blk));
        uint8_t cdb[16];
        struct cmd_thread near, far;
        cdb_atomic(cdb, 2, 1, 0);
        cmd_start(&near, &h.nx2, cdb, blk, 512);
        cdb_atomic(cdb, (1u << 20) / 512, 1, 0);
        cmd_start(&far, &h.nx2, cdb, blk, 512);
        pthread_join(far.tid, NULL);
        ck_assert_int_eq(far.task.status, SCSI_STATUS_GOOD);
        settle();
        ck_assert(!atomic_load(&near.done));
        tdm_range_unlock(h.lun->medium, &plain);
        pthread_join(near.tid, NULL);
        ck_assert_int_eq(near.task.status, SCSI_STATUS_GOOD);
        ck_assert_mem_eq(h_read10(2, 1)->data_in, blk, 512);
        scsi_task_release(&near.task);
        scsi_task_release(&far.task);
}
END_TEST

/* Reads racing multi-block atomic writes see all of one write, never a mix. */
struct race {
        atomic_bool stop;
        unsigned writes, reads, mixed;
};

static struct race race;

static void *race_writer(void *arg)
{
        (void)arg;
        const unsigned n = 64;
        uint8_t *buf = malloc(n * 512);
        uint8_t cdb[16];
        cdb_atomic(cdb, 0, (uint16_t)n, 0);
        for (unsigned i = 0; i < 1000; i++) {
                memset(buf, i & 1 ? 0x11 : 0x22, n * 512);
                struct cmd_thread c;
                memset(&c, 0, sizeof(c));
                memcpy(c.task.cdb, cdb, 16);
                c.task.cdb_len = 16;
                c.task.nexus = &h.nx2;
                c.task.target = h.target;
                c.task.data_out = buf;
                c.task.data_out_len = c.task.expected_len = n * 512;
                c.task.dir = SCSI_DIR_WRITE;
                cmd_main(&c);
                ck_assert_int_eq(c.task.status, SCSI_STATUS_GOOD);
                scsi_task_release(&c.task);
                race.writes++;
        }
        free(buf);
        atomic_store(&race.stop, true);
        return NULL;
}

START_TEST(reads_never_see_half_an_atomic_write)
{
        char jpath[128];
        journal_path(jpath, sizeof(jpath), "j");
        struct scsi_lun *lun = lun_on("disk.img", H_BLOCKS, 512);
        ck_assert_int_eq(scsi_lun_attach_atomic_journal(lun, jpath, (lun)->medium), 0);
        use_lun(lun);
        scsi_nexus_init(&h.nx2, h.target, "iqn.2024-01.org.tandem:initiator-2");
        h_clear_ua(&h.nx2);
        uint8_t *buf = malloc(64 * 512);
        memset(buf, 0x22, 64 * 512);
        h_assert_good(h_write10(0, 64, buf));
        memset(&race, 0, sizeof(race));
        pthread_t w;
        ck_assert_int_eq(pthread_create(&w, NULL, race_writer, NULL), 0);
        while (!atomic_load(&race.stop)) {
                struct scsi_task *t = h_read10(0, 64); /* a READ command, as an initiator's */
                h_assert_good(t);
                memcpy(buf, t->data_in, 64 * 512);
                for (unsigned i = 1; i < 64 * 512; i++)
                        if (buf[i] != buf[0]) {
                                race.mixed++;
                                break;
                        }
                race.reads++;
        }
        pthread_join(w, NULL);
        free(buf);
        ck_assert_uint_eq(race.writes, 1000);
        ck_assert_uint_gt(race.reads, 0);
        ck_assert_uint_eq(race.mixed, 0);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("scsi_atomic");
        TCase *tc = tcase_create("atomic");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, without_journal_one_block);
        tcase_add_test(tc, command_checks);
        tcase_add_test(tc, large_blocks_without_journal);
        tcase_add_test(tc, journal_limits_and_life);
        tcase_add_test(tc, journal_replay_after_crash);
        tcase_add_test(tc, journal_ignores_torn_and_foreign_records);
        tcase_add_test(tc, held_range_holds_off_overlapping_commands);
        tcase_add_test(tc, atomic_write_waits_for_plain_writes);
        tcase_add_test(tc, reads_never_see_half_an_atomic_write);
        suite_add_tcase(s, tc);
        return h_run_suite(s);
}
