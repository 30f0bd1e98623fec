/* Unit tests of the replication metadata file: superblock, bitmap, activity log and crash
 * recovery (replicator/md.c). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "../../replicator/md.h"

#define KIB        4096ull
#define EXT        (1ull << REPL_MD_AL_EXTENT_SHIFT)
#define BITS_EXT   (EXT / KIB)
#define SUPER_COPY 4096u
#define AL_COPY0   8192u

static char dir[64];
static char path[128];
static char err[256];

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/tandem-test-md.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/lun0.md", dir);
        err[0] = 0;
}

static void teardown(void)
{
        unlink(path);
        rmdir(dir);
}

static struct repl_md *open_md(uint64_t size, bool create, bool *crashed)
{
        struct repl_md *md = NULL;
        int rc = repl_md_open(path, size, 1, 2, create, &md, crashed, err, sizeof(err));
        ck_assert_msg(rc == 0, "open: %d %s", rc, err);
        ck_assert_ptr_nonnull(md);
        return md;
}

static int open_fail(uint64_t size, uint32_t node, uint32_t peer, bool create)
{
        struct repl_md *md = (struct repl_md *)1;
        err[0] = 0;
        int rc = repl_md_open(path, size, node, peer, create, &md, NULL, err, sizeof(err));
        ck_assert_ptr_null(md);
        return rc;
}

static void pwrite_at(uint64_t off, const void *buf, size_t n)
{
        int fd = open(path, O_RDWR);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite(fd, buf, n, (off_t)off), (ssize_t)n);
        close(fd);
}

static void pread_at(uint64_t off, void *buf, size_t n)
{
        int fd = open(path, O_RDONLY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pread(fd, buf, n, (off_t)off), (ssize_t)n);
        close(fd);
}

static uint64_t le64_at(const uint8_t *b, unsigned off)
{
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--)
                v = v << 8 | b[off + i];
        return v;
}

/* ---- superblock ---- */

START_TEST(test_create_and_reopen)
{
        const uint64_t size = 10 * KIB + 100;
        bool crashed = true;
        struct repl_md *md = open_md(size, true, &crashed);
        ck_assert(!crashed);
        struct repl_md_super s;
        repl_md_get_super(md, &s);
        ck_assert_uint_eq(s.gen.current, REPL_GEN_JUST_CREATED);
        ck_assert_uint_eq(s.gen.bitmap, 0);
        ck_assert_int_eq(s.disk, REPL_DISK_INCONSISTENT);
        ck_assert_int_eq(s.peer_disk, REPL_DISK_UNKNOWN);
        ck_assert_int_eq(s.role, REPL_ROLE_SECONDARY);
        ck_assert_uint_eq(s.node_id, 1);
        ck_assert_uint_eq(s.peer_node_id, 2);
        ck_assert_uint_eq(s.size_bytes, size);
        ck_assert_uint_eq(repl_md_bits(md), 11);
        ck_assert_uint_eq(repl_md_bitmap_bytes(md), 2);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 0);

        s.gen = (struct repl_gen){.current = 0xabc0, .bitmap = 0xdef0, .history = {0x10, 0x20}};
        s.disk = REPL_DISK_UPTODATE;
        s.peer_disk = REPL_DISK_OUTDATED;
        s.role = REPL_ROLE_PRIMARY;
        s.promote_epoch = 42;
        s.resync_cursor = 8192;
        s.node_id = 77; /* identity is kept from open */
        ck_assert_int_eq(repl_md_put_super(md, &s), 0);
        ck_assert_int_eq(repl_md_close(md), 0);

        md = open_md(size, false, &crashed);
        ck_assert(!crashed);
        struct repl_md_super r;
        repl_md_get_super(md, &r);
        ck_assert_uint_eq(r.gen.current, 0xabc0);
        ck_assert_uint_eq(r.gen.bitmap, 0xdef0);
        ck_assert_uint_eq(r.gen.history[0], 0x10);
        ck_assert_uint_eq(r.gen.history[1], 0x20);
        ck_assert_int_eq(r.disk, REPL_DISK_UPTODATE);
        ck_assert_int_eq(r.peer_disk, REPL_DISK_OUTDATED);
        ck_assert_int_eq(r.role, REPL_ROLE_PRIMARY);
        ck_assert_uint_eq(r.promote_epoch, 42);
        ck_assert_uint_eq(r.resync_cursor, 8192);
        ck_assert_uint_eq(r.node_id, 1);
        ck_assert(!r.primary_active);
        ck_assert_int_eq(repl_md_close(md), 0);

        /* create on an existing file opens it, it does not wipe it */
        md = open_md(size, true, NULL);
        repl_md_get_super(md, &r);
        ck_assert_uint_eq(r.gen.current, 0xabc0);
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

