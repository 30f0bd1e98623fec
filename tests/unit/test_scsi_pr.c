/*
 * PERSISTENT RESERVE IN/OUT through scsi_task_execute() on a LUN: what initiators see (data
 * formats, generation, sense, unit attentions owed by name, conflicts per command class),
 * RESERVE(6/10) under persistent reservations, and the LU state records: APTPL survives a new
 * LUN object on the same state file, and a record that arrives from the peer is what the LUN
 * answers with afterwards (as a Secondary that is then promoted).
 */
#include "test_scsi_harness.h"

#include "scsi/pr_model.h"
#include "tandem/medium.h"
#include "tandem/scsi_nexus.h"

static const uint8_t tur[6] = {0};

/* PERSISTENT RESERVE OUT with the basic 24-byte parameter list. */
static struct scsi_task *prout(struct scsi_nexus *nx, uint8_t sa, uint8_t type, uint64_t key,
                               uint64_t sa_key, uint8_t flags20)
{
        static uint8_t param[24];
        uint8_t cdb[10] = {0x5f, sa, type};
        put_be32(cdb + 5, 24);
        memset(param, 0, sizeof(param));
        put_be64(param, key);
        put_be64(param + 8, sa_key);
        param[20] = flags20;
        return h_run_on(nx, cdb, 10, param, 24, 24);
}

static struct scsi_task *prin(struct scsi_nexus *nx, uint8_t sa, uint16_t alloc)
{
        uint8_t cdb[10] = {0x5e, sa};
        put_be16(cdb + 7, alloc);
        return h_run_on(nx, cdb, 10, NULL, 0, alloc);
}

static uint32_t generation(struct scsi_nexus *nx)
{
        struct scsi_task *t = prin(nx, PR_IN_READ_KEYS, 8);
        h_assert_good(t);
        return get_be32(t->data_in);
}

static void assert_conflict(const struct scsi_task *t)
{
        ck_assert_msg(t->status == SCSI_STATUS_RESERVATION_CONFLICT, "status 0x%02x (%s)",
                      t->status, scsi_reason_name(t->reason));
        ck_assert_int_eq(t->sense_len, 0);
}

static void setup(void)
{
        h_setup();
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
}

START_TEST(register_keys_and_generation)
{
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1111, 0));
        ck_assert_uint_eq(generation(&h.nx), 1);
        h_assert_good(prout(&h.nx2, PR_OUT_REGISTER_IGNORE, 0, 0, 0x2222, 0));
        ck_assert_uint_eq(generation(&h.nx2), 2);
        struct scsi_task *t = prin(&h.nx, PR_IN_READ_KEYS, 100);
        h_assert_good(t);
        ck_assert_uint_eq(t->data_in_len, 24);
        ck_assert_uint_eq(get_be32(t->data_in + 4), 16);
        ck_assert_uint_eq(get_be64(t->data_in + 8), 0x1111);
        ck_assert_uint_eq(get_be64(t->data_in + 16), 0x2222);
        /* truncated to the allocation length; ADDITIONAL LENGTH still says it all */
        t = prin(&h.nx, PR_IN_READ_KEYS, 8);
        ck_assert_uint_eq(t->data_in_len, 8);
        ck_assert_uint_eq(get_be32(t->data_in + 4), 16);
        /* a wrong key: RESERVATION CONFLICT, no change */
        assert_conflict(prout(&h.nx, PR_OUT_REGISTER, 0, 0x9999, 0x3333, 0));
        /* RESERVE and RELEASE leave the generation alone; CLEAR counts */
        h_assert_good(prout(&h.nx, PR_OUT_RESERVE, PR_TYPE_WE, 0x1111, 0, 0));
        h_assert_good(prout(&h.nx, PR_OUT_RELEASE, PR_TYPE_WE, 0x1111, 0, 0));
        ck_assert_uint_eq(generation(&h.nx), 2);
        h_assert_good(prout(&h.nx, PR_OUT_CLEAR, 0, 0x1111, 0, 0));
        ck_assert_uint_eq(generation(&h.nx), 3);
        t = prin(&h.nx, PR_IN_READ_KEYS, 100);
        ck_assert_uint_eq(get_be32(t->data_in + 4), 0);
}
END_TEST

