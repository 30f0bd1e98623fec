/*
 * Bytes of persistent reservations from and to initiators: the PERSISTENT RESERVE OUT CDB and
 * parameter list (SPC-4 6.17.2 to 6.17.4) and iSCSI TransportIDs (SPC-4 7.6.4.6). Pure.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "pr_model.h"
#include "tandem/byteorder.h"

#define PARAM_BASIC_LEN 24u
#define TID_HDR_LEN     4u
#define TID_MIN_ADDL    20u
#define ISCSI_PROTOCOL  0x5u
#define TID_FORMAT_PORT 0x1u /* initiator port TransportID: name ",i,0x" ISID */
#define ISCSI_NAME_MAX  223u
#define ISID_HEX_DIGITS 12u
#define PORT_SEPARATOR  ",i,0x"
#define PORT_SEP_LEN    5u

void pr_port_name(char *out, const char *iscsi_name, const uint8_t isid[6])
{
        snprintf(out, SCSI_PORT_NAME_MAX, "%.223s" PORT_SEPARATOR "%02x%02x%02x%02x%02x%02x",
                 iscsi_name, isid[0], isid[1], isid[2], isid[3], isid[4], isid[5]);
}

size_t pr_tid_encode(const char *port_name, uint8_t *buf, size_t cap)
{
        size_t n = strnlen(port_name, SCSI_PORT_NAME_MAX - 1) + 1; /* with its NUL */
        size_t addl = (n + 3) & ~(size_t)3;
        if (addl < TID_MIN_ADDL)
                addl = TID_MIN_ADDL;
        if (TID_HDR_LEN + addl > cap)
                return 0;
        memset(buf, 0, TID_HDR_LEN + addl);
        buf[0] = (uint8_t)(TID_FORMAT_PORT << 6 | ISCSI_PROTOCOL);
        put_be16(buf + 2, (uint16_t)addl);
        memcpy(buf + TID_HDR_LEN, port_name, n - 1);
        return TID_HDR_LEN + addl;
}

/* The name part of a port name: the iSCSI name up to the separator (case-insensitive). */
static const char *find_separator(const char *s)
{
        for (const char *p = s; *p; p++)
                if (strncasecmp(p, PORT_SEPARATOR, PORT_SEP_LEN) == 0)
                        return p;
        return NULL;
}

enum scsi_reason pr_tid_parse(const uint8_t *buf, size_t avail, char *port_name, size_t *used,
                              struct scsi_field_ptr *field)
{
        if (avail < TID_HDR_LEN)
                return SR_PARAM_LIST_LENGTH_ERROR;
        if ((buf[0] & 0x0f) != ISCSI_PROTOCOL)
                return scsi_bad_param_at(field, 0, 3);
        /* An initiator device TransportID (00b) names no port: it cannot name an I_T nexus. */
        if ((buf[0] >> 6) != TID_FORMAT_PORT)
                return scsi_bad_param_at(field, 0, 7);
        size_t addl = get_be16(buf + 2);
        if (addl < TID_MIN_ADDL || addl % 4)
                return scsi_bad_param_at(field, 2, -1);
        if (TID_HDR_LEN + addl > avail)
                return SR_PARAM_LIST_LENGTH_ERROR;
        const char *s = (const char *)buf + TID_HDR_LEN;
        size_t n = strnlen(s, addl);
        if (n == addl || n >= SCSI_PORT_NAME_MAX)
                return scsi_bad_param_at(field, TID_HDR_LEN,
                                         -1); /* no NUL, or longer than a port name */
        char tmp[SCSI_PORT_NAME_MAX];
        memcpy(tmp, s, n + 1);
        const char *sep = find_separator(tmp);
        size_t name_len = sep ? (size_t)(sep - tmp) : 0;
        if (!sep || name_len == 0 || name_len > ISCSI_NAME_MAX)
                return scsi_bad_param_at(field, TID_HDR_LEN, -1);
        const char *hex = sep + PORT_SEP_LEN;
        size_t digits = strlen(hex);
        if (digits == 0 || digits > ISID_HEX_DIGITS)
                return scsi_bad_param_at(field, (uint16_t)(TID_HDR_LEN + name_len), -1);
        uint8_t isid[6] = {0};
        for (size_t i = 0; i < digits; i++) {
                int c = hex[i];
                if (!isxdigit(c))
                        return scsi_bad_param_at(field, (uint16_t)(TID_HDR_LEN + name_len), -1);
                unsigned v = (unsigned)(isdigit(c) ? c - '0' : tolower(c) - 'a' + 10);
                size_t pos = ISID_HEX_DIGITS - digits + i; /* right-aligned: leading zeroes */
                isid[pos / 2] |= (uint8_t)(pos % 2 ? v : v << 4);
        }
        tmp[name_len] = '\0';
        pr_port_name(port_name, tmp, isid);
        *used = TID_HDR_LEN + addl;
        return SCSI_OK;
}

static enum scsi_reason parse_move(const uint8_t *param, uint32_t len, struct pr_out_params *p,
                                   struct scsi_field_ptr *field)
{
        p->unreg = param[17] & 0x02;
        p->aptpl = param[17] & 0x01;
        p->rtpi = get_be16(param + 18);
        uint32_t tid_len = get_be32(param + 20);
        if (tid_len != len - PARAM_BASIC_LEN)
                return SR_PARAM_LIST_LENGTH_ERROR;
        size_t used = 0;
        enum scsi_reason r =
            pr_tid_parse(param + PARAM_BASIC_LEN, tid_len, p->move_to, &used, field);
        if (r == SR_INVALID_FIELD_PARAM)
                field->byte = (uint16_t)(field->byte + PARAM_BASIC_LEN);
        return r;
}

enum scsi_reason pr_out_parse(const uint8_t *cdb, const uint8_t *param, uint32_t len,
                              struct pr_out_params *p, struct scsi_field_ptr *field)
{
        memset(p, 0, sizeof(*p));
        p->sa = (enum pr_out_sa)(cdb[1] & 0x1f);
        p->scope = cdb[2] >> 4;
        p->type = cdb[2] & 0x0f;
        uint32_t want = get_be32(cdb + 5);
        if (p->sa > PR_OUT_REGISTER_MOVE) {
                *field = (struct scsi_field_ptr){.byte = 1, .bit = 4, .bit_valid = true};
                return SR_INVALID_FIELD_CDB;
        }
        /* Less data than the CDB announces, or less than the fixed part: a length error. */
        if (want < PARAM_BASIC_LEN || len < want)
                return SR_PARAM_LIST_LENGTH_ERROR;
        len = want;
        p->key = get_be64(param);
        p->sa_key = get_be64(param + 8);
        if (p->sa == PR_OUT_REGISTER_MOVE)
                return parse_move(param, len, p, field);
        p->spec_i_pt = param[20] & 0x08;
        p->all_tg_pt = param[20] & 0x04;
        p->aptpl = param[20] & 0x01;
        /* SPEC_I_PT is not offered (REPORT CAPABILITIES: SIP_C 0). */
        if (p->spec_i_pt)
                return scsi_bad_param_at(field, 20, 3);
        if (len != PARAM_BASIC_LEN)
                return SR_PARAM_LIST_LENGTH_ERROR;
        return SCSI_OK;
}
