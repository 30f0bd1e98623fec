/*
 * The medium: what a LUN's blocks live on, as the SCSI layer sees it. Asynchronous read,
 * write (FUA), flush, write-zeroes and unmap, each completing through a callback, plus LBA
 * range locks that give overlapping commands an order and make multi-step commands atomic.
 *
 * Two implementations: the backstore (a file or a block device on this node) and the
 * replicator (a local medium plus the peer link: a change is done when both have it).
 * The SCSI layer never knows which one it talks to.
 *
 * Threads. A request submitted on a net loop completes on that loop (io->done runs there);
 * one submitted from a thread that runs no loop may complete on any thread, possibly before
 * submit returns (tdm_medium_run() waits for it). Callers order overlapping changes
 * themselves with the range locks: a medium may run requests in flight in any order.
 */
#ifndef TANDEM_MEDIUM_H
#define TANDEM_MEDIUM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/net.h"

enum tdm_mio_op {
        TDM_MIO_READ = 0,
        TDM_MIO_WRITE = 1,
        TDM_MIO_WRITE_ZEROES = 2,
        TDM_MIO_UNMAP = 3, /* deallocate; reads return zeroes afterwards */
        TDM_MIO_FLUSH = 4, /* every write completed before submit is durable (off, len unused) */
        /*
         * A state record of the logical unit (persistent reservations, SPC-2 reservation,
         * mode pages, unit attentions owed): off is its id (< TDM_STATE_RECORDS), buf/len its
         * bytes (len 0: the record is gone). Done when every copy of the medium holds it;
         * durable on disk there too with TDM_MIO_PERSIST. Ordered with the data.
         */
        TDM_MIO_STATE = 5,
        /*
         * The medium grows to off bytes (len unused): a file is extended (sparse), a block
         * device's size is read again and must be at least off. Done when every copy has
         * grown; never shrinks. A thread that may block submits it (admin).
         */
        TDM_MIO_GROW = 6,
};

#define TDM_MIO_FUA     0x1u /* the write is durable when it completes */
#define TDM_MIO_PERSIST 0x2u /* a state record survives a restart of every node */

#define TDM_STATE_RECORDS   8
#define TDM_STATE_MAX_BYTES (64u * 1024)

struct tdm_medium;

/* One request. The submitter fills the first block; the medium owns the rest in flight. */
struct tdm_mio {
        enum tdm_mio_op op;
        uint32_t flags;
        uint64_t off, len;
        void *buf; /* READ: filled; WRITE: the data (must stay valid until done) */
        void (*done)(struct tdm_mio *io);
        void *arg; /* the submitter's */
        /*
         * WRITE only (state NULL: none): a state record stored with the data as one change,
         * on every copy: a copy holds both or neither, so the record never describes data a
         * copy lacks (COMPARE AND WRITE remembers what it applied this way).
         */
        const void *state;
        uint32_t state_len;
        uint8_t state_id;
        int result; /* set before done: 0 or -errno */

        /* The medium's, while in flight. */
        struct tdm_medium *medium;
        struct net_loop *loop;
        struct net_post post;
        struct net_work work; /* for implementations that run it on the pool */
        void *impl;
        uint64_t impl_seq;
        int impl_state;
};

/* Provisioning of a byte range (GET LBA STATUS). */
struct tdm_lba_status {
        bool mapped;
        uint64_t run_len; /* bytes from off with that status */
};

/*
 * Who serves the LUN, as ALUA reports it: this node's port group (standby or active) and,
 * for a replicated LUN, the peer's. Ids are node ids, the same on every node of a pair.
 */
enum tdm_access_state {
        TDM_ACCESS_ACTIVE = 0x0,      /* ALUA active/optimized */
        TDM_ACCESS_STANDBY = 0x2,     /* ALUA standby */
        TDM_ACCESS_UNAVAILABLE = 0x3, /* ALUA unavailable */
        TDM_ACCESS_TRANSITIONING = 0xf,
};

struct tdm_access {
        uint8_t local_state; /* enum tdm_access_state */
        uint16_t local_id;   /* this node's port group and relative port (0: the default 1) */
        uint16_t peer_id;    /* 0: no peer group */
        uint8_t peer_state;  /* enum tdm_access_state */
        /*
         * The LU carries on here from another node (promoted holding the state its earlier
         * Primary handed over): a new nexus was not powered on but lost, so its first
         * attention is I_T NEXUS LOSS OCCURRED (29/07), not POWER ON (29/00).
         */
        bool continued;
        /* Initiators may ask for this node's group (SET TARGET PORT GROUPS): TPGS 11b. */
        bool explicit_alua;
};

