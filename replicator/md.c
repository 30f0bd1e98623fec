/*
 * Persistent replication metadata: superblock, dirty bitmap and activity log in one file per
 * LUN (layout and invariant in md.h).
 *
 * Locking: `lock` guards the in-memory bitmap, the activity-log slots and the superblock copy;
 * it is never held across I/O. `io_lock` serializes every metadata write and the fdatasync that
 * makes it durable, so a page copied for writing can never be overtaken by an older copy of
 * itself. Order: io_lock before lock.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "tandem/byteorder.h"
#include "tandem/fsutil.h"
#include "md.h"

#define MD_BLOCK          4096u
#define MD_SUPER_OFF      0u    /* two copies: 0 and 4096 */
#define MD_AL_OFF         8192u /* two copies: 8192 and 12288 */
#define MD_BITMAP_OFF     16384u
#define MD_VERSION        1u
#define MD_SUPER_MAGIC    0x53444d54u /* "TMDS" little endian */
#define MD_AL_MAGIC       0x41444d54u /* "TMDA" */
#define MD_CRC_OFF        (MD_BLOCK - 4u)
#define MD_BITS_PER_PAGE  (MD_BLOCK * 8u)
#define MD_WORDS_PER_PAGE (MD_BLOCK / 8u)
#define MD_BITS_PER_EXT   (1u << (REPL_MD_AL_EXTENT_SHIFT - REPL_MD_BIT_SHIFT))

#define MD_FLAG_PRIMARY_ACTIVE 1u
#define MD_FLAG_CLEAN          2u

/* Superblock field offsets. */
enum {
        SB_MAGIC = 0,
        SB_VERSION = 4,
        SB_SEQ = 8,
        SB_CURRENT = 16,
        SB_BITMAP = 24,
        SB_HIST0 = 32,
        SB_HIST1 = 40,
        SB_DISK = 48,
        SB_PEER_DISK = 52,
        SB_ROLE = 56,
        SB_FLAGS = 60,
        SB_EPOCH = 64,
        SB_NODE = 72,
        SB_PEER_NODE = 76,
        SB_SIZE = 80,
        SB_CURSOR = 88,
        SB_BIT_SHIFT = 96,
        SB_EXT_SHIFT = 100,
};

/* Activity-log block field offsets; extents follow as u64s. */
enum { AL_MAGIC = 0, AL_VERSION = 4, AL_SEQ = 8, AL_COUNT = 16, AL_EXTENTS = 24 };

enum slot_state { SLOT_EMPTY = 0, SLOT_ACTIVE, SLOT_ADDING };

struct al_slot {
        uint64_t extent;
        uint64_t last_use;
        uint32_t refs; /* writes in flight */
        uint8_t state;
};

struct repl_md {
        int fd;
        pthread_mutex_t lock;
        pthread_mutex_t io_lock;
        pthread_cond_t al_cond;

        struct repl_md_super super;
        uint64_t super_seq; /* io_lock */
        uint64_t al_seq;    /* io_lock */

        uint64_t size_bytes; /* fixed at open */
        uint64_t nbits;
        uint64_t nbytes;
        size_t npages;
        uint64_t *words; /* npages * MD_WORDS_PER_PAGE (at least one page) */
        uint8_t *page_changed;
        uint64_t dirty;

        struct al_slot slots[REPL_MD_AL_SLOTS];
        uint64_t al_tick;
        unsigned al_waiters;
        bool al_busy;  /* one thread runs a log transaction */
        bool al_stale; /* the last log write failed: on-disk log unknown */

        atomic_uint_fast64_t io_count;

        /* Makes the data device durable before an extent leaves the log (NULL: none). */
        int (*data_flush)(void *arg);
        void *data_flush_arg;
};

/* ---- encoding ---- */

static uint32_t block_crc(const uint8_t *b)
{
        return crc32_iscsi((unsigned char *)b, (int)MD_CRC_OFF, 0xffffffffu);
}

static void seal_block(uint8_t *b)
{
        put_le32(b + MD_CRC_OFF, block_crc(b));
}

static bool block_crc_ok(const uint8_t *b)
{
        return get_le32(b + MD_CRC_OFF) == block_crc(b);
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
        if (!err || !errlen)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
}

static void encode_super(uint8_t *b, const struct repl_md_super *s, uint64_t seq, bool clean)
{
        memset(b, 0, MD_BLOCK);
        put_le32(b + SB_MAGIC, MD_SUPER_MAGIC);
        put_le32(b + SB_VERSION, MD_VERSION);
        put_le64(b + SB_SEQ, seq);
        put_le64(b + SB_CURRENT, s->gen.current);
        put_le64(b + SB_BITMAP, s->gen.bitmap);
        put_le64(b + SB_HIST0, s->gen.history[0]);
        put_le64(b + SB_HIST1, s->gen.history[1]);
        put_le32(b + SB_DISK, (uint32_t)s->disk);
        put_le32(b + SB_PEER_DISK, (uint32_t)s->peer_disk);
        put_le32(b + SB_ROLE, (uint32_t)s->role);
        put_le32(b + SB_FLAGS,
                 (s->primary_active ? MD_FLAG_PRIMARY_ACTIVE : 0) | (clean ? MD_FLAG_CLEAN : 0));
        put_le64(b + SB_EPOCH, s->promote_epoch);
        put_le32(b + SB_NODE, s->node_id);
        put_le32(b + SB_PEER_NODE, s->peer_node_id);
        put_le64(b + SB_SIZE, s->size_bytes);
        put_le64(b + SB_CURSOR, s->resync_cursor);
        put_le32(b + SB_BIT_SHIFT, REPL_MD_BIT_SHIFT);
        put_le32(b + SB_EXT_SHIFT, REPL_MD_AL_EXTENT_SHIFT);
        seal_block(b);
}

