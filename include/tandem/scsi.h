/* SCSI target model shared by the iSCSI layer, the SCSI handlers and the admin plane. */
#ifndef TANDEM_SCSI_H
#define TANDEM_SCSI_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/medium.h"
#include "tandem/net.h"

#define SCSI_MAX_LUNS          256
#define SCSI_CAW_ANSWERED_BITS 4096
#define SCSI_SENSE_MAX         32
#define SCSI_CDB_MAX           32
/*
 * An initiator port name: the iSCSI name, ",i,0x" and the ISID in 12 hex digits, as in the
 * iSCSI TransportID (SPC-4 7.6.4.6). It names an I_T nexus for reservations and attentions
 * (the pair's target ports count as one, see docs/reservations.md).
 */
#define SCSI_PORT_NAME_MAX 256

/* SCSI status bytes. */
enum scsi_status {
        SCSI_STATUS_GOOD = 0x00,
        SCSI_STATUS_CHECK_CONDITION = 0x02,
        SCSI_STATUS_CONDITION_MET = 0x04,
        SCSI_STATUS_BUSY = 0x08,
        SCSI_STATUS_RESERVATION_CONFLICT = 0x18,
        SCSI_STATUS_TASK_SET_FULL = 0x28,
        SCSI_STATUS_TASK_ABORTED = 0x40,
};

/*
 * Every way a command can fail. Handlers return one of these; scsi_sense_build()
 * is the only place that turns a reason into status and sense bytes.
 */
enum scsi_reason {
        SCSI_OK = 0,
        SR_INVALID_OPCODE,             /* 05/20/00 */
        SR_INVALID_FIELD_CDB,          /* 05/24/00, with field pointer */
        SR_INVALID_FIELD_PARAM,        /* 05/26/00, with field pointer */
        SR_PARAM_LIST_LENGTH_ERROR,    /* 05/1A/00 */
        SR_LBA_OUT_OF_RANGE,           /* 05/21/00 */
        SR_LUN_NOT_SUPPORTED,          /* 05/25/00 */
        SR_INVALID_RELEASE_OF_PR,      /* 05/26/04 */
        SR_INSUFFICIENT_REG_RESOURCES, /* 05/55/04 */
        SR_SAVING_PARAMS_UNSUP,        /* 05/39/00 */
        SR_MEDIUM_REMOVAL_PREVENTED,   /* 05/53/02 */
        SR_NOT_READY_MANUAL,           /* 02/04/03 */
        SR_NOT_READY_STANDBY,          /* 02/04/0B (ALUA standby) */
        SR_NOT_READY_UNAVAILABLE,      /* 02/04/0C */
        SR_NOT_READY_TRANSITION,       /* 02/04/0A */
        SR_MEDIUM_NOT_PRESENT,         /* 02/3A/00 */
        SR_READ_ERROR,                 /* 03/11/00 */
        SR_WRITE_ERROR,                /* 03/0C/00 */
        SR_SPACE_ALLOC_FAILED,         /* 07/27/07 */
        SR_WRITE_PROTECTED,            /* 07/27/00 */
        SR_MISCOMPARE_VERIFY,          /* 0E/1D/00 */
        SR_UA_POWER_ON_RESET,          /* 06/29/00 */
        SR_UA_BUS_DEVICE_RESET,        /* 06/29/03 (LUN reset) */
        SR_UA_TARGET_RESET,            /* 06/29/02 (target warm reset) */
        SR_UA_MODE_PARAMS_CHANGED,     /* 06/2A/01 */
        SR_UA_CAPACITY_CHANGED,        /* 06/2A/09 */
        SR_UA_LUNS_CHANGED,            /* 06/3F/0E */
        SR_UA_ALUA_STATE_CHANGED,      /* 06/2A/06 */
        SR_UA_RESERVATIONS_PREEMPTED,  /* 06/2A/03 */
        SR_UA_RESERVATIONS_RELEASED,   /* 06/2A/04 */
        SR_UA_REGISTRATIONS_PREEMPTED, /* 06/2A/05 */
        SR_UA_NEXUS_LOSS,              /* 06/29/07 (first attention after a failover) */
        SR_UA_CLEARED_BY_OTHER,        /* 06/2F/00 (CLEAR TASK SET of another nexus) */
        SR_RESERVATION_CONFLICT,       /* status 0x18, no sense */
        SR_TASK_SET_FULL,              /* status 0x28, no sense */
        SR_BUSY,                       /* status 0x08, no sense */
        SR_ABORTED_COMMAND,            /* 0B/00/00 */
        SR_INTERNAL_ERROR,             /* 04/44/00 */
        SR_TOO_MANY_TARGET_DESC,       /* 05/26/06 */
        SR_UNSUPPORTED_TARGET_DESC,    /* 05/26/07 */
        SR_TOO_MANY_SEGMENT_DESC,      /* 05/26/08 */
        SR_UNSUPPORTED_SEGMENT_DESC,   /* 05/26/09 */
        SR_COPY_TARGET_UNREACHABLE,    /* 0A/0D/02 COPY ABORTED, target not reachable */
        SR_COPY_ABORTED,               /* 0A/00/00 */
        SR_STPG_FAILED,                /* 04/67/0A SET TARGET PORT GROUPS COMMAND FAILED */
        SR_COUNT,
        /* Not a reason: the handler started medium work and completes the task later. */
        SCSI_PENDING = 1000
};

