/*
 * PERSISTENT RESERVE OUT parameter lists under fuzzing: pr_out_parse() (the CDB, the basic
 * list, REGISTER AND MOVE with its TransportID) and pr_out_apply() on the state they lead to,
 * starting from a state record that is decoded first (pr_state_decode(): the bytes a peer or
 * the state file hands over).
 *
 * Input: u16 big-endian record length L, L bytes of a state record, then commands until the
 * input ends: u8 caller (the low two bits pick one of four initiator port names), 10 bytes of
 * CDB (byte 0 is forced to 5Fh), u16 big-endian data-out length N, N bytes of data-out (cut
 * to what is left).
 *
 * Checks: only the documented reasons, with field pointers inside the CDB or the data; a
 * failed action leaves the state alone (as the handler keeps its old copy); a successful one
 * leaves a state that encodes and decodes to the same bytes (the invariants pr_state_decode
 * enforces), a generation that moved by at most one (never for RESERVE or RELEASE), "changed"
 * exactly when the state did, attentions owed only to nexuses that were registered before and
 * never to the caller, aborts only of nexuses that lost their registration.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "scsi/pr_model.h"
#include "tandem/byteorder.h"

static const char *const callers[4] = {
    "iqn.2026-11.io.tandem:host-a,i,0x000000000001",
    "iqn.2026-11.io.tandem:host-a,i,0x000000000002",
    "iqn.2026-11.io.tandem:host-b,i,0x400000000001",
    "iqn.2026-11.io.tandem:host-c,i,0x800000000001",
};

static struct pr_state st, before, again;
static struct pr_effects fx;
static uint8_t rec_a[80 * 1024], rec_b[80 * 1024];

static bool reason_parse_ok(enum scsi_reason r)
{
        return r == SCSI_OK || r == SR_PARAM_LIST_LENGTH_ERROR || r == SR_INVALID_FIELD_CDB ||
               r == SR_INVALID_FIELD_PARAM;
}

static bool reason_apply_ok(enum scsi_reason r)
{
        return r == SCSI_OK || r == SR_RESERVATION_CONFLICT || r == SR_INVALID_FIELD_CDB ||
               r == SR_INVALID_FIELD_PARAM || r == SR_INVALID_RELEASE_OF_PR ||
               r == SR_INSUFFICIENT_REG_RESOURCES;
}

static void check_field(enum scsi_reason r, const struct scsi_field_ptr *f, uint32_t len)
{
        if (r == SR_INVALID_FIELD_CDB)
                FUZZ_ASSERT(f->byte < 10, "CDB field pointer %u", f->byte);
        if (r == SR_INVALID_FIELD_PARAM)
                FUZZ_ASSERT(f->byte < (len > 24 ? len : 24), "parameter field pointer %u of %u",
                            f->byte, len);
        if (f->bit_valid)
                FUZZ_ASSERT(f->bit < 8, "bit pointer %u", f->bit);
}

/* The state's bytes, checked to come back the same through the record. */
static size_t encode_checked(const struct pr_state *s, uint8_t *buf)
{
        size_t n = pr_state_encode(s, buf, sizeof(rec_a));
        FUZZ_ASSERT(n > 0 && n <= pr_state_record_max(), "encode gave %zu bytes", n);
        FUZZ_ASSERT(pr_state_decode(&again, buf, n), "a state the machine made does not decode");
        size_t m = pr_state_encode(&again, rec_b, sizeof(rec_b));
        FUZZ_ASSERT(m == n && memcmp(rec_b, buf, n) == 0, "record round trip differs");
        return n;
}

