/* Internals shared by the SCSI handlers (daemon/scsi/ only; tests may include it too). */
#ifndef TANDEM_SCSI_INTERNAL_H
#define TANDEM_SCSI_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Private opcode-table flags (high bits, clear of the public SCSI_F_* values). */
#define SCSI_F_STAT_READ  0x01000000u /* counted as a read in the LUN statistics */
#define SCSI_F_STAT_WRITE 0x02000000u /* counted as a write in the LUN statistics */

/*
 * Exclusion between WRITE ATOMIC and the other commands touching the same LBAs (atomic.c).
 * The medium is cut into 1 MiB stripes, folded onto SCSI_ATOMIC_STRIPES slots. An atomic
 * write holds its stripes' mutexes and keeps their seq odd while it writes. Readers take no
 * lock: they check seq before and after reading (a seqlock) and read again, under the
 * mutexes, only if an atomic write overlapped. Other writers count themselves in writers[]
 * so an atomic write waits for them; they fall back to the mutexes when one is in flight.
 */
#define SCSI_ATOMIC_STRIPES      64u
#define SCSI_ATOMIC_STRIPE_SHIFT 20 /* 1 MiB of the medium per stripe */

struct scsi_stripe_writers {
        atomic_uint n;
        char pad[60]; /* one cache line each: writers on other stripes do not share it */
};

struct scsi_stripes {
        atomic_uint seq[SCSI_ATOMIC_STRIPES]; /* read by every READ: only atomic writes change it */
        struct scsi_stripe_writers writers[SCSI_ATOMIC_STRIPES];
        pthread_mutex_t lock[SCSI_ATOMIC_STRIPES];
};

struct scsi_atomic_journal;

/*
 * State of a LUN that only the SCSI layer uses. scsi_lun_create() allocates this and hands
 * out &lun, so every struct scsi_lun must come from scsi_lun_create().
 */
