/*
 * The COMPARE AND WRITEs a logical unit applied, remembered so that a resend is answered as
 * the first copy was: per initiator and LBA, a digest of the last CAW that initiator applied
 * there. The table is a state record of the medium (SCSI_STATE_CAW) that travels with the
 * CAW's write half as one change (tdm_medium_write_with_state: one replication frame), so a
 * copy has the entry exactly when it has the data, and a promoted peer recognises a resend
 * even after another initiator changed the blocks since (a resend compared with the data
 * alone would then miscompare: ESXi's "ATS miscompare"). Stored before the write, the entry
 * could outlive a write that never landed (a lock held twice); stored after it, a crash in
 * between forgot an applied CAW (the false miscompare): neither order is safe, one change is.
 *
 * Keyed by initiator name, not port name: libiscsi (QEMU) takes a new ISID when it
 * reconnects, and a host may resend on another path. Not persistent: after every node
 * restarted, a resend is compared with the data alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/byteorder.h"
#include "tandem/fnv.h"

#define CAW_TABLE_MAGIC   0x43415731u /* "CAW1" */
#define CAW_TABLE_ENTRIES 64
#define CAW_NAME_MAX      224
#define CAW_HEADER_BYTES  8
#define CAW_ENTRY_BYTES   (8 + 8 + 8 + CAW_NAME_MAX)
#define CAW_RECORD_MAX    (CAW_HEADER_BYTES + CAW_TABLE_ENTRIES * CAW_ENTRY_BYTES)

struct caw_entry {
        uint64_t lba, digest, seq; /* seq: age, for the eviction of the oldest */
        char initiator[CAW_NAME_MAX];
};

struct caw_table {
        unsigned n;
        struct caw_entry e[CAW_TABLE_ENTRIES];
};

uint64_t scsi_caw_digest(const void *halves, size_t len)
{
        return tdm_fnv1a(TDM_FNV1A_INIT, halves, len);
}

static size_t table_encode(const struct caw_table *t, uint8_t *buf)
{
        put_be32(buf, CAW_TABLE_MAGIC);
        put_be32(buf + 4, t->n);
        uint8_t *p = buf + CAW_HEADER_BYTES;
        for (unsigned i = 0; i < t->n; i++, p += CAW_ENTRY_BYTES) {
                put_be64(p, t->e[i].lba);
                put_be64(p + 8, t->e[i].digest);
                put_be64(p + 16, t->e[i].seq);
                memcpy(p + 24, t->e[i].initiator, CAW_NAME_MAX);
        }
        return CAW_HEADER_BYTES + (size_t)t->n * CAW_ENTRY_BYTES;
}

/* A record that is not a table (none yet, or damaged) is an empty table. */
static void table_decode(struct caw_table *t, const uint8_t *buf, size_t len)
{
        t->n = 0;
        if (len < CAW_HEADER_BYTES || get_be32(buf) != CAW_TABLE_MAGIC)
                return;
        uint32_t n = get_be32(buf + 4);
        if (n > CAW_TABLE_ENTRIES || len != CAW_HEADER_BYTES + (size_t)n * CAW_ENTRY_BYTES)
                return;
        const uint8_t *p = buf + CAW_HEADER_BYTES;
        for (uint32_t i = 0; i < n; i++, p += CAW_ENTRY_BYTES) {
                t->e[i].lba = get_be64(p);
                t->e[i].digest = get_be64(p + 8);
                t->e[i].seq = get_be64(p + 16);
                memcpy(t->e[i].initiator, p + 24, CAW_NAME_MAX);
                t->e[i].initiator[CAW_NAME_MAX - 1] = '\0';
        }
        t->n = n;
}

static struct caw_entry *table_find(struct caw_table *t, const char *initiator, uint64_t lba)
{
        for (unsigned i = 0; i < t->n; i++)
                if (t->e[i].lba == lba && strcmp(t->e[i].initiator, initiator) == 0)
                        return &t->e[i];
        return NULL;
}

/* The entry for (initiator, lba): the existing one, a new one, or the oldest reused. */
static struct caw_entry *table_slot(struct caw_table *t, const char *initiator, uint64_t lba)
{
        struct caw_entry *e = table_find(t, initiator, lba);
        if (e)
                return e;
        if (t->n < CAW_TABLE_ENTRIES)
                return &t->e[t->n++];
        e = &t->e[0];
        for (unsigned i = 1; i < t->n; i++)
                if (t->e[i].seq < e->seq)
                        e = &t->e[i];
        return e;
}

static uint64_t table_next_seq(const struct caw_table *t)
{
        uint64_t seq = 0;
        for (unsigned i = 0; i < t->n; i++)
                if (t->e[i].seq > seq)
                        seq = t->e[i].seq;
        return seq + 1;
}

/* Loads the table (caller frees); NULL on no memory. */
static struct caw_table *table_load(struct scsi_lun *lun, uint8_t *buf)
{
        struct caw_table *t = malloc(sizeof(*t));
        if (!t)
                return NULL;
        size_t len = scsi_lun_state_load(lun, SCSI_STATE_CAW, buf, CAW_RECORD_MAX, NULL);
        table_decode(t, buf, len > CAW_RECORD_MAX ? 0 : len);
        return t;
}

/*
 * Under caw_lock until the write is done: two CAWs at other LBAs each adding their entry to
 * the same table would otherwise store it without the other's.
 */
int scsi_caw_write_remembered(struct scsi_lun *lun, const char *initiator, uint64_t lba,
                              uint64_t digest, const void *data, uint32_t len, uint32_t flags)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        uint8_t *buf = malloc(CAW_RECORD_MAX);
        if (!buf)
                return -ENOMEM;
        pthread_mutex_lock(&priv->caw_lock);
        struct caw_table *t = table_load(lun, buf);
        int rc = -ENOMEM;
        if (t) {
                uint64_t seq = table_next_seq(t);
                struct caw_entry *e = table_slot(t, initiator, lba);
                *e = (struct caw_entry){.lba = lba, .digest = digest, .seq = seq};
                snprintf(e->initiator, sizeof(e->initiator), "%s", initiator);
                size_t record_len = table_encode(t, buf);
                rc = tdm_medium_write_with_state(lun->medium, data, len, lba * lun->block_size,
                                                 flags, SCSI_STATE_CAW, buf, (uint32_t)record_len);
                free(t);
        }
        pthread_mutex_unlock(&priv->caw_lock);
        free(buf);
        return rc;
}

bool scsi_caw_was_applied(struct scsi_lun *lun, const char *initiator, uint64_t lba,
                          uint64_t digest)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        uint8_t *buf = malloc(CAW_RECORD_MAX);
        if (!buf)
                return false;
        pthread_mutex_lock(&priv->caw_lock);
        struct caw_table *t = table_load(lun, buf);
        const struct caw_entry *e = t ? table_find(t, initiator, lba) : NULL;
        bool applied = e && e->digest == digest;
        pthread_mutex_unlock(&priv->caw_lock);
        free(t);
        free(buf);
        return applied;
}
