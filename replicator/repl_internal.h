/*
 * The replicator's engine: one struct repl_lun per replicated LUN, shared by the files of
 * replicator/ only.
 *
 * Threads per LUN: a manager (connects or accepts, handshakes, decides the sync direction,
 * reconnects), and while connected one receiver per channel (data: the peer's writes,
 * resync data and verify requests; control: acks, state, pings) plus a resync/verify
 * worker when this node is the source. iSCSI worker threads send writes themselves, on
 * the data channel under send_lock, and never wait: the ack completes the command.
 */
#ifndef TANDEM_REPL_INTERNAL_H
#define TANDEM_REPL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "genid.h"
#include "md.h"
#include "tandem/config.h"
#include "tandem/repl.h"
#include "tandem/scsi.h"

#define REPL_ORDER_STRIPES      256u
#define REPL_ORDER_SHIFT        20            /* 1 MiB per ordering stripe */
#define REPL_RESYNC_CHUNK       (256u * 1024) /* bytes per resync message */
#define REPL_RESYNC_WINDOW      (8u * 1024 * 1024)
#define REPL_VERIFY_BLOCK       4096u
#define REPL_VERIFY_CHUNK       (1024u * 1024)
#define REPL_RECONNECT_MS       500
#define REPL_CONNECT_TIMEOUT_MS 2000

/* What a data-channel message asks the peer to do. */
enum repl_op_kind {
        REPL_OP_WRITE = 1,
        REPL_OP_ZERO = 2,
        REPL_OP_UNMAP = 3,
        REPL_OP_FLUSH = 4,
        REPL_OP_RESYNC = 5,
        REPL_OP_VERIFY = 6,
        REPL_OP_STATE = 7,
};

/* A data-channel message waiting for its ack (FIFO by seq). */
struct repl_req {
        struct repl_req *next;
        uint64_t seq;
        enum repl_op_kind kind;
        uint64_t off, len;
        uint64_t sent_ns;
        struct scsi_task *task; /* NULL for resync/verify/state */
};

/* What the peer told us about itself (its State message). */
struct repl_peer_view {
        bool known;
        struct repl_side side;
        uint64_t size_bytes;
        uint32_t block_size;
        char naa[33];
        char name[64];
};

struct repl_lun {
        /* Identity and configuration (immutable after create). */
        char iqn[TDM_IQN_MAX];
        uint64_t lun_id;
        char naa[33];
        char serial[33];
        struct tdm_repl_cfg cfg;
        uint32_t node_id, peer_id;
        char self_name[64], peer_name[64];
        char listen_host[128], peer_host[128];
        uint16_t listen_port, peer_port;
        char md_path[4096];
        struct scsi_lun *lun; /* referenced */
        struct bs_dev *bs;
        uint64_t size_bytes;

        /* State, under lock. */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct repl_md *md;
        struct repl_md_super sb; /* role, disk states, generations: persisted by repl_persist */
        enum repl_conn_state conn;
        bool crashed_primary; /* found at open: this node was a Primary that crashed */
        bool want_connect;    /* admin connect/disconnect; true at start */
        bool split_brain;
        bool want_discard; /* invalidate / resolve-split-brain: become target next time */
        bool stopping;
        char last_error[256];
        struct repl_peer_view peer;
        enum repl_decision decision; /* of the current connection */

        /* Connection (fds -1 when none). */
        int listen_fd;
        int data_fd, ctl_fd;
        bool link_up;      /* channels open (the manager owns them until they close) */
        bool in_ack_set;   /* under send_lock: writes go to the peer and wait for its ack */
        uint64_t conn_gen; /* bumped on every disconnect; written under lock and send_lock */
        pthread_t data_rx, ctl_rx, sync_thread, manager;
        bool data_rx_running, ctl_rx_running, sync_running, manager_running;
        uint64_t last_ctl_rx_ns;

        /* Sending on the data channel: seq and the in-flight FIFO, under send_lock. */
        pthread_mutex_t send_lock;
        uint64_t next_seq;
        struct repl_req *inflight_head, *inflight_tail;
        uint64_t inflight_bytes;
        /*
         * Cluster mode: after losing its peer a Primary holds writes (under send_lock) until
         * the group has recorded the peer Outdated; held ones fail once replication.timeout plus
         * the hold reach TDM_CLUSTER_IO_HOLD_MAX_MS.
         */
        bool outdating;
        struct repl_req *held_head, *held_tail;
        uint64_t outdate_gen; /* our current generation id the Outdate names */
        pthread_mutex_t ctl_send_lock;

        /* Receiving (peer side): the next seq expected on the data channel. */
        uint64_t rx_expect_seq;

        /* Overlapping writes are ordered: local write and send under the same stripe. */
        pthread_mutex_t order[REPL_ORDER_STRIPES];

