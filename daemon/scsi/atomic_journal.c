/*
 * The redo journal behind multi-block WRITE ATOMIC: a file of JOURNAL_SLOTS slots, each a
 * header block followed by room for SCSI_MAX_ATOMIC_BYTES of data. An atomic write puts
 * its data in a free slot and makes it durable (scsi_journal_log), writes it in place and
 * flushes the medium, then erases the slot's header durably (scsi_journal_retire).
 *
 * On open, every slot whose header and data checksums are intact holds a write that may
 * have been torn in place by a crash: they are written again, oldest first, made durable,
 * and erased. A torn record fails its checksum and is ignored; that write had not begun
 * in place. A clean close erases the file; after a crash it waits for the next open.
 * An advisory lock keeps a second LUN object (or a second daemon) off a journal in use.
 */
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "scsi_internal.h"
#include "tandem/fsutil.h"
#include "tandem/log.h"

#define JOURNAL_SLOTS      4u
#define JOURNAL_HDR        4096u /* the data starts block aligned */
#define JOURNAL_SLOT_BYTES ((uint64_t)JOURNAL_HDR + SCSI_MAX_ATOMIC_BYTES)
#define JOURNAL_VERSION    1u
#define HDR_USED           48u

static const char journal_magic[8] = {'T', 'D', 'M', 'A', 'T', 'O', 'M', 'J'};

struct scsi_atomic_journal {
        int fd;
        char path[4096];
        uint32_t block_size;
        uint32_t
            key; /* checksum of the backing store's path: records of another store are not ours */
        pthread_mutex_t lock;
        pthread_cond_t freed;
        unsigned free_mask; /* bit i: slot i is free */
        uint64_t next_seq;
        bool damaged; /* a record could not be erased: keep the file for the next open */
};

struct journal_record {
        uint64_t seq, lba;
        uint32_t nblocks, block_size, data_crc, key;
        unsigned slot;
};

static uint32_t crc32c(const void *p, size_t len)
{
        return crc32_iscsi((unsigned char *)(uintptr_t)p, (int)len, 0xffffffffu);
}

static uint64_t slot_offset(unsigned slot)
{
        return slot * JOURNAL_SLOT_BYTES;
}

static void header_encode(uint8_t *h, const struct journal_record *r)
{
        memset(h, 0, HDR_USED);
        memcpy(h, journal_magic, sizeof(journal_magic));
        put_be32(h + 8, JOURNAL_VERSION);
        put_be32(h + 12, r->block_size);
        put_be64(h + 16, r->seq);
        put_be64(h + 24, r->lba);
        put_be32(h + 32, r->nblocks);
        put_be32(h + 36, r->data_crc);
        put_be32(h + 40, r->key);
        put_be32(h + 44, crc32c(h, 44));
}

static bool header_decode(const uint8_t *h, struct journal_record *r)
{
        if (memcmp(h, journal_magic, sizeof(journal_magic)) != 0 ||
            get_be32(h + 8) != JOURNAL_VERSION || get_be32(h + 44) != crc32c(h, 44))
                return false;
        r->block_size = get_be32(h + 12);
        r->seq = get_be64(h + 16);
        r->lba = get_be64(h + 24);
        r->nblocks = get_be32(h + 32);
        r->data_crc = get_be32(h + 36);
        r->key = get_be32(h + 40);
        return true;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
        uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = pread(fd, p, len, (off_t)off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ENODATA; /* beyond the end: no record there */
                p += n;
                off += (uint64_t)n;
                len -= (size_t)n;
        }
        return 0;
}

static int pwritev_full(int fd, struct iovec *iov, int iovcnt, uint64_t off)
{
        while (iovcnt > 0) {
                ssize_t n = pwritev(fd, iov, iovcnt, (off_t)off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                off += (uint64_t)n;
                while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
                        n -= (ssize_t)iov->iov_len;
                        iov++;
                        iovcnt--;
                }
                if (iovcnt > 0) {
                        iov->iov_base = (uint8_t *)iov->iov_base + n;
                        iov->iov_len -= (size_t)n;
                }
        }
        return 0;
}

static int sync_fd(int fd)
{
        return fdatasync(fd) < 0 ? -errno : 0;
}

/* Erases a slot's header: its record is no longer replayed. */
static int erase_header(struct scsi_atomic_journal *j, unsigned slot)
{
        static const uint8_t zero[HDR_USED];
        struct iovec iov = {.iov_base = (void *)zero, .iov_len = sizeof(zero)};
        return pwritev_full(j->fd, &iov, 1, slot_offset(slot));
}

