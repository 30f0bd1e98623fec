/*
 * Persistent reservations as a pure state machine (SPC-4 5.13, 6.16, 6.17): the state, one
 * function per PERSISTENT RESERVE OUT service action that changes it and says what else must
 * happen (unit attentions for named nexuses, nexuses whose tasks PREEMPT AND ABORT aborts),
 * the conflict rule of the data path, the record codec and the TransportIDs. Nothing here
 * locks, stores or knows a LUN: daemon/scsi/pr.c does, and the unit tests drive this alone.
 *
 * I_T nexuses are named by initiator port name only: the target ports of the pair (and of one
 * node) count as one, as if every registration had ALL_TG_PT set, so a registration made
 * through one node's portal holds on the other after a failover.
 */
#ifndef TANDEM_SCSI_PR_MODEL_H
#define TANDEM_SCSI_PR_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/scsi.h"

/* Limits: registrations per LU (the record stays well inside TDM_STATE_MAX_BYTES). */
#define PR_MAX_REGS 128

/* PERSISTENT RESERVE OUT service actions. */
enum pr_out_sa {
        PR_OUT_REGISTER = 0x0,
        PR_OUT_RESERVE = 0x1,
        PR_OUT_RELEASE = 0x2,
        PR_OUT_CLEAR = 0x3,
        PR_OUT_PREEMPT = 0x4,
        PR_OUT_PREEMPT_ABORT = 0x5,
        PR_OUT_REGISTER_IGNORE = 0x6,
        PR_OUT_REGISTER_MOVE = 0x7,
};

/* PERSISTENT RESERVE IN service actions. */
enum pr_in_sa {
        PR_IN_READ_KEYS = 0x0,
        PR_IN_READ_RESERVATION = 0x1,
        PR_IN_REPORT_CAPABILITIES = 0x2,
        PR_IN_READ_FULL_STATUS = 0x3,
};

/* Reservation types (0: none). */
enum pr_type {
        PR_TYPE_NONE = 0,
        PR_TYPE_WE = 1,    /* Write Exclusive */
        PR_TYPE_EA = 3,    /* Exclusive Access */
        PR_TYPE_WE_RO = 5, /* Write Exclusive - Registrants Only */
        PR_TYPE_EA_RO = 6, /* Exclusive Access - Registrants Only */
        PR_TYPE_WE_AR = 7, /* Write Exclusive - All Registrants */
        PR_TYPE_EA_AR = 8, /* Exclusive Access - All Registrants */
};

#define PR_SCOPE_LU 0

bool pr_type_valid(unsigned type);
/* All registrants hold the reservation (types 7, 8). */
bool pr_type_all_registrants(unsigned type);
/* Registrants only or all registrants: every registrant may run what the holder may. */
bool pr_type_registrants(unsigned type);
/* Write Exclusive kinds (1, 5, 7): reads are allowed for everybody. */
bool pr_type_write_exclusive(unsigned type);

struct pr_reg {
        uint64_t key;
        bool holder; /* holds a reservation of a type that is not all registrants */
        char name[SCSI_PORT_NAME_MAX];
};

struct pr_state {
        uint32_t generation;
        bool aptpl;    /* the last APTPL bit received: the state survives a power loss */
        uint8_t type;  /* enum pr_type; PR_TYPE_NONE: no reservation */
        uint8_t scope; /* PR_SCOPE_LU */
        unsigned nregs;
        struct pr_reg regs[PR_MAX_REGS];
};

/* The parameters of one PERSISTENT RESERVE OUT, decoded (pr_out_parse). */
struct pr_out_params {
        enum pr_out_sa sa;
        uint8_t scope, type;
        uint64_t key, sa_key;
        bool aptpl, all_tg_pt, spec_i_pt;
        /* REGISTER AND MOVE */
        bool unreg;
        uint16_t rtpi;
        char move_to[SCSI_PORT_NAME_MAX];
};

/* A unit attention owed to a named nexus. */
struct pr_ua {
        char name[SCSI_PORT_NAME_MAX];
        enum scsi_reason reason;
};

