/*
 * SCSI command execution under fuzzing: CDBs with data-out through scsi_task_execute() on a
 * target with two small sparse LUNs in /dev/shm, as tests/unit/test_scsi_harness.h builds
 * them. The LUNs and nexuses are built afresh for every input (a few system calls), so the
 * same input always meets the same state and a crash reproduces alone.
 *
 * Input: one or more commands. Each is 16 CDB bytes, a control byte, then its data-out: the
 * rest of the input, or (control bit 7) a 2-byte big-endian length, that many bytes, and
 * the next command. Control byte:
 *   bits 0-1: direction (1 read, 2 write, 3 both; the iSCSI R/W bits)
 *   bits 2-3: expected data transfer length: 0 what the command moves, 1 the data-out
 *             length, 2 255 bytes, 3 the largest the transport allows
 *   bits 4-5: LUN 0 (512-byte blocks, thin), 1 (4096-byte blocks, thick),
 *             2 LUN 0 again, 3 a LUN that does not exist
 *   bit 6:    the second initiator's nexus
 * LUN 1 gets a WRITE ATOMIC journal when a command of the input is WRITE ATOMIC(16) to it.
 * As the transport does, data-out comes only with the W bit and never exceeds the expected
 * length. Each LUN is 4 MiB so even WRITE SAME over the whole medium stays cheap.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "scsi/scsi_internal.h"
#include "tandem/backstore.h"
#include "tandem/scsi.h"
#include "tandem/scsi_nexus.h"

#define LUN_BYTES      (4u * 1024 * 1024)
#define MAX_COMMANDS   8
#define ABSENT_LUN     9
#define WRITE_EDTL_MAX (32u * 1024 * 1024) /* ISCSI_MAX_XFER: the transport refuses more */
#define READ_EDTL_MAX  0xffffffffu         /* a read's EDTL is not bounded by the transport */

static char shm_dir[64];

struct world {
        struct scsi_target *target;
        struct scsi_lun *lun[2];
        struct scsi_nexus nx[2];
        char journal[128];
};

static struct scsi_lun *make_lun(uint64_t id, uint32_t block_size, bool thin)
{
        char path[128];
        snprintf(path, sizeof(path), "%s/lun%llu.img", shm_dir, (unsigned long long)id);
        unlink(path); /* a fresh, all-zero medium every time */
        struct bs_open_opts opts = {.create_size = LUN_BYTES};
        struct bs_dev *dev = NULL;
        int rc = bs_open(path, &opts, &dev);
        FUZZ_ASSERT(rc == 0, "bs_open(%s) = %d", path, rc);
        unlink(path); /* the descriptor keeps it */
        struct tdm_medium *m = NULL;
        FUZZ_ASSERT(bs_medium_create(dev, &m) == 0, "bs_medium_create");
        struct scsi_lun *lun = scsi_lun_create(id, m, block_size, path);
        FUZZ_ASSERT(lun != NULL, "scsi_lun_create");
        lun->thin = thin;
        return lun;
}

static void world_build(struct world *w, bool journal)
{
        memset(w, 0, sizeof(*w));
        w->target = scsi_target_create("iqn.2026-11.io.tandem:fuzz");
        FUZZ_ASSERT(w->target != NULL, "scsi_target_create");
        w->lun[0] = make_lun(0, 512, true);
        w->lun[1] = make_lun(1, 4096, false);
        /*
         * Multi-block WRITE ATOMIC needs a journal (without one only single blocks are
         * atomic). Creating it costs a millisecond, so only inputs that use it get it.
         */
        if (journal) {
                snprintf(w->journal, sizeof(w->journal), "%s/lun1.journal", shm_dir);
                unlink(w->journal);
                int rc = scsi_lun_attach_atomic_journal(w->lun[1], w->journal, w->lun[1]->medium);
                FUZZ_ASSERT(rc == 0, "scsi_lun_attach_atomic_journal = %d", rc);
        }
        for (int i = 0; i < 2; i++)
                FUZZ_ASSERT(scsi_target_add_lun(w->target, w->lun[i]) == 0, "add_lun %d", i);
        scsi_nexus_init(&w->nx[0], w->target, "iqn.2026-11.io.tandem:initiator-1");
        scsi_nexus_init(&w->nx[1], w->target, "iqn.2026-11.io.tandem:initiator-2");
        /* As after an initiator's first TEST UNIT READY: no POWER ON RESET in the way. */
        for (int i = 0; i < 2; i++)
                memset(w->nx[i].power_on_pending, 0, sizeof(w->nx[i].power_on_pending));
}

