/* Small file-system helpers shared by every layer that persists state. */
#ifndef TANDEM_FSUTIL_H
#define TANDEM_FSUTIL_H

/*
 * Makes a rename or a creation in path's directory durable: fsync of the directory that
 * holds path. 0 or -errno.
 */
int tdm_fsync_parent_dir(const char *path);

#endif