START_TEST(read_reservation_and_capabilities)
{
        struct scsi_task *t = prin(&h.nx, PR_IN_REPORT_CAPABILITIES, 8);
        h_assert_good(t);
        const uint8_t caps[8] = {0, 8, 0x15, 0xb0, 0xea, 0x01, 0, 0};
        ck_assert_mem_eq(t->data_in, caps, 8);
        t = prin(&h.nx, PR_IN_READ_RESERVATION, 100);
        h_assert_good(t);
        ck_assert_uint_eq(t->data_in_len, 8);
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0xabc, 0x01)); /* APTPL */
        h_assert_good(prout(&h.nx, PR_OUT_RESERVE, PR_TYPE_EA_RO, 0xabc, 0, 0));
        t = prin(&h.nx2, PR_IN_READ_RESERVATION, 100);
        h_assert_good(t);
        ck_assert_uint_eq(t->data_in_len, 24);
        ck_assert_uint_eq(get_be32(t->data_in + 4), 16);
        ck_assert_uint_eq(get_be64(t->data_in + 8), 0xabc);
        ck_assert_uint_eq(t->data_in[8 + 13], PR_TYPE_EA_RO);
        t = prin(&h.nx, PR_IN_REPORT_CAPABILITIES, 8);
        ck_assert_uint_eq(t->data_in[3], 0xb1); /* PTPL_A now */
        /* all registrants: the reservation key is 0 */
        h_assert_good(prout(&h.nx, PR_OUT_RELEASE, PR_TYPE_EA_RO, 0xabc, 0, 0));
        h_assert_good(prout(&h.nx, PR_OUT_RESERVE, PR_TYPE_WE_AR, 0xabc, 0, 0));
        t = prin(&h.nx, PR_IN_READ_RESERVATION, 100);
        ck_assert_uint_eq(get_be64(t->data_in + 8), 0);
        ck_assert_uint_eq(t->data_in[8 + 13], PR_TYPE_WE_AR);
}
END_TEST

START_TEST(read_full_status_transport_ids)
{
        const uint8_t isid[6] = {0x80, 0, 0, 0, 0x12, 0x34};
        scsi_nexus_set_isid(&h.nx, isid);
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        h_assert_good(prout(&h.nx2, PR_OUT_REGISTER, 0, 0, 0x2, 0));
        h_assert_good(prout(&h.nx, PR_OUT_RESERVE, PR_TYPE_WE, 0x1, 0, 0));
        struct scsi_task *t = prin(&h.nx2, PR_IN_READ_FULL_STATUS, 4096);
        h_assert_good(t);
        ck_assert_uint_eq(get_be32(t->data_in), 2);
        ck_assert_uint_eq(get_be32(t->data_in + 4), t->data_in_len - 8);
        const uint8_t *d = t->data_in + 8;
        const char *want[2] = {"iqn.2024-01.org.tandem:initiator-1,i,0x800000001234",
                               "iqn.2024-01.org.tandem:initiator-2,i,0x000000000000"};
        for (int i = 0; i < 2; i++) {
                ck_assert_uint_eq(get_be64(d), (uint64_t)i + 1);
                ck_assert_uint_eq(d[12], i == 0 ? 0x03 : 0x02); /* ALL_TG_PT, R_HOLDER */
                ck_assert_uint_eq(d[13], i == 0 ? PR_TYPE_WE : 0);
                ck_assert_uint_eq(get_be16(d + 18), 0); /* RTPI: not defined with ALL_TG_PT */
                uint32_t tid = get_be32(d + 20);
                ck_assert_uint_eq(tid % 4, 0);
                ck_assert_uint_eq(d[24], 0x45);
                ck_assert_uint_eq(get_be16(d + 26), tid - 4);
                ck_assert_str_eq((const char *)d + 28, want[i]);
                d += 24 + tid;
        }
        ck_assert_ptr_eq(d, t->data_in + t->data_in_len);
}
END_TEST

