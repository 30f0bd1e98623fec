/*
 * The persistent reservation state machine (SPC-4 5.13.7 to 5.13.11, 6.17): what each
 * PERSISTENT RESERVE OUT service action does to the registrations, the reservation and the
 * generation, which unit attentions it owes to other nexuses and whose tasks PREEMPT AND
 * ABORT aborts; and who conflicts with a reservation on the data path. Pure: see pr_model.h.
 */
#include <string.h>

#include "pr_model.h"

bool pr_type_valid(unsigned type)
{
        switch (type) {
        case PR_TYPE_WE:
        case PR_TYPE_EA:
        case PR_TYPE_WE_RO:
        case PR_TYPE_EA_RO:
        case PR_TYPE_WE_AR:
        case PR_TYPE_EA_AR:
                return true;
        default:
                return false;
        }
}

bool pr_type_all_registrants(unsigned type)
{
        return type == PR_TYPE_WE_AR || type == PR_TYPE_EA_AR;
}

bool pr_type_registrants(unsigned type)
{
        return type == PR_TYPE_WE_RO || type == PR_TYPE_EA_RO || pr_type_all_registrants(type);
}

bool pr_type_write_exclusive(unsigned type)
{
        return type == PR_TYPE_WE || type == PR_TYPE_WE_RO || type == PR_TYPE_WE_AR;
}

int pr_find(const struct pr_state *st, const char *name)
{
        for (unsigned i = 0; i < st->nregs; i++)
                if (strcmp(st->regs[i].name, name) == 0)
                        return (int)i;
        return -1;
}

bool pr_is_holder(const struct pr_state *st, const char *name)
{
        if (st->type == PR_TYPE_NONE)
                return false;
        int i = pr_find(st, name);
        return i >= 0 && (pr_type_all_registrants(st->type) || st->regs[i].holder);
}

bool pr_conflicts(unsigned type, bool registered, bool holder, uint32_t flags, bool cdb_harmless)
{
        if (type == PR_TYPE_NONE || holder || (flags & SCSI_F_PR_ANY))
                return false;
        if ((flags & SCSI_F_PR_CDB) && cdb_harmless)
                return false;
        if ((flags & SCSI_F_PR_READ) && pr_type_write_exclusive(type))
                return false;
        return !(registered && pr_type_registrants(type));
}

enum pr_spc2_verdict pr_spc2_check(const struct pr_state *st, const char *me)
{
        if (pr_is_holder(st, me))
                return PR_SPC2_NOOP;
        if (pr_type_registrants(st->type) && pr_find(st, me) >= 0)
                return PR_SPC2_NOOP;
        return st->nregs ? PR_SPC2_CONFLICT : PR_SPC2_AS_SPC2;
}

/* ---- effects ---- */

static void owe_ua(struct pr_effects *fx, const char *name, enum scsi_reason reason)
{
        if (fx->nuas >= PR_MAX_REGS)
                return;
        struct pr_ua *u = &fx->uas[fx->nuas++];
        memcpy(u->name, name, sizeof(u->name));
        u->reason = reason;
}

static void owe_abort(struct pr_effects *fx, const char *name)
{
        if (fx->naborts < PR_MAX_REGS)
                memcpy(fx->aborts[fx->naborts++], name, SCSI_PORT_NAME_MAX);
}

/* Every registrant but `me` gets reason. */
static void owe_others(const struct pr_state *st, struct pr_effects *fx, const char *me,
                       enum scsi_reason reason)
{
        for (unsigned i = 0; i < st->nregs; i++)
                if (strcmp(st->regs[i].name, me) != 0)
                        owe_ua(fx, st->regs[i].name, reason);
}

static void remove_reg(struct pr_state *st, unsigned i)
{
        memmove(&st->regs[i], &st->regs[i + 1], (st->nregs - i - 1) * sizeof(st->regs[0]));
        st->nregs--;
}

