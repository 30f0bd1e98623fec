/* Internals shared by the SCSI handlers (daemon/scsi/ only; tests may include it too). */
#ifndef TANDEM_SCSI_INTERNAL_H
#define TANDEM_SCSI_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/byteorder.h"
#include "tandem/scsi.h"

/* Identity strings of every logical unit. */
#define SCSI_VENDOR_ID       "TANDEM  "
#define SCSI_PRODUCT_REV     "0001"
#define SCSI_DEFAULT_PRODUCT "VIRTUAL-DISK"

/* Limits reported in the Block Limits VPD page and enforced by the handlers. */
#define SCSI_MAX_XFER_BYTES          (16u * 1024 * 1024) /* MAXIMUM TRANSFER LENGTH, in bytes */
#define SCSI_OPT_XFER_BYTES          (1024u * 1024)      /* OPTIMAL TRANSFER LENGTH, in bytes */
#define SCSI_MAX_WS_BYTES            SCSI_MAX_XFER_BYTES /* MAXIMUM WRITE SAME LENGTH, in bytes */
#define SCSI_MAX_UNMAP_BLOCKS        (1024u * 1024)      /* MAXIMUM UNMAP LBA COUNT */
#define SCSI_MAX_UNMAP_DESCRIPTORS   256u                /* MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT */
#define SCSI_GRANULARITY_BYTES       4096u  /* page / filesystem block: alignment hint */
#define SCSI_MAX_PHYS_BLOCK_BYTES    65536u /* largest physical block a LUN may report */
#define SCSI_GET_LBA_STATUS_MAX_DESC 64u
#define SCSI_MAX_ATOMIC_BYTES        (1024u * 1024) /* WRITE ATOMIC with a journal, in bytes */
#define SCSI_MAX_CAW_BLOCKS          255u           /* MAXIMUM COMPARE AND WRITE LENGTH (a byte) */
#define SCSI_MAX_CAW_BYTES           (1024u * 1024) /* ... and at most this much per half */

/* Private opcode-table flags (high bits, clear of the public SCSI_F_* values). */
#define SCSI_F_STAT_READ  0x01000000u /* counted as a read in the LUN statistics */
#define SCSI_F_STAT_WRITE 0x02000000u /* counted as a write in the LUN statistics */

struct scsi_atomic_journal;
struct pr_state;

/* Bits of scsi_nexus.res_flags: what a nexus is to a LUN's state (pr.c). */
#define SCSI_NX_REGISTERED  0x01 /* registered for persistent reservations */
#define SCSI_NX_PR_HOLDER   0x02 /* holds the persistent reservation */
#define SCSI_NX_SPC2_HOLDER 0x04 /* holds the RESERVE(6/10) reservation */
#define SCSI_NX_UA_PENDING  0x08 /* has unit attentions owed by name (ua.c) */

/* Bits of scsi_lun_private.res_summary: the fast path's view of the same. */
#define SCSI_RES_PR_TYPE   0x0f /* the persistent reservation's type, 0: none */
#define SCSI_RES_SPC2      0x10 /* a RESERVE(6/10) reservation exists */
#define SCSI_RES_NAMED_UAS 0x20 /* attentions are owed to some named nexus */

/* Unit attentions owed to one named nexus (ua.c), oldest first. */
#define SCSI_NAMED_UA_DEPTH 4
struct scsi_named_ua {
        char name[SCSI_PORT_NAME_MAX];
        uint8_t n;
        uint8_t reasons[SCSI_NAMED_UA_DEPTH]; /* enum scsi_reason */
};
#define SCSI_NAMED_UA_MAX 256 /* nexuses with attentions owed, per LUN */

/*
 * State of a LUN that only the SCSI layer uses. scsi_lun_create() allocates this and hands
 * out &lun, so every struct scsi_lun must come from scsi_lun_create().
 */
