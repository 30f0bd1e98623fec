/* Logical units, targets and nexuses: lifetime, lookup, task management, statistics. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pr_model.h"
#include "scsi_internal.h"
#include "tandem/byteorder.h"
#include "tandem/fnv.h"

static _Atomic uint64_t next_nexus_id = 1;

/* FNV-1a: a stable default identity derived from the backing path and LUN id. */
static uint64_t identity_hash(const char *path, uint64_t id)
{
        uint8_t le_id[8];
        put_le64(le_id, id);
        return tdm_fnv1a(tdm_fnv1a(TDM_FNV1A_INIT, path, strlen(path)), le_id, sizeof(le_id));
}

/* Defaults until the configuration sets the replicated identity (same on every node). */
static void lun_default_identity(struct scsi_lun *lun, const char *name)
{
        uint64_t h = identity_hash(name, lun->id);
        uint64_t h2 = identity_hash("tandem", h);
        lun->naa[0] = 0x60; /* NAA 6, IEEE company id 0 (none assigned) */
        for (int i = 0; i < 8; i++)
                lun->naa[8 + i] = (uint8_t)(h >> (8 * (7 - i)));
        for (int i = 0; i < 5; i++)
                lun->naa[3 + i] = (uint8_t)(h2 >> (8 * i));
        lun->naa[3] &= 0x0f; /* vendor specific identifier starts in the low nibble */
        snprintf(lun->serial, sizeof(lun->serial), "%016llx", (unsigned long long)h);
        snprintf(lun->product, sizeof(lun->product), "%s", SCSI_DEFAULT_PRODUCT);
}

struct scsi_lun *scsi_lun_create(uint64_t id, struct tdm_medium *medium, uint32_t block_size,
                                 const char *name)
{
        if (!medium || block_size < 512 || block_size > 65536 || (block_size & (block_size - 1)) ||
            id >= SCSI_MAX_LUNS)
                return NULL;
        struct scsi_lun_private *priv = calloc(1, sizeof(*priv));
        if (!priv)
                return NULL;
        priv->name = strdup(name ? name : "");
        if (!priv->name) {
                free(priv);
                return NULL;
        }
        struct scsi_lun *lun = &priv->lun;
        atomic_init(&lun->refs, 1);
        lun->id = id;
        lun->medium = medium;
        lun->block_size = block_size;
        atomic_init(&lun->num_blocks, tdm_medium_size(medium) / block_size);
        atomic_init(&lun->wce, true);
        lun_default_identity(lun, priv->name);
        scsi_lun_alua_init(lun);
        if (scsi_lun_state_init(lun) < 0) {
                lun->medium->access_changed = NULL;
                lun->medium->state_changed = NULL;
                free(priv->name);
                free(priv);
                return NULL;
        }
        return lun;
}

void scsi_lun_get(struct scsi_lun *lun)
{
        atomic_fetch_add_explicit(&lun->refs, 1, memory_order_relaxed);
}

/* The last reference destroys the medium: the LUN owns it from scsi_lun_create() on. */
void scsi_lun_put(struct scsi_lun *lun)
{
        if (!lun)
                return;
        if (atomic_fetch_sub_explicit(&lun->refs, 1, memory_order_acq_rel) != 1)
                return;
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        scsi_journal_close(priv->journal);
        lun->medium->access_changed = NULL;
        lun->medium->state_changed = NULL;
        lun->medium->forwarded = NULL;
        lun->medium->size_changed = NULL;
        tdm_medium_destroy(lun->medium); /* waits for a forwarded command still running */
        scsi_lun_state_fini(lun);
        free(priv->name);
        free(priv);
}

int scsi_lun_attach_atomic_journal(struct scsi_lun *lun, const char *path,
                                   struct tdm_medium *replay_to)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        if (priv->journal)
                return -EEXIST;
        return scsi_journal_open(lun, path, replay_to, &priv->journal);
}