static void check_success(const struct pr_out_params *p, const char *me)
{
        static uint8_t old[80 * 1024];
        size_t on = pr_state_encode(&before, old, sizeof(old));
        size_t nn = encode_checked(&st, rec_a);
        bool same = on == nn && memcmp(old, rec_a, nn) == 0;
        FUZZ_ASSERT(fx.changed == !same, "changed=%d but the state %s", fx.changed,
                    same ? "is the same" : "differs");
        uint32_t dg = st.generation - before.generation;
        FUZZ_ASSERT(dg <= 1, "generation moved by %u", dg);
        if (p->sa == PR_OUT_RESERVE || p->sa == PR_OUT_RELEASE)
                FUZZ_ASSERT(dg == 0, "RESERVE/RELEASE moved the generation");
        for (unsigned i = 0; i < fx.nuas; i++) {
                FUZZ_ASSERT(strcmp(fx.uas[i].name, me) != 0, "attention owed to the caller");
                FUZZ_ASSERT(pr_find(&before, fx.uas[i].name) >= 0,
                            "attention owed to %s, who was not registered", fx.uas[i].name);
                enum scsi_reason r = fx.uas[i].reason;
                FUZZ_ASSERT(r == SR_UA_RESERVATIONS_PREEMPTED || r == SR_UA_RESERVATIONS_RELEASED ||
                                r == SR_UA_REGISTRATIONS_PREEMPTED,
                            "attention %d", r);
        }
        for (unsigned i = 0; i < fx.naborts; i++) {
                FUZZ_ASSERT(p->sa == PR_OUT_PREEMPT_ABORT, "abort from service action %u", p->sa);
                FUZZ_ASSERT(pr_find(&before, fx.aborts[i]) >= 0 && pr_find(&st, fx.aborts[i]) < 0,
                            "abort of %s, who did not lose its registration", fx.aborts[i]);
        }
        int mine = pr_find(&st, me);
        if ((p->sa == PR_OUT_REGISTER || p->sa == PR_OUT_REGISTER_IGNORE) && p->sa_key)
                FUZZ_ASSERT(mine >= 0 && st.regs[mine].key == p->sa_key, "REGISTER did not take");
        if ((p->sa == PR_OUT_REGISTER || p->sa == PR_OUT_REGISTER_IGNORE) && !p->sa_key)
                FUZZ_ASSERT(mine < 0, "unregistering left the registration");
        if (p->sa == PR_OUT_CLEAR)
                FUZZ_ASSERT(st.nregs == 0 && st.type == PR_TYPE_NONE, "CLEAR left something");
        /* The holder never conflicts; RESERVE/RELEASE verdicts are defined for everyone. */
        for (int c = 0; c < 4; c++) {
                if (pr_is_holder(&st, callers[c]))
                        FUZZ_ASSERT(!pr_conflicts(st.type, true, true, 0, false),
                                    "holder conflicts");
                enum pr_spc2_verdict v = pr_spc2_check(&st, callers[c]);
                FUZZ_ASSERT(v == PR_SPC2_AS_SPC2 || st.nregs > 0,
                            "verdict %d without registrations", v);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fuzz_in in = {.p = data, .left = size};
        uint8_t hi, lo;
        if (!fuzz_take_u8(&in, &hi) || !fuzz_take_u8(&in, &lo))
                return 0;
        size_t rl = (size_t)hi << 8 | lo;
        if (rl > in.left)
                rl = in.left;
        if (!pr_state_decode(&st, in.p, rl)) {
                FUZZ_ASSERT(st.nregs == 0 && st.type == PR_TYPE_NONE && st.generation == 0,
                            "a refused record left a state behind");
        } else if (rl) {
                encode_checked(&st, rec_a);
        }
        in.p += rl;
        in.left -= rl;
        unsigned steps = 0;
        uint8_t caller;
        while (fuzz_take_u8(&in, &caller) && in.left >= 12 && steps++ < 64) {
                uint8_t cdb[10];
                memcpy(cdb, in.p, sizeof(cdb));
                cdb[0] = 0x5f;
                uint32_t len = get_be16(in.p + 10);
                in.p += 12;
                in.left -= 12;
                if (len > in.left)
                        len = (uint32_t)in.left;
                /* A copy, so reads past the data-out are caught by ASan. */
                uint8_t *param = malloc(len ? len : 1);
                FUZZ_ASSERT(param != NULL, "out of memory");
                memcpy(param, in.p, len);
                in.p += len;
                in.left -= len;
                const char *me = callers[caller & 3];
                struct pr_out_params p;
                struct scsi_field_ptr field = {0};
                enum scsi_reason r = pr_out_parse(cdb, param, len, &p, &field);
                free(param);
                FUZZ_ASSERT(reason_parse_ok(r), "parse gave reason %d", r);
                check_field(r, &field, len);
                if (fuzz_verbose())
                        fprintf(stderr, "step %u: %s sa %u type %u key %llx sark %llx: parse %s\n",
                                steps, me, p.sa, p.type, (unsigned long long)p.key,
                                (unsigned long long)p.sa_key, scsi_reason_name(r));
                if (r != SCSI_OK)
                        continue;
                if (p.sa == PR_OUT_REGISTER_MOVE) {
                        FUZZ_ASSERT(strlen(p.move_to) > 0 && strlen(p.move_to) < SCSI_PORT_NAME_MAX,
                                    "TransportID parsed to an empty or long name");
                        uint8_t tid[SCSI_PORT_NAME_MAX + 8];
                        char back[SCSI_PORT_NAME_MAX];
                        size_t used = 0;
                        size_t n = pr_tid_encode(p.move_to, tid, sizeof(tid));
                        FUZZ_ASSERT(n > 0, "port name does not encode");
                        FUZZ_ASSERT(pr_tid_parse(tid, n, back, &used, &field) == SCSI_OK &&
                                        strcmp(back, p.move_to) == 0 && used == n,
                                    "TransportID round trip of %s", p.move_to);
                }
                before = st;
                r = pr_out_apply(&st, me, &p, caller & 4, &fx, &field);
                if (fuzz_verbose())
                        fprintf(stderr, "  apply %s, generation %u, %u registrations, type %u\n",
                                scsi_reason_name(r), st.generation, st.nregs, st.type);
                FUZZ_ASSERT(reason_apply_ok(r), "apply gave reason %d", r);
                check_field(r, &field, len);
                if (r != SCSI_OK) {
                        st = before; /* what the handler does: the old copy stays */
                        continue;
                }
                check_success(&p, me);
        }
        return 0;
}