/* Why a superblock copy is unusable, or NULL when it is fine. */
static const char *check_super(const uint8_t *b)
{
        if (get_le32(b + SB_MAGIC) != MD_SUPER_MAGIC)
                return "bad magic";
        if (!block_crc_ok(b))
                return "bad checksum";
        if (get_le32(b + SB_VERSION) != MD_VERSION)
                return "unsupported version";
        if (get_le32(b + SB_BIT_SHIFT) != REPL_MD_BIT_SHIFT ||
            get_le32(b + SB_EXT_SHIFT) != REPL_MD_AL_EXTENT_SHIFT)
                return "unsupported bitmap granularity";
        if (get_le32(b + SB_DISK) > REPL_DISK_UNKNOWN ||
            get_le32(b + SB_PEER_DISK) > REPL_DISK_UNKNOWN ||
            get_le32(b + SB_ROLE) > REPL_ROLE_PRIMARY)
                return "invalid state value";
        return NULL;
}

static void decode_super(const uint8_t *b, struct repl_md_super *s, bool *clean)
{
        uint32_t flags = get_le32(b + SB_FLAGS);
        memset(s, 0, sizeof(*s));
        s->gen.current = get_le64(b + SB_CURRENT);
        s->gen.bitmap = get_le64(b + SB_BITMAP);
        s->gen.history[0] = get_le64(b + SB_HIST0);
        s->gen.history[1] = get_le64(b + SB_HIST1);
        s->disk = (enum repl_disk_state)get_le32(b + SB_DISK);
        s->peer_disk = (enum repl_disk_state)get_le32(b + SB_PEER_DISK);
        s->role = (enum repl_role)get_le32(b + SB_ROLE);
        s->primary_active = flags & MD_FLAG_PRIMARY_ACTIVE;
        s->promote_epoch = get_le64(b + SB_EPOCH);
        s->node_id = get_le32(b + SB_NODE);
        s->peer_node_id = get_le32(b + SB_PEER_NODE);
        s->size_bytes = get_le64(b + SB_SIZE);
        s->resync_cursor = get_le64(b + SB_CURSOR);
        *clean = flags & MD_FLAG_CLEAN;
}

static bool check_al(const uint8_t *b)
{
        return get_le32(b + AL_MAGIC) == MD_AL_MAGIC && block_crc_ok(b) &&
               get_le32(b + AL_VERSION) == MD_VERSION && get_le32(b + AL_COUNT) <= REPL_MD_AL_SLOTS;
}

/* ---- raw I/O (callers hold io_lock once the md is shared) ---- */

static int write_block(struct repl_md *md, uint64_t off, const uint8_t *b)
{
        ssize_t n = pwrite(md->fd, b, MD_BLOCK, (off_t)off);
        if (n < 0)
                return -errno;
        if (n != MD_BLOCK)
                return -EIO;
        atomic_fetch_add(&md->io_count, 1);
        return 0;
}

static int sync_file(struct repl_md *md)
{
        return fdatasync(md->fd) < 0 ? -errno : 0;
}

/* Reads one block; a short read (truncated file) leaves zeroes, which no check accepts. */
static int read_block(int fd, uint64_t off, uint8_t *b)
{
        memset(b, 0, MD_BLOCK);
        ssize_t n = pread(fd, b, MD_BLOCK, (off_t)off);
        return n < 0 ? -errno : 0;
}

/* Writes the next superblock copy and makes it durable. */
static int write_super(struct repl_md *md, const struct repl_md_super *s, bool clean)
{
        uint8_t b[MD_BLOCK];
        uint64_t seq = md->super_seq + 1;
        encode_super(b, s, seq, clean);
        int rc = write_block(md, MD_SUPER_OFF + (seq % 2) * MD_BLOCK, b);
        if (rc == 0)
                rc = sync_file(md);
        if (rc == 0)
                md->super_seq = seq;
        return rc;
}

/* Writes the next activity-log copy holding `extents` and makes it durable. */
static int write_al(struct repl_md *md, const uint64_t *extents, uint32_t count)
{
        uint8_t b[MD_BLOCK];
        uint64_t seq = md->al_seq + 1;
        memset(b, 0, sizeof(b));
        put_le32(b + AL_MAGIC, MD_AL_MAGIC);
        put_le32(b + AL_VERSION, MD_VERSION);
        put_le64(b + AL_SEQ, seq);
        put_le32(b + AL_COUNT, count);
        for (uint32_t i = 0; i < count; i++)
                put_le64(b + AL_EXTENTS + 8 * i, extents[i]);
        seal_block(b);
        int rc = write_block(md, MD_AL_OFF + (seq % 2) * MD_BLOCK, b);
        if (rc == 0)
                rc = sync_file(md);
        if (rc == 0)
                md->al_seq = seq;
        return rc;
}

/* ---- bitmap in memory (callers hold lock) ---- */

static void mark_page(struct repl_md *md, uint64_t word)
{
        md->page_changed[word / MD_WORDS_PER_PAGE] = 1;
}

