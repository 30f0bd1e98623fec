/* File-system helpers. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tandem/fsutil.h"

int tdm_fsync_parent_dir(const char *path)
{
        char *copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        free(copy);
        if (fd < 0)
                return -errno;
        int rc = fsync(fd) < 0 ? -errno : 0;
        close(fd);
        return rc;
}

int tdm_write_all(int fd, const void *buf, size_t len)
{
        const char *b = buf;
        while (len) {
                ssize_t n = write(fd, b, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                b += n;
                len -= (size_t)n;
        }
        return 0;
}
