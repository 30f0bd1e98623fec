/*
 * tdm-slowfs: a FUSE file system with one file, a passthrough to a backing file, whose every
 * read, write and fsync can be made to stall: a stand-in for a slow or hung disk.
 *
 *   tdm-slowfs BACKING MOUNTPOINT [--delay-ms N]
 *
 * The mount shows BACKING as MOUNTPOINT/lun.img. SIGUSR1 turns the delay on (N ms before each
 * request is served, default 2000), SIGUSR2 turns it off. Requests are served by several
 * threads, so stalled ones wait side by side. direct_io: every I/O reaches this process (no
 * page cache in the kernel to answer from). Runs in the foreground until unmounted
 * (fusermount3 -u MOUNTPOINT) or killed.
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILE_NAME "/lun.img"

static int backing_fd = -1;
static unsigned delay_ms = 2000;
static atomic_bool stalled;

static void on_signal(int sig)
{
        atomic_store(&stalled, sig == SIGUSR1);
}

static void maybe_stall(void)
{
        if (!atomic_load(&stalled))
                return;
        struct timespec ts = {.tv_sec = delay_ms / 1000, .tv_nsec = (delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int sf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
        (void)fi;
        memset(st, 0, sizeof(*st));
        if (!strcmp(path, "/")) {
                st->st_mode = S_IFDIR | 0755;
                st->st_nlink = 2;
                return 0;
        }
        if (strcmp(path, FILE_NAME))
                return -ENOENT;
        struct stat b;
        if (fstat(backing_fd, &b) < 0)
                return -errno;
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = b.st_size;
        st->st_blocks = b.st_blocks;
        return 0;
}

static int sf_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
        (void)off;
        (void)fi;
        (void)flags;
        if (strcmp(path, "/"))
                return -ENOENT;
        fill(buf, ".", NULL, 0, 0);
        fill(buf, "..", NULL, 0, 0);
        fill(buf, &FILE_NAME[1], NULL, 0, 0);
        return 0;
}

static int sf_open(const char *path, struct fuse_file_info *fi)
{
        if (strcmp(path, FILE_NAME))
                return -ENOENT;
        fi->direct_io = 1;
        return 0;
}

static int sf_read(const char *path, char *buf, size_t len, off_t off, struct fuse_file_info *fi)
{
        (void)path;
        (void)fi;
        maybe_stall();
        ssize_t n = pread(backing_fd, buf, len, off);
        return n < 0 ? -errno : (int)n;
}

static int sf_write(const char *path, const char *buf, size_t len, off_t off,
                    struct fuse_file_info *fi)
{
        (void)path;
        (void)fi;
        maybe_stall();
        ssize_t n = pwrite(backing_fd, buf, len, off);
        return n < 0 ? -errno : (int)n;
}

static int sf_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
        (void)path;
        (void)fi;
        maybe_stall();
        int rc = datasync ? fdatasync(backing_fd) : fsync(backing_fd);
        return rc < 0 ? -errno : 0;
}

static int sf_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
        (void)fi;
        if (strcmp(path, FILE_NAME))
                return -ENOENT;
        return ftruncate(backing_fd, size) < 0 ? -errno : 0;
}

static int sf_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
        (void)path;
        (void)fi;
        maybe_stall();
        return fallocate(backing_fd, mode, off, len) < 0 ? -errno : 0;
}

static const struct fuse_operations ops = {
    .getattr = sf_getattr,
    .readdir = sf_readdir,
    .open = sf_open,
    .read = sf_read,
    .write = sf_write,
    .fsync = sf_fsync,
    .truncate = sf_truncate,
    .fallocate = sf_fallocate,
};

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: tdm-slowfs BACKING MOUNTPOINT [--delay-ms N]\n");
                return 2;
        }
        for (int i = 3; i < argc; i++) {
                if (!strcmp(argv[i], "--delay-ms") && i + 1 < argc) {
                        delay_ms = (unsigned)strtoul(argv[++i], NULL, 10);
                } else {
                        fprintf(stderr, "tdm-slowfs: unknown argument %s\n", argv[i]);
                        return 2;
                }
        }
        backing_fd = open(argv[1], O_RDWR | O_CLOEXEC);
        if (backing_fd < 0) {
                fprintf(stderr, "tdm-slowfs: %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGUSR2, &sa, NULL);
        /* Foreground, several threads; no attribute caching so sizes are always current. */
        char *fargv[] = {argv[0], argv[2], "-f", "-o", "attr_timeout=0,entry_timeout=0", NULL};
        return fuse_main(5, fargv, &ops, NULL);
}