/* What a service action did besides the new state. */
struct pr_effects {
        bool changed;  /* the state differs (store it); the generation is part of it */
        unsigned nuas; /* unit attentions to establish, in order */
        struct pr_ua uas[PR_MAX_REGS];
        unsigned naborts; /* PREEMPT AND ABORT: nexuses whose tasks to abort */
        char aborts[PR_MAX_REGS][SCSI_PORT_NAME_MAX];
};

/* Index of the registration of nexus name, or -1. */
int pr_find(const struct pr_state *st, const char *name);
/* Holds the reservation: the holder, or any registrant under an all-registrants type. */
bool pr_is_holder(const struct pr_state *st, const char *name);

/*
 * Runs one service action of nexus `me` on st (changed in place: pass a copy, keep the old
 * one if the result is not SCSI_OK). fx is cleared first. Returns SCSI_OK,
 * SR_RESERVATION_CONFLICT, SR_INVALID_FIELD_CDB / SR_INVALID_FIELD_PARAM (field set),
 * SR_INVALID_RELEASE_OF_PR or SR_INSUFFICIENT_REG_RESOURCES. `rtpi_ok` says whether a
 * REGISTER AND MOVE's relative target port identifier names a port of this LU.
 */
enum scsi_reason pr_out_apply(struct pr_state *st, const char *me, const struct pr_out_params *p,
                              bool rtpi_ok, struct pr_effects *fx, struct scsi_field_ptr *field);

/*
 * Decodes the CDB (10 bytes) and the parameter list (len bytes of param) of a PERSISTENT
 * RESERVE OUT. Returns SCSI_OK or the reason with field set: PARAMETER LIST LENGTH ERROR,
 * INVALID FIELD IN CDB / PARAMETER LIST.
 */
enum scsi_reason pr_out_parse(const uint8_t *cdb, const uint8_t *param, uint32_t len,
                              struct pr_out_params *p, struct scsi_field_ptr *field);

/*
 * The conflict rule of the data path for a command of class flags (SCSI_F_PR_*) from a
 * nexus that is or is not registered / the holder, under a reservation of type (not NONE).
 * cdb_harmless: the SCSI_F_PR_CDB command's CDB changes nothing.
 */
bool pr_conflicts(unsigned type, bool registered, bool holder, uint32_t flags, bool cdb_harmless);

/*
 * RESERVE(6/10) and RELEASE(6/10) under persistent reservations (SPC-4 5.13.3): PR_SPC2_NOOP
 * (GOOD, nothing changes: the nexus holds the persistent reservation, or is registered under
 * a registrants-only or all-registrants one), PR_SPC2_CONFLICT (registrations exist), or
 * PR_SPC2_AS_SPC2 (none: SPC-2 rules).
 */
enum pr_spc2_verdict { PR_SPC2_AS_SPC2, PR_SPC2_NOOP, PR_SPC2_CONFLICT };
enum pr_spc2_verdict pr_spc2_check(const struct pr_state *st, const char *me);

/* ---- the record (pr_record.c) ---- */

/* Bytes of st as its state record into buf (cap bytes); the length, 0 if it does not fit. */
size_t pr_state_encode(const struct pr_state *st, uint8_t *buf, size_t cap);
/* The largest record pr_state_encode can write. */
size_t pr_state_record_max(void);
/* st from a record (len 0: the empty state). false, st empty, when the bytes are not one. */
bool pr_state_decode(struct pr_state *st, const uint8_t *buf, size_t len);

/* ---- TransportIDs (pr_tid.c) ---- */

/* An iSCSI initiator port TransportID (format 01b) for name into buf; its length (a multiple
 * of 4, at least 24), 0 if cap is too small. */
size_t pr_tid_encode(const char *port_name, uint8_t *buf, size_t cap);
/*
 * Parses the TransportID at buf (avail bytes) into an initiator port name (ISID lower-case).
 * *used: its length. SCSI_OK; SR_INVALID_FIELD_PARAM (field byte relative to buf) when it is
 * not an iSCSI initiator port TransportID; SR_PARAM_LIST_LENGTH_ERROR when it runs past avail.
 */
enum scsi_reason pr_tid_parse(const uint8_t *buf, size_t avail, char *port_name, size_t *used,
                              struct scsi_field_ptr *field);
/* Builds the initiator port name of iSCSI name and ISID. */
void pr_port_name(char *out, const char *iscsi_name, const uint8_t isid[6]);

#endif