/* A nexus with the same iSCSI name but another ISID is another I_T nexus. */
START_TEST(isid_names_the_nexus)
{
        struct scsi_nexus other;
        scsi_nexus_init(&other, h.target, h.nx.initiator);
        const uint8_t isid[6] = {0x40, 0, 0, 0, 0, 2};
        scsi_nexus_set_isid(&other, isid);
        h_clear_ua(&other);
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        h_assert_good(prout(&h.nx, PR_OUT_RESERVE, PR_TYPE_EA, 0x1, 0, 0));
        assert_conflict(h_run_on(&other, (const uint8_t[10]){0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0}, 10,
                                 NULL, 0, 512));
        h_assert_good(h_read10(0, 1));
        scsi_nexus_fini(&other);
}
END_TEST

static struct scsi_task *cmd6(struct scsi_nexus *nx, uint8_t op, uint8_t b4)
{
        uint8_t cdb[6] = {op, 0, 0, 0, b4, 0};
        return h_run_on(nx, cdb, 6, NULL, 0, op == 0x12 ? 36 : 0);
}

/* SPC-4 table 5-13 / SBC-4 table 13 for a nexus that is neither holder nor registrant. */
START_TEST(conflicts_by_command_class)
{
        uint8_t buf[512] = {0};
        uint8_t rd[10], wr[10], sync[10] = {0x35}, rc10[10] = {0x25};
        cdb_rw10(rd, 0x28, 0, 1);
        cdb_rw10(wr, 0x2a, 0, 1);
        uint8_t ms6[6] = {0x1a, 0, 0x3f, 0, 255, 0};
        uint8_t rl[12] = {0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0};
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        h_assert_good(prout(&h.nx, PR_OUT_RESERVE, PR_TYPE_EA, 0x1, 0, 0));
        /* Exclusive Access: only the harmless commands */
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
        h_assert_good(cmd6(&h.nx2, 0x12, 36));
        h_assert_good(h_run_on(&h.nx2, rc10, 10, NULL, 0, 8));
        h_assert_good(h_run_on(&h.nx2, rl, 12, NULL, 0, 64));
        h_assert_good(prin(&h.nx2, PR_IN_READ_KEYS, 64));
        assert_conflict(h_run_on(&h.nx2, rd, 10, NULL, 0, 512));
        assert_conflict(h_run_on(&h.nx2, ms6, 6, NULL, 0, 255));
        assert_conflict(h_run_on(&h.nx2, wr, 10, buf, 512, 512));
        h_assert_good(cmd6(&h.nx2, 0x1b, 0x01)); /* START with POWER CONDITION 0 */
        h_assert_good(h_run_on(&h.nx, wr, 10, buf, 512, 512));
        /* Write Exclusive: reads and MODE SENSE too, no changes */
        h_assert_good(prout(&h.nx, PR_OUT_PREEMPT, PR_TYPE_WE, 0x1, 0x1, 0));
        h_assert_good(h_run_on(&h.nx2, rd, 10, NULL, 0, 512));
        h_assert_good(h_run_on(&h.nx2, ms6, 6, NULL, 0, 255));
        assert_conflict(h_run_on(&h.nx2, wr, 10, buf, 512, 512));
        assert_conflict(h_run_on(&h.nx2, sync, 10, NULL, 0, 0));
        h_assert_good(cmd6(&h.nx2, 0x1e, 0x00));   /* PREVENT 0 */
        assert_conflict(cmd6(&h.nx2, 0x1e, 0x01)); /* PREVENT 1 */
        assert_conflict(cmd6(&h.nx2, 0x1b, 0x00)); /* STOP */
        /* a registrant that does not hold it: the same under WE, everything under WE-RO */
        h_assert_good(prout(&h.nx2, PR_OUT_REGISTER, 0, 0, 0x2, 0));
        assert_conflict(h_run_on(&h.nx2, wr, 10, buf, 512, 512));
        h_assert_good(prout(&h.nx, PR_OUT_PREEMPT, PR_TYPE_WE_RO, 0x1, 0x1, 0));
        h_clear_ua(&h.nx2); /* RESERVATIONS RELEASED: the type changed */
        h_assert_good(h_run_on(&h.nx2, wr, 10, buf, 512, 512));
        h_assert_good(h_run_on(&h.nx2, sync, 10, NULL, 0, 0));
}
END_TEST