START_TEST(test_identity_refused)
{
        struct repl_md *md = open_md(1 << 20, true, NULL);
        ck_assert_int_eq(repl_md_close(md), 0);
        ck_assert_int_eq(open_fail(1 << 20, 3, 2, false), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "node id"));
        ck_assert_int_eq(open_fail(1 << 20, 1, 5, false), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "peer"));
        /* Smaller than the metadata covers: the LUN shrank, refused. */
        ck_assert_int_eq(open_fail(1 << 19, 1, 2, true), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "size changed"));
        unlink(path);
        ck_assert_int_eq(open_fail(1 << 20, 1, 2, false), -ENOENT);
}
END_TEST

/* Online resize: the bitmap grows, durably; at open a larger LUN grows it with the new range
 * out of sync (a crash inside a resize). */
START_TEST(test_grow)
{
        struct repl_md *md = open_md(1 << 20, true, NULL);
        repl_md_set_dirty(md, 4096, 4096); /* bit 1 */
        ck_assert_int_eq(repl_md_flush_bitmap(md), 0);
        ck_assert_int_eq(repl_md_grow(md, 1 << 19, false), -EINVAL); /* never shrinks */
        ck_assert_int_eq(repl_md_grow(md, 3 << 20, false), 0);
        ck_assert_uint_eq(repl_md_bits(md), 768);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 1);
        repl_md_set_dirty(md, (3 << 20) - 4096, 4096); /* the last bit: in range now */
        ck_assert(repl_md_test_bit(md, 767));
        ck_assert_int_eq(repl_md_close(md), 0);
        md = open_md(3 << 20, false, NULL);
        struct repl_md_super r;
        repl_md_get_super(md, &r);
        ck_assert_uint_eq(r.size_bytes, 3 << 20);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 2);
        ck_assert(repl_md_test_bit(md, 1) && repl_md_test_bit(md, 767));
        ck_assert_int_eq(repl_md_close(md), 0);
        /* Opened for a larger LUN: grown, the new 1 MiB (256 bits) out of sync. */
        md = open_md(4 << 20, false, NULL);
        ck_assert_uint_eq(repl_md_bits(md), 1024);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 2 + 256);
        ck_assert(repl_md_test_bit(md, 768) && repl_md_test_bit(md, 1023));
        ck_assert_int_eq(repl_md_close(md), 0);
        md = open_md(4 << 20, false, NULL);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 2 + 256);
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

/* Which superblock copy (0 or 1) holds the newer sequence number. */
static int newer_super_copy(void)
{
        uint8_t b0[4096], b1[4096];
        pread_at(0, b0, sizeof(b0));
        pread_at(SUPER_COPY, b1, sizeof(b1));
        return le64_at(b1, 8) > le64_at(b0, 8) ? 1 : 0;
}