/*
 * Sense-key specific field pointer for INVALID FIELD IN CDB/PARAMETER LIST:
 * which byte (and optionally which bit) of the CDB or parameter list is wrong.
 */
struct scsi_field_ptr {
        uint16_t byte;
        uint8_t bit; /* 0..7 */
        bool bit_valid;
};

/* Points field at byte (bit < 0: no bit pointer). */
static inline void scsi_field_point(struct scsi_field_ptr *field, uint16_t byte, int bit)
{
        *field = (struct scsi_field_ptr){
            .byte = byte, .bit = bit < 0 ? 0 : (uint8_t)bit, .bit_valid = bit >= 0};
}

/* INVALID FIELD IN PARAMETER LIST at byte of a list that is not a task's (forwarded). */
static inline enum scsi_reason scsi_bad_param_at(struct scsi_field_ptr *field, uint16_t byte,
                                                 int bit)
{
        scsi_field_point(field, byte, bit);
        return SR_INVALID_FIELD_PARAM;
}

/* Unit attention conditions, tracked per I_T nexus by generation counters. */
enum scsi_ua_kind {
        SCSI_UA_LUN_RESET = 0,
        SCSI_UA_MODE_CHANGED,
        SCSI_UA_CAPACITY_CHANGED,
        SCSI_UA_ALUA_CHANGED,
        SCSI_UA_CLEARED_BY_OTHER,
        SCSI_UA_KINDS
};

/*
 * ALUA asymmetric access states (SPC-5 5.16.2.4), as REPORT TARGET PORT GROUPS codes them.
 * tandem reports active/optimized, standby and unavailable.
 */
enum scsi_alua_state {
        SCSI_ALUA_ACTIVE_OPTIMIZED = 0x0,
        SCSI_ALUA_ACTIVE_NON_OPTIMIZED = 0x1,
        SCSI_ALUA_STANDBY = 0x2,
        SCSI_ALUA_UNAVAILABLE = 0x3,
        SCSI_ALUA_OFFLINE = 0xe,
        SCSI_ALUA_TRANSITIONING = 0xf,
};

struct scsi_lun;

/* Latency histogram buckets: bucket i counts commands with latency < 2^i microseconds
 * (and at least 2^(i-1) for i > 0); the last counts the rest. */
#define SCSI_LAT_BUCKETS 24

struct scsi_lun_stats {
        atomic_uint_fast64_t reads, writes, other;
        atomic_uint_fast64_t read_bytes, write_bytes;
        atomic_uint_fast64_t errors;
        atomic_uint_fast64_t lat_hist[SCSI_LAT_BUCKETS];
};