/*
 * A state-changing command an initiator sent to a node whose group does not serve (ALUA
 * standby): the serving node runs it as that initiator's and its answer is the command's.
 */
#define TDM_FORWARD_PORT_NAME_MAX 256
#define TDM_FORWARD_PARAM_MAX     (8u * 1024)
enum tdm_forward_tmf {
        TDM_FORWARD_TMF_NONE = 0,     /* a command: cdb */
        TDM_FORWARD_TMF_LU_RESET = 1, /* LOGICAL UNIT RESET (no cdb, no param) */
};
struct tdm_forward_cmd {
        char port_name[TDM_FORWARD_PORT_NAME_MAX]; /* the initiator port (name and ISID) */
        uint8_t cdb[16];
        uint8_t cdb_len;
        uint8_t tmf;          /* enum tdm_forward_tmf */
        const uint8_t *param; /* the data-out */
        uint32_t param_len;   /* at most TDM_FORWARD_PARAM_MAX */
};
struct tdm_forward_result {
        uint8_t status, key, asc, ascq; /* SCSI status; sense with CHECK CONDITION */
        bool field_valid;               /* INVALID FIELD IN CDB / PARAMETER LIST pointer */
        uint16_t field_byte;
        int8_t field_bit; /* -1: none */
};

struct tdm_medium_ops {
        /* Starts io; io->done runs once, with io->result set. */
        void (*submit)(struct tdm_medium *m, struct tdm_mio *io);
        /* Synchronous, cheap: the provisioning at off (a medium without holes: mapped). */
        int (*lba_status)(struct tdm_medium *m, uint64_t off, uint64_t max_len,
                          struct tdm_lba_status *out);
        /* A hint that a range will be read soon (may be NULL). */
        void (*prefetch)(struct tdm_medium *m, uint64_t off, uint64_t len);
        /*
         * Explicit ALUA (may be NULL: this node's group is always active): asks that this
         * node's group become active. io->done runs once it is (result 0) or could not be
         * (-errno); meanwhile the access state says transitioning. Only io's completion
         * fields are used.
         */
        void (*request_active)(struct tdm_medium *m, struct tdm_mio *io);
        /*
         * Runs cmd on the node whose group serves and waits for its answer (may be NULL):
         * 0 with *res its answer, or -errno when no serving node could run it. Blocks: only
         * threads that may wait call it.
         */
        int (*forward)(struct tdm_medium *m, const struct tdm_forward_cmd *cmd,
                       struct tdm_forward_result *res);
        /* Publishes the access state now (may be NULL): the replicator asks its peer view. */
        void (*refresh_access)(struct tdm_medium *m);
        /*
         * The state record id as this copy holds it: its length (0: none), copied into buf
         * up to cap bytes; *persist (may be NULL) whether it is durable. Synchronous, cheap.
         */
        size_t (*state_get)(struct tdm_medium *m, unsigned id, void *buf, size_t cap,
                            bool *persist);
        void (*destroy)(struct tdm_medium *m);
};

/* A held or waited-for range. Embedded in the holder's object. */
struct tdm_range {
        uint64_t off, len;
        bool shared;                          /* readers share; a writer holds its range alone */
        void (*granted)(struct tdm_range *r); /* a lock that had to wait: runs on r's loop */
        void *arg;

        /* The lock table's. */
        struct tdm_range *next, *prev;
        struct net_loop *loop;
        struct net_post post;
        bool waiting;
        pthread_cond_t *waiter; /* tdm_range_lock_wait's */
};

struct tdm_range_table {
        pthread_mutex_t lock;
        struct tdm_range *held;                  /* unordered */
        struct tdm_range *wait_head, *wait_tail; /* FIFO */
};

struct tdm_medium {
        const struct tdm_medium_ops *ops;
        _Atomic uint64_t size; /* bytes */
        struct tdm_range_table ranges;
        _Atomic uint64_t access; /* struct tdm_access, packed */
        /* Told after every change of the access state (set once by the layer above). */
        void (*access_changed)(void *arg);
        void *access_arg;
        /* Told when a state record changed other than through this node's own request (the
         * peer's copy arrived): same arg as access_changed. Any thread. */
        void (*state_changed)(void *arg, unsigned id);
        /* Runs a command another node forwarded (ops->forward there) and fills *res; on a
         * thread that may block. Set once by the layer above; same arg as access_changed. */
        void (*forwarded)(void *arg, const struct tdm_forward_cmd *cmd,
                          struct tdm_forward_result *res);
        /* Told when the medium grew other than through this node's own request (the Primary
         * grew a replicated LUN); any thread. Same arg as access_changed. */
        void (*size_changed)(void *arg);
};

