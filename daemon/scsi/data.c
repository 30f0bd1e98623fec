/* Data-in buffers of a task: inline for small replies, heap (page aligned) for the rest. */
#include <stdlib.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/bufcache.h"

uint8_t *scsi_data_in_alloc(struct scsi_task *task, uint32_t len)
{
        if (len <= sizeof(task->data_in_inline)) {
                memset(task->data_in_inline, 0, len);
                task->data_in = task->data_in_inline;
                task->data_in_owned = false;
        } else {
                task->data_in = calloc(1, len);
                if (!task->data_in)
                        return NULL;
                task->data_in_owned = true;
                task->data_in_cached = false;
        }
        task->data_in_len = len;
        return task->data_in;
}

/*
 * Medium reads land here directly: page aligned so O_DIRECT backstores can fill it, and
 * taken from the worker's buffer cache so large reads cost no fresh pages.
 */
uint8_t *scsi_data_in_alloc_aligned(struct scsi_task *task, uint32_t len)
{
        size_t cap = 0;
        void *buf = tdm_buf_get(len ? len : 1, &cap);
        if (!buf)
                return NULL;
        task->data_in = buf;
        task->data_in_owned = true;
        task->data_in_cached = true;
        task->data_in_cap = cap;
        task->data_in_len = len;
        return buf;
}

/*
 * A reply longer than the ALLOCATION LENGTH is cut to it: what is left is what the
 * command transfers (data_in_len == xfer_len; the transport compares it with the EDTL).
 */
void scsi_data_in_limit(struct scsi_task *task, uint32_t alloc_len)
{
        task->data_in_len = min_u32(alloc_len, task->data_in_len);
        task->xfer_len = task->data_in_len;
}

void scsi_task_release(struct scsi_task *task)
{
        if (task->data_in_owned && task->data_in_cached)
                tdm_buf_put(task->data_in, task->data_in_cap);
        else if (task->data_in_owned)
                free(task->data_in);
        task->data_in = NULL;
        task->data_in_owned = false;
        task->data_in_cached = false;
        task->data_in_len = 0;
}