/* A record to replay: intact, of this LUN's store and geometry, inside the medium. */
static bool record_usable(const struct scsi_atomic_journal *j, const struct scsi_lun *lun,
                          const struct journal_record *r)
{
        uint64_t capacity = atomic_load(&lun->num_blocks);
        bool ok = r->key == j->key && r->block_size == lun->block_size && r->nblocks > 0 &&
                  (uint64_t)r->nblocks * r->block_size <= SCSI_MAX_ATOMIC_BYTES &&
                  r->lba <= capacity && r->nblocks <= capacity - r->lba;
        if (!ok)
                log_warn("LUN %llu: %s slot %u holds a record of another LUN or geometry "
                         "(lba %llu, %u blocks of %u): not replayed",
                         (unsigned long long)lun->id, j->path, r->slot, (unsigned long long)r->lba,
                         r->nblocks, r->block_size);
        return ok;
}

/* Reads the records worth replaying, sorted oldest first. */
static int collect_records(struct scsi_atomic_journal *j, struct scsi_lun *lun, uint8_t *buf,
                           struct journal_record *recs, unsigned *count)
{
        unsigned n = 0;
        for (unsigned slot = 0; slot < JOURNAL_SLOTS; slot++) {
                struct journal_record r = {.slot = slot};
                int rc = pread_full(j->fd, buf, HDR_USED, slot_offset(slot));
                if (rc == -ENODATA)
                        break;
                if (rc < 0)
                        return rc;
                if (!header_decode(buf, &r) || !record_usable(j, lun, &r))
                        continue;
                uint32_t len = r.nblocks * r.block_size;
                rc = pread_full(j->fd, buf, len, slot_offset(slot) + JOURNAL_HDR);
                if (rc < 0 && rc != -ENODATA)
                        return rc;
                if (rc == -ENODATA || crc32c(buf, len) != r.data_crc)
                        continue; /* torn while logged: that write never began in place */
                recs[n++] = r;
        }
        for (unsigned a = 1; a < n; a++) /* insertion sort of at most JOURNAL_SLOTS */
                for (unsigned b = a; b > 0 && recs[b - 1].seq > recs[b].seq; b--) {
                        struct journal_record t = recs[b];
                        recs[b] = recs[b - 1];
                        recs[b - 1] = t;
                }
        *count = n;
        return 0;
}

/* Writes every intact record in place, makes it durable, then erases every header. */
static int journal_replay(struct scsi_atomic_journal *j, struct scsi_lun *lun, struct tdm_medium *m)
{
        uint8_t *buf = NULL;
        if (posix_memalign((void **)&buf, JOURNAL_HDR, SCSI_MAX_ATOMIC_BYTES))
                return -ENOMEM;
        struct journal_record recs[JOURNAL_SLOTS];
        unsigned n = 0;
        int rc = collect_records(j, lun, buf, recs, &n);
        for (unsigned i = 0; rc == 0 && i < n; i++) {
                uint32_t len = recs[i].nblocks * recs[i].block_size;
                rc = pread_full(j->fd, buf, len, slot_offset(recs[i].slot) + JOURNAL_HDR);
                if (rc == 0)
                        rc = tdm_medium_write(m, buf, len, recs[i].lba * lun->block_size, 0);
                if (rc == 0 && recs[i].seq >= j->next_seq)
                        j->next_seq = recs[i].seq + 1;
        }
        free(buf);
        if (rc == 0 && n > 0)
                rc = tdm_medium_flush(m);
        for (unsigned slot = 0; rc == 0 && slot < JOURNAL_SLOTS; slot++)
                rc = erase_header(j, slot);
        if (rc == 0)
                rc = sync_fd(j->fd);
        if (rc < 0) {
                log_err("LUN %llu: replaying the atomic write journal %s failed: %s",
                        (unsigned long long)lun->id, j->path, strerror(-rc));
                return -EIO; /* whatever the cause: the medium may still hold a torn write */
        }
        if (n > 0)
                log_notice("LUN %llu: %u interrupted atomic writes completed from %s",
                           (unsigned long long)lun->id, n, j->path);
        return rc;
}

/* Every slot exists before the first record: a record never extends the file. */
static int journal_preallocate(struct scsi_atomic_journal *j)
{
        struct stat st;
        if (fstat(j->fd, &st) < 0)
                return -errno;
        uint64_t want = JOURNAL_SLOTS * JOURNAL_SLOT_BYTES;
        if ((uint64_t)st.st_size >= want)
                return 0;
        int rc = -posix_fallocate(j->fd, 0, (off_t)want);
        if (rc == 0)
                rc = sync_fd(j->fd);
        if (rc == 0)
                rc = tdm_fsync_parent_dir(j->path);
        return rc;
}

static void journal_free(struct scsi_atomic_journal *j)
{
        if (j->fd >= 0)
                close(j->fd);
        pthread_mutex_destroy(&j->lock);
        pthread_cond_destroy(&j->freed);
        free(j);
}

