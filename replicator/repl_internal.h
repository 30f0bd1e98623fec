/*
 * The replicator's engine: one struct repl_lun per replicated LUN, shared by the files of
 * replicator/ only.
 *
 * A replicated LUN is a medium (include/tandem/medium.h) wrapping this node's medium: a
 * change goes to the local medium and to the peer's send queue at the same moment and is
 * done when both are (protocol C).
 *
 * Threads per LUN: a manager (connects or accepts, handshakes, decides the sync direction,
 * reconnects, outdates a lost peer), and while connected a sender that drains the data
 * channel's queue, one receiver per channel (data: the peer's writes, resync data and
 * verify requests; control: acks, state, pings) plus a resync/verify worker when this node
 * is the source. The iSCSI workers only queue: no socket or disk wait is theirs.
 */
#ifndef TANDEM_REPL_INTERNAL_H
#define TANDEM_REPL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "frame_seal.h"
#include "genid.h"
#include "md.h"
#include "tandem/config.h"
#include "tandem/repl.h"
#include "tandem/medium.h"

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
        REPL_OP_STATE = 7,    /* identity and role */
        REPL_OP_LU_STATE = 8, /* a state record of the logical unit */
        REPL_OP_RESIZE = 9,   /* the LUN grew (off: its new size) */
};

#define REPL_HEAD_INLINE 96 /* frame header + a Write message fit here */

struct repl_write;

/*
 * A data-channel message: queued for the sender, then waiting for its ack (FIFO by seq).
 * A change of the Primary's is embedded in its repl_write; any other is freed once both
 * the sender and the peer's answer are done with it.
 */
struct repl_req {
        struct repl_req *next;     /* in flight or held, under send_lock */
        struct repl_req *out_next; /* the send queue, under send_lock */
        uint64_t seq;
        enum repl_op_kind kind;
        uint64_t off, len;
        uint64_t sent_ns;
        struct repl_write *w; /* NULL for resync/verify/state */
        atomic_int refs;      /* standalone: its answer and the sender */
        /* The frame: header and message packed when queued, the payload borrowed. */
        uint8_t head_inline[REPL_HEAD_INLINE];
        uint8_t *head;
        uint32_t head_len;
        const void *payload;
        uint32_t payload_len;
        void *owned; /* freed with a standalone req (resync data, digests) */
};

/*
 * One change the Primary makes for a caller: the local request and the peer's part run at
 * once; the caller's request completes when both are done and the sender let go of the
 * data (protocol C).
 */
struct repl_write {
        struct repl_req req; /* the peer's part */
        struct repl_lun *r;
        struct tdm_mio *io;   /* the caller's */
        struct tdm_mio local; /* on this node's medium */
        atomic_int pending;   /* local, peer, sender, and one while starting */
        int local_rc;
        atomic_int peer_rc;
        struct net_work al_work; /* an activity-log commit, on the pool */
        bool al_held;
};

/* What the peer told us about itself (its State message). */
struct repl_peer_view {
        bool known;
        bool lu_state_valid;
        struct repl_side side;
        uint64_t size_bytes;
        uint32_t block_size;
        char naa[33];
        char name[64];
};

struct repl_lun {
        struct tdm_medium medium; /* first: what the LUN's SCSI layer uses */
        struct tdm_medium *local; /* this node's copy (owned) */
        uint32_t block_size;
        _Atomic bool stopped; /* repl_lun_stop began: the medium takes no more changes */
        bool stop_done;       /* ... and finished: threads ended, metadata closed */
        bool quiesced;        /* shutting down: this node's group stops serving (r->lock) */
        bool demoting;        /* a demote drains changes: new commands are refused (r->lock) */
        /*
         * The LU's state records here are current: this node was promoted, or received a whole
         * set. After a restart only the persistent (APTPL) ones are; the others come back from
         * a peer that has them (r->lock).
         */
        bool lu_state_valid;
        /* Promoted holding a state handed over by an earlier Primary (r->lock): tdm_access. */
        bool continued;
        /*
         * Explicit ALUA (repl_stpg.c, r->lock): a move of the Primary to this node that an
         * initiator asked for is under way, and the requests waiting for it (chained
         * through tdm_mio.impl).
         */
        bool moving;
        struct tdm_mio *move_waiters;
        /* Feature bits both sides offered on the current connection (r->lock). */
        uint64_t peer_features;
        /*
         * Forwarded commands (repl_forward.c, r->lock): this node's waiting for the Primary's
         * answers, and the peer's running here.
         */
        uint64_t fwd_next_id;
        struct repl_fwd_wait *fwd_waits;
        unsigned fwd_jobs;
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
        /*
         * The link's frames are sealed (frame_seal.h), per channel and direction, with the
         * keys of that channel's handshake: set before the threads start, freed once they
         * ended. data_seal: the sender; data_open: the data receiver; ctl_seal: under
         * ctl_send_lock; ctl_open: the manager, then the control receiver.
         */
        struct frame_seal data_seal, data_open, ctl_seal, ctl_open;
        pthread_t data_rx, ctl_rx, sync_thread, manager, sender;
        bool data_rx_running, ctl_rx_running, sync_running, manager_running, sender_running;
        uint64_t last_ctl_rx_ns;

