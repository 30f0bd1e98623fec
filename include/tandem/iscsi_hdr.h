/*
 * The basic header segments (RFC 7143 section 11) as typed structs: code reads and builds
 * PDUs by field name, not by byte offset. Multi-byte fields are big-endian on the wire and
 * typed so (be16/be24/be32: a plain store of a host integer does not compile). Every struct
 * is bytes only, so it may overlay any 48-byte buffer; the asserts pin the RFC's offsets.
 */
#ifndef TANDEM_ISCSI_HDR_H
#define TANDEM_ISCSI_HDR_H

#include <stddef.h>
#include <stdint.h>

#include "tandem/byteorder.h"

typedef struct {
        uint8_t b[2];
} be16;
typedef struct {
        uint8_t b[3];
} be24;
typedef struct {
        uint8_t b[4];
} be32;

static inline uint16_t be16_get(be16 f)
{
        return get_be16(f.b);
}
static inline uint32_t be24_get(be24 f)
{
        return get_be24(f.b);
}
static inline uint32_t be32_get(be32 f)
{
        return get_be32(f.b);
}
static inline be16 be16_of(uint16_t v)
{
        be16 f;
        put_be16(f.b, v);
        return f;
}
static inline be24 be24_of(uint32_t v)
{
        be24 f;
        put_be24(f.b, v);
        return f;
}
static inline be32 be32_of(uint32_t v)
{
        be32 f;
        put_be32(f.b, v);
        return f;
}

#define ISCSI_RSVD_TAG 0xffffffffu /* "no task": ITT of unsolicited PDUs, TTT of none */

/* Flags byte (bhs->flags) bits shared by several opcodes. */
#define ISCSI_FLAG_FINAL     0x80
#define ISCSI_FLAG_OVERFLOW  0x04 /* Data-In, SCSI Response: residual overflow */
#define ISCSI_FLAG_UNDERFLOW 0x02 /* ... and underflow */
#define ISCSI_FLAG_STATUS    0x01 /* Data-In: carries the command's status */

/* What every BHS shares. */
struct iscsi_bhs {
        uint8_t opcode; /* I bit 0x40 (initiator PDUs), opcode 0x3f */
        uint8_t flags;  /* F bit 0x80 and the opcode's own */
        uint8_t spec[2];
        uint8_t ahs_len; /* in 4-byte words */
        be24 dsl;
        uint8_t lun[8]; /* or the opcode's own */
        be32 itt;
        uint8_t spec2[28];
};

/* The sequence numbers at 24..35 of every target response. */
struct iscsi_sn {
        be32 stat_sn;
        be32 exp_cmdsn;
        be32 max_cmdsn;
};

/* ---- initiator to target ---- */

struct iscsi_scsi_cmd_hdr {
        uint8_t opcode;
        uint8_t flags; /* F 0x80, R 0x40, W 0x20, ATTR 0x07 */
        uint8_t rsvd[2];
        uint8_t ahs_len;
        be24 dsl;
        uint8_t lun[8];
        be32 itt;
        be32 edtl;
        be32 cmdsn;
        be32 exp_stat_sn;
        uint8_t cdb[16];
};

struct iscsi_data_out_hdr {
        uint8_t opcode;
        uint8_t flags; /* F 0x80 */
        uint8_t rsvd[2];
        uint8_t ahs_len;
        be24 dsl;
        uint8_t lun[8];
        be32 itt;
        be32 ttt;
        be32 rsvd2;
        be32 exp_stat_sn;
        be32 rsvd3;
        be32 data_sn;
        be32 offset;
        be32 rsvd4;
};

/* NOP-Out, Text, Logout and Task Management requests share this head. */
struct iscsi_req_hdr {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd[2];
        uint8_t ahs_len;
        be24 dsl;
        uint8_t lun[8];
        be32 itt;
        be32 word20; /* NOP/Text: TTT; TMF: RTT; Logout: CID (16 bits) */
        be32 cmdsn;
        be32 exp_stat_sn;
        be32 word32; /* TMF: RefCmdSN */
        be32 word36; /* TMF: ExpDataSN */
        uint8_t rsvd2[8];
};

struct iscsi_login_req_hdr {
        uint8_t opcode;
        uint8_t flags; /* T 0x80, C 0x40, CSG 0x0c, NSG 0x03 */
        uint8_t version_max;
        uint8_t version_min;
        uint8_t ahs_len;
        be24 dsl;
        uint8_t isid[6];
        be16 tsih;
        be32 itt;
        be16 cid;
        uint8_t rsvd[2];
        be32 cmdsn;
        be32 exp_stat_sn;
        uint8_t rsvd2[16];
};

/* ---- target to initiator ---- */