/*
 * An I_T nexus's (a session's) counters. Only the thread that serves the session writes
 * them, with relaxed loads and stores (no read-modify-write, no lock: plain moves on the
 * machines we run on); any thread may read them (scsi_nexus_stats_read).
 */
struct scsi_nexus_stats {
        _Atomic uint64_t reads, writes, other;
        _Atomic uint64_t read_bytes, write_bytes; /* data moved by GOOD read/write commands */
        _Atomic uint64_t errors;
        _Atomic uint64_t lat_hist[SCSI_LAT_BUCKETS];
};

/* A copy of a LUN's or a nexus's counters. */
struct scsi_io_counters {
        uint64_t reads, writes, other, read_bytes, write_bytes, errors;
        uint64_t lat_hist[SCSI_LAT_BUCKETS];
};

/* One logical unit. Reference counted: tasks in flight hold a reference. */
struct scsi_lun {
        atomic_int refs;
        uint64_t id;               /* LUN number within its target */
        struct tdm_medium *medium; /* owned: destroyed with the LUN */
        uint64_t identity_seed;    /* hash of the backing store's name: default NAA/serial */
        uint32_t block_size;
        uint8_t lbppb_exponent; /* physical block = block_size << this (READ CAPACITY(16)) */
        _Atomic uint64_t num_blocks;
        uint8_t naa[16]; /* NAA IEEE Registered Extended (type 6) designator */
        char serial[33]; /* unit serial number, VPD 0x80 */
        char product[17];
        bool thin;       /* logical block provisioning: UNMAP/WRITE SAME UNMAP allowed */
        bool read_only;  /* write protected by configuration: every medium change fails */
        atomic_bool wce; /* write cache enabled (MODE page 08) */
        atomic_bool removal_prevented;
        atomic_uint ua_gen[SCSI_UA_KINDS]; /* bumped when a UA must be raised on every nexus */
        _Atomic(uint64_t) ua_origin[SCSI_UA_KINDS]; /* nexus id that caused it: it gets no UA */
        struct scsi_lun_stats stats;
};

struct scsi_target;

/* Per I_T nexus state (one per iSCSI session). */
struct scsi_nexus {
        uint64_t id; /* unique across the process */
        struct scsi_target *target;
        char initiator[224];
        char port_name[SCSI_PORT_NAME_MAX]; /* initiator port name (see SCSI_PORT_NAME_MAX) */
        /*
         * What this nexus is to each LUN's reservations and attentions (SCSI_NX_* bits),
         * valid while the LUN's state epoch equals res_epoch (daemon/scsi/pr.c).
         */
        uint64_t res_epoch[SCSI_MAX_LUNS];
        uint8_t res_flags[SCSI_MAX_LUNS];
        /* Unit attention bookkeeping, indexed by LUN id. */
        bool power_on_pending[SCSI_MAX_LUNS];
        unsigned ua_seen[SCSI_MAX_LUNS][SCSI_UA_KINDS];
        unsigned luns_gen_seen;
        /* Sense of the last CHECK CONDITION, returned by REQUEST SENSE. */
        uint8_t last_sense[SCSI_SENSE_MAX];
        uint8_t last_sense_len;
        /*
         * COMPARE AND WRITE answered on this nexus, by (LUN, LBA) hashed to a bit: only a CAW
         * at a place this nexus has had no answer for may be a resend (daemon/scsi/caw.c).
         */
        _Atomic uint64_t caw_answered[SCSI_CAW_ANSWERED_BITS / 64];
        struct scsi_nexus_stats stats; /* written by the session's thread only */
};

/* A target: a named set of LUNs. The LUN table can change live (RCU by refcount). */
struct scsi_target {
        atomic_int refs;
        char iqn[224];
        char alias[256];
        uint16_t tpgt;
        pthread_mutex_t lun_lock; /* writers only; readers use scsi_target_get_lun() */
        _Atomic(struct scsi_lun *) luns[SCSI_MAX_LUNS];
        atomic_uint luns_gen; /* bumped on LUN add/del: REPORTED LUNS DATA HAS CHANGED */
};