/* The sense of a unit attention of class 2Ah with ASCQ q. */
static void assert_ua_2a(const struct scsi_task *t, uint8_t ascq)
{
        h_assert_sense(t, 0x6, 0x2a, ascq);
}

static size_t ua_record_len(void)
{
        return tdm_medium_state_get(h.lun->medium, SCSI_STATE_UA, NULL, 0, NULL);
}

START_TEST(attentions_owed_by_name)
{
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        h_assert_good(prout(&h.nx2, PR_OUT_REGISTER, 0, 0, 0x2, 0));
        h_assert_good(prout(&h.nx, PR_OUT_RESERVE, PR_TYPE_WE_RO, 0x1, 0, 0));
        h_assert_good(prout(&h.nx, PR_OUT_RELEASE, PR_TYPE_WE_RO, 0x1, 0, 0));
        ck_assert_uint_gt(ua_record_len(), 6); /* stored before the RELEASE completed */
        h_assert_good(h_run_on(&h.nx, tur, 6, NULL, 0, 0)); /* the releaser: none */
        assert_ua_2a(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x04);
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0)); /* reported once */
        ck_assert_uint_eq(ua_record_len(), 6);               /* and the record says so */
        /* INQUIRY does not take it; REQUEST SENSE reports it as its data */
        h_assert_good(prout(&h.nx, PR_OUT_CLEAR, 0, 0x1, 0, 0));
        h_assert_good(cmd6(&h.nx2, 0x12, 36));
        struct scsi_task *t = cmd6(&h.nx2, 0x03, 18);
        h_assert_good(t);
        ck_assert_uint_eq(t->data_in[2], 0x6);
        ck_assert_uint_eq(t->data_in[12], 0x2a);
        ck_assert_uint_eq(t->data_in[13], 0x03);
        h_assert_good(h_run_on(&h.nx2, tur, 6, NULL, 0, 0));
        /* owed to a nexus that is not logged in: it gets it after its POWER ON RESET */
        struct scsi_nexus late;
        scsi_nexus_init(&late, h.target, "iqn.2024-01.org.tandem:initiator-3");
        h_clear_ua(&late);
        h_assert_good(prout(&late, PR_OUT_REGISTER, 0, 0, 0x3, 0));
        scsi_nexus_fini(&late); /* logs out */
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        h_assert_good(prout(&h.nx, PR_OUT_PREEMPT, PR_TYPE_EA, 0x1, 0x3, 0));
        scsi_nexus_init(&late, h.target, "iqn.2024-01.org.tandem:initiator-3");
        h_assert_sense(h_run_on(&late, tur, 6, NULL, 0, 0), 0x6, 0x29, 0x00);
        assert_ua_2a(h_run_on(&late, tur, 6, NULL, 0, 0), 0x05);
        h_assert_good(h_run_on(&late, tur, 6, NULL, 0, 0));
        scsi_nexus_fini(&late);
}
END_TEST

START_TEST(standby_port)
{
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        h_assert_good(prout(&h.nx2, PR_OUT_REGISTER, 0, 0, 0x2, 0));
        h_assert_good(prout(&h.nx, PR_OUT_PREEMPT, PR_TYPE_WE, 0x1, 0x2, 0));
        struct tdm_access a = {.local_state = TDM_ACCESS_STANDBY, .local_id = 1};
        tdm_medium_set_access(h.lun->medium, &a);
        h_clear_ua(&h.nx); /* ASYMMETRIC ACCESS STATE CHANGED */
        h_clear_ua(&h.nx2);
        /* the standby side reads the state but changes nothing, attentions stay owed */
        h_assert_good(prin(&h.nx2, PR_IN_READ_KEYS, 64));
        h_assert_sense(prout(&h.nx, PR_OUT_CLEAR, 0, 0x1, 0, 0), 0x2, 0x04, 0x0b);
        ck_assert_uint_gt(ua_record_len(), 6);
        a.local_state = TDM_ACCESS_ACTIVE;
        tdm_medium_set_access(h.lun->medium, &a);
        h_clear_ua(&h.nx);
        assert_ua_2a(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x05); /* owed by name first */
        assert_ua_2a(h_run_on(&h.nx2, tur, 6, NULL, 0, 0), 0x06);
}
END_TEST