static void world_destroy(struct world *w)
{
        for (int i = 0; i < 2; i++)
                scsi_nexus_fini(&w->nx[i]);
        for (int i = 0; i < 2; i++)
                scsi_lun_put(w->lun[i]);
        scsi_target_put(w->target);
        if (w->journal[0])
                unlink(w->journal);
}

/* A command that has answered holds no range lock: one left behind stops every later writer
 * of its range for good (and it lives in the command's frame: a dangling entry). */
static void check_no_range_held(struct scsi_lun *lun)
{
        struct tdm_range_table *rt = &lun->medium->ranges;
        pthread_mutex_lock(&rt->lock);
        bool idle = rt->held == NULL && rt->wait_head == NULL;
        pthread_mutex_unlock(&rt->lock);
        FUZZ_ASSERT(idle, "lun %llu: a range lock is still held after the answer",
                    (unsigned long long)lun->id);
}

static void check_sense(const struct scsi_task *t)
{
        FUZZ_ASSERT(t->sense_len <= SCSI_SENSE_MAX, "sense_len %u", t->sense_len);
        if (t->status != SCSI_STATUS_CHECK_CONDITION) {
                FUZZ_ASSERT(t->sense_len == 0, "status 0x%02x with %u sense bytes", t->status,
                            t->sense_len);
                return;
        }
        FUZZ_ASSERT(t->sense_len >= 8, "CHECK CONDITION with %u sense bytes", t->sense_len);
        uint8_t code = t->sense[0] & 0x7f, key;
        if (code == 0x70) {
                FUZZ_ASSERT(t->sense_len >= 18, "fixed sense of %u bytes", t->sense_len);
                FUZZ_ASSERT(t->sense[7] + 8u == t->sense_len, "ADDITIONAL SENSE LENGTH %u for %u",
                            t->sense[7], t->sense_len);
                key = t->sense[2] & 0x0f;
        } else {
                FUZZ_ASSERT(code == 0x72, "sense response code 0x%02x", t->sense[0]);
                FUZZ_ASSERT(t->sense[7] + 8u == t->sense_len, "ADDITIONAL SENSE LENGTH %u for %u",
                            t->sense[7], t->sense_len);
                key = t->sense[1] & 0x0f;
                /* Descriptors fill the additional bytes exactly. */
                unsigned off = 8;
                while (off < t->sense_len) {
                        FUZZ_ASSERT(off + 2 <= t->sense_len &&
                                        off + 2u + t->sense[off + 1] <= t->sense_len,
                                    "sense descriptor at %u overruns %u", off, t->sense_len);
                        off += 2u + t->sense[off + 1];
                }
        }
        FUZZ_ASSERT(key != 0 && key != 0x0f, "sense key 0x%x with CHECK CONDITION", key);
}

static void check_task(const struct scsi_task *t)
{
        uint8_t s = t->status;
        FUZZ_ASSERT(s == SCSI_STATUS_GOOD || s == SCSI_STATUS_CHECK_CONDITION ||
                        s == SCSI_STATUS_RESERVATION_CONFLICT || s == SCSI_STATUS_CONDITION_MET,
                    "status 0x%02x (%s) for opcode 0x%02x", s, scsi_reason_name(t->reason),
                    t->cdb[0]);
        check_sense(t);
        if (s != SCSI_STATUS_GOOD && s != SCSI_STATUS_CONDITION_MET)
                FUZZ_ASSERT(t->data_in_len == 0, "failed command returns %u bytes", t->data_in_len);
        FUZZ_ASSERT(t->data_in_len <= SCSI_MAX_XFER_BYTES, "data_in_len %u", t->data_in_len);
        if (t->data_in_len) {
                FUZZ_ASSERT(t->data_in != NULL, "data_in_len %u without a buffer", t->data_in_len);
                FUZZ_ASSERT(t->data_in_owned || t->data_in_len <= sizeof(t->data_in_inline),
                            "inline data_in of %u bytes", t->data_in_len);
                /* Touch every byte: the sanitizer reports a buffer shorter than its length. */
                volatile uint8_t sum = 0;
                for (uint32_t i = 0; i < t->data_in_len; i += 64)
                        sum ^= t->data_in[i];
                sum ^= t->data_in[t->data_in_len - 1];
                (void)sum;
        }
}

/* The expected data transfer length the control byte asks for. */
static uint32_t expected_len(uint8_t ctl, const struct scsi_task *t, uint32_t out_len)
{
        switch ((ctl >> 2) & 3) {
        case 0: {
                uint32_t want = scsi_cdb_data_out_len(t->cdb, t->lun);
                if (!(t->dir & SCSI_DIR_WRITE))
                        want = 64 * 1024; /* a read's length is unknown here: a typical EDTL */
                return want > out_len ? want : out_len;
        }
        case 1:
                return out_len;
        case 2:
                return 255;
        default:
                return (t->dir & SCSI_DIR_WRITE) ? WRITE_EDTL_MAX : READ_EDTL_MAX;
        }
}

