/* Data-plane internals: connections, sessions and tasks owned by one worker thread. */
#ifndef TANDEM_ISCSI_CONN_H
#define TANDEM_ISCSI_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tandem/iscsi_hdr.h"
#include "tandem/iscsi_login.h"
#include "tandem/iscsi_pdu.h"
#include "tandem/clock.h"
#include "tandem/iscsi_portal.h"
#include "tandem/net.h"
#include "tandem/scsi.h"

struct iscsi_worker;
struct iscsi_conn;

/* Largest SCSI data transfer a single command may ask for. */
#define ISCSI_MAX_XFER  (16u * 1024 * 1024) /* the Block Limits MAXIMUM TRANSFER LENGTH */
#define ISCSI_TASK_HASH 256
/* Per-connection bounds on what a hostile or slow initiator can make us hold. */
/*
 * The byte bounds are configured (iscsi.max_conn_output: stop reading above it, resume below
 * a quarter; iscsi.max_conn_write_data: write data held at once); the task counts are fixed.
 */
#define ISCSI_TASKS_HIGH     4096u /* answered tasks whose PDUs are not sent yet */
#define ISCSI_COLLECTING_MAX 1024u /* tasks waiting for Data-Out at once */

enum iscsi_task_state {
        ISCSI_TASK_COLLECTING, /* waiting for Data-Out */
        ISCSI_TASK_EXECUTING,  /* waiting for the medium (disk, replication peers) */
        ISCSI_TASK_DONE,
};

struct iscsi_task {
        struct scsi_task scsi;
        struct iscsi_conn *conn;
        struct iscsi_task *hash_next; /* in conn->tasks[] while collecting */
        struct iscsi_task *exec_next; /* in conn->executing[] while in the medium */
        struct iscsi_task *free_next;
        uint32_t itt;
        uint32_t cmdsn;
        uint32_t edtl;       /* expected data transfer length */
        uint32_t cdb_out;    /* bytes the CDB asks the initiator to send (0: no data-out CDB) */
        uint32_t exec_bytes; /* counted in conn->exec_data_bytes while in the medium */
        bool immediate;
        enum iscsi_task_state state;
        /* Data-Out collection. */
        uint8_t *wbuf; /* from tdm_buf_get */
        size_t wbuf_cap;
        uint32_t wbuf_size;
        uint32_t want;       /* bytes we collect: min(edtl, what the CDB transfers) capped */
        uint32_t received;   /* bytes received (any order within bursts) */
        uint32_t r2t_offset; /* next offset to solicit */
        uint32_t r2t_sn;
        uint32_t r2t_outstanding;
        uint32_t ttt_base;        /* TTT of this task's R2Ts (one per task) */
        uint32_t exp_datasn;      /* DataSN due next in the current Data-Out sequence */
        uint32_t unsolicited_end; /* end of the unsolicited window (immediate + first burst) */
        bool aborted;
};

/* One queued outgoing PDU: header (+digest) and an optional data segment. */
struct iscsi_tx {
        struct iscsi_tx *next;
        uint8_t hdr[ISCSI_BHS_LEN + ISCSI_DIGEST_LEN];
        uint32_t hdr_len;
        const uint8_t *data;
        uint32_t data_len;
        uint8_t trailer[3 + ISCSI_DIGEST_LEN]; /* padding + data digest */
        uint32_t trailer_len;
        uint32_t sent;                /* bytes of this PDU already written */
        uint8_t *owned;               /* freed when sent */
        struct iscsi_task *task_done; /* task released when this PDU is sent */
        bool close_after;
};

/* Where the receiver is in the PDU in front (rx.c). */
enum iscsi_rx_state {
        RX_BHS,     /* the 48-byte basic header segment */
        RX_AHS,     /* additional header segments */
        RX_HDIGEST, /* header digest */
        RX_DATA,    /* data segment, padding and data digest, in the receive buffer */
        RX_DIRECT,  /* a large Data-Out payload, straight into its command's buffer */
        RX_DISCARD, /* bytes of a refused PDU, read and dropped */
        RX_DONE,    /* nothing more is parsed (a refused login) */
};

struct iscsi_rx {
        enum iscsi_rx_state state;
        uint32_t pos; /* bytes of the PDU in front judged so far (from rx_off) */
        uint32_t ahs_len, dsl;
        bool judged; /* a Data-Out the direct path already answered or ignored */
        /* RX_DIRECT */
        struct iscsi_task *task;
        uint8_t bhs[ISCSI_BHS_LEN];
        uint8_t *dest;
        uint32_t left;
        /* RX_DISCARD */
        uint32_t discard_left;
};

enum iscsi_conn_state {
        ISCSI_CONN_LOGIN,
        ISCSI_CONN_LOGIN_HELD, /* the final login answer waits until this node serves */
        ISCSI_CONN_FFP,
        ISCSI_CONN_LOGOUT,      /* the final answer queued: nothing more is parsed */
        ISCSI_CONN_AWAIT_CLOSE, /* the final answer sent: waiting for the initiator to close */
        ISCSI_CONN_CLOSED,
};