static struct scsi_task *spc2(struct scsi_nexus *nx, bool release)
{
        return cmd6(nx, release ? 0x17 : 0x16, 0);
}

/* SPC-4 5.13.3: RESERVE/RELEASE next to persistent reservations. */
START_TEST(spc2_reserve_and_persistent_reservations)
{
        h_assert_good(spc2(&h.nx, false));
        char holder[SCSI_PORT_NAME_MAX] = {0};
        size_t n = tdm_medium_state_get(h.lun->medium, SCSI_STATE_RESERVE, holder,
                                        sizeof(holder) - 1, NULL);
        ck_assert_str_eq(holder, h.nx.port_name); /* by name, in the record */
        ck_assert_uint_eq(n, strlen(h.nx.port_name));
        assert_conflict(prout(&h.nx2, PR_OUT_REGISTER, 0, 0, 0x2, 0));
        assert_conflict(prin(&h.nx2, PR_IN_READ_KEYS, 64));
        h_assert_good(spc2(&h.nx, true));
        ck_assert_uint_eq(tdm_medium_state_get(h.lun->medium, SCSI_STATE_RESERVE, NULL, 0, NULL),
                          0);
        /* registrations exist: RESERVE and RELEASE conflict, for anybody */
        h_assert_good(prout(&h.nx2, PR_OUT_REGISTER, 0, 0, 0x2, 0));
        assert_conflict(spc2(&h.nx, false));
        assert_conflict(spc2(&h.nx2, false));
        assert_conflict(spc2(&h.nx2, true));
        /* the holder, and registrants under registrants-only types: GOOD, no effect */
        h_assert_good(prout(&h.nx2, PR_OUT_RESERVE, PR_TYPE_WE, 0x2, 0, 0));
        h_assert_good(spc2(&h.nx2, false));
        h_assert_good(spc2(&h.nx2, true));
        ck_assert_uint_eq(tdm_medium_state_get(h.lun->medium, SCSI_STATE_RESERVE, NULL, 0, NULL),
                          0);
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        assert_conflict(spc2(&h.nx, false));
        h_assert_good(prout(&h.nx2, PR_OUT_PREEMPT, PR_TYPE_WE_RO, 0x2, 0x2, 0));
        h_clear_ua(&h.nx);
        h_assert_good(spc2(&h.nx, false));
        /* a LUN reset ends a RESERVE, never a persistent reservation */
        scsi_nexus_lun_reset(&h.nx, h.lun);
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        struct scsi_task *t = prin(&h.nx, PR_IN_READ_RESERVATION, 64);
        ck_assert_uint_eq(t->data_in[8 + 13], PR_TYPE_WE_RO);
        h_assert_good(prout(&h.nx2, PR_OUT_CLEAR, 0, 0x2, 0, 0));
        h_clear_ua(&h.nx);
        h_assert_good(spc2(&h.nx, false));
        scsi_nexus_lun_reset(&h.nx, h.lun);
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
        h_assert_good(spc2(&h.nx2, false)); /* the reset released it */
}
END_TEST

static char aborted[4][SCSI_PORT_NAME_MAX];
static size_t n_aborted;
static const struct scsi_task *abort_except;

static void record_abort(struct scsi_target *t, uint64_t lun_id, const char *const *names, size_t n,
                         const struct scsi_task *except)
{
        ck_assert_ptr_eq(t, h.target);
        ck_assert_uint_eq(lun_id, 0);
        for (size_t i = 0; i < n && n_aborted < 4; i++)
                snprintf(aborted[n_aborted++], SCSI_PORT_NAME_MAX, "%s", names[i]);
        abort_except = except;
}

