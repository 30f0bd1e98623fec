/*
 * Persistent replication metadata of one LUN, in one external file: superblock (generation
 * ids, disk states, flags), dirty bitmap (one bit per 4 KiB) and activity log (the extents
 * that may have writes in flight).
 *
 * Invariant: a dirty block is never claimed clean after a crash. Every bit set in memory is
 * on disk, or inside an extent recorded in the on-disk activity log (recovery at open sets
 * every bit of those extents), provided bits are set between al_begin and al_end of the range.
 * Bits set any other way (set_all, bitmap_merge, set_dirty outside a bracket) are durable only
 * after repl_md_flush_bitmap().
 *
 * File layout (every 4 KiB block little endian, versioned, crc32c in its last 4 bytes):
 *     0      superblock copy 0      4096  superblock copy 1   (alternate, higher seq wins)
 *     8192   activity log copy 0   12288  activity log copy 1 (alternate, higher seq wins)
 *     16384  bitmap, raw: bit i is bit i%8 of byte i/8, padded to 4 KiB
 * A torn write of a superblock or log block leaves the other copy valid.
 */
#ifndef TANDEM_REPL_MD_H
#define TANDEM_REPL_MD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "genid.h"

#define REPL_MD_BIT_SHIFT       12  /* one bitmap bit per 4 KiB */
#define REPL_MD_AL_EXTENT_SHIFT 22  /* activity log extents of 4 MiB */
#define REPL_MD_AL_SLOTS        256 /* hot extents tracked at once */

struct repl_md_super {
        struct repl_gen gen;
        enum repl_disk_state disk;      /* this node's disk */
        enum repl_disk_state peer_disk; /* last known */
        enum repl_role role;            /* role when last written */
        bool primary_active; /* set while Primary runs: found set at open = crashed primary */
        uint64_t promote_epoch;
        uint32_t node_id, peer_node_id;
        uint64_t size_bytes;    /* the LUN's size the bitmap covers */
        uint64_t resync_cursor; /* byte offset a full/bitmap resync had reached (for resume) */
};

struct repl_md;

/*
 * Opens the metadata file at path. With create, a missing or empty file is created
 * (gen.current = JUST_CREATED, disk Inconsistent, peer_disk Unknown); an existing non-empty
 * file is opened and checked as without create. Refuses (-EINVAL, err names the reason) a
 * file of another node id, peer id or size ("size changed: ..."), and a corrupt one (bad
 * magic or checksum on both copies, newer version, truncated). Missing without create:
 * -ENOENT. Crash recovery: if the file was not closed cleanly, every extent in the activity
 * log gets all its bits set (then persisted); *crashed_primary (may be NULL) tells whether it
 * was not closed cleanly while primary_active was set.
 */
int repl_md_open(const char *path, uint64_t size_bytes, uint32_t node_id, uint32_t peer_node_id,
                 bool create, struct repl_md **out, bool *crashed_primary, char *err,
                 size_t errlen);
/* Clean close: bitmap written, activity log emptied, clean flag set, fdatasync; md is freed
 * even when an error is returned. */
int repl_md_close(struct repl_md *md);
/* Test only: frees md without writing anything, as a crash would leave the file. */
void repl_md_abandon(struct repl_md *md);

void repl_md_get_super(struct repl_md *md, struct repl_md_super *out);
/* Writes the superblock durably (the other of the two copies, next sequence number); returns
 * after fdatasync. node_id, peer_node_id and size_bytes are kept from open, not taken from s. */
int repl_md_put_super(struct repl_md *md, const struct repl_md_super *s);

/*
 * The LUN grew to size_bytes: the bitmap covers the new range (dirty, or clean when both
 * copies are known equal there), durably, and the superblock records the size. Never
 * shrinks (-EINVAL). Blocks: not on a data-path thread.
 */
int repl_md_grow(struct repl_md *md, uint64_t size_bytes, bool dirty);

/* Bitmap (in memory, thread-safe; any thread): */
uint64_t repl_md_bits(struct repl_md *md); /* total bits */
/* Bits of every 4K chunk the byte range touches. */
void repl_md_set_dirty(struct repl_md *md, uint64_t off, uint64_t len);
/* Only chunks fully inside the range (the LUN's last, partial chunk counts as full when the
 * range reaches the end of the LUN). */
void repl_md_clear_dirty(struct repl_md *md, uint64_t off, uint64_t len);
void repl_md_set_all(struct repl_md *md);
uint64_t repl_md_dirty_bits(struct repl_md *md); /* popcount, O(1) */
bool repl_md_test_bit(struct repl_md *md, uint64_t bit);
/* Next dirty bit >= from; false if none. */
bool repl_md_next_dirty(struct repl_md *md, uint64_t from, uint64_t *bit);
/* Bitmap bytes for the wire: copy out n bytes from byte offset first (bit i is bit i%8 of byte
 * i/8; bits past the end read 0), and OR in a peer's bytes (bits past the end ignored).
 * -EINVAL when [first, first+n) is not inside repl_md_bitmap_bytes(). */
size_t repl_md_bitmap_bytes(struct repl_md *md);
int repl_md_bitmap_read(struct repl_md *md, uint64_t first, void *out, size_t n);
int repl_md_bitmap_merge(struct repl_md *md, uint64_t first, const void *in, size_t n);
/* Persists the changed 4 KiB pages of the bitmap + fdatasync. */
int repl_md_flush_bitmap(struct repl_md *md);

/*
 * Activity log (any thread, blocking). Before a write to [off,off+len) reaches the disk call
 * al_begin; after it is done (and acked or its bits set) al_end with the same range. al_begin
 * returns at once when every extent is already in the log (a mutex, no I/O); otherwise it
 * evicts least-recently-used idle extents (writing their bitmap pages durably first), writes
 * the new log durably and returns. An extent with writes in flight is never evicted: al_begin
 * waits when every slot is busy. -EINVAL for a range of more than REPL_MD_AL_SLOTS extents;
 * an I/O error is returned as -errno with nothing held. len 0 is a no-op.
 */
int repl_md_al_begin(struct repl_md *md, uint64_t off, uint64_t len);
/* al_begin when it needs no I/O (every extent already active): 0, else -EWOULDBLOCK and
 * nothing changed (the caller runs al_begin where it may block). */
int repl_md_al_try_begin(struct repl_md *md, uint64_t off, uint64_t len);
void repl_md_al_end(struct repl_md *md, uint64_t off, uint64_t len);
/* Extents the in-memory activity log holds now (tests, status). */
unsigned repl_md_al_used(struct repl_md *md);

/* Counters for tests: metadata block writes done (superblock, AL, bitmap pages). */
uint64_t repl_md_io_count(struct repl_md *md);

/*
 * The metadata lives in its own file, so its fdatasync does not cover the data: fn makes
 * the data device durable and runs before an activity-log transaction evicts an extent.
 * Set once, before the log is used.
 */
void repl_md_set_data_flush(struct repl_md *md, int (*fn)(void *arg), void *arg);

#endif