static uint64_t word_mask(unsigned shift, uint64_t n)
{
        return (n >= 64 ? ~0ull : ((1ull << n) - 1)) << shift;
}

/* Sets bits [b0, b1). */
static void set_bits(struct repl_md *md, uint64_t b0, uint64_t b1)
{
        while (b0 < b1) {
                uint64_t w = b0 / 64, n = 64 - b0 % 64;
                if (n > b1 - b0)
                        n = b1 - b0;
                uint64_t added = word_mask(b0 % 64, n) & ~md->words[w];
                if (added) {
                        md->words[w] |= added;
                        md->dirty += (uint64_t)__builtin_popcountll(added);
                        mark_page(md, w);
                }
                b0 += n;
        }
}

/* Clears bits [b0, b1). */
static void clear_bits(struct repl_md *md, uint64_t b0, uint64_t b1)
{
        while (b0 < b1) {
                uint64_t w = b0 / 64, n = 64 - b0 % 64;
                if (n > b1 - b0)
                        n = b1 - b0;
                uint64_t removed = word_mask(b0 % 64, n) & md->words[w];
                if (removed) {
                        md->words[w] &= ~removed;
                        md->dirty -= (uint64_t)__builtin_popcountll(removed);
                        mark_page(md, w);
                }
                b0 += n;
        }
}

static void set_extent_bits(struct repl_md *md, uint64_t extent)
{
        if (extent >= (md->nbits + MD_BITS_PER_EXT - 1) / MD_BITS_PER_EXT)
                return; /* beyond the LUN: nothing to mark */
        uint64_t b0 = extent * MD_BITS_PER_EXT, b1 = b0 + MD_BITS_PER_EXT;
        set_bits(md, b0, b1 < md->nbits ? b1 : md->nbits);
}

static void encode_page(const struct repl_md *md, size_t page, uint8_t *b)
{
        const uint64_t *w = md->words + page * MD_WORDS_PER_PAGE;
        for (unsigned i = 0; i < MD_WORDS_PER_PAGE; i++)
                put_le64(b + 8 * i, w[i]);
}

/* ---- bitmap persistence (callers hold io_lock) ---- */

/*
 * Writes page p if it changed since it was last written. *wrote tells whether a write
 * happened (the caller owes an fdatasync then).
 */
static int flush_page(struct repl_md *md, size_t p, bool *wrote)
{
        uint8_t b[MD_BLOCK];
        pthread_mutex_lock(&md->lock);
        bool changed = md->page_changed[p];
        if (changed) {
                encode_page(md, p, b);
                md->page_changed[p] = 0;
        }
        pthread_mutex_unlock(&md->lock);
        if (!changed)
                return 0;
        int rc = write_block(md, MD_BITMAP_OFF + (uint64_t)p * MD_BLOCK, b);
        if (rc < 0) {
                pthread_mutex_lock(&md->lock);
                md->page_changed[p] = 1;
                pthread_mutex_unlock(&md->lock);
                return rc;
        }
        *wrote = true;
        return 0;
}

/* After a failed fdatasync nothing written since is known durable: write it all again. */
static void mark_all_pages(struct repl_md *md)
{
        pthread_mutex_lock(&md->lock);
        memset(md->page_changed, 1, md->npages);
        pthread_mutex_unlock(&md->lock);
}

static int flush_all_pages(struct repl_md *md)
{
        bool wrote = false;
        for (size_t p = 0; p < md->npages; p++) {
                int rc = flush_page(md, p, &wrote);
                if (rc < 0)
                        return rc;
        }
        if (wrote) {
                int rc = sync_file(md);
                if (rc < 0) {
                        mark_all_pages(md);
                        return rc;
                }
        }
        return 0;
}

/* ---- open / close ---- */

static void md_free(struct repl_md *md)
{
        if (!md)
                return;
        if (md->fd >= 0)
                close(md->fd);
        pthread_mutex_destroy(&md->lock);
        pthread_mutex_destroy(&md->io_lock);
        pthread_cond_destroy(&md->al_cond);
        free(md->words);
        free(md->page_changed);
        free(md);
}

/* The bitmap's geometry for a LUN of size_bytes (the arrays are the caller's). */
static void set_geometry(struct repl_md *md, uint64_t size_bytes)
{
        md->size_bytes = size_bytes;
        md->nbits = (size_bytes >> REPL_MD_BIT_SHIFT) +
                    ((size_bytes & ((1u << REPL_MD_BIT_SHIFT) - 1)) ? 1 : 0);
        md->nbytes = (md->nbits + 7) / 8;
        md->npages = (size_t)((md->nbytes + MD_BLOCK - 1) / MD_BLOCK);
}

static struct repl_md *md_alloc(uint64_t size_bytes)
{
        struct repl_md *md = calloc(1, sizeof(*md));
        if (!md)
                return NULL;
        md->fd = -1;
        pthread_mutex_init(&md->lock, NULL);
        pthread_mutex_init(&md->io_lock, NULL);
        pthread_cond_init(&md->al_cond, NULL);
        set_geometry(md, size_bytes);
        size_t alloc_pages = md->npages ? md->npages : 1;
        md->words = calloc(alloc_pages * MD_WORDS_PER_PAGE, sizeof(uint64_t));
        md->page_changed = calloc(alloc_pages, 1);
        if (!md->words || !md->page_changed) {
                md_free(md);
                return NULL;
        }
        return md;
}