START_TEST(preempt_and_abort_calls_the_transport)
{
        scsi_set_pr_abort(record_abort);
        n_aborted = 0;
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        h_assert_good(prout(&h.nx2, PR_OUT_REGISTER, 0, 0, 0x2, 0));
        h_assert_good(prout(&h.nx2, PR_OUT_RESERVE, PR_TYPE_EA, 0x2, 0, 0));
        h_assert_good(prout(&h.nx, PR_OUT_PREEMPT, PR_TYPE_EA, 0x1, 0x2, 0));
        ck_assert_uint_eq(n_aborted, 0); /* PREEMPT alone aborts nothing */
        h_clear_ua(&h.nx2);
        h_assert_good(prout(&h.nx2, PR_OUT_REGISTER, 0, 0, 0x2, 0));
        h_assert_good(prout(&h.nx, PR_OUT_PREEMPT_ABORT, PR_TYPE_EA, 0x1, 0x2, 0));
        ck_assert_uint_eq(n_aborted, 1);
        ck_assert_str_eq(aborted[0], h.nx2.port_name);
        ck_assert_ptr_eq(abort_except, &h.task);
        scsi_set_pr_abort(NULL);
}
END_TEST

/* REGISTER AND MOVE through the handler: parameter list with a TransportID. */
START_TEST(register_and_move)
{
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        h_assert_good(prout(&h.nx, PR_OUT_RESERVE, PR_TYPE_WE, 0x1, 0, 0));
        uint8_t param[300] = {0};
        put_be64(param, 0x1);
        put_be64(param + 8, 0x77);
        param[17] = 0x02; /* UNREG */
        put_be16(param + 18, 1);
        size_t n = pr_tid_encode(h.nx2.port_name, param + 24, sizeof(param) - 24);
        put_be32(param + 20, (uint32_t)n);
        uint8_t cdb[10] = {0x5f, PR_OUT_REGISTER_MOVE};
        put_be32(cdb + 5, (uint32_t)(24 + n));
        h_assert_good(h_run_on(&h.nx, cdb, 10, param, (uint32_t)(24 + n), (uint32_t)(24 + n)));
        uint8_t buf[512] = {0}, wr[10];
        cdb_rw10(wr, 0x2a, 0, 1);
        assert_conflict(h_run_on(&h.nx, wr, 10, buf, 512, 512));
        h_assert_good(h_run_on(&h.nx2, wr, 10, buf, 512, 512));
        struct scsi_task *t = prin(&h.nx, PR_IN_READ_RESERVATION, 64);
        ck_assert_uint_eq(get_be64(t->data_in + 8), 0x77);
        ck_assert_uint_eq(get_be32(t->data_in), 2); /* REGISTER, then the move */
        /* a relative target port that is not ours */
        put_be16(param + 18, 9);
        put_be64(param, 0x77);
        n = pr_tid_encode(h.nx.port_name, param + 24, sizeof(param) - 24);
        put_be32(param + 20, (uint32_t)n);
        t = h_run_on(&h.nx2, cdb, 10, param, (uint32_t)(24 + n), (uint32_t)(24 + n));
        h_assert_sense(t, 0x5, 0x26, 0x00);
        h_assert_field(t, false, 18, -1);
}
END_TEST

START_TEST(parameter_errors)
{
        uint8_t cdb[10] = {0x5f, PR_OUT_REGISTER};
        uint8_t param[24] = {0};
        h_assert_sense(h_run(cdb, 10, NULL, 0, 0), 0x5, 0x1a, 0x00); /* length 0 */
        put_be32(cdb + 5, 24);
        param[20] = 0x08; /* SPEC_I_PT */
        struct scsi_task *t = h_run(cdb, 10, param, 24, 24);
        h_assert_sense(t, 0x5, 0x26, 0x00);
        h_assert_field(t, false, 20, 3);
        cdb[2] = 0x12; /* RESERVE with scope 1 */
        cdb[1] = PR_OUT_RESERVE;
        param[20] = 0;
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x1, 0));
        put_be64(param, 0x1);
        t = h_run(cdb, 10, param, 24, 24);
        h_assert_invalid_cdb(t, 2, 7);
        /* service actions 4 to 1Fh of PR IN, 8 to 1Fh of PR OUT */
        uint8_t in[10] = {0x5e, 0x04, 0, 0, 0, 0, 0, 0, 8, 0};
        h_assert_invalid_cdb(h_run(in, 10, NULL, 0, 8), 1, 4);
        cdb[1] = 0x08;
        cdb[2] = 0;
        h_assert_invalid_cdb(h_run(cdb, 10, param, 24, 24), 1, 4);
        ck_assert_uint_eq(generation(&h.nx), 1);
}
END_TEST

