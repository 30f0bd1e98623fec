/* iSCSI PDU layout (RFC 7143 section 11): basic header segment accessors and constants. */
#ifndef TANDEM_ISCSI_PDU_H
#define TANDEM_ISCSI_PDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "tandem/byteorder.h"

#define ISCSI_BHS_LEN     48
#define ISCSI_DIGEST_LEN  4
#define ISCSI_MAX_AHS_LEN (255 * 4)

enum iscsi_opcode {
        ISCSI_OP_NOP_OUT = 0x00,
        ISCSI_OP_SCSI_CMD = 0x01,
        ISCSI_OP_TMF_REQ = 0x02,
        ISCSI_OP_LOGIN_REQ = 0x03,
        ISCSI_OP_TEXT_REQ = 0x04,
        ISCSI_OP_DATA_OUT = 0x05,
        ISCSI_OP_LOGOUT_REQ = 0x06,
        ISCSI_OP_SNACK = 0x10,
        ISCSI_OP_NOP_IN = 0x20,
        ISCSI_OP_SCSI_RSP = 0x21,
        ISCSI_OP_TMF_RSP = 0x22,
        ISCSI_OP_LOGIN_RSP = 0x23,
        ISCSI_OP_TEXT_RSP = 0x24,
        ISCSI_OP_DATA_IN = 0x25,
        ISCSI_OP_LOGOUT_RSP = 0x26,
        ISCSI_OP_R2T = 0x31,
        ISCSI_OP_ASYNC = 0x32,
        ISCSI_OP_REJECT = 0x3f,
};

/* Reject reasons (RFC 7143 11.17.1). */
enum iscsi_reject_reason {
        ISCSI_REJECT_DIGEST_ERROR = 0x02,
        ISCSI_REJECT_SNACK_REJECT = 0x03,
        ISCSI_REJECT_PROTOCOL_ERROR = 0x04,
        ISCSI_REJECT_CMD_NOT_SUPPORTED = 0x05,
        ISCSI_REJECT_IMM_CMD_REJECT = 0x06,
        ISCSI_REJECT_TASK_IN_PROGRESS = 0x07,
        ISCSI_REJECT_INVALID_DATA_ACK = 0x08,
        ISCSI_REJECT_INVALID_PDU_FIELD = 0x09,
        ISCSI_REJECT_OUT_OF_RESOURCES = 0x0a,
        ISCSI_REJECT_WAITING_FOR_LOGOUT = 0x0c,
};

/* Login status classes/details (RFC 7143 11.13.5). */
#define ISCSI_LOGIN_STATUS(cls, det)         ((uint16_t)(((cls) << 8) | (det)))
#define ISCSI_LOGIN_SUCCESS                  ISCSI_LOGIN_STATUS(0, 0)
#define ISCSI_LOGIN_INITIATOR_ERROR          ISCSI_LOGIN_STATUS(2, 0)
#define ISCSI_LOGIN_AUTH_FAILED              ISCSI_LOGIN_STATUS(2, 1)
#define ISCSI_LOGIN_NOT_AUTHORIZED           ISCSI_LOGIN_STATUS(2, 2)
#define ISCSI_LOGIN_NOT_FOUND                ISCSI_LOGIN_STATUS(2, 3)
#define ISCSI_LOGIN_TARGET_REMOVED           ISCSI_LOGIN_STATUS(2, 4)
#define ISCSI_LOGIN_UNSUPPORTED_VERSION      ISCSI_LOGIN_STATUS(2, 5)
#define ISCSI_LOGIN_TOO_MANY_CONNECTIONS     ISCSI_LOGIN_STATUS(2, 6)
#define ISCSI_LOGIN_MISSING_PARAMETER        ISCSI_LOGIN_STATUS(2, 7)
#define ISCSI_LOGIN_CANT_INCLUDE_IN_SESSION  ISCSI_LOGIN_STATUS(2, 8)
#define ISCSI_LOGIN_SESSION_TYPE_UNSUPPORTED ISCSI_LOGIN_STATUS(2, 9)
#define ISCSI_LOGIN_SESSION_DOES_NOT_EXIST   ISCSI_LOGIN_STATUS(2, 10)
#define ISCSI_LOGIN_INVALID_DURING_LOGIN     ISCSI_LOGIN_STATUS(2, 11)
#define ISCSI_LOGIN_TARGET_ERROR             ISCSI_LOGIN_STATUS(3, 0)
#define ISCSI_LOGIN_SERVICE_UNAVAILABLE      ISCSI_LOGIN_STATUS(3, 1)
#define ISCSI_LOGIN_OUT_OF_RESOURCES         ISCSI_LOGIN_STATUS(3, 2)

/* Common BHS fields. */
static inline uint8_t iscsi_bhs_opcode(const uint8_t *bhs)
{
        return bhs[0] & 0x3f;
}
static inline bool iscsi_bhs_immediate(const uint8_t *bhs)
{
        return (bhs[0] & 0x40) != 0;
}
static inline bool iscsi_bhs_final(const uint8_t *bhs)
{
        return (bhs[1] & 0x80) != 0;
}
static inline uint32_t iscsi_bhs_ahs_len(const uint8_t *bhs)
{
        return (uint32_t)bhs[4] * 4;
}
static inline uint32_t iscsi_bhs_dsl(const uint8_t *bhs)
{
        return get_be24(bhs + 5);
}
static inline void iscsi_bhs_set_dsl(uint8_t *bhs, uint32_t len)
{
        put_be24(bhs + 5, len);
}
static inline uint32_t iscsi_bhs_itt(const uint8_t *bhs)
{
        return get_be32(bhs + 16);
}
static inline uint32_t iscsi_pad4(uint32_t len)
{
        return (4 - (len & 3)) & 3;
}

/*
 * Decode the 8-byte LUN field (SAM-5 single level: peripheral or flat addressing)
 * into a LUN number; returns false for forms we do not support.
 */
bool iscsi_lun_decode(const uint8_t *p, uint64_t *lun);
void iscsi_lun_encode(uint8_t *p, uint64_t lun);

/*
 * CRC32C (ISA-L crc32_iscsi). iscsi_crc32c() continues a running value (start with
 * ISCSI_CRC32C_SEED); iscsi_crc32c_iov() returns the finished digest, which goes on the
 * wire as a little-endian 32-bit word.
 */
uint32_t iscsi_crc32c(const void *buf, size_t len, uint32_t seed);
uint32_t iscsi_crc32c_iov(const void *const *bufs, const size_t *lens, int n);
#define ISCSI_CRC32C_SEED 0xffffffffu

/* Serial number arithmetic (RFC 1982) for 32-bit sequence numbers. */
static inline bool iscsi_sn_lt(uint32_t a, uint32_t b)
{
        return a != b && (int32_t)(a - b) < 0;
}
static inline bool iscsi_sn_le(uint32_t a, uint32_t b)
{
        return a == b || (int32_t)(a - b) < 0;
}

#endif