static uint64_t md_file_len(const struct repl_md *md)
{
        return MD_BITMAP_OFF + (uint64_t)md->npages * MD_BLOCK;
}

/* Initializes an empty file: both log copies empty, both superblock copies, clean. */
static int md_format(struct repl_md *md, const char *path, uint64_t size_bytes, uint32_t node_id,
                     uint32_t peer_node_id, char *err, size_t errlen)
{
        struct repl_md_super s = {
            .gen = {.current = REPL_GEN_JUST_CREATED},
            .disk = REPL_DISK_INCONSISTENT,
            .peer_disk = REPL_DISK_UNKNOWN,
            .role = REPL_ROLE_SECONDARY,
            .node_id = node_id,
            .peer_node_id = peer_node_id,
            .size_bytes = size_bytes,
        };
        int rc = ftruncate(md->fd, (off_t)md_file_len(md)) < 0 ? -errno : 0;
        for (int i = 0; i < 2 && rc == 0; i++)
                rc = write_al(md, NULL, 0);
        for (int i = 0; i < 2 && rc == 0; i++)
                rc = write_super(md, &s, true);
        if (rc == 0)
                rc = tdm_fsync_parent_dir(path);
        if (rc < 0)
                set_err(err, errlen, "%s: cannot initialize metadata: %s", path, strerror(-rc));
        return rc;
}

/* Loads the newer valid superblock copy. */
static int load_super(struct repl_md *md, const char *path, bool *clean, char *err, size_t errlen)
{
        uint8_t b[2][MD_BLOCK];
        const char *why[2];
        int best = -1;
        for (int i = 0; i < 2; i++) {
                int rc = read_block(md->fd, MD_SUPER_OFF + (uint64_t)i * MD_BLOCK, b[i]);
                if (rc < 0) {
                        set_err(err, errlen, "%s: %s", path, strerror(-rc));
                        return rc;
                }
                why[i] = check_super(b[i]);
                if (!why[i] && (best < 0 || get_le64(b[i] + SB_SEQ) > get_le64(b[best] + SB_SEQ)))
                        best = i;
        }
        if (best < 0) {
                set_err(err, errlen, "%s: no valid metadata superblock (copy 0: %s, copy 1: %s)",
                        path, why[0], why[1]);
                return -EINVAL;
        }
        decode_super(b[best], &md->super, clean);
        md->super_seq = get_le64(b[best] + SB_SEQ);
        return 0;
}

static int check_identity(const struct repl_md *md, const char *path, uint64_t size_bytes,
                          uint32_t node_id, uint32_t peer_node_id, char *err, size_t errlen)
{
        const struct repl_md_super *s = &md->super;
        if (s->node_id != node_id) {
                set_err(err, errlen, "%s: metadata belongs to node id %u, this is node id %u", path,
                        s->node_id, node_id);
                return -EINVAL;
        }
        if (s->peer_node_id != peer_node_id) {
                set_err(err, errlen, "%s: metadata is for peer node id %u, configured peer is %u",
                        path, s->peer_node_id, peer_node_id);
                return -EINVAL;
        }
        if (s->size_bytes != size_bytes) {
                set_err(err, errlen,
                        "%s: size changed: metadata covers %llu bytes, the LUN has %llu", path,
                        (unsigned long long)s->size_bytes, (unsigned long long)size_bytes);
                return -EINVAL;
        }
        return 0;
}

static int load_bitmap(struct repl_md *md, const char *path, char *err, size_t errlen)
{
        uint8_t b[MD_BLOCK];
        for (size_t p = 0; p < md->npages; p++) {
                int rc = read_block(md->fd, MD_BITMAP_OFF + (uint64_t)p * MD_BLOCK, b);
                if (rc < 0) {
                        set_err(err, errlen, "%s: reading bitmap: %s", path, strerror(-rc));
                        return rc;
                }
                uint64_t *w = md->words + p * MD_WORDS_PER_PAGE;
                for (unsigned i = 0; i < MD_WORDS_PER_PAGE; i++)
                        w[i] = get_le64(b + 8 * i);
        }
        /* Bits past the end must not exist, whatever the file holds there. */
        uint64_t nwords = md->npages * (uint64_t)MD_WORDS_PER_PAGE;
        if (md->nbits % 64)
                md->words[md->nbits / 64] &= word_mask(0, md->nbits % 64);
        for (uint64_t w = (md->nbits + 63) / 64; w < nwords; w++)
                md->words[w] = 0;
        md->dirty = 0;
        for (uint64_t w = 0; w < nwords; w++)
                md->dirty += (uint64_t)__builtin_popcountll(md->words[w]);
        return 0;
}

/* Sets every bit of every extent in the on-disk log and makes the bitmap durable. */
static int recover_al(struct repl_md *md, const char *path, char *err, size_t errlen)
{
        uint8_t b[2][MD_BLOCK];
        int best = -1;
        for (int i = 0; i < 2; i++) {
                int rc = read_block(md->fd, MD_AL_OFF + (uint64_t)i * MD_BLOCK, b[i]);
                if (rc < 0) {
                        set_err(err, errlen, "%s: reading activity log: %s", path, strerror(-rc));
                        return rc;
                }
                if (check_al(b[i]) &&
                    (best < 0 || get_le64(b[i] + AL_SEQ) > get_le64(b[best] + AL_SEQ)))
                        best = i;
        }
        if (best < 0) {
                set_err(err, errlen, "%s: activity log unreadable after an unclean shutdown", path);
                return -EINVAL;
        }
        uint32_t count = get_le32(b[best] + AL_COUNT);
        for (uint32_t i = 0; i < count; i++)
                set_extent_bits(md, get_le64(b[best] + AL_EXTENTS + 8 * i));
        int rc = flush_all_pages(md);
        if (rc < 0)
                set_err(err, errlen, "%s: writing recovered bitmap: %s", path, strerror(-rc));
        return rc;
}