/* ---- the records: APTPL across a new LUN object, reload as the Secondary does ---- */

static struct scsi_lun *lun_with_state(const char *img, const char *state)
{
        struct bs_open_opts opts = {.create_size = H_BLOCKS * H_BS};
        struct bs_dev *dev = NULL;
        ck_assert_int_eq(bs_open(img, &opts, &dev), 0);
        struct tdm_medium *m = NULL;
        ck_assert_int_eq(bs_medium_create(dev, &m), 0);
        ck_assert_int_eq(bs_medium_attach_state(m, state), 0);
        struct scsi_lun *lun = scsi_lun_create(0, m, H_BS, img);
        ck_assert_ptr_nonnull(lun);
        return lun;
}

/* Replaces the harness LUN with a new object on the same files. */
static void reopen(const char *img, const char *state)
{
        ck_assert_int_eq(scsi_target_del_lun(h.target, 0), 0);
        scsi_lun_put(h.lun);
        h.lun = lun_with_state(img, state);
        ck_assert_int_eq(scsi_target_add_lun(h.target, h.lun), 0);
        scsi_nexus_init(&h.nx, h.target, "iqn.2024-01.org.tandem:initiator-1");
        scsi_nexus_init(&h.nx2, h.target, "iqn.2024-01.org.tandem:initiator-2");
        h_clear_ua(&h.nx);
        h_clear_ua(&h.nx2);
}

START_TEST(aptpl_survives_a_new_lun_object)
{
        char dir[] = "/tmp/tandem-pr-XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char img[96], state[96];
        snprintf(img, sizeof(img), "%s/lun.img", dir);
        snprintf(state, sizeof(state), "%s/lun.state", dir);
        reopen(img, state);
        /* without APTPL: gone with the LUN object (a restart of every node) */
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x5, 0));
        reopen(img, state);
        ck_assert_uint_eq(get_be32(prin(&h.nx, PR_IN_READ_KEYS, 64)->data_in + 4), 0);
        /* with APTPL: registrations, reservation and generation come back */
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0, 0x5, 0x01));
        h_assert_good(prout(&h.nx2, PR_OUT_REGISTER, 0, 0, 0x6, 0x01));
        h_assert_good(prout(&h.nx, PR_OUT_RESERVE, PR_TYPE_EA, 0x5, 0, 0));
        uint32_t gen = generation(&h.nx);
        reopen(img, state);
        ck_assert_uint_eq(generation(&h.nx), gen);
        struct scsi_task *t = prin(&h.nx, PR_IN_READ_RESERVATION, 64);
        ck_assert_uint_eq(get_be64(t->data_in + 8), 0x5);
        ck_assert_uint_eq(t->data_in[8 + 13], PR_TYPE_EA);
        assert_conflict(h_run_on(&h.nx2, (const uint8_t[10]){0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0}, 10,
                                 NULL, 0, 512));
        t = prin(&h.nx, PR_IN_REPORT_CAPABILITIES, 8);
        ck_assert_uint_eq(t->data_in[3] & 1, 1); /* PTPL_A */
        /* APTPL 0 from then on: the file forgets it */
        h_assert_good(prout(&h.nx, PR_OUT_REGISTER, 0, 0x5, 0x5, 0));
        reopen(img, state);
        ck_assert_uint_eq(generation(&h.nx), 0);
        ck_assert_int_eq(scsi_target_del_lun(h.target, 0), 0);
        scsi_lun_put(h.lun);
        h.lun = h_make_lun(0, H_BLOCKS, H_BS, true);
        ck_assert_int_eq(scsi_target_add_lun(h.target, h.lun), 0);
        unlink(img);
        unlink(state);
        rmdir(dir);
}
END_TEST