/*
 * How long a connection whose final answer (Logout, a refused login, a cold reset) is sent
 * waits for the initiator to close first before it is reset. The side that closes first keeps
 * the connection in TIME_WAIT for 60 s; on the target, that TIME_WAIT would answer a later
 * connection that reuses the address pair, after a failover brought the portal back here,
 * with ACKs instead of the reset a tickle ACK or a retransmission needs.
 */
#define ISCSI_AWAIT_CLOSE_S 2u

/*
 * How long a login to a target another node serves behind the shared portal is held before
 * it is refused with 03/01 (service unavailable). A failover brings the portal IP up beside
 * the promotion, so a client that connects in between is answered as soon as the node is
 * Primary instead of being dropped or refused (both cost it seconds of backoff). Below ESXi's
 * 5 s login timeout (open-iscsi's is 15 s); a refused login is retried after Time2Wait.
 */
#define ISCSI_LOGIN_HOLD_MAX_S 4u

struct iscsi_session;

struct iscsi_conn {
        int fd;
        struct net_handler handler; /* fd in the worker's loop */
        struct iscsi_worker *worker;
        char peer[64];
        char portal[64];
        enum iscsi_conn_state state;
        struct iscsi_login login;
        struct iscsi_login_env login_env;
        struct iscsi_session *sess;
        struct iscsi_text_state text;

        /* Receive buffer: whole PDUs are parsed from here. */
        uint8_t *rx;
        uint32_t rx_cap, rx_len, rx_off;
        uint64_t rx_consumed; /* bytes of PDUs taken from the buffer, to tell progress */

        struct iscsi_rx rx_st;
        struct iscsi_tx *discard_reply; /* sent once a refused PDU's bytes are dropped */

        /* Transmit queue. */
        struct iscsi_tx *tx_head, *tx_tail;
        struct iscsi_tx *tx_pool;
        uint32_t tx_pooled;
        uint64_t tx_queued_bytes;
        uint64_t tx_moved_ns; /* output last taken by the initiator, or first queued */
        uint64_t output_high; /* iscsi.max_conn_output */
        bool rx_paused;
        uint64_t collect_bytes;  /* write data held by the connection's tasks (wbuf sizes) */
        uint64_t write_data_max; /* iscsi.max_conn_write_data */
        uint64_t refused_full;   /* writes answered TASK SET FULL (logged sparsely) */
        bool want_write;

        /* Tasks waiting for Data-Out, by ITT. */
        struct iscsi_task *tasks[ISCSI_TASK_HASH];
        /* Tasks in the medium, by ITT: a new command may not take one of their ITTs. */
        struct iscsi_task *executing[ISCSI_TASK_HASH];
        uint32_t tasks_active;
        uint32_t tasks_collecting; /* tasks in tasks[] */
        struct iscsi_task *task_free;
        uint32_t next_ttt;

        /* Liveness. */
        uint64_t last_rx_ns;
        uint64_t login_start_ns;
        bool pending_login;   /* counted in the admission's pending logins */
        uint64_t nop_sent_ns; /* 0 = no ping outstanding */
        uint32_t nop_ttt;

        uint32_t async_pending;   /* tasks waiting for the medium: the conn outlives them */
        uint64_t exec_data_bytes; /* Data-In those tasks will send (backpressure) */
        atomic_bool kill;   /* set by another thread (reinstatement, cold reset): stop at once */
        uint64_t logout_ns; /* when the connection entered LOGOUT (close deadline) */
        uint64_t await_close_ns; /* when it entered AWAIT_CLOSE (reset deadline) */
        /* LOGIN_HELD: the final request's header, its answer, since when. */
        uint8_t held_req[ISCSI_BHS_LEN];
        struct iscsi_pdu_reply held_reply;
        uint64_t held_ns;
        struct iscsi_conn *next; /* worker's list */
        struct iscsi_conn *prev;
        struct iscsi_conn *dirty_next; /* output to flush at the end of this round */
        bool is_dirty;
};

struct iscsi_session {
        struct iscsi_session *next;
        uint64_t id;
        enum iscsi_session_type type;
        uint8_t isid[6];
        uint16_t tsih;
        char initiator[TDM_IQN_MAX];
        char target_name[TDM_IQN_MAX];
        struct scsi_target *target;
        struct iscsi_session_params params;
        struct scsi_nexus nexus;
        uint32_t exp_cmdsn;
        uint32_t queue_depth;
        uint32_t stat_sn;
        struct iscsi_conn *conn; /* MaxConnections = 1 */
        /* LUN references held by the session, refreshed when the target's LUN set changes. */
        struct scsi_lun *lun_cache[SCSI_MAX_LUNS];
        unsigned lun_cache_gen;
};