/* Continues the log's sequence from whichever copy is newer (garbage counts as 0). */
static void load_al_seq(struct repl_md *md)
{
        uint8_t b[MD_BLOCK];
        md->al_seq = 0;
        for (int i = 0; i < 2; i++)
                if (read_block(md->fd, MD_AL_OFF + (uint64_t)i * MD_BLOCK, b) == 0 && check_al(b) &&
                    get_le64(b + AL_SEQ) > md->al_seq)
                        md->al_seq = get_le64(b + AL_SEQ);
}

int repl_md_open(const char *path, uint64_t size_bytes, uint32_t node_id, uint32_t peer_node_id,
                 bool create, struct repl_md **out, bool *crashed_primary, char *err, size_t errlen)
{
        *out = NULL;
        if (crashed_primary)
                *crashed_primary = false;
        struct repl_md *md = md_alloc(size_bytes);
        if (!md) {
                set_err(err, errlen, "%s: out of memory for the bitmap", path);
                return -ENOMEM;
        }
        int rc = 0;
        md->fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
        if (md->fd < 0) {
                rc = -errno;
                set_err(err, errlen, "%s: %s", path, strerror(-rc));
                goto fail;
        }
        struct stat st;
        if (fstat(md->fd, &st) < 0) {
                rc = -errno;
                set_err(err, errlen, "%s: %s", path, strerror(-rc));
                goto fail;
        }
        if (st.st_size == 0 && create) {
                rc = md_format(md, path, size_bytes, node_id, peer_node_id, err, errlen);
                if (rc < 0)
                        goto fail;
        }

        bool clean = false;
        rc = load_super(md, path, &clean, err, errlen);
        /*
         * A LUN larger than the metadata covers grew while this node was down or before the
         * metadata caught up (a crash inside an online resize): the metadata is read at its
         * own size, then grown with the new range out of sync (its contents may differ).
         */
        uint64_t grow_to = 0;
        if (rc == 0 && md->super.size_bytes && md->super.size_bytes < size_bytes) {
                grow_to = size_bytes;
                set_geometry(md, md->super.size_bytes);
        }
        if (rc == 0)
                rc = check_identity(md, path, md->size_bytes, node_id, peer_node_id, err, errlen);
        if (rc < 0)
                goto fail;
        if (fstat(md->fd, &st) < 0 || (uint64_t)st.st_size < md_file_len(md)) {
                rc = -EINVAL;
                set_err(err, errlen, "%s: metadata file truncated (%lld bytes, need %llu)", path,
                        (long long)st.st_size, (unsigned long long)md_file_len(md));
                goto fail;
        }
        rc = load_bitmap(md, path, err, errlen);
        if (rc == 0 && !clean)
                rc = recover_al(md, path, err, errlen);
        if (rc < 0)
                goto fail;
        load_al_seq(md);

        /* From here on the file is "open": an empty log, and not clean until repl_md_close. */
        rc = write_al(md, NULL, 0);
        if (rc == 0)
                rc = write_super(md, &md->super, false);
        if (rc < 0) {
                set_err(err, errlen, "%s: writing metadata: %s", path, strerror(-rc));
                goto fail;
        }
        if (grow_to && (rc = repl_md_grow(md, grow_to, true)) < 0) {
                set_err(err, errlen, "%s: growing the metadata to %llu bytes: %s", path,
                        (unsigned long long)grow_to, strerror(-rc));
                goto fail;
        }
        if (crashed_primary)
                *crashed_primary = !clean && md->super.primary_active;
        *out = md;
        return 0;
fail:
        md_free(md);
        return rc;
}

int repl_md_close(struct repl_md *md)
{
        if (!md)
                return 0;
        pthread_mutex_lock(&md->io_lock);
        int rc = flush_all_pages(md);
        if (rc == 0)
                rc = write_al(md, NULL, 0);
        if (rc == 0) {
                struct repl_md_super s;
                pthread_mutex_lock(&md->lock);
                s = md->super;
                pthread_mutex_unlock(&md->lock);
                rc = write_super(md, &s, true);
        }
        pthread_mutex_unlock(&md->io_lock);
        md_free(md);
        return rc;
}

void repl_md_abandon(struct repl_md *md)
{
        md_free(md);
}

/* ---- superblock ---- */

void repl_md_get_super(struct repl_md *md, struct repl_md_super *out)
{
        pthread_mutex_lock(&md->lock);
        *out = md->super;
        pthread_mutex_unlock(&md->lock);
}

int repl_md_put_super(struct repl_md *md, const struct repl_md_super *s)
{
        pthread_mutex_lock(&md->io_lock);
        pthread_mutex_lock(&md->lock);
        struct repl_md_super next = *s;
        next.node_id = md->super.node_id;
        next.peer_node_id = md->super.peer_node_id;
        next.size_bytes = md->super.size_bytes;
        md->super = next;
        pthread_mutex_unlock(&md->lock);
        int rc = write_super(md, &next, false);
        pthread_mutex_unlock(&md->io_lock);
        return rc;
}