/* For implementations: set up the common part. */
void tdm_medium_init(struct tdm_medium *m, const struct tdm_medium_ops *ops, uint64_t size);
void tdm_medium_fini(struct tdm_medium *m);
/* Implementations complete a request with this: io->done on the submitter's loop. */
void tdm_mio_complete(struct tdm_mio *io, int result);

/* Submits io (records the caller's loop, so done comes back to it). */
void tdm_medium_submit(struct tdm_medium *m, struct tdm_mio *io);
/*
 * For threads that may block (resync, admin, tests): submits and waits; returns io->result.
 * Never on a net loop thread.
 */
int tdm_medium_run(struct tdm_medium *m, struct tdm_mio *io);
/* ops->forward, or -EOPNOTSUPP for a medium of this node alone. */
int tdm_medium_forward(struct tdm_medium *m, const struct tdm_forward_cmd *cmd,
                       struct tdm_forward_result *res);
/* Asks for this node's group to become active (ops->request_active); done on the caller's loop. */
void tdm_medium_request_active(struct tdm_medium *m, struct tdm_mio *io);
/* Shorthands for tdm_medium_run. */
int tdm_medium_read(struct tdm_medium *m, void *buf, uint64_t len, uint64_t off);
int tdm_medium_write(struct tdm_medium *m, const void *buf, uint64_t len, uint64_t off,
                     uint32_t flags);
/* A write with state record id set to state/state_len in the same change (see tdm_mio.state). */
int tdm_medium_write_with_state(struct tdm_medium *m, const void *buf, uint64_t len, uint64_t off,
                                uint32_t flags, unsigned id, const void *state, uint32_t state_len);
int tdm_medium_flush(struct tdm_medium *m);
int tdm_medium_change(struct tdm_medium *m, enum tdm_mio_op op, uint64_t off, uint64_t len);
void tdm_medium_destroy(struct tdm_medium *m);

static inline uint64_t tdm_medium_size(const struct tdm_medium *m)
{
        return atomic_load_explicit(&m->size, memory_order_relaxed);
}

/* State records: the caller's copy of record id (its length, 0: none); may block (loop-less). */
size_t tdm_medium_state_get(struct tdm_medium *m, unsigned id, void *buf, size_t cap,
                            bool *persist);
int tdm_medium_state_put(struct tdm_medium *m, unsigned id, const void *buf, size_t len,
                         uint32_t flags);

/*
 * A table of state records with an optional file for the persistent ones (the backstore
 * keeps one per medium; daemon/medium/state.c). The file is rewritten atomically (temporary
 * file, fsync, rename, fsync of the directory) whenever a persistent record changes or one
 * stops being persistent; records that are not persistent live in memory only.
 */
struct tdm_state_store;
struct tdm_state_store *tdm_state_store_new(void);
void tdm_state_store_free(struct tdm_state_store *st);
/* Loads the persistent records from path (missing: none) and persists there from now on. */
int tdm_state_store_attach(struct tdm_state_store *st, const char *path);
/* May block (file write): not on a net loop. 0 or -errno. */
int tdm_state_store_put(struct tdm_state_store *st, unsigned id, const void *buf, size_t len,
                        bool persist);
size_t tdm_state_store_get(struct tdm_state_store *st, unsigned id, void *buf, size_t cap,
                           bool *persist);

/* Access state: the implementation publishes (telling access_changed), SCSI reads. */
void tdm_medium_set_access(struct tdm_medium *m, const struct tdm_access *a);
struct tdm_access tdm_medium_access(const struct tdm_medium *m);

/*
 * Range locks. tdm_range_lock returns true when r is held now; false when it waits, and
 * r->granted(r) then runs on the caller's loop once it is held (waiters are served in the
 * order they came: a writer is not starved by a stream of readers). A thread on no loop
 * uses tdm_range_lock_wait, which blocks. len 0 locks nothing (always granted).
 */
bool tdm_range_lock(struct tdm_medium *m, struct tdm_range *r);
void tdm_range_lock_wait(struct tdm_medium *m, struct tdm_range *r);
void tdm_range_unlock(struct tdm_medium *m, struct tdm_range *r);

#endif