/* conn.c */
struct iscsi_conn *iscsi_conn_create(struct iscsi_worker *w, int fd);
void iscsi_conn_destroy(struct iscsi_conn *c);
/* A whole PDU of the login phase. < 0 when the connection must be closed. */
int iscsi_conn_login_pdu(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data,
                         uint32_t len);
/* The final answer is out: read and drop until the initiator closes (ISCSI_AWAIT_CLOSE_S). */
void iscsi_conn_await_close(struct iscsi_conn *c);

/* rx.c: receive and dispatch what the socket has. < 0 when the connection must close. */
int iscsi_conn_on_readable(struct iscsi_conn *c);
int iscsi_conn_flush(struct iscsi_conn *c);
void iscsi_conn_tick(struct iscsi_conn *c, uint64_t now_ns);

/* tx.c */
struct iscsi_tx *iscsi_tx_alloc(struct iscsi_conn *c);
void iscsi_tx_queue(struct iscsi_conn *c, struct iscsi_tx *tx);
void iscsi_tx_free(struct iscsi_conn *c, struct iscsi_tx *tx);
void iscsi_tx_pool_drain(struct iscsi_conn *c);
/* Frees every queued PDU unsent, releasing the tasks they answer. */
void iscsi_tx_drop_queued(struct iscsi_conn *c);
/* Whether this connection holds too much unsent output to take more commands. */
bool iscsi_conn_over_high(const struct iscsi_conn *c);
/* Pause or resume reading according to the queued output; true when it just resumed. */
bool iscsi_conn_check_backpressure(struct iscsi_conn *c);
void iscsi_tx_seal(struct iscsi_conn *c, struct iscsi_tx *tx);
void iscsi_send_reject(struct iscsi_conn *c, const uint8_t *bhs, uint8_t reason);
/* StatSN (taking the next one if advance_stat), ExpCmdSN, MaxCmdSN of the session. */
void iscsi_fill_sn(struct iscsi_conn *c, struct iscsi_sn *sn, bool advance_stat);

/* scsi_cmd.c */
int iscsi_scsi_cmd(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len);
int iscsi_data_out(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len);
/* Data-Out in two steps, for payloads received straight into the task's buffer. */
struct iscsi_task *iscsi_data_out_task(struct iscsi_conn *c, const uint8_t *bhs, uint32_t len);
void iscsi_data_out_landed(struct iscsi_conn *c, struct iscsi_task *t, const uint8_t *bhs,
                           uint32_t len);
void iscsi_task_put(struct iscsi_conn *c, struct iscsi_task *t);
void iscsi_conn_drop_tasks(struct iscsi_conn *c);
struct iscsi_task *iscsi_task_find(struct iscsi_conn *c, uint32_t itt);
void iscsi_task_unhash(struct iscsi_conn *c, struct iscsi_task *t);

/* ffp.c */
int iscsi_nop_out(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len);
int iscsi_logout(struct iscsi_conn *c, const uint8_t *bhs);
int iscsi_tmf(struct iscsi_conn *c, const uint8_t *bhs);
int iscsi_text(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len);
void iscsi_send_nop_ping(struct iscsi_conn *c);

/* session.c */
/*
 * The session of a finished login, or NULL: out of memory, or (*refusal set, a log line in
 * refused) over iscsi.max_sessions or iscsi.max_sessions_per_initiator.
 */
struct iscsi_session *iscsi_session_create(struct iscsi_conn *c, struct iscsi_login *l,
                                           int *refusal, char *refused, size_t refused_len);
void iscsi_session_destroy(struct iscsi_session *s);
uint16_t iscsi_session_alloc_tsih(void *arg);
/* Ends every session on target t (other than the one of except): cold reset. */
void iscsi_sessions_drop_target(const struct scsi_target *t, const struct iscsi_conn *except);
/* CmdSN window check; returns true if the command may proceed. */
bool iscsi_session_check_cmdsn(struct iscsi_session *s, const uint8_t *bhs);
uint32_t iscsi_session_max_cmdsn(const struct iscsi_session *s);
/* A referenced LUN of the session's target, or NULL; no shared lock in the common case. */
struct scsi_lun *iscsi_session_lun(struct iscsi_session *s, uint64_t id);

/* portal.c */
void iscsi_worker_want_write(struct iscsi_worker *w, struct iscsi_conn *c, bool on);
void iscsi_worker_pause_rx(struct iscsi_worker *w, struct iscsi_conn *c, bool paused);
/* A login of this worker is held (true) or no longer (false): held ones are checked often. */
void iscsi_worker_hold_login(struct iscsi_worker *w, bool held);
const struct tdm_iscsi_cfg *iscsi_worker_cfg(struct iscsi_worker *w);
/* The environment the portal was started with (target lookups). */
const struct iscsi_env *iscsi_env(void);
/*
 * Output was queued or a command completed outside the connection's own event: it is
 * flushed (and its reading resumed if it was paused) at the end of this loop round. For a
 * closed connection: frees it once its last command completed.
 */
void iscsi_conn_mark_dirty(struct iscsi_conn *c);

#endif
