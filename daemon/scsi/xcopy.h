/* EXTENDED COPY (LID1) and RECEIVE COPY RESULTS: the limits, the parsed parameter list. */
#ifndef TANDEM_SCSI_XCOPY_H
#define TANDEM_SCSI_XCOPY_H

#include <stdbool.h>
#include <stdint.h>

#include "scsi_internal.h"

/* Reported (RECEIVE COPY RESULTS OPERATING PARAMETERS, VPD 8Fh) and enforced. */
#define XCOPY_MAX_TARGETS       2u
#define XCOPY_MAX_SEGMENTS      32u
#define XCOPY_MAX_DESC_LIST     1024u
#define XCOPY_MAX_SEGMENT_BYTES (16u * 1024 * 1024) /* one replication frame: never torn */
#define XCOPY_RESULTS_KEPT      16u                 /* finished copies COPY STATUS can report */

struct xcopy_target {
        uint8_t naa[16];
        uint32_t block_size; /* DISK BLOCK LENGTH as sent (0: not given) */
};

struct xcopy_segment {
        uint16_t src, dst; /* target descriptor indexes */
        uint64_t src_lba, dst_lba;
        uint32_t blocks; /* 02h */
        uint32_t bytes;  /* 0Ah */
        uint32_t field;  /* offset of the descriptor in the parameter list */
};

struct xcopy_plan {
        uint8_t list_id, list_id_usage;
        unsigned n_targets, n_segments;
        struct xcopy_target targets[XCOPY_MAX_TARGETS];
        struct xcopy_segment segments[XCOPY_MAX_SEGMENTS];
};

/*
 * Parses and checks an EXTENDED COPY parameter list of len bytes (no media touched): SCSI_OK
 * with *plan, or the reason (with *f for INVALID FIELD IN PARAMETER LIST).
 */
enum scsi_reason xcopy_parse(const uint8_t *p, uint32_t len, struct xcopy_plan *plan,
                             struct scsi_field_ptr *f);

/* xcopy_results.c: what COPY STATUS reports for a finished copy of a nexus. */
void xcopy_record_result(struct scsi_lun *lun, uint64_t nexus, uint8_t list_id, bool ok,
                         uint16_t segments, uint64_t bytes);

#endif