int scsi_journal_open(struct scsi_lun *lun, const char *path, struct tdm_medium *replay_to,
                      struct scsi_atomic_journal **out)
{
        if (strlen(path) >= sizeof(((struct scsi_atomic_journal *)0)->path))
                return -ENAMETOOLONG;
        struct scsi_atomic_journal *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        snprintf(j->path, sizeof(j->path), "%s", path);
        j->block_size = lun->block_size;
        const char *name = scsi_lun_private(lun)->name;
        j->key = crc32c(name, strlen(name));
        j->free_mask = (1u << JOURNAL_SLOTS) - 1;
        pthread_mutex_init(&j->lock, NULL);
        pthread_cond_init(&j->freed, NULL);
        int rc = 0;
        j->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (j->fd < 0)
                rc = -errno;
        else if (flock(j->fd, LOCK_EX | LOCK_NB) < 0)
                rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
        if (rc == 0)
                rc = journal_replay(j, lun, replay_to);
        if (rc == 0)
                rc = journal_preallocate(j);
        if (rc < 0) {
                journal_free(j);
                return rc;
        }
        *out = j;
        return 0;
}

static int slot_take(struct scsi_atomic_journal *j, unsigned *slot, uint64_t *seq)
{
        pthread_mutex_lock(&j->lock);
        while (!j->damaged && j->free_mask == 0)
                pthread_cond_wait(&j->freed, &j->lock);
        int rc = j->damaged ? -EIO : 0;
        if (rc == 0) {
                *slot = (unsigned)__builtin_ctz(j->free_mask);
                j->free_mask &= ~(1u << *slot);
                *seq = j->next_seq++;
        }
        pthread_mutex_unlock(&j->lock);
        return rc;
}

static void slot_give_back(struct scsi_atomic_journal *j, unsigned slot)
{
        pthread_mutex_lock(&j->lock);
        j->free_mask |= 1u << slot;
        pthread_cond_signal(&j->freed);
        pthread_mutex_unlock(&j->lock);
}

/* A record that cannot be erased stays, and so does its slot: the next open replays it. */
static void mark_damaged(struct scsi_atomic_journal *j, int rc)
{
        log_err("atomic write journal %s: %s; atomic writes stop until the LUN is reopened",
                j->path, strerror(-rc));
        /*
         * A record left behind could be replayed over writes acknowledged later: the journal
         * goes away (the open fd keeps the lock) and the next open starts a fresh one.
         */
        if (unlink(j->path) < 0 && errno != ENOENT)
                log_err("atomic write journal %s: cannot remove it: %s", j->path, strerror(errno));
        pthread_mutex_lock(&j->lock);
        j->damaged = true;
        pthread_cond_broadcast(&j->freed);
        pthread_mutex_unlock(&j->lock);
}

int scsi_journal_log(struct scsi_atomic_journal *j, uint64_t lba, uint32_t nblocks,
                     const void *data, unsigned *slot)
{
        struct journal_record r = {
            .lba = lba, .nblocks = nblocks, .block_size = j->block_size, .key = j->key};
        uint32_t len = nblocks * j->block_size;
        if (len == 0 || len > SCSI_MAX_ATOMIC_BYTES)
                return -EINVAL;
        int rc = slot_take(j, slot, &r.seq);
        if (rc < 0)
                return rc;
        r.data_crc = crc32c(data, len);
        uint8_t header[HDR_USED];
        header_encode(header, &r);
        struct iovec iov[2] = {{.iov_base = header, .iov_len = sizeof(header)},
                               {.iov_base = (void *)(uintptr_t)data, .iov_len = len}};
        uint64_t off = slot_offset(*slot);
        rc = pwritev_full(j->fd, &iov[0], 1, off);
        if (rc == 0)
                rc = pwritev_full(j->fd, &iov[1], 1, off + JOURNAL_HDR);
        if (rc == 0)
                rc = sync_fd(j->fd);
        if (rc == 0)
                return 0;
        /* The command fails: its record must not be replayed later. */
        int erc = erase_header(j, *slot);
        if (erc == 0)
                erc = sync_fd(j->fd);
        if (erc < 0)
                mark_damaged(j, erc);
        else
                slot_give_back(j, *slot);
        return rc;
}

void scsi_journal_fail(struct scsi_atomic_journal *j, int rc)
{
        mark_damaged(j, rc);
}

int scsi_journal_retire(struct scsi_atomic_journal *j, unsigned slot)
{
        int rc = erase_header(j, slot);
        if (rc == 0)
                rc = sync_fd(j->fd);
        if (rc < 0) {
                mark_damaged(j, rc);
                return rc;
        }
        slot_give_back(j, slot);
        return 0;
}

void scsi_journal_close(struct scsi_atomic_journal *j)
{
        if (!j)
                return;
        /* Still locked by us: nobody opened it meanwhile, so the name is still ours. */
        if (!j->damaged && j->free_mask == (1u << JOURNAL_SLOTS) - 1)
                unlink(j->path);
        journal_free(j);
}