/* Data direction flags of a task (from the iSCSI header R/W bits). */
#define SCSI_DIR_READ  0x1
#define SCSI_DIR_WRITE 0x2

struct scsi_task;
typedef void (*scsi_task_done_fn)(struct scsi_task *task);

/*
 * One SCSI command. The transport fills in the CDB, the nexus, the LUN, the expected
 * transfer length and (for writes) the data-out buffer, then calls scsi_task_execute().
 */
struct scsi_task {
        uint8_t cdb[SCSI_CDB_MAX];
        uint8_t cdb_len;
        uint64_t lun_id;
        struct scsi_lun *lun; /* NULL if lun_id does not exist (REPORT LUNS/INQUIRY still work) */
        struct scsi_nexus *nexus;
        struct scsi_target *target;
        uint8_t dir;           /* SCSI_DIR_* */
        uint32_t expected_len; /* iSCSI expected data transfer length */

        /* Data out (write data), fully received before execution. */
        uint8_t *data_out;
        uint32_t data_out_len;

        /*
         * Data in, produced by the handler. data_in points either to data_in_inline or to
         * a heap buffer the handler allocated (data_in_owned = true; the transport frees it).
         * data_in_len is the full length the command produced, before truncation to the
         * allocation length / expected length (the transport computes residuals).
         */
        uint8_t *data_in;
        uint32_t data_in_len;
        bool data_in_owned;
        bool data_in_cached; /* owned buffer from tdm_buf_get, of data_in_cap bytes */
        size_t data_in_cap;
        uint8_t data_in_inline[256];

        /* Result. */
        uint8_t status;
        uint8_t sense[SCSI_SENSE_MAX];
        uint8_t sense_len;
        enum scsi_reason reason;
        struct scsi_field_ptr field;
        uint64_t info; /* sense INFORMATION field (e.g. miscompare offset) */
        bool info_valid;

        /* Bytes the CDB says it transfers (set by the handler; for residual computation). */
        uint32_t xfer_len;

        uint64_t start_ns;

        /*
         * Completion. When scsi_task_execute() returns with async set, the command waits
         * for the medium and done(task) runs later, on the loop that executed it.
         */
        bool async;
        scsi_task_done_fn done;

        /* The SCSI layer's, while the command runs. */
        const struct scsi_opcode_entry *entry;
        uint64_t lba, nblocks;           /* decoded by the handler, for its later steps */
        uint32_t op_flags;               /* the handler's own bits, likewise */
        bool in_execute;                 /* inside scsi_task_execute */
        bool finished;                   /* completed before execute returned */
        enum scsi_reason pending_result; /* ... with this */
        struct tdm_range range;          /* the LBAs the command holds */
        struct tdm_mio mio;              /* its medium request */
        struct net_work work;            /* a handler that may block runs on the pool */
        enum scsi_reason (*blocking)(struct scsi_task *task);
        void (*after_io)(struct scsi_task *task, int rc);
};

/* Flags of an opcode table entry. */
#define SCSI_F_DATA_IN                   0x0001 /* returns data to the initiator */
#define SCSI_F_DATA_OUT                  0x0002 /* takes data from the initiator */
#define SCSI_F_NEEDS_LUN                 0x0004 /* fails with LUN NOT SUPPORTED when the LUN is absent */
#define SCSI_F_NO_UA                     0x0008 /* executes without reporting a pending unit attention */
#define SCSI_F_OK_ON_STANDBY             0x0010 /* allowed while the LUN's port group is standby */
#define SCSI_F_ALLOWED_UNDER_RESERVATION 0x0020 /* SPC-2 RESERVE held by another nexus */
#define SCSI_F_WRITES_MEDIUM             0x0040 /* modifies the medium (for replication / write-protect) */
/*
 * Persistent reservation conflict classes (SPC-4 table 5-13, SBC-4 table 13): a command
 * from a nexus that does not hold the reservation is allowed under every type
 * (SCSI_F_PR_ANY), under the Write Exclusive types (SCSI_F_PR_READ), or when its CDB
 * changes no state (SCSI_F_PR_CDB: PREVENT 0; START 1 with POWER CONDITION 0). Without
 * one of them only holders (and registrants under a registrants-only or all-registrants
 * type) may run it.
 */