struct scsi_lun_private {
        struct scsi_lun lun; /* first */
        char *name;          /* the backing store's name (identity, journal key) */
        atomic_bool swp;     /* control page SWP: software write protect */
        atomic_bool d_sense; /* control page D_SENSE: descriptor format sense data */
        struct scsi_atomic_journal *journal; /* NULL: atomic writes of one block only */
        atomic_uint alua_published;          /* ALUA states last reported, see alua.c */
        /* The nexus whose SET TARGET PORT GROUPS is moving the groups (0: none, alua_stpg.c). */
        _Atomic uint64_t alua_requester;
        /*
         * The LU's reservations and the attentions it owes by name (pr.c, reserve.c, ua.c),
         * kept in state records of the medium. state_op_lock serializes every change with
         * the store of its record (held on the pool while the store waits for the peer);
         * state_lock guards the copies below and is held only to read or swap them. Order:
         * state_op_lock, then state_lock. A change bumps state_epoch (under state_lock) so
         * each nexus recomputes what it is to the LUN (scsi_nexus.res_*).
         */
        pthread_mutex_t state_op_lock;
        pthread_mutex_t state_lock;
        struct pr_state *pr;                  /* never NULL after scsi_lun_create */
        char spc2_holder[SCSI_PORT_NAME_MAX]; /* RESERVE(6/10) holder, "": none */
        uint64_t spc2_nexus;                  /* its local nexus id, 0: from the record */
        struct scsi_named_ua *named_uas;      /* SCSI_NAMED_UA_MAX entries */
        unsigned n_named_uas;
        _Atomic uint32_t res_summary; /* SCSI_RES_* */
        _Atomic uint64_t state_epoch;
        pthread_mutex_t caw_lock; /* the table of applied CAWs: load, change, store */
        /* The nexus whose MODE SELECT went to the serving node: no attention for it. */
        _Atomic uint64_t mode_select_origin;
        uint64_t resets; /* LOGICAL UNIT RESETs the LU had (its reset record), state_lock */
};

static inline struct scsi_lun_private *scsi_lun_private(const struct scsi_lun *lun)
{
        return (struct scsi_lun_private *)(uintptr_t)lun;
}

/* Write protected: by configuration (read-only LUN) or by the control mode page SWP bit. */
static inline bool scsi_lun_write_protected(const struct scsi_lun *lun)
{
        return lun->read_only ||
               atomic_load_explicit(&scsi_lun_private(lun)->swp, memory_order_relaxed);
}

/*
 * This node's port group serves the LU: only then does it change the LU's state records (a
 * Secondary only receives them; one it sent would be refused by the Primary).
 */
static inline bool scsi_lun_active(const struct scsi_lun *lun)
{
        return tdm_medium_access(lun->medium).local_state == TDM_ACCESS_ACTIVE;
}

static inline uint32_t min_u32(uint32_t a, uint32_t b)
{
        return a < b ? a : b;
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
        return a < b ? a : b;
}

/* INVALID FIELD IN CDB pointing at cdb[byte] (bit < 0: no bit pointer). */
static inline enum scsi_reason scsi_bad_cdb_field(struct scsi_task *task, uint16_t byte, int bit)
{
        scsi_field_point(&task->field, byte, bit);
        return SR_INVALID_FIELD_CDB;
}

/* INVALID FIELD IN PARAMETER LIST pointing at parameter byte (bit < 0: no bit pointer). */
static inline enum scsi_reason scsi_bad_param_field(struct scsi_task *task, uint16_t byte, int bit)
{
        return scsi_bad_param_at(&task->field, byte, bit);
}

/* True when [lba, lba + nblocks) lies inside the LUN (no overflow). */
static inline bool scsi_lba_range_ok(const struct scsi_lun *lun, uint64_t lba, uint64_t nblocks)
{
        uint64_t capacity = atomic_load_explicit(&lun->num_blocks, memory_order_relaxed);
        return lba <= capacity && nblocks <= capacity - lba;
}

/* data.c: data-in buffers. */
uint8_t *scsi_data_in_alloc(struct scsi_task *task, uint32_t len);
uint8_t *scsi_data_in_alloc_aligned(struct scsi_task *task, uint32_t len);
/* Commands bounded by an ALLOCATION LENGTH transfer min(alloc_len, data produced). */
void scsi_data_in_limit(struct scsi_task *task, uint32_t alloc_len);

/* sense.c */
/* A reason as the status and sense codes another node understands (a forwarded command's
 * answer), and back: the reason with those codes (field pointer included). */
void scsi_reason_to_result(enum scsi_reason reason, const struct scsi_field_ptr *field,
                           struct tdm_forward_result *res);
enum scsi_reason scsi_reason_from_result(const struct tdm_forward_result *res,
                                         struct scsi_field_ptr *field);
