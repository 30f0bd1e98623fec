/*
 * The EXTENDED COPY parameter list (xcopy_parse): any bytes, at any length, must come back
 * as a verdict, never as a read past the list; an accepted plan stays within the limits the
 * copy manager reports. (Running a copy is fuzz_cdb's: an 83h CDB with this list as data.)
 */
#include "fuzz_util.h"
#include "scsi/xcopy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > 4096)
                return 0;
        /* A copy of exactly size bytes: ASan sees any read past the end. */
        uint8_t *p = malloc(size ? size : 1);
        memcpy(p, data, size);
        struct xcopy_plan plan;
        struct scsi_field_ptr f = {0};
        enum scsi_reason r = xcopy_parse(p, (uint32_t)size, &plan, &f);
        if (fuzz_verbose())
                fprintf(stderr, "xcopy: %zu bytes: %s, %u targets, %u segments\n", size,
                        scsi_reason_name(r), plan.n_targets, plan.n_segments);
        FUZZ_ASSERT(r < SR_COUNT, "reason %d", r);
        if (r == SCSI_OK) {
                FUZZ_ASSERT(plan.n_targets <= XCOPY_MAX_TARGETS, "%u targets", plan.n_targets);
                FUZZ_ASSERT(plan.n_segments <= XCOPY_MAX_SEGMENTS, "%u segments", plan.n_segments);
                FUZZ_ASSERT(size >= 16, "a plan from %zu bytes", size);
        }
        if (r == SR_INVALID_FIELD_PARAM)
                FUZZ_ASSERT(f.byte < size || size == 0 || f.byte == 0xffff, "field %u of %zu",
                            f.byte, size);
        free(p);
        return 0;
}
