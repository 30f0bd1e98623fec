/*
 * SCSI-layer calls a transport makes over the life of an I_T nexus, beyond scsi.h
 * (owned by the SCSI layer, daemon/scsi/).
 */
#ifndef TANDEM_SCSI_NEXUS_H
#define TANDEM_SCSI_NEXUS_H

#include "tandem/scsi.h"

/*
 * The I_T nexus ends (logout, connection loss after Time2Retain, session reinstatement,
 * target cold reset): reservations it holds through RESERVE(6/10) are released.
 * Call once, before the nexus memory goes away; nx->target must still be referenced.
 */
void scsi_nexus_fini(struct scsi_nexus *nx);

#endif