START_TEST(test_torn_super_falls_back)
{
        struct repl_md *md = open_md(1 << 20, true, NULL);
        struct repl_md_super s;
        repl_md_get_super(md, &s);
        s.gen.current = 0x1110;
        ck_assert_int_eq(repl_md_put_super(md, &s), 0);
        s.gen.current = 0x2220;
        ck_assert_int_eq(repl_md_put_super(md, &s), 0);
        repl_md_abandon(md);

        /* tear the newer copy: the older one is used */
        uint8_t junk[100];
        memset(junk, 0x5a, sizeof(junk));
        pwrite_at((uint64_t)newer_super_copy() * SUPER_COPY + 16, junk, sizeof(junk));
        md = open_md(1 << 20, false, NULL);
        repl_md_get_super(md, &s);
        ck_assert_uint_eq(s.gen.current, 0x1110);
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

START_TEST(test_corrupt_files)
{
        uint8_t junk[4096];
        struct repl_md *md = open_md(1 << 20, true, NULL);
        ck_assert_int_eq(repl_md_close(md), 0);

        /* bad magic on both copies */
        memset(junk, 0, sizeof(junk));
        pwrite_at(0, junk, 4);
        pwrite_at(SUPER_COPY, junk, 4);
        ck_assert_int_eq(open_fail(1 << 20, 1, 2, false), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "bad magic"));

        /* bad crc on both copies */
        md = NULL;
        unlink(path);
        md = open_md(1 << 20, true, NULL);
        ck_assert_int_eq(repl_md_close(md), 0);
        junk[0] = 0xff;
        pwrite_at(100, junk, 1);
        pwrite_at(SUPER_COPY + 100, junk, 1);
        ck_assert_int_eq(open_fail(1 << 20, 1, 2, false), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "checksum"));

        /* a newer format version, correctly checksummed */
        unlink(path);
        md = open_md(1 << 20, true, NULL);
        ck_assert_int_eq(repl_md_close(md), 0);
        for (unsigned c = 0; c < 2; c++) {
                uint8_t b[4096];
                pread_at(c * SUPER_COPY, b, sizeof(b));
                b[4] = 9;
                uint32_t crc = crc32_iscsi(b, 4092, 0xffffffffu);
                for (int i = 0; i < 4; i++)
                        b[4092 + i] = (uint8_t)(crc >> (8 * i));
                pwrite_at(c * SUPER_COPY, b, sizeof(b));
        }
        ck_assert_int_eq(open_fail(1 << 20, 1, 2, false), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "version"));

        /* truncated: superblocks fine, bitmap cut off */
        unlink(path);
        md = open_md(1 << 30, true, NULL);
        ck_assert_int_eq(repl_md_close(md), 0);
        ck_assert_int_eq(truncate(path, 20000), 0);
        ck_assert_int_eq(open_fail(1 << 30, 1, 2, false), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "truncated"));
        ck_assert_int_eq(truncate(path, 100), 0);
        ck_assert_int_eq(open_fail(1 << 30, 1, 2, false), -EINVAL);
        ck_assert_int_eq(truncate(path, 0), 0);
        ck_assert_int_eq(open_fail(1 << 30, 1, 2, false), -EINVAL);

        /* random garbage */
        unlink(path);
        int fd = open(path, O_CREAT | O_WRONLY, 0600);
        ck_assert_int_ge(fd, 0);
        srand(7);
        for (int i = 0; i < 32; i++) {
                for (size_t j = 0; j < sizeof(junk); j++)
                        junk[j] = (uint8_t)rand();
                ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
        }
        close(fd);
        ck_assert_int_eq(open_fail(1 << 20, 1, 2, true), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "no valid metadata superblock"));
}
END_TEST

START_TEST(test_corrupt_al_after_crash)
{
        struct repl_md *md = open_md(1 << 24, true, NULL);
        ck_assert_int_eq(repl_md_al_begin(md, 0, 4096), 0);
        repl_md_abandon(md);
        uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        pwrite_at(AL_COPY0 + 24, junk, sizeof(junk));
        pwrite_at(AL_COPY0 + 4096 + 24, junk, sizeof(junk));
        ck_assert_int_eq(open_fail(1 << 24, 1, 2, false), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "activity log"));
}
END_TEST

/* ---- bitmap in memory ---- */