uint8_t scsi_sense_format(uint8_t *buf, size_t cap, enum scsi_reason reason,
                          const struct scsi_field_ptr *field, uint64_t info, bool info_valid,
                          bool descriptor);
bool scsi_reason_has_sense(enum scsi_reason reason);

/* alua.c */
/* Listens to the medium's access state (scsi_lun_create). */
void scsi_lun_alua_init(struct scsi_lun *lun);
enum scsi_reason spc_report_target_port_groups(struct scsi_task *task);

/*
 * ua.c: unit attentions of one nexus for one LUN. *store: the attention was owed by name and
 * is now taken; the command must store the LUN's attention record (scsi_ua_store_taken)
 * before it reports it, so a promoted peer does not report it again.
 */
enum scsi_reason scsi_ua_take(struct scsi_nexus *nx, struct scsi_lun *lun, bool *store);
void scsi_ua_clear_luns_changed(struct scsi_nexus *nx);
/* Blocking (pool): stores the attention record, then reports the taken attention. */
enum scsi_reason scsi_ua_store_taken(struct scsi_task *task);
/* Owes reason to the named nexus (state_lock held; changes nothing if already owed). */
void scsi_ua_owe_locked(struct scsi_lun *lun, const char *name, enum scsi_reason reason);
/* Takes the first attention owed to name (state_lock held); SCSI_OK: none. */
enum scsi_reason scsi_ua_take_named_locked(struct scsi_lun *lun, const char *name);
bool scsi_ua_owed_locked(const struct scsi_lun *lun, const char *name);
/* The attention record: encode (state_lock held) into buf; its length. */
size_t scsi_ua_encode_locked(const struct scsi_lun *lun, uint8_t *buf, size_t cap);
size_t scsi_ua_record_max(void);
/* Replaces the owed attentions with the record's (state_lock held); false if malformed. */
bool scsi_ua_decode_locked(struct scsi_lun *lun, const uint8_t *buf, size_t len);
/* Reloads the attention record (it changed on the other copy, or at start). Any thread. */
void scsi_ua_reload(struct scsi_lun *lun);

/* opcodes.c */
bool scsi_opcode_has_service_actions(uint8_t opcode);
/* Service action of a CDB whose opcode has service actions. */
uint16_t scsi_cdb_service_action(const uint8_t *cdb);
enum scsi_reason scsi_cdb_check_usage(struct scsi_task *task, const struct scsi_opcode_entry *e);

/* alua.c, alua_stpg.c: explicit ALUA. */
struct scsi_stpg_groups {
        uint16_t local_id, peer_id;      /* peer_id 0: no peer group */
        uint8_t local_state, peer_state; /* enum tdm_access_state */
};
/* This node's port group and relative port id: the medium's, or 1 for a LUN of this node. */
uint16_t scsi_alua_local_group(const struct tdm_access *a);
/*
 * What a SET TARGET PORT GROUPS parameter list (len bytes) asks of groups g: *activate
 * when this node's group is to become active; else nothing. A reason (with *bad set for a
 * field) when the list is malformed or asks what tandem does not do.
 */
enum scsi_reason scsi_stpg_decide(const struct scsi_stpg_groups *g, const uint8_t *param,
                                  uint32_t len, bool *activate, struct scsi_field_ptr *bad);
enum scsi_reason spc_set_target_port_groups(struct scsi_task *task);

/* lun.c */
/* The medium's size_changed callback: the LUN takes the medium's size (scsi_lun_grow). */
void scsi_lun_medium_grew(void *arg);
void scsi_lun_count_bytes(struct scsi_lun *lun, bool is_write, uint64_t bytes);
/* LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT of READ CAPACITY(16) (see lun.c: 0 by default). */
uint8_t scsi_lun_lbppb_exponent(const struct scsi_lun *lun);
/* Alignment hint: logical blocks per page / filesystem block or per physical block. */
uint32_t scsi_lun_granularity_blocks(const struct scsi_lun *lun);

/*
 * medium_io.c: the medium under a command. scsi_mio_start locks the range (shared for a
 * READ), submits one request, unlocks, and calls after(task, rc) on the task's loop; the
 * handler returns SCSI_PENDING and after() ends with scsi_task_complete(). A handler with
 * several steps returns scsi_task_block(task, fn): fn runs on the pool, where it may wait
 * (the scsi_sync_* calls and tdm_range_lock_wait), and its reason completes the task.
 */
