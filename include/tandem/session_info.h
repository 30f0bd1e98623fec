/*
 * A point-in-time view of the iSCSI sessions, for `tandemctl status`. The admin plane
 * (daemon/admin/) consumes it; the iSCSI layer (daemon/iscsi/) provides it.
 */
#ifndef TANDEM_SESSION_INFO_H
#define TANDEM_SESSION_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "tandem/scsi.h"

/* One connection of one session (a session with several connections gives several rows). */
struct iscsi_session_info {
        char initiator[224]; /* InitiatorName */
        char target[224];    /* TargetName; "" for a discovery session */
        uint8_t isid[6];
        uint16_t tsih;
        char peer[64]; /* "addr:port" or "[v6]:port" of the initiator */
        uint16_t cid;
        char state[32];              /* "login", "full-feature", "logout", ... */
        uint32_t commands_in_flight; /* SCSI commands received and not yet answered */
        uint64_t id;                 /* unique in this process, never reused: rates match on it */
        struct scsi_io_counters io;  /* the session's commands (normal sessions; else zeros) */
};

/*
 * Fills out[0 .. min(n, max) - 1] and returns n, the number of rows that exist (so a
 * caller whose buffer was too small can retry with n). Called on the control thread
 * while worker threads serve connections: the implementation must be thread-safe.
 * Implemented by the iSCSI layer; daemon/admin/ipc.c has a weak fallback returning 0
 * that is used only while that implementation is not linked in.
 */
size_t iscsi_sessions_snapshot(struct iscsi_session_info *out, size_t max);

#endif
