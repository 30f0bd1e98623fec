/*
 * THE opcode table: one row per (opcode, service action), sorted. It drives dispatch,
 * the CDB reserved-bit check (usage[] is the CDB USAGE DATA of REPORT SUPPORTED
 * OPERATION CODES: a bit the initiator may set) and REPORT SUPPORTED OPERATION CODES.
 */
#include "scsi_internal.h"

#define F_IN   SCSI_F_DATA_IN
#define F_OUT  SCSI_F_DATA_OUT
#define F_LUN  SCSI_F_NEEDS_LUN
#define F_NOUA SCSI_F_NO_UA
#define F_SBY  SCSI_F_OK_ON_STANDBY
#define F_RES  SCSI_F_ALLOWED_UNDER_RESERVATION
#define F_WR   SCSI_F_WRITES_MEDIUM
#define F_SR   SCSI_F_STAT_READ
#define F_SW   SCSI_F_STAT_WRITE
/* Persistent reservation conflict classes (see scsi.h): allowed for every nexus under every
 * type, under the Write Exclusive types, or when the CDB changes nothing. */
#define F_PRA SCSI_F_PR_ANY
#define F_PRR SCSI_F_PR_READ
#define F_PRC SCSI_F_PR_CDB

/* Usage bytes shared by the READ/WRITE family: byte 1 DPO 0x10, FUA 0x08, FUA_NV 0x02. */
#define RW_FLAGS 0x1a
#define LBA4     0xff, 0xff, 0xff, 0xff
#define LBA8     LBA4, LBA4
#define GROUP    0x1f

#define ROW(op, len, fl, fn, nm, ...)                                                              \
        {                                                                                          \
                .opcode = (op), .cdb_len = (len), .flags = (fl), .handler = (fn), .name = (nm),    \
                .usage = {                                                                         \
                        __VA_ARGS__                                                                \
                }                                                                                  \
        }
#define ROW_SA(op, sa, len, fl, fn, nm, ...)                                                       \
        {                                                                                          \
                .opcode = (op), .service_action = (sa), .has_service_action = true,                \
                .cdb_len = (len), .flags = (fl), .handler = (fn), .name = (nm), .usage = {         \
                        __VA_ARGS__                                                                \
                }                                                                                  \
        }

/*
 * PR IN works on a standby port (it reads the replicated state); PR OUT too (SPC-5 5.16.2.4.4),
 * run by the serving node (forward.c). Neither runs while another nexus holds a RESERVE(6/10).
 */
#define PRIN(sa, nm)                                                                               \
        ROW_SA(0x5e, sa, 10, F_IN | F_LUN | F_SBY | F_PRA, spc_pr_in, nm, 0x5e, sa, 0, 0, 0, 0, 0, \
               0xff, 0xff, 0)
#define PROUT(sa, nm)                                                                              \
        ROW_SA(0x5f, sa, 10, F_OUT | F_LUN | F_SBY | F_PRA, spc_pr_out, nm, 0x5f, sa, 0xff, 0, 0,  \
               0xff, 0xff, 0xff, 0xff, 0)

