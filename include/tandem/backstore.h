/*
 * Backing stores: regular files (sparse) and block devices, with group-committed flushes.
 * The bs_* calls below are synchronous (for threads that may block); as a medium
 * (bs_medium_create) requests from a net loop go through io_uring on that loop's own ring,
 * or through the thread pool where io_uring is unavailable, and never block the loop.
 */
#ifndef TANDEM_BACKSTORE_H
#define TANDEM_BACKSTORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct tdm_mio;

struct bs_dev {
        int fd;
        char path[4096];
        uint64_t size;
        bool is_blockdev;
        bool direct; /* opened with O_DIRECT */
        /* A file on a file system where an io_uring submission may wait (FUSE, NFS, unknown):
         * every request goes straight to io_uring's workers, never tried inline. */
        bool submit_async;
        /*
         * FUA: true writes with RWF_DSYNC; false (the default) writes, then joins a group
         * flush, which concurrent FUA writes and SYNCHRONIZE CACHEs share.
         */
        bool fua_dsync;
        atomic_bool no_zero_range; /* fallocate(ZERO_RANGE) unsupported: write zeroes */
        atomic_bool no_punch_hole; /* fallocate(PUNCH_HOLE) unsupported: write zeroes */
        /* Group commit: every write bumps write_seq; a flush makes durable all seqs <= its start.
         */
        atomic_uint_fast64_t write_seq;
        pthread_mutex_t flush_lock;
        pthread_cond_t flush_cond;
        uint64_t durable_seq; /* all writes up to this seq are durable */
        bool flushing;
        uint64_t flush_covers; /* write_seq when the running fdatasync started */
        /* Requests of the medium waiting for an fdatasync (FIFO through tdm_mio.impl). */
        struct tdm_mio *flush_wait_head, *flush_wait_tail;
        uint64_t flush_count;              /* fdatasync calls actually made (for tests) */
        int flush_err;                     /* first failed fdatasync: every later flush fails too */
        atomic_uint_fast64_t dsync_writes; /* writes made with RWF_DSYNC (for tests) */
};

struct bs_open_opts {
        uint64_t create_size; /* > 0: create (sparse) or grow a regular file to this size */
        bool direct;          /* O_DIRECT */
        bool must_exist;
        bool read_only; /* O_RDONLY: never written, created or grown (create_size 0) */
};

/* All return 0 or a negative errno. */
int bs_open(const char *path, const struct bs_open_opts *opts, struct bs_dev **out);
void bs_close(struct bs_dev *bs);
int bs_read(struct bs_dev *bs, void *buf, size_t len, uint64_t off);
int bs_write(struct bs_dev *bs, const void *buf, size_t len, uint64_t off);
int bs_writev(struct bs_dev *bs, const struct iovec *iov, int iovcnt, uint64_t off);
/* Make every write completed before the call durable; concurrent callers share one fdatasync. */
int bs_flush(struct bs_dev *bs);
/* Deallocate (punch hole / BLKDISCARD); reads return zeroes afterwards. */
int bs_unmap(struct bs_dev *bs, uint64_t off, uint64_t len);
/* Write zeroes over a range (WRITE SAME of a zero block without UNMAP). */
int bs_write_zeroes(struct bs_dev *bs, uint64_t off, uint64_t len);
/*
 * Provisioning status at off: *mapped true if data is allocated; *run_len is the length
 * of the run with that status starting at off (capped at max_len).
 */
int bs_lba_status(struct bs_dev *bs, uint64_t off, uint64_t max_len, bool *mapped,
                  uint64_t *run_len);
/* Re-read the size (after the admin grew the file or LV). */
int bs_refresh_size(struct bs_dev *bs);
/* The size the file or device has now, as the kernel reports it; bs->size is left alone. */
int bs_probe_size(struct bs_dev *bs, uint64_t *size);
/*
 * Regular files only (-ENOTTY on a block device): sets the file's length with ftruncate
 * (growing keeps it sparse) and bs->size. Used to grow a LUN and to undo that growth.
 */
int bs_set_file_size(struct bs_dev *bs, uint64_t size);

/* Advises the kernel that the range will be read soon (PRE-FETCH). */
void bs_prefetch(struct bs_dev *bs, uint64_t off, uint64_t len);

struct tdm_medium;

/* What serves a medium's requests from net loops. */
enum bs_engine {
        BS_ENGINE_URING,   /* one io_uring per loop thread */
        BS_ENGINE_THREADS, /* the thread pool (net_pool_submit) */
};
/*
 * The engine bs_medium_create gives a new medium: TANDEM_BACKSTORE_IO=uring|threads
 * (default uring), threads where io_uring cannot be set up.
 */
enum bs_engine bs_engine_default(void);
const char *bs_engine_name(enum bs_engine e);
enum bs_engine bs_medium_engine(struct tdm_medium *m);

/*
 * The backstore as a medium (include/tandem/medium.h); the medium owns bs from here on
 * (tdm_medium_destroy closes it). 0 or -ENOMEM.
 */
int bs_medium_create(struct bs_dev *bs, struct tdm_medium **out);
/* The file the medium's persistent state records live in (loaded now if it exists). */
int bs_medium_attach_state(struct tdm_medium *m, const char *path);
/* The device under a medium made by bs_medium_create. */
struct bs_dev *bs_medium_dev(struct tdm_medium *m);

#endif
