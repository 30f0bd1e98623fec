/* Persistent reservations (SPC-4 5.13): the state and its record. */
#include "scsi_internal.h"

void scsi_pr_reload(struct scsi_lun *lun)
{
        (void)lun; /* nothing cached yet */
}
