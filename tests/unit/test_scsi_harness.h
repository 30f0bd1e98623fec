/*
 * Shared fixture of the SCSI unit tests: a sparse temporary file behind a LUN of a
 * target, one or two nexuses, and helpers that run a CDB and check status and sense.
 */
#ifndef TEST_SCSI_HARNESS_H
#define TEST_SCSI_HARNESS_H

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scsi/scsi_internal.h"
#include "tandem/backstore.h"
#include "tandem/scsi.h"

#define H_BLOCKS 4096u /* 2 MiB with 512-byte blocks */
#define H_BS     512u

struct harness {
        char path[64];
        struct scsi_target *target;
        struct scsi_lun *lun;  /* our reference */
        struct scsi_nexus nx;  /* the "initiator" of most tests */
        struct scsi_nexus nx2; /* a second initiator */
        struct scsi_task task;
};

static struct harness h;

static inline struct scsi_lun *h_make_lun(uint64_t id, uint64_t blocks, uint32_t bs, bool thin)
{
        struct bs_open_opts opts = {.create_size = blocks * bs};
        struct bs_dev *dev = NULL;
        char path[64];
        snprintf(path, sizeof(path), "/tmp/tandem-scsi-test-XXXXXX");
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(bs_open(path, &opts, &dev), 0);
        unlink(path); /* the open descriptor keeps the file */
        struct tdm_medium *m = NULL;
        ck_assert_int_eq(bs_medium_create(dev, &m), 0);
        struct scsi_lun *lun = scsi_lun_create(id, m, bs, path);
        ck_assert_ptr_nonnull(lun);
        lun->thin = thin;
        return lun;
}

static inline void h_setup_with(uint64_t blocks, uint32_t bs, bool thin)
{
        memset(&h, 0, sizeof(h));
        h.target = scsi_target_create("iqn.2024-01.org.tandem:unit");
        ck_assert_ptr_nonnull(h.target);
        h.lun = h_make_lun(0, blocks, bs, thin);
        ck_assert_int_eq(scsi_target_add_lun(h.target, h.lun), 0);
        scsi_nexus_init(&h.nx, h.target, "iqn.2024-01.org.tandem:initiator-1");
        scsi_nexus_init(&h.nx2, h.target, "iqn.2024-01.org.tandem:initiator-2");
}

/* The backing store under the harness LUN (flush counts, file size). */
static inline struct bs_dev *h_dev(void)
{
        return bs_medium_dev(h.lun->medium);
}

static inline void h_setup(void)
{
        h_setup_with(H_BLOCKS, H_BS, true);
}

static inline void h_setup_thick(void)
{
        h_setup_with(H_BLOCKS, H_BS, false);
}

static inline void h_teardown(void)
{
        scsi_task_release(&h.task);
        scsi_lun_put(h.lun);
        scsi_target_put(h.target);
}

/* Runs one CDB on a nexus; out/out_len is the data-out, expected the iSCSI EDTL. */
static inline struct scsi_task *h_run_on(struct scsi_nexus *nx, const uint8_t *cdb, size_t cdb_len,
                                         const void *out, uint32_t out_len, uint32_t expected)
{
        struct scsi_task *t = &h.task;
        scsi_task_release(t);
        memset(t, 0, sizeof(*t));
        memcpy(t->cdb, cdb, cdb_len);
        t->cdb_len = (uint8_t)cdb_len;
        t->nexus = nx;
        t->target = h.target;
        t->lun_id = 0;
        t->lun = scsi_target_get_lun(h.target, 0);
        t->data_out = (uint8_t *)out;
        t->data_out_len = out_len;
        t->expected_len = expected;
        t->dir = out_len ? SCSI_DIR_WRITE : SCSI_DIR_READ;
        scsi_task_execute(t);
        scsi_lun_put(t->lun);
        t->lun = NULL;
        return t;
}

/* As h_run_on() for the default nexus, with EDTL = data-out length or the read size. */
static inline struct scsi_task *h_run(const uint8_t *cdb, size_t cdb_len, const void *out,
                                      uint32_t out_len, uint32_t expected)
{
        return h_run_on(&h.nx, cdb, cdb_len, out, out_len, expected);
}