void scsi_mio_start(struct scsi_task *task, enum tdm_mio_op op, void *buf, uint64_t off,
                    uint64_t len, uint32_t flags, void (*after)(struct scsi_task *task, int rc));
enum scsi_reason scsi_task_block(struct scsi_task *task,
                                 enum scsi_reason (*fn)(struct scsi_task *task));
/* The task's command ended with reason r (from a completion; any reason but SCSI_PENDING). */
void scsi_task_complete(struct scsi_task *task, enum scsi_reason r);
/* A failed medium request as a reason (logged once, naming the initiator). */
enum scsi_reason scsi_io_error(struct scsi_task *task, const char *what, int rc, bool write);
/* The reason for a medium error rc (-errno), without logging. */
enum scsi_reason scsi_io_reason(int rc, bool write);
/* Blocking-handler helpers: the whole range is locked for the call (exclusive). */
int scsi_sync_write(struct scsi_task *task, const void *buf, uint64_t len, uint64_t off,
                    uint32_t flags);
/* MIO flags a write of this task needs for durability: FUA when asked or the cache is off. */
uint32_t scsi_write_flags(const struct scsi_task *task, bool fua);

/*
 * caw_memory.c: the COMPARE AND WRITEs applied, per initiator and LBA (a state record), so a
 * resend is answered GOOD. Blocking (pool). write_remembered: the CAW's write half and its
 * entry in the table as one change of the medium (every copy has both or neither).
 */
uint64_t scsi_caw_digest(const void *halves, size_t len);
int scsi_caw_write_remembered(struct scsi_lun *lun, const char *initiator, uint64_t lba,
                              uint64_t digest, const void *data, uint32_t len, uint32_t flags);
bool scsi_caw_was_applied(struct scsi_lun *lun, const char *initiator, uint64_t lba,
                          uint64_t digest);

/* atomic.c: MAXIMUM ATOMIC TRANSFER LENGTH of the LUN in blocks (0: not offered). */
uint32_t scsi_atomic_max_blocks(const struct scsi_lun *lun);

/* atomic_journal.c: the redo journal that makes multi-block atomic writes power-safe. */
int scsi_journal_open(struct scsi_lun *lun, const char *path, struct tdm_medium *replay_to,
                      struct scsi_atomic_journal **out);
/* Writes a record of the data and makes it durable; *slot identifies it for retire. */
int scsi_journal_log(struct scsi_atomic_journal *j, uint64_t lba, uint32_t nblocks,
                     const void *data, unsigned *slot);
/* The data is durable in place: the record is erased (durably) and its slot reused. */
int scsi_journal_retire(struct scsi_atomic_journal *j, unsigned slot);
/* The in-place write of a logged record failed: stop atomic writes, drop the journal. */
void scsi_journal_fail(struct scsi_atomic_journal *j, int rc);
/* Erases the file when every record was retired; keeps it for replay otherwise. */
void scsi_journal_close(struct scsi_atomic_journal *j);

/* lu_state.c: the LU's state records on its medium (TDM_MIO_STATE ids). */
enum scsi_state_id {
        SCSI_STATE_PR = 0,      /* persistent reservations: registrations, holder, generation */
        SCSI_STATE_RESERVE = 1, /* the SPC-2 reservation's holder */
        SCSI_STATE_MODE = 2,    /* changeable mode page values */
        SCSI_STATE_UA = 3,      /* unit attentions owed to named I_T nexuses */
        SCSI_STATE_CAW = 4,     /* COMPARE AND WRITEs applied, per initiator and LBA */
        SCSI_STATE_RESET = 5,   /* LOGICAL UNIT RESETs counted (lu_reset.c) */
        SCSI_STATE_IDS
};
/*
 * Stores a record on every copy of the medium (blocking: pool or a loop-less thread); 0 or
 * -errno (logged). persist: it survives a restart of every node (APTPL).
 */
int scsi_lun_state_store(struct scsi_lun *lun, enum scsi_state_id id, const void *buf, size_t len,
                         bool persist);
size_t scsi_lun_state_load(struct scsi_lun *lun, enum scsi_state_id id, void *buf, size_t cap,
                           bool *persist);
/* The medium's state_changed callback: a record arrived from the other copy. */
void scsi_lun_state_changed(void *arg, unsigned id);