struct scsi_target *scsi_target_create(const char *iqn)
{
        struct scsi_target *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        atomic_init(&t->refs, 1);
        snprintf(t->iqn, sizeof(t->iqn), "%s", iqn ? iqn : "");
        t->tpgt = 1;
        pthread_mutex_init(&t->lun_lock, NULL);
        return t;
}

void scsi_target_get(struct scsi_target *t)
{
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void scsi_target_put(struct scsi_target *t)
{
        if (!t)
                return;
        if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
                return;
        for (int i = 0; i < SCSI_MAX_LUNS; i++)
                scsi_lun_put(atomic_load(&t->luns[i]));
        pthread_mutex_destroy(&t->lun_lock);
        free(t);
}

/*
 * The lock makes "load the pointer, take a reference" atomic against del_lun dropping
 * the table's reference; it is per target and held for a few instructions.
 */
struct scsi_lun *scsi_target_get_lun(struct scsi_target *t, uint64_t id)
{
        if (!t || id >= SCSI_MAX_LUNS)
                return NULL;
        pthread_mutex_lock(&t->lun_lock);
        struct scsi_lun *lun = atomic_load_explicit(&t->luns[id], memory_order_acquire);
        if (lun)
                scsi_lun_get(lun);
        pthread_mutex_unlock(&t->lun_lock);
        return lun;
}

/* The table takes its own reference; the caller keeps (and later puts) its own. */
int scsi_target_add_lun(struct scsi_target *t, struct scsi_lun *lun)
{
        if (!t || !lun || lun->id >= SCSI_MAX_LUNS)
                return -EINVAL;
        pthread_mutex_lock(&t->lun_lock);
        if (atomic_load(&t->luns[lun->id])) {
                pthread_mutex_unlock(&t->lun_lock);
                return -EEXIST;
        }
        scsi_lun_get(lun);
        atomic_store_explicit(&t->luns[lun->id], lun, memory_order_release);
        atomic_fetch_add_explicit(&t->luns_gen, 1, memory_order_release);
        pthread_mutex_unlock(&t->lun_lock);
        return 0;
}

int scsi_target_del_lun(struct scsi_target *t, uint64_t id)
{
        if (!t || id >= SCSI_MAX_LUNS)
                return -EINVAL;
        pthread_mutex_lock(&t->lun_lock);
        struct scsi_lun *lun = atomic_exchange(&t->luns[id], NULL);
        if (lun)
                atomic_fetch_add_explicit(&t->luns_gen, 1, memory_order_release);
        pthread_mutex_unlock(&t->lun_lock);
        if (!lun)
                return -ENOENT;
        scsi_lun_put(lun);
        return 0;
}

void scsi_nexus_init(struct scsi_nexus *nx, struct scsi_target *t, const char *initiator)
{
        memset(nx, 0, sizeof(*nx));
        nx->id = atomic_fetch_add(&next_nexus_id, 1);
        nx->target = t;
        snprintf(nx->initiator, sizeof(nx->initiator), "%s", initiator ? initiator : "");
        static const uint8_t no_isid[6];
        pr_port_name(nx->port_name, nx->initiator, no_isid);
        for (int i = 0; i < SCSI_MAX_LUNS; i++)
                nx->power_on_pending[i] = true;
        if (t)
                nx->luns_gen_seen = atomic_load(&t->luns_gen);
}

void scsi_nexus_set_isid(struct scsi_nexus *nx, const uint8_t isid[6])
{
        pr_port_name(nx->port_name, nx->initiator, isid);
        memset(nx->res_epoch, 0, sizeof(nx->res_epoch)); /* another nexus to every LUN */
}

/*
 * The task set is one for all nexuses (control mode page TST 000b), so a CLEAR TASK SET
 * clears the other nexuses' commands too, and they hear of it (SAM-5 7.6): COMMANDS CLEARED
 * BY ANOTHER INITIATOR. Their commands already in the medium finish (it cannot cancel one):
 * to them that is a command completed just before the clear.
 */
void scsi_nexus_clear_task_set(struct scsi_nexus *nx, struct scsi_lun *lun)
{
        if (lun)
                scsi_lun_raise_ua(lun, SCSI_UA_CLEARED_BY_OTHER, nx->id);
}

unsigned scsi_latency_bucket(uint64_t ns)
{
        uint64_t us = ns / 1000;
        unsigned bucket = 0;
        while (bucket < SCSI_LAT_BUCKETS - 1 && us >= (1ull << bucket))
                bucket++;
        return bucket;
}

void scsi_lun_record_latency(struct scsi_lun *lun, uint64_t ns)
{
        atomic_fetch_add_explicit(&lun->stats.lat_hist[scsi_latency_bucket(ns)], 1,
                                  memory_order_relaxed);
}

void scsi_lun_count_bytes(struct scsi_lun *lun, bool is_write, uint64_t bytes)
{
        if (is_write)
                atomic_fetch_add_explicit(&lun->stats.write_bytes, bytes, memory_order_relaxed);
        else
                atomic_fetch_add_explicit(&lun->stats.read_bytes, bytes, memory_order_relaxed);
}

int scsi_lun_set_physical_block_size(struct scsi_lun *lun, uint32_t bytes)
{
        if (bytes == 0)
                bytes = lun->block_size;
        if (bytes < lun->block_size || bytes > SCSI_MAX_PHYS_BLOCK_BYTES || (bytes & (bytes - 1)))
                return -EINVAL;
        uint8_t exponent = 0;
        while ((lun->block_size << exponent) < bytes)
                exponent++;
        lun->lbppb_exponent = exponent;
        return 0;
}

/*
 * The size is stored before the attention is raised, so a nexus that sees the attention
 * and asks READ CAPACITY gets the new size (the UA generation bump is a release).
 */
int scsi_lun_grow(struct scsi_lun *lun, uint64_t num_blocks)
{
        uint64_t now = atomic_load(&lun->num_blocks);
        if (num_blocks < now)
                return -EINVAL;
        if (num_blocks == now)
                return 0;
        atomic_store(&lun->num_blocks, num_blocks);
        scsi_lun_raise_ua(lun, SCSI_UA_CAPACITY_CHANGED, 0);
        return 0;
}

void scsi_lun_medium_grew(void *arg)
{
        struct scsi_lun *lun = arg;
        scsi_lun_grow(lun, tdm_medium_size(lun->medium) / lun->block_size);
}

/*
 * The exponent is the configured one (physical_block_size), 0 by default although a file
 * on a 4 KiB filesystem has 4 KiB blocks: libiscsi 1.19's GetLBAStatus.UnmapSingle asks
 * GET LBA STATUS about LBA i + 1 and wants the first descriptor to start at i + LBPPB,
 * where SBC-4 has it start at the LBA asked about; only with one logical block per
 * physical block do the two agree. OPTIMAL TRANSFER LENGTH GRANULARITY and UNMAP
 * GRANULARITY tell initiators about the 4 KiB either way. Unmapping part of a physical
 * block is handled (those LBAs read back zeroes, the block stays allocated and GET LBA
 * STATUS says so), so WRITE SAME / UNMAP need no alignment whatever the exponent.
 */
uint8_t scsi_lun_lbppb_exponent(const struct scsi_lun *lun)
{
        return lun->lbppb_exponent;
}

/* The larger of a page / filesystem block and the physical block, in logical blocks. */
uint32_t scsi_lun_granularity_blocks(const struct scsi_lun *lun)
{
        uint32_t physical = 1u << lun->lbppb_exponent;
        uint32_t page = lun->block_size >= SCSI_GRANULARITY_BYTES
                            ? 1
                            : SCSI_GRANULARITY_BYTES / lun->block_size;
        return physical > page ? physical : page;
}