struct iscsi_scsi_rsp_hdr {
        uint8_t opcode;
        uint8_t flags; /* F 0x80, o 0x10, u 0x08, O 0x04, U 0x02 */
        uint8_t response;
        uint8_t status;
        uint8_t ahs_len;
        be24 dsl;
        uint8_t rsvd[8];
        be32 itt;
        be32 snack_tag;
        struct iscsi_sn sn;
        be32 exp_data_sn;
        be32 bidi_residual;
        be32 residual;
};

struct iscsi_data_in_hdr {
        uint8_t opcode;
        uint8_t flags; /* F 0x80, A 0x40, O 0x04, U 0x02, S 0x01 */
        uint8_t rsvd;
        uint8_t status;
        uint8_t ahs_len;
        be24 dsl;
        uint8_t lun[8];
        be32 itt;
        be32 ttt;
        struct iscsi_sn sn; /* StatSN only with S; ExpCmdSN/MaxCmdSN always */
        be32 data_sn;
        be32 offset;
        be32 residual;
};

struct iscsi_r2t_hdr {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd[2];
        uint8_t ahs_len;
        be24 dsl;
        uint8_t lun[8];
        be32 itt;
        be32 ttt;
        struct iscsi_sn sn; /* StatSN not advanced */
        be32 r2t_sn;
        be32 offset;
        be32 desired_len;
};

/* NOP-In, Text, Logout, Task Management responses and Reject share this layout. */
struct iscsi_rsp_hdr {
        uint8_t opcode;
        uint8_t flags;
        uint8_t response; /* Logout, TMF; Reject: reason */
        uint8_t rsvd;
        uint8_t ahs_len;
        be24 dsl;
        uint8_t lun[8];
        be32 itt;
        be32 ttt; /* NOP-In, Text */
        struct iscsi_sn sn;
        be32 word36;    /* Reject: DataSN/R2TSN */
        be16 time2wait; /* Logout */
        be16 time2retain;
        be32 word44;
};

struct iscsi_async_hdr {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd[2];
        uint8_t ahs_len;
        be24 dsl;
        uint8_t lun[8];
        be32 all_ones;
        be32 rsvd2;
        struct iscsi_sn sn;
        uint8_t event;
        uint8_t vcode;
        be16 param1;
        be16 param2;
        be16 param3;
        be32 rsvd3;
};

struct iscsi_login_rsp_hdr {
        uint8_t opcode;
        uint8_t flags; /* T 0x80, C 0x40, CSG 0x0c, NSG 0x03 */
        uint8_t version_max;
        uint8_t version_active;
        uint8_t ahs_len;
        be24 dsl;
        uint8_t isid[6];
        be16 tsih;
        be32 itt;
        be32 rsvd;
        struct iscsi_sn sn;
        uint8_t status_class;
        uint8_t status_detail;
        uint8_t rsvd2[10];
};

#define ISCSI_HDR_AT(type, field, off) _Static_assert(offsetof(type, field) == (off), #type)
ISCSI_HDR_AT(struct iscsi_bhs, itt, 16);
ISCSI_HDR_AT(struct iscsi_scsi_cmd_hdr, cdb, 32);
ISCSI_HDR_AT(struct iscsi_data_out_hdr, offset, 40);
ISCSI_HDR_AT(struct iscsi_req_hdr, cmdsn, 24);
ISCSI_HDR_AT(struct iscsi_scsi_rsp_hdr, residual, 44);
ISCSI_HDR_AT(struct iscsi_data_in_hdr, sn, 24);
ISCSI_HDR_AT(struct iscsi_data_in_hdr, residual, 44);
ISCSI_HDR_AT(struct iscsi_r2t_hdr, desired_len, 44);
ISCSI_HDR_AT(struct iscsi_rsp_hdr, time2wait, 40);
ISCSI_HDR_AT(struct iscsi_async_hdr, event, 36);
ISCSI_HDR_AT(struct iscsi_login_rsp_hdr, status_class, 36);
ISCSI_HDR_AT(struct iscsi_login_req_hdr, cid, 20);
ISCSI_HDR_AT(struct iscsi_login_req_hdr, exp_stat_sn, 28);
_Static_assert(sizeof(struct iscsi_bhs) == 48 && sizeof(struct iscsi_scsi_cmd_hdr) == 48 &&
                   sizeof(struct iscsi_data_out_hdr) == 48 && sizeof(struct iscsi_req_hdr) == 48 &&
                   sizeof(struct iscsi_scsi_rsp_hdr) == 48 &&
                   sizeof(struct iscsi_data_in_hdr) == 48 && sizeof(struct iscsi_r2t_hdr) == 48 &&
                   sizeof(struct iscsi_rsp_hdr) == 48 && sizeof(struct iscsi_async_hdr) == 48 &&
                   sizeof(struct iscsi_login_rsp_hdr) == 48 &&
                   sizeof(struct iscsi_login_req_hdr) == 48,
               "a BHS is 48 bytes");
#undef ISCSI_HDR_AT

#endif