static void release(struct pr_state *st)
{
        st->type = PR_TYPE_NONE;
        st->scope = PR_SCOPE_LU;
        for (unsigned i = 0; i < st->nregs; i++)
                st->regs[i].holder = false;
}

static void establish(struct pr_state *st, int holder, unsigned type, unsigned scope)
{
        release(st);
        st->type = (uint8_t)type;
        st->scope = (uint8_t)scope;
        if (!pr_type_all_registrants(type))
                st->regs[holder].holder = true;
}

static void changed_with_generation(struct pr_state *st, struct pr_effects *fx)
{
        st->generation++;
        fx->changed = true;
}

/* INVALID FIELD IN CDB at the SCOPE or TYPE of a service action that takes them. */
static enum scsi_reason check_scope_type(const struct pr_out_params *p,
                                         struct scsi_field_ptr *field)
{
        if (p->scope != PR_SCOPE_LU)
                *field = (struct scsi_field_ptr){.byte = 2, .bit = 7, .bit_valid = true};
        else if (!pr_type_valid(p->type))
                *field = (struct scsi_field_ptr){.byte = 2, .bit = 3, .bit_valid = true};
        else
                return SCSI_OK;
        return SR_INVALID_FIELD_CDB;
}

/* Unregistering (5.13.11.3): a holder's reservation goes with it (RO types tell the rest). */
static void unregister(struct pr_state *st, unsigned i, struct pr_effects *fx)
{
        bool was_holder = st->regs[i].holder;
        remove_reg(st, i);
        if (st->type == PR_TYPE_NONE)
                return;
        if (pr_type_all_registrants(st->type)) {
                if (st->nregs == 0)
                        release(st);
                return;
        }
        if (!was_holder)
                return;
        unsigned type = st->type;
        release(st);
        if (pr_type_registrants(type)) /* the unregistered nexus is gone from the list */
                owe_others(st, fx, "", SR_UA_RESERVATIONS_RELEASED);
}

/* The caller's registration, checked: RESERVATION CONFLICT unless registered with key. */
static enum scsi_reason registered_with(const struct pr_state *st, const char *me, uint64_t key,
                                        int *idx)
{
        *idx = pr_find(st, me);
        if (*idx < 0 || st->regs[*idx].key != key)
                return SR_RESERVATION_CONFLICT;
        return SCSI_OK;
}

static enum scsi_reason bad_param(struct scsi_field_ptr *field, uint16_t byte)
{
        *field = (struct scsi_field_ptr){.byte = byte};
        return SR_INVALID_FIELD_PARAM;
}

/* ---- service actions ---- */

static enum scsi_reason do_register(struct pr_state *st, const char *me,
                                    const struct pr_out_params *p, struct pr_effects *fx)
{
        bool ignore = p->sa == PR_OUT_REGISTER_IGNORE;
        int i = pr_find(st, me);
        if (i < 0) {
                if (!ignore && p->key != 0)
                        return SR_RESERVATION_CONFLICT;
                if (p->sa_key == 0)
                        return SCSI_OK; /* nothing to register, nothing changes */
                if (st->nregs >= PR_MAX_REGS)
                        return SR_INSUFFICIENT_REG_RESOURCES;
                struct pr_reg *r = &st->regs[st->nregs++];
                memset(r, 0, sizeof(*r));
                r->key = p->sa_key;
                memcpy(r->name, me, strnlen(me, SCSI_PORT_NAME_MAX - 1));
        } else {
                if (!ignore && p->key != st->regs[i].key)
                        return SR_RESERVATION_CONFLICT;
                if (p->sa_key == 0)
                        unregister(st, (unsigned)i, fx);
                else
                        st->regs[i].key = p->sa_key;
        }
        st->aptpl = p->aptpl;
        changed_with_generation(st, fx);
        return SCSI_OK;
}

