/*
 * The persistent reservation state as its LU state record (SCSI_STATE_PR), big-endian:
 *
 *   "TPR1" | version 1 | flags (bit 0: APTPL) | type | scope | generation u32 | count u16 |
 *   { key u64 | flags (bit 0: holder) | name length u8 | name } * count
 *
 * A record that does not decode to a state the machine could have made is refused whole.
 */
#include <string.h>

#include "pr_model.h"
#include "tandem/byteorder.h"

#define REC_MAGIC   0x54505231u /* "TPR1" */
#define REC_VERSION 1u
#define REC_HDR_LEN 16u
#define REG_HDR_LEN 10u
#define NAME_MAX_   (SCSI_PORT_NAME_MAX - 1)

size_t pr_state_record_max(void)
{
        return REC_HDR_LEN + (size_t)PR_MAX_REGS * (REG_HDR_LEN + NAME_MAX_);
}

size_t pr_state_encode(const struct pr_state *st, uint8_t *buf, size_t cap)
{
        if (cap < REC_HDR_LEN || st->nregs > PR_MAX_REGS)
                return 0;
        put_be32(buf, REC_MAGIC);
        buf[4] = REC_VERSION;
        buf[5] = st->aptpl ? 1 : 0;
        buf[6] = st->type;
        buf[7] = st->scope;
        put_be32(buf + 8, st->generation);
        put_be16(buf + 12, (uint16_t)st->nregs);
        buf[14] = buf[15] = 0;
        size_t at = REC_HDR_LEN;
        for (unsigned i = 0; i < st->nregs; i++) {
                const struct pr_reg *r = &st->regs[i];
                size_t n = strnlen(r->name, NAME_MAX_);
                if (at + REG_HDR_LEN + n > cap)
                        return 0;
                put_be64(buf + at, r->key);
                buf[at + 8] = r->holder ? 1 : 0;
                buf[at + 9] = (uint8_t)n;
                memcpy(buf + at + REG_HDR_LEN, r->name, n);
                at += REG_HDR_LEN + n;
        }
        return at;
}

/* The invariants of a state: unique non-empty names and nonzero keys, one holder exactly
 * when a reservation of a single-holder type exists. */
static bool state_sane(const struct pr_state *st)
{
        if (st->type != PR_TYPE_NONE && (!pr_type_valid(st->type) || st->nregs == 0))
                return false;
        if (st->scope != PR_SCOPE_LU)
                return false;
        unsigned holders = 0;
        for (unsigned i = 0; i < st->nregs; i++) {
                if (!st->regs[i].name[0] || st->regs[i].key == 0)
                        return false;
                holders += st->regs[i].holder;
                for (unsigned j = 0; j < i; j++)
                        if (strcmp(st->regs[i].name, st->regs[j].name) == 0)
                                return false;
        }
        bool single = st->type != PR_TYPE_NONE && !pr_type_all_registrants(st->type);
        return holders == (single ? 1u : 0u);
}

bool pr_state_decode(struct pr_state *st, const uint8_t *buf, size_t len)
{
        memset(st, 0, offsetof(struct pr_state, regs));
        if (len == 0)
                return true;
        if (len < REC_HDR_LEN || get_be32(buf) != REC_MAGIC || buf[4] != REC_VERSION ||
            (buf[5] & ~1u))
                goto bad;
        st->aptpl = buf[5] & 1;
        st->type = buf[6];
        st->scope = buf[7];
        st->generation = get_be32(buf + 8);
        unsigned count = get_be16(buf + 12);
        if (count > PR_MAX_REGS)
                goto bad;
        size_t at = REC_HDR_LEN;
        for (unsigned i = 0; i < count; i++) {
                if (at + REG_HDR_LEN > len)
                        goto bad;
                struct pr_reg *r = &st->regs[i];
                size_t n = buf[at + 9];
                if ((buf[at + 8] & ~1u) || at + REG_HDR_LEN + n > len ||
                    memchr(buf + at + REG_HDR_LEN, 0, n))
                        goto bad;
                r->key = get_be64(buf + at);
                r->holder = buf[at + 8] & 1;
                memcpy(r->name, buf + at + REG_HDR_LEN, n);
                r->name[n] = '\0';
                at += REG_HDR_LEN + n;
                st->nregs = i + 1;
        }
        if (at != len || !state_sane(st))
                goto bad;
        return true;
bad:
        memset(st, 0, offsetof(struct pr_state, regs));
        return false;
}
