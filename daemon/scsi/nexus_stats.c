/*
 * Per-session (I_T nexus) I/O counters and copies of the counters for the admin plane.
 * A nexus's counters have one writer, the thread that serves its session: each update is a
 * relaxed load and store, so the data path gains no locked instruction and no shared cache
 * line; readers on other threads see each counter whole (relaxed atomic loads).
 */
#include <stdatomic.h>

#include "scsi_internal.h"

static void bump(_Atomic uint64_t *c, uint64_t v)
{
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                              memory_order_relaxed);
}

void scsi_task_record_done(struct scsi_task *task, uint64_t latency_ns)
{
        if (!task->lun)
                return;
        scsi_lun_record_latency(task->lun, latency_ns);
        struct scsi_nexus *nx = task->nexus;
        if (!nx)
                return;
        struct scsi_nexus_stats *s = &nx->stats;
        uint32_t flags = task->entry ? task->entry->flags : 0;
        bool good = task->status == SCSI_STATUS_GOOD;
        if (flags & SCSI_F_STAT_READ) {
                bump(&s->reads, 1);
                if (good)
                        bump(&s->read_bytes, task->xfer_len);
        } else if (flags & SCSI_F_STAT_WRITE) {
                bump(&s->writes, 1);
                if (good)
                        bump(&s->write_bytes, task->data_out_len);
        } else {
                bump(&s->other, 1);
        }
        if (!good)
                bump(&s->errors, 1);
        bump(&s->lat_hist[scsi_latency_bucket(latency_ns)], 1);
}

/* The counters of a LUN's or a nexus's stats (same members, different atomic types). */
#define COUNTERS_COPY(s, out)                                                                      \
        do {                                                                                       \
                (out)->reads = atomic_load_explicit(&(s)->reads, memory_order_relaxed);            \
                (out)->writes = atomic_load_explicit(&(s)->writes, memory_order_relaxed);          \
                (out)->other = atomic_load_explicit(&(s)->other, memory_order_relaxed);            \
                (out)->read_bytes = atomic_load_explicit(&(s)->read_bytes, memory_order_relaxed);  \
                (out)->write_bytes =                                                               \
                    atomic_load_explicit(&(s)->write_bytes, memory_order_relaxed);                 \
                (out)->errors = atomic_load_explicit(&(s)->errors, memory_order_relaxed);          \
                for (size_t i_ = 0; i_ < SCSI_LAT_BUCKETS; i_++)                                   \
                        (out)->lat_hist[i_] =                                                      \
                            atomic_load_explicit(&(s)->lat_hist[i_], memory_order_relaxed);        \
        } while (0)

void scsi_nexus_stats_read(const struct scsi_nexus *nx, struct scsi_io_counters *out)
{
        COUNTERS_COPY(&nx->stats, out);
}

void scsi_lun_stats_read(const struct scsi_lun *lun, struct scsi_io_counters *out)
{
        COUNTERS_COPY(&lun->stats, out);
}