/*
 * pr.c: the LU's reservation state. Reload the persistent reservation state from its record
 * (it changed elsewhere; also at start). Any thread.
 */
void scsi_pr_reload(struct scsi_lun *lun);
/* Sets up and loads the state of a new LUN (scsi_lun_create) and frees it (last put). */
int scsi_lun_state_init(struct scsi_lun *lun);
void scsi_lun_state_fini(struct scsi_lun *lun);
/* What nexus nx is to the LUN's state (SCSI_NX_*), cached per nexus by epoch. Loop-safe. */
uint8_t scsi_nexus_res_flags(struct scsi_nexus *nx, struct scsi_lun *lun);
/* A change of the in-memory state is visible (state_lock held): new epoch and summary. */
void scsi_lun_state_changed_locked(struct scsi_lun *lun);
/*
 * Stores the records in mask (1u << SCSI_STATE_*) from the in-memory state, state_op_lock
 * held (blocking). 0 or the first -errno.
 */
int scsi_lun_state_store_locked(struct scsi_lun *lun, unsigned mask);
/* The same from any thread, later: on the pool when called on a loop, else now. */
void scsi_lun_state_store_later(struct scsi_lun *lun, unsigned mask);
/* The admission check of persistent and SPC-2 reservations (task.c). */
enum scsi_reason scsi_reservation_check(struct scsi_task *task, const struct scsi_opcode_entry *e);

/* pr_out.c: PERSISTENT RESERVE OUT for initiator port `me` (task: the command's own, so its
 * transport aborts what PREEMPT AND ABORT preempts; NULL for a forwarded one). May block. */
enum scsi_reason scsi_pr_out_run(struct scsi_lun *lun, const char *me, const uint8_t *cdb,
                                 const uint8_t *param, uint32_t len, struct scsi_field_ptr *field,
                                 const struct scsi_task *task);

/* forward.c: state-changing commands on a node whose group does not serve. */
/* Has the serving node run the task's command (on the pool); NOT READY (standby) when none can. */
enum scsi_reason scsi_forward(struct scsi_task *task);
/* The medium's forwarded callback (set by scsi_lun_alua_init): runs another node's command. */
void scsi_lun_forwarded(void *arg, const struct tdm_forward_cmd *cmd,
                        struct tdm_forward_result *res);

/* reserve.c: RESERVE/RELEASE (SPC-2 logical unit reservations). */
/* LUN RESET: the RESERVE ends; true if one did (its record is then the caller's to store). */
bool scsi_reservation_release_all(struct scsi_lun *lun);
size_t scsi_spc2_encode_locked(const struct scsi_lun *lun, uint8_t *buf, size_t cap);
void scsi_spc2_reload(struct scsi_lun *lun);
enum scsi_reason spc_reserve(struct scsi_task *task);
enum scsi_reason spc_release(struct scsi_task *task);

/* lu_reset.c: a reset another node's standby port passed on (the pool); the reset record
 * (state_lock held to encode); reload it (it changed elsewhere). */
enum scsi_reason scsi_lun_reset_run(struct scsi_lun *lun);
size_t scsi_reset_encode_locked(const struct scsi_lun *lun, uint8_t *buf, size_t cap);
void scsi_reset_reload(struct scsi_lun *lun);

/* pr_in.c, pr_out.c: PERSISTENT RESERVE IN and OUT. */
enum scsi_reason spc_pr_in(struct scsi_task *task);
enum scsi_reason spc_pr_out(struct scsi_task *task);

/* Handlers: spc.c */
enum scsi_reason spc_test_unit_ready(struct scsi_task *task);
enum scsi_reason spc_request_sense(struct scsi_task *task);
enum scsi_reason spc_report_luns(struct scsi_task *task);
enum scsi_reason spc_prevent_allow(struct scsi_task *task);
enum scsi_reason spc_start_stop_unit(struct scsi_task *task);
enum scsi_reason spc_report_supported_opcodes(struct scsi_task *task);

/* Handlers: inquiry.c */
enum scsi_reason spc_inquiry(struct scsi_task *task);

/* Handlers: mode.c */
enum scsi_reason spc_mode_sense6(struct scsi_task *task);
enum scsi_reason spc_mode_sense10(struct scsi_task *task);
enum scsi_reason spc_mode_select6(struct scsi_task *task);
enum scsi_reason spc_mode_select10(struct scsi_task *task);