/* Consumes the POWER ON RESET of a fresh nexus with TEST UNIT READY. */
static inline void h_clear_ua(struct scsi_nexus *nx)
{
        static const uint8_t tur[6] = {0};
        for (int i = 0; i < 10; i++) {
                struct scsi_task *t = h_run_on(nx, tur, 6, NULL, 0, 0);
                if (t->status == SCSI_STATUS_GOOD)
                        return;
                ck_assert_int_eq(t->sense[2] & 0x0f, 0x6);
        }
        ck_abort_msg("unit attentions did not clear");
}

static inline void h_assert_good(const struct scsi_task *t)
{
        ck_assert_msg(t->status == SCSI_STATUS_GOOD, "status 0x%02x sense %x/%02x/%02x (%s)",
                      t->status, t->sense_len ? t->sense[2] & 0x0f : 0,
                      t->sense_len ? t->sense[12] : 0, t->sense_len ? t->sense[13] : 0,
                      scsi_reason_name(t->reason));
}

/* CHECK CONDITION with fixed-format sense key/ASC/ASCQ. */
static inline void h_assert_sense(const struct scsi_task *t, uint8_t key, uint8_t asc, uint8_t ascq)
{
        ck_assert_msg(t->status == SCSI_STATUS_CHECK_CONDITION, "status 0x%02x (%s), want CC",
                      t->status, scsi_reason_name(t->reason));
        ck_assert_int_eq(t->sense_len, 18);
        ck_assert_int_eq(t->sense[0] & 0x7f, 0x70);
        ck_assert_msg((t->sense[2] & 0x0f) == key && t->sense[12] == asc && t->sense[13] == ascq,
                      "sense %x/%02x/%02x, want %x/%02x/%02x", t->sense[2] & 0x0f, t->sense[12],
                      t->sense[13], key, asc, ascq);
}

/* Sense-key specific field pointer: cdb (C/D), byte, bit (-1: no bit pointer). */
static inline void h_assert_field(const struct scsi_task *t, bool cdb, unsigned byte, int bit)
{
        uint8_t want0 = (uint8_t)(0x80 | (cdb ? 0x40 : 0) | (bit >= 0 ? 0x08 | bit : 0));
        ck_assert_msg(t->sense[15] == want0 && get_be16(t->sense + 16) == byte,
                      "SKS %02x %02x %02x, want %02x byte %u", t->sense[15], t->sense[16],
                      t->sense[17], want0, byte);
}

static inline void h_assert_invalid_cdb(const struct scsi_task *t, unsigned byte, int bit)
{
        h_assert_sense(t, 0x5, 0x24, 0x00);
        h_assert_field(t, true, byte, bit);
}

/* CDB builders. */
static inline void cdb_rw10(uint8_t *cdb, uint8_t op, uint32_t lba, uint16_t n)
{
        memset(cdb, 0, 10);
        cdb[0] = op;
        put_be32(cdb + 2, lba);
        put_be16(cdb + 7, n);
}

static inline void cdb_rw16(uint8_t *cdb, uint8_t op, uint64_t lba, uint32_t n)
{
        memset(cdb, 0, 16);
        cdb[0] = op;
        put_be64(cdb + 2, lba);
        put_be32(cdb + 10, n);
}

static inline struct scsi_task *h_write10(uint32_t lba, uint16_t n, const void *buf)
{
        uint8_t cdb[10];
        cdb_rw10(cdb, 0x2a, lba, n);
        return h_run(cdb, 10, buf, n * h.lun->block_size, n * h.lun->block_size);
}

static inline struct scsi_task *h_read10(uint32_t lba, uint16_t n)
{
        uint8_t cdb[10];
        cdb_rw10(cdb, 0x28, lba, n);
        return h_run(cdb, 10, NULL, 0, n * h.lun->block_size);
}

static inline void *h_pattern(size_t len, uint8_t seed)
{
        uint8_t *p = malloc(len);
        ck_assert_ptr_nonnull(p);
        for (size_t i = 0; i < len; i++)
                p[i] = (uint8_t)(seed + i * 7 + (i >> 9));
        return p;
}

static inline bool h_all_zero(const uint8_t *p, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (p[i])
                        return false;
        return true;
}

static inline int h_run_suite(Suite *s)
{
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