int repl_md_grow(struct repl_md *md, uint64_t size_bytes, bool dirty)
{
        if (size_bytes < md->size_bytes)
                return -EINVAL;
        if (size_bytes == md->size_bytes)
                return 0;
        uint64_t old_bits = md->nbits;
        uint64_t nbits = (size_bytes >> REPL_MD_BIT_SHIFT) +
                         ((size_bytes & ((1u << REPL_MD_BIT_SHIFT) - 1)) ? 1 : 0);
        uint64_t nbytes = (nbits + 7) / 8;
        size_t npages = (size_t)((nbytes + MD_BLOCK - 1) / MD_BLOCK);
        size_t old_alloc = md->npages ? md->npages : 1, alloc = npages ? npages : 1;
        pthread_mutex_lock(&md->io_lock);
        pthread_mutex_lock(&md->lock);
        int rc = 0;
        if (alloc > old_alloc) {
                uint64_t *words = realloc(md->words, alloc * MD_WORDS_PER_PAGE * sizeof(uint64_t));
                if (words)
                        md->words = words;
                uint8_t *changed = words ? realloc(md->page_changed, alloc) : NULL;
                if (changed)
                        md->page_changed = changed;
                if (!words || !changed) {
                        rc = -ENOMEM;
                } else {
                        memset(md->words + old_alloc * MD_WORDS_PER_PAGE, 0,
                               (alloc - old_alloc) * MD_WORDS_PER_PAGE * sizeof(uint64_t));
                        memset(md->page_changed + old_alloc, 1, alloc - old_alloc);
                }
        }
        if (rc == 0) {
                md->nbits = nbits;
                md->nbytes = nbytes;
                md->npages = npages;
                md->size_bytes = size_bytes;
                md->super.size_bytes = size_bytes;
                /* The page that held the old end gets the new bits too. */
                mark_page(md, old_bits / 64);
                if (dirty)
                        set_bits(md, old_bits, nbits);
        }
        struct repl_md_super s = md->super;
        pthread_mutex_unlock(&md->lock);
        if (rc == 0 && ftruncate(md->fd, (off_t)md_file_len(md)) < 0)
                rc = -errno;
        if (rc == 0)
                rc = flush_all_pages(md);
        if (rc == 0)
                rc = write_super(md, &s, false);
        pthread_mutex_unlock(&md->io_lock);
        return rc;
}

/* ---- bitmap API ---- */

uint64_t repl_md_bits(struct repl_md *md)
{
        return md->nbits;
}

void repl_md_set_dirty(struct repl_md *md, uint64_t off, uint64_t len)
{
        if (len == 0 || off >= md->size_bytes)
                return;
        uint64_t b0 = off >> REPL_MD_BIT_SHIFT;
        uint64_t last = len > UINT64_MAX - off ? UINT64_MAX : off + len - 1;
        uint64_t b1 = (last >> REPL_MD_BIT_SHIFT) + 1;
        if (b1 > md->nbits)
                b1 = md->nbits;
        pthread_mutex_lock(&md->lock);
        set_bits(md, b0, b1);
        pthread_mutex_unlock(&md->lock);
}

void repl_md_clear_dirty(struct repl_md *md, uint64_t off, uint64_t len)
{
        const uint64_t chunk = 1ull << REPL_MD_BIT_SHIFT;
        uint64_t size = md->size_bytes;
        if (len == 0 || off >= size)
                return;
        uint64_t end = len > size - off ? size : off + len;
        uint64_t b0 = off / chunk + (off % chunk ? 1 : 0);
        uint64_t b1 = end == size ? md->nbits : end / chunk;
        if (b0 >= b1)
                return;
        pthread_mutex_lock(&md->lock);
        clear_bits(md, b0, b1);
        pthread_mutex_unlock(&md->lock);
}

void repl_md_set_all(struct repl_md *md)
{
        pthread_mutex_lock(&md->lock);
        set_bits(md, 0, md->nbits);
        pthread_mutex_unlock(&md->lock);
}

uint64_t repl_md_dirty_bits(struct repl_md *md)
{
        pthread_mutex_lock(&md->lock);
        uint64_t n = md->dirty;
        pthread_mutex_unlock(&md->lock);
        return n;
}

bool repl_md_test_bit(struct repl_md *md, uint64_t bit)
{
        if (bit >= md->nbits)
                return false;
        pthread_mutex_lock(&md->lock);
        bool set = (md->words[bit / 64] >> (bit % 64)) & 1;
        pthread_mutex_unlock(&md->lock);
        return set;
}

bool repl_md_next_dirty(struct repl_md *md, uint64_t from, uint64_t *bit)
{
        if (from >= md->nbits)
                return false;
        uint64_t nwords = (md->nbits + 63) / 64;
        bool found = false;
        pthread_mutex_lock(&md->lock);
        uint64_t w = from / 64;
        uint64_t word = md->words[w] & (~0ull << (from % 64));
        for (;;) {
                if (word) {
                        *bit = w * 64 + (uint64_t)__builtin_ctzll(word);
                        found = true;
                        break;
                }
                if (++w >= nwords)
                        break;
                word = md->words[w];
        }
        pthread_mutex_unlock(&md->lock);
        return found;
}

