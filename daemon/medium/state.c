/*
 * State records of a logical unit, kept with its medium: a few small blobs by id, in memory,
 * and the persistent ones also in a file rewritten atomically on each change of them.
 *
 * File: "TDMS" | version u32 | count u32 | { id u32 | length u32 | bytes } * count |
 * FNV-1a 64 of everything before it (little-endian throughout). A file that fails its check
 * is refused, not half used.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tandem/byteorder.h"
#include "tandem/fnv.h"
#include "tandem/fsutil.h"
#include "tandem/log.h"
#include "tandem/medium.h"

#define STATE_MAGIC   0x534d4454u /* "TDMS" */
#define STATE_VERSION 1u

struct state_record {
        uint8_t *bytes;
        size_t len;
        bool persist;
};

struct tdm_state_store {
        pthread_mutex_t lock;
        struct state_record rec[TDM_STATE_RECORDS];
        char *path; /* NULL: nothing persists */
};

struct tdm_state_store *tdm_state_store_new(void)
{
        struct tdm_state_store *st = calloc(1, sizeof(*st));
        if (st)
                pthread_mutex_init(&st->lock, NULL);
        return st;
}

void tdm_state_store_free(struct tdm_state_store *st)
{
        if (!st)
                return;
        for (unsigned i = 0; i < TDM_STATE_RECORDS; i++)
                free(st->rec[i].bytes);
        free(st->path);
        pthread_mutex_destroy(&st->lock);
        free(st);
}

/* The persistent records as file bytes (lock held); *out malloc'd. */
static int encode_locked(const struct tdm_state_store *st, uint8_t **out, size_t *outlen)
{
        size_t len = 12 + 8;
        uint32_t count = 0;
        for (unsigned i = 0; i < TDM_STATE_RECORDS; i++)
                if (st->rec[i].persist && st->rec[i].len) {
                        len += 8 + st->rec[i].len;
                        count++;
                }
        uint8_t *b = malloc(len);
        if (!b)
                return -ENOMEM;
        put_le32(b, STATE_MAGIC);
        put_le32(b + 4, STATE_VERSION);
        put_le32(b + 8, count);
        size_t at = 12;
        for (unsigned i = 0; i < TDM_STATE_RECORDS; i++) {
                const struct state_record *r = &st->rec[i];
                if (!r->persist || !r->len)
                        continue;
                put_le32(b + at, i);
                put_le32(b + at + 4, (uint32_t)r->len);
                memcpy(b + at + 8, r->bytes, r->len);
                at += 8 + r->len;
        }
        put_le64(b + at, tdm_fnv1a(TDM_FNV1A_INIT, b, at));
        *out = b;
        *outlen = len;
        return 0;
}

/* Temporary file, fsync, rename, fsync of the directory: the old file or the new, whole. */
static int save_locked(const struct tdm_state_store *st)
{
        uint8_t *b;
        size_t len;
        int rc = encode_locked(st, &b, &len);
        if (rc < 0)
                return rc;
        char tmp[4200];
        snprintf(tmp, sizeof(tmp), "%s.tmp", st->path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        rc = fd < 0 ? -errno : tdm_write_all(fd, b, len);
        if (rc == 0 && fsync(fd) < 0)
                rc = -errno;
        if (fd >= 0)
                close(fd);
        if (rc == 0 && rename(tmp, st->path) < 0)
                rc = -errno;
        if (rc == 0)
                rc = tdm_fsync_parent_dir(st->path);
        if (rc < 0)
                unlink(tmp);
        free(b);
        return rc;
}

static int set_locked(struct tdm_state_store *st, unsigned id, const void *buf, size_t len,
                      bool persist)
{
        uint8_t *copy = NULL;
        if (len && !(copy = malloc(len)))
                return -ENOMEM;
        if (len)
                memcpy(copy, buf, len);
        free(st->rec[id].bytes);
        st->rec[id] = (struct state_record){.bytes = copy, .len = len, .persist = persist && len};
        return 0;
}

/* Reads the file's records into the table (lock held). */
static int load_locked(struct tdm_state_store *st, const uint8_t *b, size_t len)
{
        if (len < 20 || get_le32(b) != STATE_MAGIC || get_le32(b + 4) != STATE_VERSION ||
            get_le64(b + len - 8) != tdm_fnv1a(TDM_FNV1A_INIT, b, len - 8))
                return -EBADMSG;
        uint32_t count = get_le32(b + 8);
        size_t at = 12, end = len - 8;
        for (uint32_t n = 0; n < count; n++) {
                if (end - at < 8)
                        return -EBADMSG;
                uint32_t id = get_le32(b + at), rlen = get_le32(b + at + 4);
                if (id >= TDM_STATE_RECORDS || rlen > TDM_STATE_MAX_BYTES || end - at - 8 < rlen)
                        return -EBADMSG;
                int rc = set_locked(st, id, b + at + 8, rlen, true);
                if (rc < 0)
                        return rc;
                at += 8 + rlen;
        }
        return at == end ? 0 : -EBADMSG;
}

int tdm_state_store_attach(struct tdm_state_store *st, const char *path)
{
        int rc = 0;
        pthread_mutex_lock(&st->lock);
        free(st->path);
        st->path = strdup(path);
        if (!st->path)
                rc = -ENOMEM;
        FILE *f = rc == 0 ? fopen(path, "rb") : NULL;
        if (f) {
                uint8_t *b = malloc(TDM_STATE_RECORDS * (TDM_STATE_MAX_BYTES + 8) + 20);
                size_t n =
                    b ? fread(b, 1, TDM_STATE_RECORDS * (TDM_STATE_MAX_BYTES + 8) + 20, f) : 0;
                rc = b ? load_locked(st, b, n) : -ENOMEM;
                if (rc < 0)
                        log_err("state records %s: %s: refused", path, strerror(-rc));
                free(b);
                fclose(f);
        } else if (rc == 0 && errno != ENOENT) {
                rc = -errno;
        }
        pthread_mutex_unlock(&st->lock);
        return rc;
}

int tdm_state_store_put(struct tdm_state_store *st, unsigned id, const void *buf, size_t len,
                        bool persist)
{
        if (id >= TDM_STATE_RECORDS || len > TDM_STATE_MAX_BYTES)
                return -EINVAL;
        pthread_mutex_lock(&st->lock);
        bool was_persistent = st->rec[id].persist;
        int rc = set_locked(st, id, buf, len, persist);
        if (rc == 0 && st->path && (was_persistent || st->rec[id].persist))
                rc = save_locked(st);
        pthread_mutex_unlock(&st->lock);
        return rc;
}

size_t tdm_state_store_get(struct tdm_state_store *st, unsigned id, void *buf, size_t cap,
                           bool *persist)
{
        if (id >= TDM_STATE_RECORDS)
                return 0;
        pthread_mutex_lock(&st->lock);
        size_t len = st->rec[id].len;
        if (persist)
                *persist = st->rec[id].persist;
        if (buf && cap && len)
                memcpy(buf, st->rec[id].bytes, len < cap ? len : cap);
        pthread_mutex_unlock(&st->lock);
        return len;
}