        /* Resync / verify progress (under lock). */
        bool sync_paused;
        bool verify_mode, verify_resync, verify_requested;
        uint64_t sync_total, sync_done;
        uint64_t sync_rate_bps;
        uint64_t sync_last_ns, sync_last_done;
        uint64_t verify_oos;
        uint64_t resync_sent, resync_received;
        atomic_uint_fast64_t writes_replicated;
        atomic_int io_active; /* commands inside repl_lun_io: demote and shutdown wait for them */
        uint64_t dirty_at_disconnect;
};

/* repl_lun.c */
void repl_set_error(struct repl_lun *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Persist the superblock from the live fields (lock held). */
int repl_persist(struct repl_lun *r);
void repl_side_self(struct repl_lun *r, struct repl_side *s);
void repl_update_standby(struct repl_lun *r);

/* Waits (at most ms) until no command is inside repl_lun_io or waits for an ack. */
bool repl_writes_drained(struct repl_lun *r, unsigned ms);
/* Runs fn on the started replicated LUN with this NAA (32 hex digits); -ENOENT if none. */
int repl_with_naa(const char *naa, char *err, size_t errlen,
                  int (*fn)(struct repl_lun *r, void *arg, char *err, size_t errlen), void *arg);
/* Runs fn on the started replicated LUN iqn/lun (all-LUN list locked); -ENOENT if none. */
int repl_with_lun(const char *iqn, uint64_t lun, char *err, size_t errlen,
                  int (*fn)(struct repl_lun *r, void *arg, char *err, size_t errlen), void *arg);

/* repl_conn.c */
void *repl_manager_main(void *arg);
/*
 * Tear the connection down (any thread): in-flight requests complete, bits are set.
 * repl_disconnect_gen does nothing if the connection of generation gen is already gone
 * (a late caller must not end the next connection).
 */
#define REPL_GEN_ANY UINT64_MAX
void repl_disconnect(struct repl_lun *r, const char *why);
/* A Primary's data moves on without its peer: new current generation, peer Outdated. r->lock. */
void repl_go_on_without_peer_locked(struct repl_lun *r);
void repl_disconnect_gen(struct repl_lun *r, uint64_t gen, const char *why);
int repl_send_state(struct repl_lun *r);
bool repl_stopping(struct repl_lun *r);
/* The wire form of generations; hist must hold 2 ids and live as long as m. */
struct Tandem__Repl__Generations;
void repl_gen_to_msg(const struct repl_gen *g, struct Tandem__Repl__Generations *m, uint64_t *hist);
/* Identity and role on the data channel, ordered with the writes (first after connect,
 * and on every role change). */
int repl_send_scsi_state(struct repl_lun *r);
/* Takes the peer's State message into r->peer (lock held). */
struct Tandem__Repl__State;
void repl_peer_from_state(struct repl_lun *r, const struct Tandem__Repl__State *m);

/* repl_io.c */
/*
 * The ack for every request up to seq arrived (error: that seq failed on the peer).
 * -EPROTO for an ack of a seq never sent.
 */
int repl_acked(struct repl_lun *r, uint64_t seq, int error);
/* When the oldest request still waiting for its ack was sent (0: none). */
uint64_t repl_oldest_inflight_ns(struct repl_lun *r);
/* A request is done (error: the command fails; !peer_has_it: its range is out of sync). */
void repl_req_complete(struct repl_lun *r, struct repl_req *req, int error, bool peer_has_it);
/* Complete every in-flight request as if acknowledged by nobody (peer dropped); in cluster
 * mode while the peer is being outdated, those with a command are held instead. */
void repl_fail_inflight(struct repl_lun *r);
/* Send a data-channel message with a fresh seq and queue its req (send_lock held). */
int repl_send_data_locked(struct repl_lun *r, struct repl_req *req, uint8_t type, void *msg,
                          const struct iovec *iov, int niov);
void repl_order_lock(struct repl_lun *r, uint64_t off, uint64_t len);
void repl_order_unlock(struct repl_lun *r, uint64_t off, uint64_t len);

/* repl_outdate.c: the cluster's part in dropping a peer (cluster mode only). */
/* send_lock held: queue a change while the peer is being outdated (the task waits). */
void repl_hold_locked(struct repl_lun *r, struct repl_req *req);
/* Manager thread, after a disconnect: get the peer outdated through the group, releasing the
 * held writes once that is done (or failing them while it cannot be). */
void repl_outdate_peer(struct repl_lun *r);
/* Registers the handler for Outdate messages naming this node (once, at first start). */
void repl_outdate_handler_install(void);

/* repl_apply.c */
void *repl_data_rx_main(void *arg);
void *repl_ctl_rx_main(void *arg);
int repl_send_ctl(struct repl_lun *r, uint8_t type, void *msg);

/* repl_sync.c */
void *repl_sync_main(void *arg);

#endif