size_t repl_md_bitmap_bytes(struct repl_md *md)
{
        return (size_t)md->nbytes;
}

static bool byte_range_ok(const struct repl_md *md, uint64_t first, size_t n)
{
        return first <= md->nbytes && n <= md->nbytes - first;
}

int repl_md_bitmap_read(struct repl_md *md, uint64_t first, void *out, size_t n)
{
        if (!byte_range_ok(md, first, n))
                return -EINVAL;
        uint8_t *o = out;
        pthread_mutex_lock(&md->lock);
        for (size_t i = 0; i < n; i++) {
                uint64_t idx = first + i;
                o[i] = (uint8_t)(md->words[idx / 8] >> (8 * (idx % 8)));
        }
        pthread_mutex_unlock(&md->lock);
        return 0;
}

int repl_md_bitmap_merge(struct repl_md *md, uint64_t first, const void *in, size_t n)
{
        if (!byte_range_ok(md, first, n))
                return -EINVAL;
        const uint8_t *src = in;
        pthread_mutex_lock(&md->lock);
        for (size_t i = 0; i < n; i++) {
                uint64_t idx = first + i;
                uint64_t v = src[i];
                if (idx == md->nbytes - 1 && md->nbits % 8)
                        v &= (1u << (md->nbits % 8)) - 1;
                uint64_t added = (v << (8 * (idx % 8))) & ~md->words[idx / 8];
                if (added) {
                        md->words[idx / 8] |= added;
                        md->dirty += (uint64_t)__builtin_popcountll(added);
                        mark_page(md, idx / 8);
                }
        }
        pthread_mutex_unlock(&md->lock);
        return 0;
}

int repl_md_flush_bitmap(struct repl_md *md)
{
        pthread_mutex_lock(&md->io_lock);
        int rc = flush_all_pages(md);
        pthread_mutex_unlock(&md->io_lock);
        return rc;
}

/* ---- activity log ---- */

static struct al_slot *find_active(struct repl_md *md, uint64_t extent)
{
        for (unsigned i = 0; i < REPL_MD_AL_SLOTS; i++)
                if (md->slots[i].state == SLOT_ACTIVE && md->slots[i].extent == extent)
                        return &md->slots[i];
        return NULL;
}

static bool extent_in_slots(struct repl_md *md, uint64_t extent)
{
        for (unsigned i = 0; i < REPL_MD_AL_SLOTS; i++)
                if (md->slots[i].state != SLOT_EMPTY && md->slots[i].extent == extent)
                        return true;
        return false;
}

static bool all_active(struct repl_md *md, uint64_t e0, uint64_t e1)
{
        for (uint64_t e = e0; e <= e1; e++)
                if (!find_active(md, e))
                        return false;
        return true;
}

static void pin_range(struct repl_md *md, uint64_t e0, uint64_t e1)
{
        for (uint64_t e = e0; e <= e1; e++) {
                struct al_slot *s = find_active(md, e);
                s->refs++;
                s->last_use = ++md->al_tick;
        }
}

/* The idle slot to reuse: an empty one, else the least recently used idle extent outside
 * [e0, e1]; -1 when every slot is busy or taken. */
static int pick_victim(struct repl_md *md, uint64_t e0, uint64_t e1, const bool *taken)
{
        int best = -1;
        for (int i = 0; i < REPL_MD_AL_SLOTS; i++) {
                const struct al_slot *s = &md->slots[i];
                if (taken[i])
                        continue;
                if (s->state == SLOT_EMPTY)
                        return i;
                if (s->state != SLOT_ACTIVE || s->refs || (s->extent >= e0 && s->extent <= e1))
                        continue;
                if (best < 0 || s->last_use < md->slots[best].last_use)
                        best = i;
        }
        return best;
}

struct al_change {
        int slot;
        struct al_slot old;
};

/*
 * Plans the log transaction for [e0, e1]: every missing extent gets a slot (its old idle
 * extent is the victim) in state ADDING. False when not enough slots are idle (nothing
 * changed then).
 */
static bool plan_al(struct repl_md *md, uint64_t e0, uint64_t e1, struct al_change *changes,
                    unsigned *nchanges)
{
        bool taken[REPL_MD_AL_SLOTS] = {false};
        unsigned n = 0;
        for (uint64_t e = e0; e <= e1; e++) {
                if (extent_in_slots(md, e))
                        continue;
                int v = pick_victim(md, e0, e1, taken);
                if (v < 0)
                        return false;
                taken[v] = true;
                changes[n++].slot = v;
        }
        n = 0;
        for (uint64_t e = e0; e <= e1; e++) {
                if (extent_in_slots(md, e))
                        continue;
                struct al_slot *s = &md->slots[changes[n].slot];
                changes[n++].old = *s;
                *s = (struct al_slot){.extent = e, .state = SLOT_ADDING};
        }
        *nchanges = n;
        return true;
}