const struct scsi_opcode_entry scsi_opcode_table[] = {
    ROW(0x00, 6, F_LUN | F_SBY | F_RES | F_PRA, spc_test_unit_ready, "TEST UNIT READY", 0x00, 0, 0,
        0, 0, 0),
    ROW(0x03, 6, F_IN | F_NOUA | F_SBY | F_RES | F_PRA, spc_request_sense, "REQUEST SENSE", 0x03,
        0x01, 0, 0, 0xff, 0),
    ROW(0x08, 6, F_IN | F_LUN | F_SR | F_PRR, sbc_read6, "READ(6)", 0x08, 0x1f, 0xff, 0xff, 0xff,
        0),
    ROW(0x0a, 6, F_OUT | F_LUN | F_WR | F_SW, sbc_write6, "WRITE(6)", 0x0a, 0x1f, 0xff, 0xff, 0xff,
        0),
    ROW(0x12, 6, F_IN | F_NOUA | F_SBY | F_RES | F_PRA, spc_inquiry, "INQUIRY", 0x12, 0x01, 0xff,
        0xff, 0xff, 0),
    ROW(0x15, 6, F_OUT | F_LUN | F_SBY, spc_mode_select6, "MODE SELECT(6)", 0x15, 0x10, 0, 0, 0xff,
        0),
    ROW(0x16, 6, F_LUN | F_PRA, spc_reserve, "RESERVE(6)", 0x16, 0, 0, 0, 0, 0),
    ROW(0x17, 6, F_LUN | F_RES | F_PRA, spc_release, "RELEASE(6)", 0x17, 0, 0, 0, 0, 0),
    ROW(0x1a, 6, F_IN | F_LUN | F_SBY | F_PRR, spc_mode_sense6, "MODE SENSE(6)", 0x1a, 0x08, 0xff,
        0xff, 0xff, 0),
    ROW(0x1b, 6, F_LUN | F_PRC, spc_start_stop_unit, "START STOP UNIT", 0x1b, 0x01, 0, 0x0f, 0xf7,
        0),
    ROW(0x1e, 6, F_LUN | F_PRC, spc_prevent_allow, "PREVENT ALLOW MEDIUM REMOVAL", 0x1e, 0, 0, 0,
        0x03, 0),
    ROW(0x25, 10, F_IN | F_LUN | F_SBY | F_PRA, sbc_read_capacity10, "READ CAPACITY(10)", 0x25,
        0x00, LBA4, 0, 0, 0x01, 0),
    ROW(0x28, 10, F_IN | F_LUN | F_SR | F_PRR, sbc_read10, "READ(10)", 0x28, RW_FLAGS, LBA4, GROUP,
        0xff, 0xff, 0),
    ROW(0x2a, 10, F_OUT | F_LUN | F_WR | F_SW, sbc_write10, "WRITE(10)", 0x2a, RW_FLAGS, LBA4,
        GROUP, 0xff, 0xff, 0),
    ROW(0x2e, 10, F_OUT | F_LUN | F_WR | F_SW, sbc_write_verify10, "WRITE AND VERIFY(10)", 0x2e,
        0x12, LBA4, GROUP, 0xff, 0xff, 0),
    ROW(0x2f, 10, F_OUT | F_LUN | F_SR | F_PRR, sbc_verify10, "VERIFY(10)", 0x2f, 0x16, LBA4, GROUP,
        0xff, 0xff, 0),
    ROW(0x34, 10, F_LUN | F_PRR, sbc_prefetch10, "PRE-FETCH(10)", 0x34, 0x02, LBA4, GROUP, 0xff,
        0xff, 0),
    ROW(0x35, 10, F_LUN, sbc_sync_cache10, "SYNCHRONIZE CACHE(10)", 0x35, 0x06, LBA4, GROUP, 0xff,
        0xff, 0),
    ROW(0x37, 10, F_IN | F_LUN | F_PRR, sbc_read_defect_data10, "READ DEFECT DATA(10)", 0x37, 0,
        0x1f, 0, 0, 0, 0, 0xff, 0xff, 0),
    ROW(0x41, 10, F_OUT | F_LUN | F_WR | F_SW, sbc_write_same10, "WRITE SAME(10)", 0x41, 0x08, LBA4,
        GROUP, 0xff, 0xff, 0),
    ROW(0x42, 10, F_OUT | F_LUN | F_WR | F_SW, sbc_unmap, "UNMAP", 0x42, 0x00, 0, 0, 0, 0, GROUP,
        0xff, 0xff, 0),
    ROW(0x55, 10, F_OUT | F_LUN | F_SBY, spc_mode_select10, "MODE SELECT(10)", 0x55, 0x10, 0, 0, 0,
        0, 0, 0xff, 0xff, 0),
    ROW(0x56, 10, F_LUN | F_PRA, spc_reserve, "RESERVE(10)", 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    ROW(0x57, 10, F_LUN | F_RES | F_PRA, spc_release, "RELEASE(10)", 0x57, 0, 0, 0, 0, 0, 0, 0, 0,
        0),
    ROW(0x5a, 10, F_IN | F_LUN | F_SBY | F_PRR, spc_mode_sense10, "MODE SENSE(10)", 0x5a, 0x18,
        0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0),
    /* PERSISTENT RESERVE IN/OUT: the handlers take every service action of their rows. */
    PRIN(0x00, "PERSISTENT RESERVE IN (READ KEYS)"),
    PRIN(0x01, "PERSISTENT RESERVE IN (READ RESERVATION)"),
    PRIN(0x02, "PERSISTENT RESERVE IN (REPORT CAPABILITIES)"),
    PRIN(0x03, "PERSISTENT RESERVE IN (READ FULL STATUS)"),
    PROUT(0x00, "PERSISTENT RESERVE OUT (REGISTER)"),
    PROUT(0x01, "PERSISTENT RESERVE OUT (RESERVE)"),
    PROUT(0x02, "PERSISTENT RESERVE OUT (RELEASE)"),
    PROUT(0x03, "PERSISTENT RESERVE OUT (CLEAR)"),
    PROUT(0x04, "PERSISTENT RESERVE OUT (PREEMPT)"),
    PROUT(0x05, "PERSISTENT RESERVE OUT (PREEMPT AND ABORT)"),
    PROUT(0x06, "PERSISTENT RESERVE OUT (REGISTER AND IGNORE EXISTING KEY)"),
    PROUT(0x07, "PERSISTENT RESERVE OUT (REGISTER AND MOVE)"),
    ROW_SA(0x83, 0x00, 16, F_OUT | F_LUN | F_WR | F_SW, spc_extended_copy, "EXTENDED COPY(LID1)",
           0x83, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0),
    ROW_SA(0x84, 0x00, 16, F_IN | F_LUN | F_PRR, spc_receive_copy_results,
           "RECEIVE COPY RESULTS(COPY STATUS)", 0x84, 0x00, 0xff, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
           0xff, 0xff, 0, 0),
    ROW_SA(0x84, 0x03, 16, F_IN | F_LUN | F_PRR, spc_receive_copy_results,
           "RECEIVE COPY RESULTS(OPERATING PARAMETERS)", 0x84, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
           0xff, 0xff, 0xff, 0, 0),
    ROW(0x88, 16, F_IN | F_LUN | F_SR | F_PRR, sbc_read16, "READ(16)", 0x88, RW_FLAGS, LBA8, LBA4,
        GROUP, 0),
    ROW(0x89, 16, F_OUT | F_LUN | F_WR | F_SW, sbc_compare_and_write, "COMPARE AND WRITE", 0x89,
        RW_FLAGS, LBA8, 0, 0, 0, 0xff, GROUP, 0),
    ROW(0x8a, 16, F_OUT | F_LUN | F_WR | F_SW, sbc_write16, "WRITE(16)", 0x8a, RW_FLAGS, LBA8, LBA4,
        GROUP, 0),
    ROW(0x8b, 16, F_OUT | F_LUN | F_WR | F_SW, sbc_orwrite16, "ORWRITE(16)", 0x8b, RW_FLAGS, LBA8,
        LBA4, GROUP, 0),
    ROW(0x8e, 16, F_OUT | F_LUN | F_WR | F_SW, sbc_write_verify16, "WRITE AND VERIFY(16)", 0x8e,
        0x12, LBA8, LBA4, GROUP, 0),
    ROW(0x8f, 16, F_OUT | F_LUN | F_SR | F_PRR, sbc_verify16, "VERIFY(16)", 0x8f, 0x16, LBA8, LBA4,
        GROUP, 0),
    ROW(0x90, 16, F_LUN | F_PRR, sbc_prefetch16, "PRE-FETCH(16)", 0x90, 0x02, LBA8, LBA4, GROUP, 0),
    ROW(0x91, 16, F_LUN, sbc_sync_cache16, "SYNCHRONIZE CACHE(16)", 0x91, 0x06, LBA8, LBA4, GROUP,
        0),
    ROW(0x93, 16, F_OUT | F_LUN | F_WR | F_SW, sbc_write_same16, "WRITE SAME(16)", 0x93, 0x09, LBA8,
        LBA4, GROUP, 0),
    ROW(0x9c, 16, F_OUT | F_LUN | F_WR | F_SW, sbc_write_atomic16, "WRITE ATOMIC(16)", 0x9c, 0x18,
        LBA8, 0, 0, 0xff, 0xff, GROUP, 0),
    ROW_SA(0x9e, 0x10, 16, F_IN | F_LUN | F_SBY | F_PRA, sbc_read_capacity16, "READ CAPACITY(16)",
           0x9e, 0x10, LBA8, LBA4, 0x01, 0),
    ROW_SA(0x9e, 0x12, 16, F_IN | F_LUN | F_PRR, sbc_get_lba_status, "GET LBA STATUS", 0x9e, 0x12,
           LBA8, LBA4, 0, 0),
    ROW(0xa0, 12, F_IN | F_NOUA | F_SBY | F_RES | F_PRA, spc_report_luns, "REPORT LUNS", 0xa0, 0,
        0xff, 0, 0, 0, LBA4, 0, 0),
    /* PARAMETER DATA FORMAT (byte 1 bits 7-5): the handler takes 000b and 001b. */
    ROW_SA(0xa3, 0x0a, 12, F_IN | F_LUN | F_SBY | F_RES | F_PRA, spc_report_target_port_groups,
           "REPORT TARGET PORT GROUPS", 0xa3, 0xea, 0, 0, 0, 0, LBA4, 0, 0),
    ROW_SA(0xa3, 0x0c, 12, F_IN | F_LUN | F_SBY | F_RES | F_PRR, spc_report_supported_opcodes,
           "REPORT SUPPORTED OPERATION CODES", 0xa3, 0x0c, 0x87, 0xff, 0xff, 0xff, LBA4, 0, 0),
    ROW_SA(0xa4, 0x0a, 12, F_OUT | F_LUN | F_SBY | F_PRA, spc_set_target_port_groups,
           "SET TARGET PORT GROUPS", 0xa4, 0x0a, 0, 0, 0, 0, LBA4, 0, 0),
    ROW(0xa8, 12, F_IN | F_LUN | F_SR | F_PRR, sbc_read12, "READ(12)", 0xa8, RW_FLAGS, LBA4, LBA4,
        GROUP, 0),
    ROW(0xaa, 12, F_OUT | F_LUN | F_WR | F_SW, sbc_write12, "WRITE(12)", 0xaa, RW_FLAGS, LBA4, LBA4,
        GROUP, 0),
    ROW(0xae, 12, F_OUT | F_LUN | F_WR | F_SW, sbc_write_verify12, "WRITE AND VERIFY(12)", 0xae,
        0x12, LBA4, LBA4, GROUP, 0),
    ROW(0xaf, 12, F_OUT | F_LUN | F_SR | F_PRR, sbc_verify12, "VERIFY(12)", 0xaf, 0x16, LBA4, LBA4,
        GROUP, 0),
    ROW(0xb7, 12, F_IN | F_LUN | F_PRR, sbc_read_defect_data12, "READ DEFECT DATA(12)", 0xb7, 0x1f,
        LBA4, LBA4, 0, 0),
};

const size_t scsi_opcode_table_len = sizeof(scsi_opcode_table) / sizeof(scsi_opcode_table[0]);

/* opcode -> 1 + index of its first row (0: unsupported). Built once at start-up. */
static uint8_t first_row[256];

__attribute__((constructor)) static void opcode_index_build(void)
{
        for (size_t i = scsi_opcode_table_len; i-- > 0;)
                first_row[scsi_opcode_table[i].opcode] = (uint8_t)(i + 1);
}

bool scsi_opcode_has_service_actions(uint8_t opcode)
{
        unsigned idx = first_row[opcode];
        return idx && scsi_opcode_table[idx - 1].has_service_action;
}

uint16_t scsi_cdb_service_action(const uint8_t *cdb)
{
        return cdb[1] & 0x1f;
}

const struct scsi_opcode_entry *scsi_opcode_lookup(const uint8_t *cdb)
{
        unsigned idx = first_row[cdb[0]];
        if (!idx)
                return NULL;
        const struct scsi_opcode_entry *e = &scsi_opcode_table[idx - 1];
        if (!e->has_service_action)
                return e;
        uint16_t sa = scsi_cdb_service_action(cdb);
        for (; e < scsi_opcode_table + scsi_opcode_table_len && e->opcode == cdb[0]; e++)
                if (e->service_action == sa)
                        return e;
        return NULL;
}

/* A set bit the table does not allow: INVALID FIELD IN CDB at its byte and top bit. */
enum scsi_reason scsi_cdb_check_usage(struct scsi_task *task, const struct scsi_opcode_entry *e)
{
        for (unsigned i = 1; i < e->cdb_len; i++) {
                uint8_t bad = task->cdb[i] & (uint8_t)~e->usage[i];
                if (bad) {
                        int bit = 7;
                        while (!(bad & (1u << bit)))
                                bit--;
                        return scsi_bad_cdb_field(task, (uint16_t)i, bit);
                }
        }
        return SCSI_OK;
}

static uint64_t write_blocks_bytes(uint64_t blocks, const struct scsi_lun *lun)
{
        uint64_t bytes = blocks * lun->block_size;
        return bytes > UINT32_MAX ? UINT32_MAX : bytes;
}

/* VERIFY: BYTCHK 01b compares the whole range, 11b one block against every block. */
static uint32_t verify_data_out_len(const uint8_t *cdb, uint64_t blocks, const struct scsi_lun *lun)
{
        switch ((cdb[1] >> 1) & 0x03) {
        case 1:
                return (uint32_t)write_blocks_bytes(blocks, lun);
        case 3:
                return blocks ? lun->block_size : 0;
        default:
                return 0;
        }
}

uint32_t scsi_cdb_data_out_len(const uint8_t *cdb, const struct scsi_lun *lun)
{
        switch (cdb[0]) {
        case 0x15: /* MODE SELECT(6) */
                return cdb[4];
        case 0x83: /* EXTENDED COPY: PARAMETER LIST LENGTH */
                return get_be32(cdb + 10);
        case 0x55: /* MODE SELECT(10) */
        case 0x42: /* UNMAP */
                return get_be16(cdb + 7);
        case 0x5f: /* PERSISTENT RESERVE OUT */
                return get_be32(cdb + 5);
        case 0xa4: /* MAINTENANCE OUT (SET TARGET PORT GROUPS): PARAMETER LIST LENGTH */
                return get_be32(cdb + 6);
        }
        if (!lun)
                return 0;
        switch (cdb[0]) {
        case 0x0a: /* WRITE(6): 0 means 256 blocks */
                return (uint32_t)write_blocks_bytes(cdb[4] ? cdb[4] : 256, lun);
        case 0x2a:
        case 0x2e:
                return (uint32_t)write_blocks_bytes(get_be16(cdb + 7), lun);
        case 0xaa:
        case 0xae:
                return (uint32_t)write_blocks_bytes(get_be32(cdb + 6), lun);
        case 0x8a:
        case 0x8b:
        case 0x8e:
                return (uint32_t)write_blocks_bytes(get_be32(cdb + 10), lun);
        case 0x89: /* COMPARE AND WRITE: the verify half, then the write half */
                return 2 * (uint32_t)write_blocks_bytes(cdb[13], lun);
        case 0x9c: /* WRITE ATOMIC(16) */
                return (uint32_t)write_blocks_bytes(get_be16(cdb + 12), lun);
        case 0x2f:
                return verify_data_out_len(cdb, get_be16(cdb + 7), lun);
        case 0xaf:
                return verify_data_out_len(cdb, get_be32(cdb + 6), lun);
        case 0x8f:
                return verify_data_out_len(cdb, get_be32(cdb + 10), lun);
        case 0x41: /* WRITE SAME(10) */
                return lun->block_size;
        case 0x93: /* WRITE SAME(16); NDOB: no data-out buffer */
                return (cdb[1] & 0x01) ? 0 : lun->block_size;
        }
        return 0;
}