START_TEST(test_bitmap_partial_last_chunk)
{
        const uint64_t size = 10 * KIB + 100; /* 11 bits, the last one covers 100 bytes */
        struct repl_md *md = open_md(size, true, NULL);
        repl_md_set_dirty(md, 10 * KIB + 50, 10);
        ck_assert(repl_md_test_bit(md, 10));
        ck_assert_uint_eq(repl_md_dirty_bits(md), 1);
        repl_md_clear_dirty(md, 10 * KIB, 50); /* does not cover the chunk's data */
        ck_assert(repl_md_test_bit(md, 10));
        repl_md_clear_dirty(md, 10 * KIB, 100); /* up to the end of the LUN: covered */
        ck_assert(!repl_md_test_bit(md, 10));
        repl_md_set_dirty(md, 10 * KIB, 1 << 20); /* runs past the end: clamped */
        ck_assert_uint_eq(repl_md_dirty_bits(md), 1);
        repl_md_clear_dirty(md, 9 * KIB + 1, 1 << 20); /* past the end, chunk 9 partial */
        ck_assert_uint_eq(repl_md_dirty_bits(md), 0);
        repl_md_set_dirty(md, size, 4096); /* beyond the LUN: ignored */
        ck_assert_uint_eq(repl_md_dirty_bits(md), 0);
        ck_assert(!repl_md_test_bit(md, 11));

        repl_md_set_dirty(md, 4095, 2); /* straddles chunks 0 and 1 */
        ck_assert(repl_md_test_bit(md, 0));
        ck_assert(repl_md_test_bit(md, 1));
        ck_assert_uint_eq(repl_md_dirty_bits(md), 2);
        repl_md_clear_dirty(md, 1, 8190); /* neither chunk fully inside */
        ck_assert_uint_eq(repl_md_dirty_bits(md), 2);
        repl_md_clear_dirty(md, 0, 8192);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 0);
        repl_md_set_dirty(md, 0, 0);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 0);

        repl_md_set_all(md);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 11);
        uint8_t b[2];
        ck_assert_int_eq(repl_md_bitmap_read(md, 0, b, 2), 0);
        ck_assert_uint_eq(b[0], 0xff);
        ck_assert_uint_eq(b[1], 0x07); /* only the 3 bits that exist */
        uint64_t bit;
        ck_assert(repl_md_next_dirty(md, 10, &bit));
        ck_assert_uint_eq(bit, 10);
        ck_assert(!repl_md_next_dirty(md, 11, &bit));
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

START_TEST(test_bitmap_words)
{
        struct repl_md *md = open_md(1 << 20, true, NULL); /* 256 bits, 4 words */
        repl_md_set_dirty(md, 60 * KIB, 10 * KIB);         /* bits 60..69 cross a word */
        ck_assert_uint_eq(repl_md_dirty_bits(md), 10);
        repl_md_set_dirty(md, 62 * KIB, 3 * KIB); /* already set: count unchanged */
        ck_assert_uint_eq(repl_md_dirty_bits(md), 10);
        uint64_t bit = 0;
        ck_assert(repl_md_next_dirty(md, 0, &bit));
        ck_assert_uint_eq(bit, 60);
        ck_assert(repl_md_next_dirty(md, 65, &bit));
        ck_assert_uint_eq(bit, 65);
        ck_assert(!repl_md_next_dirty(md, 70, &bit));
        ck_assert(!repl_md_test_bit(md, 59));
        ck_assert(repl_md_test_bit(md, 63));
        ck_assert(repl_md_test_bit(md, 64));
        ck_assert(!repl_md_test_bit(md, 70));
        repl_md_clear_dirty(md, 63 * KIB, 2 * KIB); /* bits 63 and 64 */
        ck_assert_uint_eq(repl_md_dirty_bits(md), 8);
        ck_assert(repl_md_next_dirty(md, 63, &bit));
        ck_assert_uint_eq(bit, 65);
        repl_md_set_dirty(md, 255 * KIB, KIB); /* last bit of the last word */
        ck_assert(repl_md_next_dirty(md, 70, &bit));
        ck_assert_uint_eq(bit, 255);
        repl_md_set_dirty(md, 0, 256 * KIB); /* whole words */
        ck_assert_uint_eq(repl_md_dirty_bits(md), 256);
        repl_md_clear_dirty(md, 0, 1 << 20);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 0);
        ck_assert(!repl_md_next_dirty(md, 0, &bit));
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