/* Writes the victims' bitmap pages and then the new log, both durably (io_lock held). */
static int commit_al(struct repl_md *md, const struct al_change *changes, unsigned n)
{
        /* Writes to an evicted extent may sit in a cache: once it leaves the log only the
         * bitmap speaks for it, and the bitmap is clean while connected. */
        bool evicts = false;
        for (unsigned i = 0; i < n; i++)
                evicts |= changes[i].old.state == SLOT_ACTIVE;
        if (evicts && md->data_flush) {
                int rc = md->data_flush(md->data_flush_arg);
                if (rc < 0)
                        return rc;
        }
        bool wrote = false;
        for (unsigned i = 0; i < n; i++) {
                if (changes[i].old.state != SLOT_ACTIVE)
                        continue;
                uint64_t page = changes[i].old.extent * MD_BITS_PER_EXT / MD_BITS_PER_PAGE;
                if (page >= md->npages)
                        continue;
                int rc = flush_page(md, (size_t)page, &wrote);
                if (rc < 0)
                        return rc;
        }
        if (wrote) {
                int rc = sync_file(md);
                if (rc < 0) {
                        mark_all_pages(md);
                        return rc;
                }
        }
        uint64_t extents[REPL_MD_AL_SLOTS];
        uint32_t count = 0;
        pthread_mutex_lock(&md->lock);
        for (unsigned i = 0; i < REPL_MD_AL_SLOTS; i++)
                if (md->slots[i].state != SLOT_EMPTY)
                        extents[count++] = md->slots[i].extent;
        pthread_mutex_unlock(&md->lock);
        return write_al(md, extents, count);
}

/* Ends the transaction (lock held): the new extents go live, or the old ones come back. */
static void finish_al(struct repl_md *md, const struct al_change *changes, unsigned n, int rc)
{
        for (unsigned i = 0; i < n; i++) {
                struct al_slot *s = &md->slots[changes[i].slot];
                if (rc == 0)
                        s->state = SLOT_ACTIVE;
                else
                        *s = changes[i].old; /* its page may be unwritten: keep it logged */
        }
        md->al_stale = rc != 0;
        md->al_busy = false;
        pthread_cond_broadcast(&md->al_cond);
}

int repl_md_al_begin(struct repl_md *md, uint64_t off, uint64_t len)
{
        if (len == 0)
                return 0;
        if (off + (len - 1) < off)
                return -EINVAL;
        uint64_t e0 = off >> REPL_MD_AL_EXTENT_SHIFT;
        uint64_t e1 = (off + (len - 1)) >> REPL_MD_AL_EXTENT_SHIFT;
        if (e1 - e0 >= REPL_MD_AL_SLOTS)
                return -EINVAL;

        struct al_change changes[REPL_MD_AL_SLOTS];
        unsigned n = 0;
        pthread_mutex_lock(&md->lock);
        for (;;) {
                if (!md->al_stale && all_active(md, e0, e1)) {
                        pin_range(md, e0, e1); /* the hot path: no I/O */
                        pthread_mutex_unlock(&md->lock);
                        return 0;
                }
                if (!md->al_busy && plan_al(md, e0, e1, changes, &n))
                        break;
                md->al_waiters++;
                pthread_cond_wait(&md->al_cond, &md->lock);
                md->al_waiters--;
        }
        md->al_busy = true;
        pthread_mutex_unlock(&md->lock);

        pthread_mutex_lock(&md->io_lock);
        int rc = commit_al(md, changes, n);
        pthread_mutex_unlock(&md->io_lock);

        pthread_mutex_lock(&md->lock);
        finish_al(md, changes, n, rc);
        if (rc == 0)
                pin_range(md, e0, e1);
        pthread_mutex_unlock(&md->lock);
        return rc;
}

int repl_md_al_try_begin(struct repl_md *md, uint64_t off, uint64_t len)
{
        if (len == 0 || off + (len - 1) < off)
                return 0;
        uint64_t e0 = off >> REPL_MD_AL_EXTENT_SHIFT;
        uint64_t e1 = (off + (len - 1)) >> REPL_MD_AL_EXTENT_SHIFT;
        if (e1 - e0 >= REPL_MD_AL_SLOTS)
                return -EWOULDBLOCK;
        pthread_mutex_lock(&md->lock);
        bool hot = !md->al_stale && all_active(md, e0, e1);
        if (hot)
                pin_range(md, e0, e1);
        pthread_mutex_unlock(&md->lock);
        return hot ? 0 : -EWOULDBLOCK;
}

void repl_md_al_end(struct repl_md *md, uint64_t off, uint64_t len)
{
        if (len == 0 || off + (len - 1) < off)
                return;
        uint64_t e0 = off >> REPL_MD_AL_EXTENT_SHIFT;
        uint64_t e1 = (off + (len - 1)) >> REPL_MD_AL_EXTENT_SHIFT;
        bool wake = false;
        pthread_mutex_lock(&md->lock);
        for (uint64_t e = e0; e <= e1 && e - e0 < REPL_MD_AL_SLOTS; e++) {
                struct al_slot *s = find_active(md, e);
                if (s && s->refs && --s->refs == 0)
                        wake = true;
        }
        if (wake && md->al_waiters)
                pthread_cond_broadcast(&md->al_cond);
        pthread_mutex_unlock(&md->lock);
}

unsigned repl_md_al_used(struct repl_md *md)
{
        unsigned n = 0;
        pthread_mutex_lock(&md->lock);
        for (unsigned i = 0; i < REPL_MD_AL_SLOTS; i++)
                n += md->slots[i].state == SLOT_ACTIVE;
        pthread_mutex_unlock(&md->lock);
        return n;
}

uint64_t repl_md_io_count(struct repl_md *md)
{
        return atomic_load(&md->io_count);
}

void repl_md_set_data_flush(struct repl_md *md, int (*fn)(void *arg), void *arg)
{
        md->data_flush = fn;
        md->data_flush_arg = arg;
}