        /* Sending on the data channel: seq, the send queue and the in-flight FIFO. */
        pthread_mutex_t send_lock;
        pthread_cond_t out_cond; /* the sender waits on it (with send_lock) */
        uint64_t next_seq;
        struct repl_req *out_head, *out_tail;
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

        /* Resync / verify progress (under lock). */
        bool sync_paused;
        bool verify_mode, verify_resync, verify_requested;
        uint64_t sync_total, sync_done;
        uint64_t sync_rate_bps;
        uint64_t sync_last_ns, sync_last_done;
        uint64_t verify_oos;
        uint64_t resync_sent, resync_received;
        uint64_t promotions; /* times this node became Primary since start (under lock) */
        atomic_uint_fast64_t writes_replicated;
        atomic_int io_active; /* changes not yet completed: demote and shutdown wait for them */
        uint64_t dirty_at_disconnect;
};

/* repl_lun.c */
void repl_set_error(struct repl_lun *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Persist the superblock from the live fields (lock held). */
int repl_persist(struct repl_lun *r);
void repl_side_self(struct repl_lun *r, struct repl_side *s);
/* repl_io.c: a part of a caller's change is done (error: the peer's failure). */
void repl_write_part_done(struct repl_write *w, int error);

/* Waits (at most ms) until no change of a caller is in flight. */
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
/* The logical unit's state records, all of them, after the role (the node whose data wins
 * sends them on connect; send_lock held, peer in the ack set). */
int repl_queue_lu_state_snapshot_locked(struct repl_lun *r);
/* Identity and role on the data channel, ordered with the writes (first after connect,
 * and on every role change). */
int repl_send_scsi_state(struct repl_lun *r);
/* Takes the peer's State message into r->peer (lock held). */
struct Tandem__Repl__State;
void repl_peer_from_state(struct repl_lun *r, const struct Tandem__Repl__State *m);

/* repl_forward.c: commands a Secondary's initiators sent, run by the Primary. */
int repl_forward(struct tdm_medium *m, const struct tdm_forward_cmd *cmd,
                 struct tdm_forward_result *res);
struct Tandem__Repl__Forward;
struct Tandem__Repl__ForwardReply;
/* Control channel: the peer's command (run on the pool) and its answer to ours. */
int repl_on_forward(struct repl_lun *r, const struct Tandem__Repl__Forward *m);
void repl_on_forward_reply(struct repl_lun *r, const struct Tandem__Repl__ForwardReply *m);
/* Waits until no forwarded command of the peer runs here (the LUN is stopping). */
void repl_forward_wait_idle(struct repl_lun *r);

/* repl_grow.c: the Secondary's side of an online resize (data channel, in order). */
struct Tandem__Repl__Resize;
int repl_apply_resize(struct repl_lun *r, const struct Tandem__Repl__Resize *m);

/* repl_stpg.c: SET TARGET PORT GROUPS (the medium's request_active). */
void repl_request_active(struct tdm_medium *m, struct tdm_mio *io);
/* Waits until no move is under way (the LUN is stopping: the mover gives up soon). */
void repl_stpg_wait_idle(struct repl_lun *r);

/* repl_io.c: the medium the LUN sees. */
extern const struct tdm_medium_ops repl_medium_ops;
/* This node's access state (role, link, peer's role) published to the LUN (r->lock held). */
void repl_publish_access(struct repl_lun *r);
/*
 * The ack for every request up to seq arrived (error: that seq failed on the peer).
 * -EPROTO for an ack of a seq never sent; REPL_ACKED_REFUSED_RESIZE when the failed one was
 * a resize the peer refused (its disk is fine); else 0.
 */
#define REPL_ACKED_REFUSED_RESIZE 1
int repl_acked(struct repl_lun *r, uint64_t seq, int error);
/* When the oldest request still waiting for its ack was sent (0: none). */
uint64_t repl_oldest_inflight_ns(struct repl_lun *r);
/* A request is done (error: the command fails; !peer_has_it: its range is out of sync). */
void repl_req_complete(struct repl_lun *r, struct repl_req *req, int error, bool peer_has_it);
/* Complete every in-flight request as if acknowledged by nobody (peer dropped); in cluster
 * mode while the peer is being outdated, those with a command are held instead. */
void repl_fail_inflight(struct repl_lun *r);

/* repl_send.c: the data channel's send queue and the thread that drains it. */
/*
 * Gives req a fresh seq, packs its frame (the payload stays borrowed until the sender is
 * done), and queues it for the sender and for its ack (send_lock held, peer in the ack
 * set). 0, or -EMSGSIZE / -ENOMEM with nothing queued.
 */
int repl_queue_data_locked(struct repl_lun *r, struct repl_req *req, uint8_t type, void *msg,
                           const void *payload, uint32_t payload_len);
/* A standalone request (resync, verify, state), with room for an owned payload. */
struct repl_req *repl_req_new(enum repl_op_kind kind, size_t owned_bytes);
/* Done with a request: its answer came (or never will), or the sender let go of it. */
void repl_req_put(struct repl_req *req);
void *repl_sender_main(void *arg);
/* After the sender ended: drops what is still queued (the link is gone). */
void repl_send_queue_drop(struct repl_lun *r);

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