START_TEST(test_bitmap_read_merge)
{
        const uint64_t size = 1000 * KIB + 1; /* 1001 bits, 126 bytes */
        struct repl_md *a = open_md(size, true, NULL);
        ck_assert_uint_eq(repl_md_bitmap_bytes(a), 126);
        uint64_t bits[] = {0, 7, 8, 63, 64, 500, 999, 1000};
        for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
                repl_md_set_dirty(a, bits[i] * KIB, 1);
        uint8_t buf[126];
        ck_assert_int_eq(repl_md_bitmap_read(a, 0, buf, sizeof(buf)), 0);
        ck_assert_uint_eq(buf[0], 0x81);
        ck_assert_uint_eq(buf[1], 0x01);
        ck_assert_uint_eq(buf[125], 0x01); /* bit 1000 */
        ck_assert_int_eq(repl_md_bitmap_read(a, 120, buf, 7), -EINVAL);
        ck_assert_int_eq(repl_md_bitmap_read(a, 127, buf, 0), -EINVAL);
        ck_assert_int_eq(repl_md_bitmap_read(a, 126, buf, 0), 0);
        ck_assert_int_eq(repl_md_close(a), 0);

        /* another node's bitmap, merged in two pieces, with garbage past the last bit */
        unlink(path);
        struct repl_md *b = open_md(size, true, NULL);
        repl_md_set_dirty(b, 3 * KIB, 1);
        repl_md_set_dirty(b, 500 * KIB, 1); /* overlaps */
        ck_assert_int_eq(repl_md_bitmap_merge(b, 0, buf, 60), 0);
        buf[125] = 0xff;
        ck_assert_int_eq(repl_md_bitmap_merge(b, 60, buf + 60, 66), 0);
        ck_assert_uint_eq(repl_md_dirty_bits(b), 9);
        for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
                ck_assert(repl_md_test_bit(b, bits[i]));
        ck_assert(repl_md_test_bit(b, 3));
        ck_assert_int_eq(repl_md_bitmap_merge(b, 100, buf, 27), -EINVAL);
        uint8_t back[126];
        ck_assert_int_eq(repl_md_bitmap_read(b, 0, back, sizeof(back)), 0);
        ck_assert_uint_eq(back[0], 0x89);
        ck_assert_uint_eq(back[125], 0x01);
        ck_assert_int_eq(repl_md_close(b), 0);
}
END_TEST

/* ---- persistence ---- */

START_TEST(test_flush_and_reopen)
{
        struct repl_md *md = open_md(1 << 30, true, NULL); /* 8 bitmap pages */
        uint64_t io0 = repl_md_io_count(md);
        ck_assert_int_eq(repl_md_flush_bitmap(md), 0);
        ck_assert_uint_eq(repl_md_io_count(md), io0); /* nothing changed: no write */
        repl_md_set_dirty(md, 5 * KIB, 1);
        repl_md_set_dirty(md, (1 << 30) - 1, 1);
        ck_assert_int_eq(repl_md_flush_bitmap(md), 0);
        ck_assert_uint_eq(repl_md_io_count(md), io0 + 2); /* first and last page */
        ck_assert_int_eq(repl_md_flush_bitmap(md), 0);
        ck_assert_uint_eq(repl_md_io_count(md), io0 + 2);
        repl_md_abandon(md); /* crash: flushed bits survive */

        bool crashed = true;
        md = open_md(1 << 30, false, &crashed);
        ck_assert(!crashed);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 2);
        ck_assert(repl_md_test_bit(md, 5));
        ck_assert(repl_md_test_bit(md, repl_md_bits(md) - 1));
        repl_md_clear_dirty(md, 0, 1 << 30);
        repl_md_set_dirty(md, 77 * KIB, 1);
        ck_assert_int_eq(repl_md_close(md), 0); /* clean close writes the bitmap */

        md = open_md(1 << 30, false, NULL);
        ck_assert_uint_eq(repl_md_dirty_bits(md), 1);
        ck_assert(repl_md_test_bit(md, 77));
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