static void run_command(struct world *w, const uint8_t *cdb, uint8_t ctl, const uint8_t *out,
                        uint32_t out_len)
{
        struct scsi_task t;
        memset(&t, 0, sizeof(t));
        memcpy(t.cdb, cdb, 16);
        t.cdb_len = 16;
        t.nexus = &w->nx[(ctl >> 6) & 1];
        t.target = w->target;
        unsigned lun_sel = (ctl >> 4) & 3;
        t.lun_id = lun_sel == 3 ? ABSENT_LUN : (lun_sel & 1);
        t.lun = scsi_target_get_lun(w->target, t.lun_id);
        t.dir = ctl & 3;
        if (!(t.dir & SCSI_DIR_WRITE))
                out_len = 0; /* the transport rejects data on a command without W */
        t.expected_len = expected_len(ctl, &t, out_len);
        if ((t.dir & SCSI_DIR_WRITE) && t.expected_len > WRITE_EDTL_MAX)
                t.expected_len = WRITE_EDTL_MAX;
        if (out_len > t.expected_len)
                out_len = t.expected_len;
        /* An exact-size heap copy: the sanitizer catches reads past the data-out. */
        uint8_t *buf = out_len ? malloc(out_len) : NULL;
        FUZZ_ASSERT(!out_len || buf, "out of memory");
        if (out_len)
                memcpy(buf, out, out_len);
        t.data_out = buf;
        t.data_out_len = out_len;
        scsi_task_execute(&t);
        if (fuzz_verbose())
                fprintf(stderr,
                        "cdb: %02x lun %llu dir %u edtl %u out %u -> status 0x%02x %s in %u\n",
                        t.cdb[0], (unsigned long long)t.lun_id, t.dir, t.expected_len, out_len,
                        t.status, scsi_reason_name(t.reason), t.data_in_len);
        check_task(&t);
        for (int i = 0; i < 2; i++)
                check_no_range_held(w->lun[i]);
        scsi_task_release(&t);
        FUZZ_ASSERT(t.data_in == NULL && t.data_in_len == 0, "release left data_in");
        scsi_lun_put(t.lun);
        free(buf);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        snprintf(shm_dir, sizeof(shm_dir), "/dev/shm/tandem-fuzz-cdb-XXXXXX");
        if (!mkdtemp(shm_dir)) {
                snprintf(shm_dir, sizeof(shm_dir), "/tmp/tandem-fuzz-cdb-XXXXXX");
                FUZZ_ASSERT(mkdtemp(shm_dir) != NULL, "no temporary directory");
        }
        return 0;
}

__attribute__((destructor)) static void remove_shm_dir(void)
{
        if (shm_dir[0])
                rmdir(shm_dir);
}

struct command {
        const uint8_t *cdb;
        uint8_t ctl;
        const uint8_t *out;
        uint32_t out_len;
};

static int split_commands(const uint8_t *data, size_t size, struct command *cmds)
{
        struct fuzz_in in = {data, size};
        int n = 0;
        while (n < MAX_COMMANDS && in.left >= 17) {
                struct command *c = &cmds[n++];
                c->cdb = in.p;
                c->ctl = in.p[16];
                in.p += 17;
                in.left -= 17;
                if (c->ctl & 0x80) {
                        uint8_t hi = 0, lo = 0;
                        fuzz_take_u8(&in, &hi);
                        fuzz_take_u8(&in, &lo);
                        c->out_len = (uint32_t)((hi << 8) | lo);
                        if (c->out_len > in.left)
                                c->out_len = (uint32_t)in.left;
                } else {
                        c->out_len = (uint32_t)in.left;
                }
                c->out = in.p;
                in.p += c->out_len;
                in.left -= c->out_len;
                if (!(c->ctl & 0x80))
                        break;
        }
        return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct command cmds[MAX_COMMANDS];
        int n = split_commands(data, size, cmds);
        if (n == 0)
                return 0;
        bool journal = false;
        for (int i = 0; i < n; i++)
                if (cmds[i].cdb[0] == 0x9c && ((cmds[i].ctl >> 4) & 3) == 1)
                        journal = true;
        struct world w;
        world_build(&w, journal);
        for (int i = 0; i < n; i++)
                run_command(&w, cmds[i].cdb, cmds[i].ctl, cmds[i].out, cmds[i].out_len);
        world_destroy(&w);
        return 0;
}