static enum scsi_reason do_reserve(struct pr_state *st, const char *me,
                                   const struct pr_out_params *p, struct pr_effects *fx,
                                   struct scsi_field_ptr *field)
{
        int i;
        enum scsi_reason r = check_scope_type(p, field);
        if (r == SCSI_OK)
                r = registered_with(st, me, p->key, &i);
        if (r != SCSI_OK)
                return r;
        if (st->type != PR_TYPE_NONE) {
                /* Only its holder may reserve again, and only with the same type and scope. */
                if (!pr_is_holder(st, me) || st->type != p->type || st->scope != p->scope)
                        return SR_RESERVATION_CONFLICT;
                return SCSI_OK;
        }
        establish(st, i, p->type, p->scope);
        fx->changed = true; /* RESERVE does not count in the generation */
        return SCSI_OK;
}

static enum scsi_reason do_release(struct pr_state *st, const char *me,
                                   const struct pr_out_params *p, struct pr_effects *fx,
                                   struct scsi_field_ptr *field)
{
        int i;
        enum scsi_reason r = check_scope_type(p, field);
        if (r == SCSI_OK)
                r = registered_with(st, me, p->key, &i);
        if (r != SCSI_OK)
                return r;
        if (!pr_is_holder(st, me))
                return SCSI_OK; /* no reservation, or another's: nothing to release */
        if (st->type != p->type || st->scope != p->scope)
                return SR_INVALID_RELEASE_OF_PR;
        unsigned type = st->type;
        release(st);
        fx->changed = true;
        if (pr_type_registrants(type))
                owe_others(st, fx, me, SR_UA_RESERVATIONS_RELEASED);
        return SCSI_OK;
}

static enum scsi_reason do_clear(struct pr_state *st, const char *me, const struct pr_out_params *p,
                                 struct pr_effects *fx)
{
        int i;
        enum scsi_reason r = registered_with(st, me, p->key, &i);
        if (r != SCSI_OK)
                return r;
        owe_others(st, fx, me, SR_UA_RESERVATIONS_PREEMPTED);
        release(st);
        st->nregs = 0;
        changed_with_generation(st, fx);
        return SCSI_OK;
}

/* Removes registration i of another nexus as preempted (attention, abort when asked). */
static void preempt_reg(struct pr_state *st, unsigned i, const struct pr_out_params *p,
                        struct pr_effects *fx)
{
        owe_ua(fx, st->regs[i].name, SR_UA_REGISTRATIONS_PREEMPTED);
        if (p->sa == PR_OUT_PREEMPT_ABORT)
                owe_abort(fx, st->regs[i].name);
        remove_reg(st, i);
}

static enum scsi_reason do_preempt(struct pr_state *st, const char *me,
                                   const struct pr_out_params *p, struct pr_effects *fx,
                                   struct scsi_field_ptr *field)
{
        int i;
        enum scsi_reason r = check_scope_type(p, field);
        if (r == SCSI_OK)
                r = registered_with(st, me, p->key, &i);
        if (r != SCSI_OK)
                return r;
        bool all_reg = pr_type_all_registrants(st->type);
        if (p->sa_key == 0 && !all_reg)
                return bad_param(field, 8);
        if (all_reg && p->sa_key == 0) {
                /* Every other registration goes; the preempting nexus reserves anew. */
                for (unsigned j = st->nregs; j-- > 0;)
                        if (strcmp(st->regs[j].name, me) != 0)
                                preempt_reg(st, j, p, fx);
                establish(st, pr_find(st, me), p->type, p->scope);
                changed_with_generation(st, fx);
                return SCSI_OK;
        }
        int holder = -1;
        for (unsigned j = 0; j < st->nregs; j++)
                if (st->regs[j].holder)
                        holder = (int)j;
        if (holder < 0 || st->regs[holder].key != p->sa_key) {
                /* The key names no holder: only registrations go (5.13.11.4.3). */
                bool matched = false;
                for (unsigned j = 0; j < st->nregs; j++)
                        matched |= st->regs[j].key == p->sa_key;
                if (!matched)
                        return SR_RESERVATION_CONFLICT;
                for (unsigned j = st->nregs; j-- > 0;) {
                        if (st->regs[j].key != p->sa_key)
                                continue;
                        if (strcmp(st->regs[j].name, me) != 0)
                                preempt_reg(st, j, p, fx);
                        else if (!all_reg) /* it is not the holder: its key differs */
                                remove_reg(st, j);
                }
                changed_with_generation(st, fx);
                return SCSI_OK;
        }
        /* The key names the holder (5.13.11.4.4): its reservation becomes the caller's. */
        unsigned old_type = st->type, old_scope = st->scope;
        for (unsigned j = st->nregs; j-- > 0;)
                if (st->regs[j].key == p->sa_key && strcmp(st->regs[j].name, me) != 0)
                        preempt_reg(st, j, p, fx);
        establish(st, pr_find(st, me), p->type, p->scope);
        if (old_type != p->type || old_scope != p->scope)
                owe_others(st, fx, me, SR_UA_RESERVATIONS_RELEASED);
        changed_with_generation(st, fx);
        return SCSI_OK;
}