START_TEST(reload_from_the_peers_record)
{
        /* The peer's state: nx2 holds Exclusive Access, nx is registered. */
        static struct pr_state st;
        static uint8_t rec[64 * 1024];
        memset(&st, 0, sizeof(st));
        st.generation = 41;
        st.type = PR_TYPE_EA;
        st.nregs = 2;
        snprintf(st.regs[0].name, SCSI_PORT_NAME_MAX, "%s", h.nx.port_name);
        st.regs[0].key = 0x10;
        snprintf(st.regs[1].name, SCSI_PORT_NAME_MAX, "%s", h.nx2.port_name);
        st.regs[1].key = 0x20;
        st.regs[1].holder = true;
        h_assert_good(h_read10(0, 1)); /* the nexus has looked at the LUN (cached) */
        size_t len = pr_state_encode(&st, rec, sizeof(rec));
        ck_assert_int_eq(tdm_medium_state_put(h.lun->medium, SCSI_STATE_PR, rec, len, 0), 0);
        h.lun->medium->state_changed(h.lun->medium->access_arg, SCSI_STATE_PR);
        ck_assert_uint_eq(generation(&h.nx), 41);
        assert_conflict(h_read10(0, 1));
        h_assert_good(h_run_on(&h.nx2, (const uint8_t[10]){0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0}, 10,
                               NULL, 0, 512));
        /* the SPC-2 holder and the attentions owed arrive the same way */
        h_assert_good(prout(&h.nx2, PR_OUT_CLEAR, 0, 0x20, 0, 0));
        h_clear_ua(&h.nx);
        const char *name = h.nx2.port_name;
        ck_assert_int_eq(
            tdm_medium_state_put(h.lun->medium, SCSI_STATE_RESERVE, name, strlen(name), 0), 0);
        h.lun->medium->state_changed(h.lun->medium->access_arg, SCSI_STATE_RESERVE);
        assert_conflict(h_read10(0, 1));
        uint8_t ua[64] = {'T', 'U', 'A', '1', 0, 1};
        size_t nl = strlen(h.nx.port_name);
        ua[6] = (uint8_t)nl;
        memcpy(ua + 7, h.nx.port_name, nl);
        ua[7 + nl] = 1;
        ua[8 + nl] = 0x2a;
        ua[9 + nl] = 0x05;
        ck_assert_int_eq(tdm_medium_state_put(h.lun->medium, SCSI_STATE_UA, ua, 10 + nl, 0), 0);
        h.lun->medium->state_changed(h.lun->medium->access_arg, SCSI_STATE_UA);
        assert_ua_2a(h_run_on(&h.nx, tur, 6, NULL, 0, 0), 0x05);
        /* a record that is not one changes nothing */
        rec[0] ^= 0xff;
        ck_assert_int_eq(tdm_medium_state_put(h.lun->medium, SCSI_STATE_PR, rec, len, 0), 0);
        h.lun->medium->state_changed(h.lun->medium->access_arg, SCSI_STATE_PR);
        ck_assert_uint_eq(generation(&h.nx2), 42);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("scsi_pr");
        TCase *tc = tcase_create("pr");
        tcase_add_checked_fixture(tc, setup, h_teardown);
        tcase_add_test(tc, register_keys_and_generation);
        tcase_add_test(tc, read_reservation_and_capabilities);
        tcase_add_test(tc, read_full_status_transport_ids);
        tcase_add_test(tc, isid_names_the_nexus);
        tcase_add_test(tc, conflicts_by_command_class);
        tcase_add_test(tc, attentions_owed_by_name);
        tcase_add_test(tc, standby_port);
        tcase_add_test(tc, spc2_reserve_and_persistent_reservations);
        tcase_add_test(tc, preempt_and_abort_calls_the_transport);
        tcase_add_test(tc, register_and_move);
        tcase_add_test(tc, parameter_errors);
        tcase_add_test(tc, aptpl_survives_a_new_lun_object);
        tcase_add_test(tc, reload_from_the_peers_record);
        suite_add_tcase(s, tc);
        return h_run_suite(s);
}
