/*
 * Resource limits of the iSCSI layer (iscsi.max_sessions ... in tandem.conf): admission of new
 * TCP connections (login rate per address, connections not yet logged in) and the one log
 * line per refusal kind and peer. Session counts live in session.c, per-connection output and
 * write-data caps in tx.c and scsi_cmd.c, the output timeout in conn.c.
 */
#ifndef TANDEM_ISCSI_LIMITS_H
#define TANDEM_ISCSI_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#include "tandem/config.h"

enum iscsi_refusal {
        ISCSI_REFUSE_RATE,           /* connection over login_rate: closed before login */
        ISCSI_REFUSE_PENDING,        /* max_pending_logins reached: closed before login */
        ISCSI_REFUSE_LOGIN_TIMEOUT,  /* login not finished in login_timeout: closed */
        ISCSI_REFUSE_SESSIONS,       /* max_sessions: Login Response 03/02 */
        ISCSI_REFUSE_SESSIONS_INIT,  /* max_sessions_per_initiator: Login Response 03/02 */
        ISCSI_REFUSE_OUTPUT_TIMEOUT, /* output not taken within output_timeout: dropped */
        ISCSI_REFUSE_NOT_SERVING,    /* held login, the target served elsewhere: 03/01 */
        ISCSI_REFUSE_KINDS,
};

/* Seconds between two log lines of the same refusal kind and peer address. */
#define ISCSI_REFUSAL_LOG_INTERVAL_S 10u

/*
 * Logs "PEER: what" at warning level, unless the same kind was logged for the same address
 * (peer without its port) within the interval: then it only counts, and the next line says
 * how many were refused meanwhile. Any thread.
 */
void iscsi_refusal_log(enum iscsi_refusal kind, const char *peer, const char *what);

/* ---- admission of new connections (admission.c; any thread) ---- */

/* The limits admission applies (copied; 0 in a field: the default). */
void iscsi_admission_configure(const struct tdm_iscsi_cfg *cfg);
/*
 * A connection just accepted: true when it may go on to login (then it counts as pending
 * until iscsi_pending_login_done), false when it is to be closed at once (logged).
 */
bool iscsi_admit_connection(int fd);
/* The connection on fd logged in: its address gets back the token its connection took. */
void iscsi_admission_logged_in(int fd);
/* A connection admitted by iscsi_admit_connection left the login phase (or closed in it). */
void iscsi_pending_login_done(void);
/* Connections admitted and still in login (for tests and status). */
unsigned iscsi_pending_logins(void);

#endif