static enum scsi_reason do_register_move(struct pr_state *st, const char *me,
                                         const struct pr_out_params *p, bool rtpi_ok,
                                         struct pr_effects *fx, struct scsi_field_ptr *field)
{
        int i;
        enum scsi_reason r = registered_with(st, me, p->key, &i);
        if (r != SCSI_OK)
                return r;
        if (p->sa_key == 0)
                return bad_param(field, 8);
        if (!rtpi_ok)
                return bad_param(field, 18);
        if (strcmp(p->move_to, me) == 0)
                return bad_param(field, 24); /* the TransportID names the caller itself */
        if (st->type == PR_TYPE_NONE) {
                /* Nothing to move (5.13.8). */
                *field = (struct scsi_field_ptr){.byte = 1, .bit = 4, .bit_valid = true};
                return SR_INVALID_FIELD_CDB;
        }
        if (!st->regs[i].holder) /* another's, or all registrants (no single holder) */
                return SR_RESERVATION_CONFLICT;
        int d = pr_find(st, p->move_to);
        if (d < 0) {
                if (st->nregs >= PR_MAX_REGS)
                        return SR_INSUFFICIENT_REG_RESOURCES;
                d = (int)st->nregs++;
                memset(&st->regs[d], 0, sizeof(st->regs[d]));
                memcpy(st->regs[d].name, p->move_to, strnlen(p->move_to, SCSI_PORT_NAME_MAX - 1));
        }
        st->regs[d].key = p->sa_key;
        st->regs[i].holder = false;
        st->regs[d].holder = true;
        if (p->unreg)
                remove_reg(st, (unsigned)i);
        st->aptpl = p->aptpl;
        changed_with_generation(st, fx);
        return SCSI_OK;
}

enum scsi_reason pr_out_apply(struct pr_state *st, const char *me, const struct pr_out_params *p,
                              bool rtpi_ok, struct pr_effects *fx, struct scsi_field_ptr *field)
{
        fx->changed = false;
        fx->nuas = 0;
        fx->naborts = 0;
        switch (p->sa) {
        case PR_OUT_REGISTER:
        case PR_OUT_REGISTER_IGNORE:
                return do_register(st, me, p, fx);
        case PR_OUT_RESERVE:
                return do_reserve(st, me, p, fx, field);
        case PR_OUT_RELEASE:
                return do_release(st, me, p, fx, field);
        case PR_OUT_CLEAR:
                return do_clear(st, me, p, fx);
        case PR_OUT_PREEMPT:
        case PR_OUT_PREEMPT_ABORT:
                return do_preempt(st, me, p, fx, field);
        case PR_OUT_REGISTER_MOVE:
                return do_register_move(st, me, p, rtpi_ok, fx, field);
        }
        *field = (struct scsi_field_ptr){.byte = 1, .bit = 4, .bit_valid = true};
        return SR_INVALID_FIELD_CDB;
}