/* Handlers: sbc.c (medium access) */
enum scsi_reason sbc_read6(struct scsi_task *task);
enum scsi_reason sbc_read10(struct scsi_task *task);
enum scsi_reason sbc_read12(struct scsi_task *task);
enum scsi_reason sbc_read16(struct scsi_task *task);
enum scsi_reason sbc_write6(struct scsi_task *task);
enum scsi_reason sbc_write10(struct scsi_task *task);
enum scsi_reason sbc_write12(struct scsi_task *task);
enum scsi_reason sbc_write16(struct scsi_task *task);
enum scsi_reason sbc_write_verify10(struct scsi_task *task);
enum scsi_reason sbc_write_verify12(struct scsi_task *task);
enum scsi_reason sbc_write_verify16(struct scsi_task *task);
enum scsi_reason sbc_verify10(struct scsi_task *task);
enum scsi_reason sbc_verify12(struct scsi_task *task);
enum scsi_reason sbc_verify16(struct scsi_task *task);
enum scsi_reason sbc_orwrite16(struct scsi_task *task);
enum scsi_reason sbc_prefetch10(struct scsi_task *task);
enum scsi_reason sbc_prefetch16(struct scsi_task *task);
enum scsi_reason sbc_sync_cache10(struct scsi_task *task);
enum scsi_reason sbc_sync_cache16(struct scsi_task *task);

/* Handlers: atomic.c */
enum scsi_reason sbc_write_atomic16(struct scsi_task *task);

/* Handlers: xcopy.c, xcopy_results.c */
enum scsi_reason spc_extended_copy(struct scsi_task *task);
enum scsi_reason spc_receive_copy_results(struct scsi_task *task);
/* The descriptors of the Third-party Copy VPD page (8Fh) into d; their length. */
uint32_t scsi_vpd_third_party_copy(uint8_t *d);

/* Handlers: caw.c */
enum scsi_reason sbc_compare_and_write(struct scsi_task *task);
/* MAXIMUM COMPARE AND WRITE LENGTH of the LUN, in blocks. */
uint32_t scsi_caw_max_blocks(const struct scsi_lun *lun);

/* Handlers: capacity.c */
enum scsi_reason sbc_read_capacity10(struct scsi_task *task);
enum scsi_reason sbc_read_capacity16(struct scsi_task *task);
enum scsi_reason sbc_read_defect_data10(struct scsi_task *task);
enum scsi_reason sbc_read_defect_data12(struct scsi_task *task);

/* Handlers: lbp.c (logical block provisioning) */
enum scsi_reason sbc_write_same10(struct scsi_task *task);
enum scsi_reason sbc_write_same16(struct scsi_task *task);
enum scsi_reason sbc_unmap(struct scsi_task *task);
enum scsi_reason sbc_get_lba_status(struct scsi_task *task);

/* Mode page bytes, shared by MODE SENSE and MODE SELECT (mode.c). */
enum scsi_mode_pc {
        SCSI_MODE_PC_CURRENT = 0,
        SCSI_MODE_PC_CHANGEABLE = 1,
        SCSI_MODE_PC_DEFAULT = 2,
        SCSI_MODE_PC_SAVED = 3,
};
#define SCSI_MODE_BUF_MAX    128
#define SCSI_CONTROL_D_SENSE 0x04 /* control page byte 2 */
#define SCSI_CONTROL_SWP     0x08 /* control page byte 4 */
/* Page code's bytes as MODE SENSE shows them into p (SCSI_MODE_BUF_MAX); 0: no such page. */
uint32_t scsi_mode_page_put(const struct scsi_lun *lun, uint8_t code, enum scsi_mode_pc pc,
                            uint8_t *p);

/*
 * mode_select.c: MODE SELECT(6/10) of lun for nexus origin (0: another node's, forwarded):
 * checks the whole list, stores the new values in the LU's mode record (on every copy) and
 * only then makes them current. Blocking (pool).
 */
enum scsi_reason scsi_mode_select_run(struct scsi_lun *lun, const uint8_t *cdb,
                                      const uint8_t *param, uint32_t len, uint64_t origin,
                                      struct scsi_field_ptr *field);
/* The mode record changed on the other copy: its values become current (any thread). */
void scsi_mode_reload(struct scsi_lun *lun);

#endif