struct scsi_lun_private {
        struct scsi_lun lun;          /* first */
        atomic_bool swp;              /* control page SWP: software write protect */
        atomic_bool d_sense;          /* control page D_SENSE: descriptor format sense data */
        _Atomic uint64_t reserved_by; /* nexus holding a RESERVE(6/10) reservation, 0: none */
        struct scsi_stripes stripes;
        struct scsi_atomic_journal *journal; /* NULL: atomic writes of one block only */
        /* ALUA (alua.c): the peer's group of a replicated LUN, and what was last reported. */
        uint16_t alua_peer_id; /* peer's group and relative port; 0: no peer group */
        _Atomic uint8_t alua_peer_state;
        _Atomic(scsi_alua_refresh_fn) alua_refresh;
        atomic_uint alua_published; /* SCSI_ALUA_PUB_* word, see alua.c */
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

/* Big-endian field access. */
static inline uint16_t get_be16(const uint8_t *p)
{
        return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t get_be24(const uint8_t *p)
{
        return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}

static inline uint32_t get_be32(const uint8_t *p)
{
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t get_be64(const uint8_t *p)
{
        return ((uint64_t)get_be32(p) << 32) | get_be32(p + 4);
}

static inline void put_be16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
        put_be32(p, (uint32_t)(v >> 32));
        put_be32(p + 4, (uint32_t)v);
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
        task->field.byte = byte;
        task->field.bit = bit < 0 ? 0 : (uint8_t)bit;
        task->field.bit_valid = bit >= 0;
        return SR_INVALID_FIELD_CDB;
}

/* INVALID FIELD IN PARAMETER LIST pointing at parameter byte (bit < 0: no bit pointer). */
static inline enum scsi_reason scsi_bad_param_field(struct scsi_task *task, uint16_t byte, int bit)
{
        task->field.byte = byte;
        task->field.bit = bit < 0 ? 0 : (uint8_t)bit;
        task->field.bit_valid = bit >= 0;
        return SR_INVALID_FIELD_PARAM;
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
uint8_t scsi_sense_format(uint8_t *buf, size_t cap, enum scsi_reason reason,
                          const struct scsi_field_ptr *field, uint64_t info, bool info_valid,
                          bool descriptor);
bool scsi_reason_has_sense(enum scsi_reason reason);

/* alua.c */
/* This node's group state as commands see it: standby or active/optimized. */
static inline enum scsi_alua_state scsi_alua_local_state(bool standby)
{
        return standby ? SCSI_ALUA_STANDBY : SCSI_ALUA_ACTIVE_OPTIMIZED;
}
/* The local state last published (compared on every command: a change raises the UA). */
static inline enum scsi_alua_state scsi_alua_published_local(const struct scsi_lun *lun)
{
        return (enum scsi_alua_state)(
            atomic_load_explicit(&scsi_lun_private(lun)->alua_published, memory_order_relaxed) &
            0x0f);
}
void scsi_lun_alua_init(struct scsi_lun *lun);
/*
 * Asks the replicator for the peer's state (the refresh callback), then publishes both
 * groups' states, raising the attention on a change. From a worker holding no lock.
 */
void scsi_alua_notice_change(struct scsi_lun *lun);
enum scsi_reason spc_report_target_port_groups(struct scsi_task *task);

/* ua.c: unit attentions of one nexus for one LUN. */
enum scsi_reason scsi_ua_take(struct scsi_nexus *nx, struct scsi_lun *lun);
void scsi_ua_clear_luns_changed(struct scsi_nexus *nx);

/* opcodes.c */
bool scsi_opcode_has_service_actions(uint8_t opcode);
/* Service action of a CDB whose opcode has service actions. */
uint16_t scsi_cdb_service_action(const uint8_t *cdb);
enum scsi_reason scsi_cdb_check_usage(struct scsi_task *task, const struct scsi_opcode_entry *e);

/* lun.c */
void scsi_lun_count_bytes(struct scsi_lun *lun, bool is_write, uint64_t bytes);
/* LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT of READ CAPACITY(16) (see lun.c: 0 by default). */
uint8_t scsi_lun_lbppb_exponent(const struct scsi_lun *lun);
/* Alignment hint: logical blocks per page / filesystem block or per physical block. */
uint32_t scsi_lun_granularity_blocks(const struct scsi_lun *lun);

/*
 * atomic.c: medium access that respects WRITE ATOMIC. Every read of the medium goes
 * through scsi_medium_read(); every other change of the medium is bracketed by
 * scsi_medium_write_begin()/end() over the byte range it changes.
 */
struct scsi_write_guard {
        uint64_t off, len;
        bool locked; /* the slow path: the stripes' mutexes are held */
};
void scsi_stripes_init(struct scsi_stripes *st);
void scsi_stripes_destroy(struct scsi_stripes *st);
int scsi_medium_read(struct scsi_lun *lun, void *buf, size_t len, uint64_t off);
void scsi_medium_write_begin(struct scsi_lun *lun, uint64_t off, uint64_t len,
                             struct scsi_write_guard *g);
void scsi_medium_write_end(struct scsi_lun *lun, struct scsi_write_guard *g);
/*
 * medium.c: every change a command makes to the medium (replicated LUNs send it to the
 * peer as well). 0 or -errno.
 */
int scsi_medium_write(struct scsi_task *task, const void *buf, size_t len, uint64_t off);
int scsi_medium_write_zeroes(struct scsi_task *task, uint64_t off, uint64_t len);
int scsi_medium_unmap(struct scsi_task *task, uint64_t off, uint64_t len);
int scsi_medium_flush(struct scsi_task *task);
/* MAXIMUM ATOMIC TRANSFER LENGTH of the LUN in blocks (0: WRITE ATOMIC is not offered). */
uint32_t scsi_atomic_max_blocks(const struct scsi_lun *lun);

/* atomic_journal.c: the redo journal that makes multi-block atomic writes power-safe. */
int scsi_journal_open(struct scsi_lun *lun, const char *path, struct scsi_atomic_journal **out);
/* Writes a record of the data and makes it durable; *slot identifies it for retire. */
int scsi_journal_log(struct scsi_atomic_journal *j, uint64_t lba, uint32_t nblocks,
                     const void *data, unsigned *slot);
/* The data is durable in place: the record is erased (durably) and its slot reused. */
int scsi_journal_retire(struct scsi_atomic_journal *j, unsigned slot);
/* The in-place write of a logged record failed: stop atomic writes, drop the journal. */
void scsi_journal_fail(struct scsi_atomic_journal *j, int rc);
/* Erases the file when every record was retired; keeps it for replay otherwise. */
void scsi_journal_close(struct scsi_atomic_journal *j);

/* Durability after a write: with the write cache off or FUA set, data is on stable media. */
enum scsi_reason scsi_write_commit(struct scsi_task *task, bool fua);

/* reserve.c: RESERVE/RELEASE (SPC-2 logical unit reservations). */
enum scsi_reason scsi_reservation_check(struct scsi_task *task, const struct scsi_opcode_entry *e);
void scsi_reservation_release_all(struct scsi_lun *lun);
enum scsi_reason spc_reserve(struct scsi_task *task);
enum scsi_reason spc_release(struct scsi_task *task);

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

#endif
