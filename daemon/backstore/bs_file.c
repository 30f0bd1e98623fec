/* Backing store on a regular file or a block device: opening, sizes, synchronous I/O. */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "bs_internal.h"

static int bs_query_size(int fd, bool is_blockdev, uint64_t *size)
{
        if (is_blockdev) {
                uint64_t bytes;
                if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
                        return -errno;
                *size = bytes;
                return 0;
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        *size = (uint64_t)st.st_size;
        return 0;
}

static int bs_open_fd(const char *path, const struct bs_open_opts *opts)
{
        int flags = (opts->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
        if (!opts->must_exist && opts->create_size > 0)
                flags |= O_CREAT;
        if (opts->direct)
                flags |= O_DIRECT;
        int fd = open(path, flags, 0600);
        return fd < 0 ? -errno : fd;
}

/*
 * Whether an io_uring submission of I/O to this regular file may wait in the kernel: the file
 * systems known to answer a non-blocking attempt with EAGAIN are local disk ones and tmpfs.
 * FUSE (whose requests beyond its max_background wait for a slot: a stalled FUSE store held
 * the submitting net loop for seconds), NFS, SMB and anything unknown are not trusted.
 */
static bool file_submission_may_block(int fd)
{
        struct statfs sfs;
        if (fstatfs(fd, &sfs) < 0)
                return true;
        switch ((unsigned long)sfs.f_type) {
        case EXT4_SUPER_MAGIC: /* also ext2 and ext3 */
        case XFS_SUPER_MAGIC:
        case BTRFS_SUPER_MAGIC:
        case F2FS_SUPER_MAGIC:
        case TMPFS_MAGIC:
                return false;
        default:
                return true;
        }
}

int bs_open(const char *path, const struct bs_open_opts *opts, struct bs_dev **out)
{
        if (strlen(path) >= sizeof(((struct bs_dev *)0)->path))
                return -ENAMETOOLONG;
        if (opts->read_only && opts->create_size > 0)
                return -EINVAL;
        int fd = bs_open_fd(path, opts);
        if (fd < 0)
                return fd;
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
                close(fd);
                return -EINVAL;
        }
        bool is_blockdev = S_ISBLK(st.st_mode);
        /* Growing a regular file keeps it sparse; a file is never shrunk behind the admin's back.
         */
        if (!is_blockdev && opts->create_size > (uint64_t)st.st_size &&
            ftruncate(fd, (off_t)opts->create_size) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        struct bs_dev *bs = calloc(1, sizeof(*bs));
        if (!bs) {
                close(fd);
                return -ENOMEM;
        }
        bs->fd = fd;
        snprintf(bs->path, sizeof(bs->path), "%s", path);
        bs->is_blockdev = is_blockdev;
        bs->direct = opts->direct;
        bs->submit_async = !is_blockdev && file_submission_may_block(fd);
        pthread_mutex_init(&bs->flush_lock, NULL);
        pthread_cond_init(&bs->flush_cond, NULL);
        int rc = bs_query_size(fd, is_blockdev, &bs->size);
        if (rc < 0) {
                bs_close(bs);
                return rc;
        }
        *out = bs;
        return 0;
}

void bs_close(struct bs_dev *bs)
{
        if (!bs)
                return;
        close(bs->fd);
        pthread_mutex_destroy(&bs->flush_lock);
        pthread_cond_destroy(&bs->flush_cond);
        free(bs);
}

int bs_refresh_size(struct bs_dev *bs)
{
        return bs_query_size(bs->fd, bs->is_blockdev, &bs->size);
}

int bs_probe_size(struct bs_dev *bs, uint64_t *size)
{
        return bs_query_size(bs->fd, bs->is_blockdev, size);
}

int bs_set_file_size(struct bs_dev *bs, uint64_t size)
{
        if (bs->is_blockdev)
                return -ENOTTY;
        if (size > (uint64_t)INT64_MAX)
                return -EFBIG;
        if (ftruncate(bs->fd, (off_t)size) < 0)
                return -errno;
        bs->size = size;
        return 0;
}

#define DIRECT_MEM_ALIGN BS_DIRECT_ALIGN

bool bs_direct_aligned(const void *buf, size_t len)
{
        return !((uintptr_t)buf & (DIRECT_MEM_ALIGN - 1)) && !(len & 511);
}

static bool direct_mem_aligned(const struct iovec *iov, int iovcnt)
{
        for (int i = 0; i < iovcnt; i++)
                if (!bs_direct_aligned(iov[i].iov_base, iov[i].iov_len))
                        return false;
        return true;
}

static int bs_read_plain(struct bs_dev *bs, void *buf, size_t len, uint64_t off);

/* Reads into an aligned bounce buffer when the caller's buffer does not suit O_DIRECT. */
static int bs_read_bounced(struct bs_dev *bs, void *buf, size_t len, uint64_t off)
{
        void *bounce;
        if (posix_memalign(&bounce, DIRECT_MEM_ALIGN, len ? len : 1) != 0)
                return -ENOMEM;
        int rc = bs_read_plain(bs, bounce, len, off);
        if (rc == 0)
                memcpy(buf, bounce, len);
        free(bounce);
        return rc;
}

int bs_read(struct bs_dev *bs, void *buf, size_t len, uint64_t off)
{
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        if (bs->direct && !direct_mem_aligned(&iov, 1))
                return bs_read_bounced(bs, buf, len, off);
        return bs_read_plain(bs, buf, len, off);
}

static int bs_read_plain(struct bs_dev *bs, void *buf, size_t len, uint64_t off)
{
        uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = pread(bs->fd, p, len, (off_t)off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0) { /* past the end of a file: reads as zeroes */
                        memset(p, 0, len);
                        return 0;
                }
                p += n;
                off += (uint64_t)n;
                len -= (size_t)n;
        }
        return 0;
}

int bs_write(struct bs_dev *bs, const void *buf, size_t len, uint64_t off)
{
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        return bs_writev(bs, &iov, 1, off);
}

static void iov_advance(struct iovec **iov, int *iovcnt, size_t n)
{
        while (n > 0 && *iovcnt > 0) {
                if (n >= (*iov)->iov_len) {
                        n -= (*iov)->iov_len;
                        (*iov)++;
                        (*iovcnt)--;
                } else {
                        (*iov)->iov_base = (uint8_t *)(*iov)->iov_base + n;
                        (*iov)->iov_len -= n;
                        n = 0;
                }
        }
}

static int bs_writev_plain(struct bs_dev *bs, const struct iovec *iov_in, int iovcnt, uint64_t off,
                           int rwf);

static int bs_writev_bounced(struct bs_dev *bs, const struct iovec *iov, int iovcnt, uint64_t off,
                             int rwf)
{
        size_t len = 0;
        for (int i = 0; i < iovcnt; i++)
                len += iov[i].iov_len;
        uint8_t *bounce;
        if (posix_memalign((void **)&bounce, DIRECT_MEM_ALIGN, len ? len : 1) != 0)
                return -ENOMEM;
        size_t at = 0;
        for (int i = 0; i < iovcnt; i++) {
                memcpy(bounce + at, iov[i].iov_base, iov[i].iov_len);
                at += iov[i].iov_len;
        }
        struct iovec one = {.iov_base = bounce, .iov_len = len};
        int rc = bs_writev_plain(bs, &one, 1, off, rwf);
        free(bounce);
        return rc;
}

int bs_writev(struct bs_dev *bs, const struct iovec *iov, int iovcnt, uint64_t off)
{
        return bs_writev_flags(bs, iov, iovcnt, off, 0);
}

int bs_writev_flags(struct bs_dev *bs, const struct iovec *iov, int iovcnt, uint64_t off, int rwf)
{
        if (bs->direct && !direct_mem_aligned(iov, iovcnt))
                return bs_writev_bounced(bs, iov, iovcnt, off, rwf);
        return bs_writev_plain(bs, iov, iovcnt, off, rwf);
}

static int bs_writev_plain(struct bs_dev *bs, const struct iovec *iov_in, int iovcnt, uint64_t off,
                           int rwf)
{
        struct iovec local[64];
        if (iovcnt > 64)
                return -EINVAL;
        memcpy(local, iov_in, sizeof(*iov_in) * (size_t)iovcnt);
        struct iovec *iov = local;
        while (iovcnt > 0) {
                ssize_t n = pwritev2(bs->fd, iov, iovcnt, (off_t)off, rwf);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -ENOSPC;
                off += (uint64_t)n;
                iov_advance(&iov, &iovcnt, (size_t)n);
        }
        if (rwf & RWF_DSYNC)
                atomic_fetch_add(&bs->dsync_writes, 1);
        atomic_fetch_add(&bs->write_seq, 1);
        return 0;
}

int bs_write_zeroes(struct bs_dev *bs, uint64_t off, uint64_t len)
{
        if (bs->is_blockdev) {
                uint64_t range[2] = {off, len};
                if (ioctl(bs->fd, BLKZEROOUT, range) == 0) {
                        atomic_fetch_add(&bs->write_seq, 1);
                        return 0;
                }
        } else if (!atomic_load(&bs->no_zero_range)) {
                if (fallocate(bs->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                              (off_t)len) == 0) {
                        atomic_fetch_add(&bs->write_seq, 1);
                        return 0;
                }
                if (errno == EOPNOTSUPP)
                        atomic_store(&bs->no_zero_range, true);
        }
        /* Filesystems without ZERO_RANGE (tmpfs before 6.x): write a zero buffer. */
        static const uint8_t zero[65536] __attribute__((aligned(DIRECT_MEM_ALIGN)));
        while (len > 0) {
                size_t n = len < sizeof(zero) ? (size_t)len : sizeof(zero);
                int rc = bs_write(bs, zero, n, off);
                if (rc < 0)
                        return rc;
                off += n;
                len -= n;
        }
        return 0;
}

int bs_unmap(struct bs_dev *bs, uint64_t off, uint64_t len)
{
        if (len == 0)
                return 0;
        /*
         * PUNCH_HOLE deallocates and guarantees zeroes on files and, since Linux 4.9, on block
         * devices too (unlike BLKDISCARD, whose discarded blocks may read back anything), so
         * LBPRZ holds for thin LUNs on LVM volumes as well.
         */
        int rc = -EOPNOTSUPP;
        if (!atomic_load(&bs->no_punch_hole))
                rc = fallocate(bs->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                               (off_t)len) < 0
                         ? -errno
                         : 0;
        /* No deallocation here: write the zeroes the initiator will read back. */
        if (rc == -EOPNOTSUPP || rc == -ENOTTY || rc == -ENODEV) {
                atomic_store(&bs->no_punch_hole, true);
                return bs_write_zeroes(bs, off, len);
        }
        if (rc == 0)
                atomic_fetch_add(&bs->write_seq, 1);
        return rc;
}

int bs_lba_status(struct bs_dev *bs, uint64_t off, uint64_t max_len, bool *mapped,
                  uint64_t *run_len)
{
        uint64_t end = off + max_len;
        if (bs->is_blockdev) {
                *mapped = true;
                *run_len = max_len;
                return 0;
        }
        off_t data = lseek(bs->fd, (off_t)off, SEEK_DATA);
        if (data < 0) {
                if (errno == ENXIO) { /* no data from off to EOF */
                        *mapped = false;
                        *run_len = max_len;
                        return 0;
                }
                return -errno;
        }
        if ((uint64_t)data > off) {
                *mapped = false;
                *run_len = ((uint64_t)data < end ? (uint64_t)data : end) - off;
                return 0;
        }
        off_t hole = lseek(bs->fd, (off_t)off, SEEK_HOLE);
        if (hole < 0)
                return -errno;
        *mapped = true;
        *run_len = ((uint64_t)hole < end ? (uint64_t)hole : end) - off;
        return 0;
}

void bs_prefetch(struct bs_dev *bs, uint64_t off, uint64_t len)
{
        (void)posix_fadvise(bs->fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}