#define SCSI_F_PR_ANY  0x0080
#define SCSI_F_PR_READ 0x0100
#define SCSI_F_PR_CDB  0x0200

typedef enum scsi_reason (*scsi_handler_fn)(struct scsi_task *task);

/*
 * One row of the opcode table. A row with a nonzero service action is looked up by
 * (opcode, service action). usage[] is the CDB usage data mask reported by
 * REPORT SUPPORTED OPERATION CODES: a bit set means the initiator may set it; a set
 * bit outside the mask makes the command fail with INVALID FIELD IN CDB.
 */
struct scsi_opcode_entry {
        uint8_t opcode;
        uint16_t service_action;
        bool has_service_action;
        uint8_t cdb_len;
        uint8_t usage[16];
        uint32_t flags;
        scsi_handler_fn handler;
        const char *name;
};

/* The opcode table (daemon/scsi/opcodes.c). */
extern const struct scsi_opcode_entry scsi_opcode_table[];
extern const size_t scsi_opcode_table_len;

const struct scsi_opcode_entry *scsi_opcode_lookup(const uint8_t *cdb);

/*
 * Executes a task: checks the CDB against the table, handles unit attentions, runs the
 * handler and fills status/sense/data_in. Returns with the result, or with async set when
 * the command waits for the medium: task->done(task) then runs later on the caller's loop.
 * On a thread that runs no loop every command completes before this returns.
 */
void scsi_task_execute(struct scsi_task *task);

/* Free task-owned buffers (data_in when owned). Does not free the task itself. */
void scsi_task_release(struct scsi_task *task);

/* Sense building: the single place where reasons become bytes (daemon/scsi/sense.c). */
void scsi_task_set_reason(struct scsi_task *task, enum scsi_reason reason);
void scsi_sense_build(struct scsi_task *task, enum scsi_reason reason);
const char *scsi_reason_name(enum scsi_reason reason);

/* How many bytes of write data a CDB expects (0 if none or CDB unknown). */
uint32_t scsi_cdb_data_out_len(const uint8_t *cdb, const struct scsi_lun *lun);

/*
 * LUN and target lifetime. The LUN takes the medium (destroyed with the LUN); name (the
 * backing store's path) seeds the default identity.
 */
struct scsi_lun *scsi_lun_create(uint64_t id, struct tdm_medium *medium, uint32_t block_size,
                                 const char *name);
void scsi_lun_get(struct scsi_lun *lun);
void scsi_lun_put(struct scsi_lun *lun);
void scsi_lun_raise_ua(struct scsi_lun *lun, enum scsi_ua_kind kind, uint64_t origin_nexus);

/*
 * ALUA (daemon/scsi/alua.c): the target port groups come from the medium's access state
 * (include/tandem/medium.h): this node's group, and for a replicated LUN the peer's. The
 * LUN listens to the medium: every change of either group's state raises ASYMMETRIC ACCESS
 * STATE CHANGED on every I_T nexus of the LUN, once per change.
 */
/*
 * Gives the LUN a journal file for WRITE ATOMIC (created if missing; records a crash left
 * behind are written to replay_to first: this node's medium, under any replication).
 * Without one a LUN guarantees atomicity of a single logical block only. Call before the
 * LUN serves commands; 0 or -errno.
 */
int scsi_lun_attach_atomic_journal(struct scsi_lun *lun, const char *path,
                                   struct tdm_medium *replay_to);
/*
 * Physical block size the LUN reports (512e: 512-byte logical blocks on 4096-byte physical
 * ones). A power-of-two multiple of block_size, at most 65536; 0 means block_size. Call
 * before the LUN serves commands; 0 or -EINVAL.
 */