START_TEST(test_crashed_primary_flag)
{
        struct repl_md *md = open_md(1 << 24, true, NULL);
        struct repl_md_super s;
        repl_md_get_super(md, &s);
        s.primary_active = true;
        ck_assert_int_eq(repl_md_put_super(md, &s), 0);
        ck_assert_int_eq(repl_md_close(md), 0);

        bool crashed = true;
        md = open_md(1 << 24, false, &crashed);
        ck_assert(!crashed); /* clean shutdown while Primary is no crash */
        repl_md_abandon(md);
        md = open_md(1 << 24, false, &crashed);
        ck_assert(crashed);
        repl_md_get_super(md, &s);
        s.primary_active = false;
        ck_assert_int_eq(repl_md_put_super(md, &s), 0);
        repl_md_abandon(md);
        md = open_md(1 << 24, false, &crashed);
        ck_assert(!crashed); /* a crashed Secondary is not a crashed Primary */
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

/* ---- activity log ---- */

START_TEST(test_al_hot_path_no_io)
{
        struct repl_md *md = open_md(1 << 30, true, NULL);
        uint64_t io0 = repl_md_io_count(md);
        ck_assert_int_eq(repl_md_al_begin(md, 3 * EXT + 100, 8192), 0);
        ck_assert_uint_eq(repl_md_io_count(md), io0 + 1); /* the log block */
        repl_md_al_end(md, 3 * EXT + 100, 8192);
        uint64_t io1 = repl_md_io_count(md);
        for (int i = 0; i < 1000; i++) {
                ck_assert_int_eq(repl_md_al_begin(md, 3 * EXT + (uint64_t)i * KIB, KIB), 0);
                repl_md_set_dirty(md, 3 * EXT + (uint64_t)i * KIB, KIB);
                repl_md_al_end(md, 3 * EXT + (uint64_t)i * KIB, KIB);
        }
        ck_assert_uint_eq(repl_md_io_count(md), io1);
        ck_assert_uint_eq(repl_md_al_used(md), 1);

        /* a write crossing into the next extent adds one */
        ck_assert_int_eq(repl_md_al_begin(md, 4 * EXT - KIB, 2 * KIB), 0);
        ck_assert_uint_eq(repl_md_al_used(md), 2);
        repl_md_al_end(md, 4 * EXT - KIB, 2 * KIB);

        ck_assert_int_eq(repl_md_al_begin(md, 0, 0), 0);
        ck_assert_int_eq(repl_md_al_begin(md, 0, (REPL_MD_AL_SLOTS + 1) * EXT), -EINVAL);
        ck_assert_int_eq(repl_md_al_begin(md, UINT64_MAX - 10, 100), -EINVAL);
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

START_TEST(test_al_crash_recovery)
{
        const uint64_t size = 64 * EXT + 3 * KIB; /* the last extent is 3 chunks */
        struct repl_md *md = open_md(size, true, NULL);
        ck_assert_int_eq(repl_md_al_begin(md, 5 * EXT + 10 * KIB, KIB), 0);
        ck_assert_int_eq(repl_md_al_begin(md, 64 * EXT, KIB), 0);
        /* in-flight writes whose bits were never set: the log must cover them */
        repl_md_set_dirty(md, 9 * EXT, KIB); /* not logged and not flushed: may be lost */
        repl_md_abandon(md);

        bool crashed = true;
        md = open_md(size, false, &crashed);
        ck_assert(!crashed);
        ck_assert_uint_eq(repl_md_dirty_bits(md), BITS_EXT + 3);
        uint64_t bit;
        ck_assert(repl_md_next_dirty(md, 0, &bit));
        ck_assert_uint_eq(bit, 5 * BITS_EXT);
        ck_assert(repl_md_test_bit(md, 6 * BITS_EXT - 1));
        ck_assert(!repl_md_test_bit(md, 6 * BITS_EXT));
        ck_assert(repl_md_test_bit(md, 64 * BITS_EXT + 2));
        ck_assert_uint_eq(repl_md_al_used(md), 0);
        repl_md_abandon(md); /* the recovered bits were persisted at open */

        md = open_md(size, false, NULL);
        ck_assert_uint_eq(repl_md_dirty_bits(md), BITS_EXT + 3);
        repl_md_clear_dirty(md, 0, size);
        ck_assert_int_eq(repl_md_close(md), 0);
        md = open_md(size, false, NULL); /* clean close: the log was emptied */
        ck_assert_uint_eq(repl_md_dirty_bits(md), 0);
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

/* Fills every slot with extents 0..SLOTS-1, each with one dirty block, none in flight. */
static void fill_al(struct repl_md *md)
{
        for (uint64_t e = 0; e < REPL_MD_AL_SLOTS; e++) {
                ck_assert_int_eq(repl_md_al_begin(md, e * EXT, KIB), 0);
                repl_md_set_dirty(md, e * EXT, KIB);
                repl_md_al_end(md, e * EXT, KIB);
        }
        ck_assert_uint_eq(repl_md_al_used(md), REPL_MD_AL_SLOTS);
}

START_TEST(test_al_eviction_flushes_bitmap)
{
        const uint64_t size = 2 * REPL_MD_AL_SLOTS * EXT;
        struct repl_md *md = open_md(size, true, NULL);
        fill_al(md);
        /* extent 0 is the least recently used: touching 1..255 keeps them hot */
        for (uint64_t e = 1; e < REPL_MD_AL_SLOTS; e++) {
                ck_assert_int_eq(repl_md_al_begin(md, e * EXT, KIB), 0);
                repl_md_al_end(md, e * EXT, KIB);
        }
        uint64_t io0 = repl_md_io_count(md);
        ck_assert_int_eq(repl_md_al_begin(md, 300 * EXT, KIB), 0);
        /* the victim's bitmap page, then the log */
        ck_assert_uint_eq(repl_md_io_count(md), io0 + 2);
        ck_assert_uint_eq(repl_md_al_used(md), REPL_MD_AL_SLOTS);
        repl_md_al_end(md, 300 * EXT, KIB);
        /* extent 1 is now the oldest; its page was just written with extent 0's: no page I/O */
        io0 = repl_md_io_count(md);
        ck_assert_int_eq(repl_md_al_begin(md, 301 * EXT, KIB), 0);
        ck_assert_uint_eq(repl_md_io_count(md), io0 + 1);
        repl_md_al_end(md, 301 * EXT, KIB);
        repl_md_abandon(md);

        md = open_md(size, false, NULL);
        /* extent 0 left the log, so only its written block comes back (from the page) */
        ck_assert(repl_md_test_bit(md, 0));
        ck_assert(!repl_md_test_bit(md, 1));
        /* extent 1 also left the log */
        ck_assert(repl_md_test_bit(md, BITS_EXT));
        ck_assert(!repl_md_test_bit(md, BITS_EXT + 1));
        /* extents still logged come back whole; 300 and 301 too */
        ck_assert(repl_md_test_bit(md, 2 * BITS_EXT + 1));
        ck_assert(repl_md_test_bit(md, 300 * BITS_EXT + 5));
        ck_assert(repl_md_test_bit(md, 301 * BITS_EXT + 5));
        ck_assert(!repl_md_test_bit(md, 302 * BITS_EXT));
        ck_assert_uint_eq(repl_md_dirty_bits(md), 2 + 256 * BITS_EXT);
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

struct waiter {
        struct repl_md *md;
        uint64_t off;
        int rc;
        atomic_int done;
};

static void *al_begin_thread(void *arg)
{
        struct waiter *w = arg;
        w->rc = repl_md_al_begin(w->md, w->off, KIB);
        w->done = 1;
        return NULL;
}

START_TEST(test_al_busy_extents_not_evicted)
{
        const uint64_t size = 2 * REPL_MD_AL_SLOTS * EXT;
        struct repl_md *md = open_md(size, true, NULL);
        for (uint64_t e = 0; e < REPL_MD_AL_SLOTS; e++)
                ck_assert_int_eq(repl_md_al_begin(md, e * EXT, KIB), 0); /* all in flight */
        struct waiter w = {.md = md, .off = 400 * EXT};
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, al_begin_thread, &w), 0);
        usleep(100 * 1000);
        ck_assert_int_eq(w.done, 0); /* every slot busy: it waits */
        repl_md_al_end(md, 17 * EXT, KIB);
        pthread_join(t, NULL);
        ck_assert_int_eq(w.rc, 0);
        repl_md_set_dirty(md, 400 * EXT, KIB);
        repl_md_abandon(md);

        md = open_md(size, false, NULL);
        /* the log still held every busy extent and the new one, not extent 17 */
        ck_assert(repl_md_test_bit(md, 16 * BITS_EXT + 9));
        ck_assert(repl_md_test_bit(md, 18 * BITS_EXT + 9));
        ck_assert(repl_md_test_bit(md, 400 * BITS_EXT + 9));
        ck_assert(!repl_md_test_bit(md, 17 * BITS_EXT + 9));
        ck_assert_uint_eq(repl_md_dirty_bits(md), 256 * BITS_EXT);
        ck_assert_int_eq(repl_md_close(md), 0);
}
END_TEST

struct worker {
        struct repl_md *md;
        unsigned seed;
        uint64_t extents;
        int iterations;
        int failures;
};

static void *worker_thread(void *arg)
{
        struct worker *w = arg;
        for (int i = 0; i < w->iterations; i++) {
                uint64_t off = ((uint64_t)rand_r(&w->seed) % (w->extents * BITS_EXT)) * KIB;
                uint64_t len = KIB * (1 + (uint64_t)rand_r(&w->seed) % 64);
                if (repl_md_al_begin(w->md, off, len) != 0) {
                        w->failures++;
                        continue;
                }
                repl_md_set_dirty(w->md, off, len);
                if (rand_r(&w->seed) % 4 == 0)
                        repl_md_clear_dirty(w->md, off, len); /* acked by the peer */
                repl_md_al_end(w->md, off, len);
                if (rand_r(&w->seed) % 500 == 0 && repl_md_flush_bitmap(w->md) != 0)
                        w->failures++;
        }
        return NULL;
}

/*
 * Two writers over more extents than the log holds, then a crash: every bit set in memory at
 * the crash must be set after recovery (the invariant), and nothing outside the log or the
 * bitmap on disk.
 */
START_TEST(test_concurrency_and_crash_invariant)
{
        const uint64_t extents = REPL_MD_AL_SLOTS + 64;
        const uint64_t size = extents * EXT;
        struct repl_md *md = open_md(size, true, NULL);
        struct worker w[2] = {{md, 1, extents, 3000, 0}, {md, 2, extents, 3000, 0}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
                ck_assert_int_eq(pthread_create(&t[i], NULL, worker_thread, &w[i]), 0);
        for (int i = 0; i < 2; i++)
                pthread_join(t[i], NULL);
        ck_assert_int_eq(w[0].failures + w[1].failures, 0);
        ck_assert_uint_eq(repl_md_al_used(md), REPL_MD_AL_SLOTS);

        size_t nbytes = repl_md_bitmap_bytes(md);
        uint8_t *before = malloc(nbytes), *after = malloc(nbytes);
        ck_assert_int_eq(repl_md_bitmap_read(md, 0, before, nbytes), 0);
        uint64_t dirty_before = repl_md_dirty_bits(md);
        ck_assert_uint_gt(dirty_before, 0);
        repl_md_abandon(md);

        md = open_md(size, false, NULL);
        ck_assert_int_eq(repl_md_bitmap_read(md, 0, after, nbytes), 0);
        for (size_t i = 0; i < nbytes; i++)
                ck_assert_msg((before[i] & ~after[i]) == 0, "byte %zu: lost dirty bits", i);
        ck_assert_uint_ge(repl_md_dirty_bits(md), dirty_before);
        ck_assert_int_eq(repl_md_close(md), 0);

        /* a clean close keeps exactly what was in memory */
        md = open_md(size, false, NULL);
        ck_assert_int_eq(repl_md_bitmap_read(md, 0, before, nbytes), 0);
        ck_assert_int_eq(repl_md_close(md), 0);
        md = open_md(size, false, NULL);
        ck_assert_int_eq(repl_md_bitmap_read(md, 0, after, nbytes), 0);
        ck_assert_int_eq(memcmp(before, after, nbytes), 0);
        ck_assert_int_eq(repl_md_close(md), 0);
        free(before);
        free(after);
}
END_TEST

static Suite *md_suite(void)
{
        Suite *s = suite_create("repl_md");
        TCase *tc = tcase_create("core");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_create_and_reopen);
        tcase_add_test(tc, test_identity_refused);
        tcase_add_test(tc, test_grow);
        tcase_add_test(tc, test_torn_super_falls_back);
        tcase_add_test(tc, test_corrupt_files);
        tcase_add_test(tc, test_corrupt_al_after_crash);
        tcase_add_test(tc, test_bitmap_partial_last_chunk);
        tcase_add_test(tc, test_bitmap_words);
        tcase_add_test(tc, test_bitmap_read_merge);
        tcase_add_test(tc, test_flush_and_reopen);
        tcase_add_test(tc, test_crashed_primary_flag);
        tcase_add_test(tc, test_al_hot_path_no_io);
        tcase_add_test(tc, test_al_crash_recovery);
        tcase_add_test(tc, test_al_eviction_flushes_bitmap);
        tcase_add_test(tc, test_al_busy_extents_not_evicted);
        tcase_add_test(tc, test_concurrency_and_crash_invariant);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(md_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
