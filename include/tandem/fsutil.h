/* Small file-system helpers shared by every layer that persists state. */
#ifndef TANDEM_FSUTIL_H
#define TANDEM_FSUTIL_H

#include <stddef.h>

/*
 * Makes a rename or a creation in path's directory durable: fsync of the directory that
 * holds path. 0 or -errno.
 */
int tdm_fsync_parent_dir(const char *path);

/* Writes all len bytes (again after a short write or EINTR). 0 or -errno (-EIO: wrote 0). */
int tdm_write_all(int fd, const void *buf, size_t len);

#endif