int scsi_lun_set_physical_block_size(struct scsi_lun *lun, uint32_t bytes);
/*
 * Online growth: the LUN now has num_blocks blocks (the backing store must already hold
 * them). Range checks and READ CAPACITY see the new size at once, and every I_T nexus gets
 * UNIT ATTENTION CAPACITY DATA HAS CHANGED on its next command (the admin plane is no
 * nexus, so nobody is spared). The same size again changes nothing and raises nothing;
 * fewer blocks than now: -EINVAL (a shrink would cut off initiators' data). 0 or -EINVAL.
 */
int scsi_lun_grow(struct scsi_lun *lun, uint64_t num_blocks);

struct scsi_target *scsi_target_create(const char *iqn);
void scsi_target_get(struct scsi_target *t);
void scsi_target_put(struct scsi_target *t);
/* Returns a referenced LUN or NULL. */
struct scsi_lun *scsi_target_get_lun(struct scsi_target *t, uint64_t id);
int scsi_target_add_lun(struct scsi_target *t, struct scsi_lun *lun);
int scsi_target_del_lun(struct scsi_target *t, uint64_t id);
/*
 * Whether another node serves one of t's LUNs behind the port this node shares with it
 * (replication.target_ports = "shared": a floating portal): here that LUN is standby or
 * in transition, and no path of this node can make it active. A login to t is then one
 * that came to this node before the portal's owner was promoted, or before it promoted
 * every LUN of t (it promotes them one by one). Per-node ports (ALUA multipath) are real
 * standby paths: false for them. Any thread.
 */
bool scsi_target_served_elsewhere(struct scsi_target *t);

void scsi_nexus_init(struct scsi_nexus *nx, struct scsi_target *t, const char *initiator);
/* The session's ISID (6 bytes): completes the initiator port name (zeroes until set). */
void scsi_nexus_set_isid(struct scsi_nexus *nx, const uint8_t isid[6]);
/*
 * Task management. LOGICAL UNIT RESET's effects on lun (on the serving node: here, and
 * counted for the other node's nexuses); true when scsi_lun_store_reset must then run before
 * the function is answered: it stores the LU's records on every copy (so the peer's nexuses
 * hear of the reset and a peer promoted after the answer has it too), or on a standby node
 * has the serving node run the reset.
 */
bool scsi_nexus_lun_reset(struct scsi_nexus *nx, struct scsi_lun *lun);
/* The second half of a LUN RESET (blocking: the pool). */
void scsi_lun_store_reset(struct scsi_lun *lun);
/* CLEAR TASK SET from nx (its own tasks are the transport's): the other nexuses are told. */
void scsi_nexus_clear_task_set(struct scsi_nexus *nx, struct scsi_lun *lun);

/*
 * PREEMPT AND ABORT: the transport aborts every task of the named I_T nexuses (initiator
 * port names) on LUN lun_id of target t, all but `except` (the PERSISTENT RESERVE OUT
 * itself), and returns once they are aborted. Runs on the pool (it may wait). Set once at
 * start-up; while unset the preempted nexuses' tasks run to their end.
 */
typedef void (*scsi_pr_abort_fn)(struct scsi_target *t, uint64_t lun_id,
                                 const char *const *port_names, size_t n,
                                 const struct scsi_task *except);
void scsi_set_pr_abort(scsi_pr_abort_fn fn);

void scsi_lun_record_latency(struct scsi_lun *lun, uint64_t ns);
/* The histogram bucket of a latency (see SCSI_LAT_BUCKETS). */
unsigned scsi_latency_bucket(uint64_t ns);
/*
 * The transport answered task after latency_ns: the LUN's latency histogram and the nexus's
 * counters (on the thread that serves the nexus only).
 */
void scsi_task_record_done(struct scsi_task *task, uint64_t latency_ns);
/* Copies of the counters (any thread). */
void scsi_nexus_stats_read(const struct scsi_nexus *nx, struct scsi_io_counters *out);
void scsi_lun_stats_read(const struct scsi_lun *lun, struct scsi_io_counters *out);

#endif
