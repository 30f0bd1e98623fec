/*
 * tdm-xcopy: EXTENDED COPY through a failover, as a clone or Storage vMotion offloads it. Over
 * and over: the source region is rewritten with a new version stamp in every block, then one
 * EXTENDED COPY copies its segments to the destination region. Afterwards every destination
 * segment must hold one version throughout (a copy that failed may leave the old one, never
 * a mix), and a version the copies could have left there.
 *
 * Usage: tdm-xcopy URL [--seconds S] [--segments N] [--segment-blocks B] [--src LBA]
 *                  [--dst LBA] [--liveness S]
 * Prints: "xcopy: copies=N copy_errors=N segments=N torn=N wrong=N errors=N max_stall_ms=N
 *          reconnects=N ua_retries=N"; exits 1 when a segment is torn or wrong, or on another
 *          error (a command sent again after a unit attention is none).
 */
#include <getopt.h>
#include <inttypes.h>

#include "tdm_client.h"

#define BS           512
#define MAX_SEGMENTS 16

static struct {
        const char *url;
        unsigned seconds, segments, seg_blocks, liveness;
        uint64_t src, dst;
} opt = {
    .seconds = 12, .segments = 4, .seg_blocks = 2048, .liveness = 2, .src = 300000, .dst = 350000};

static void put64(uint8_t *p, uint64_t v)
{
        for (int i = 0; i < 8; i++)
                p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static void cdb_rw16(uint8_t *cdb, uint8_t op, uint64_t lba, uint32_t blocks)
{
        memset(cdb, 0, 16);
        cdb[0] = op;
        put64(cdb + 2, lba);
        cdb[10] = (uint8_t)(blocks >> 24);
        cdb[11] = (uint8_t)(blocks >> 16);
        cdb[12] = (uint8_t)(blocks >> 8);
        cdb[13] = (uint8_t)blocks;
}

/* The LUN's NAA designator from VPD 83h, for the copy's target descriptor. */
static int lun_naa(struct tdm_client *c, uint8_t naa[16])
{
        uint8_t cdb[6] = {0x12, 0x01, 0x83, 0x01, 0x00, 0};
        struct scsi_task *t = tdm_client_run(c, cdb, 6, SCSI_XFER_READ, NULL, 0, 256);
        int rc = -1;
        if (t && t->status == SCSI_STATUS_GOOD && t->datain.size >= 4) {
                const uint8_t *d = t->datain.data;
                int end = 4 + ((d[2] << 8) | d[3]);
                if (end > t->datain.size)
                        end = t->datain.size;
                for (int at = 4; at + 4 <= end; at += 4 + d[at + 3])
                        if ((d[at + 1] & 0x3f) == 0x03 && d[at + 3] == 16 && at + 20 <= end) {
                                memcpy(naa, d + at + 4, 16);
                                rc = 0;
                                break;
                        }
        }
        if (t)
                scsi_free_scsi_task(t);
        return rc;
}

static void stamp(uint8_t *buf, uint64_t version, uint32_t blocks)
{
        for (uint32_t i = 0; i < blocks; i++) {
                memset(buf + (size_t)i * BS, (int)(version & 0xff), BS);
                put64(buf + (size_t)i * BS, version);
        }
}

static int xcopy(struct tdm_client *c, const uint8_t naa[16])
{
        uint8_t p[16 + 32 + MAX_SEGMENTS * 28] = {0}, cdb[16] = {0x83};
        uint32_t seg_len = opt.segments * 28;
        p[0] = 1;
        p[1] = 0x18; /* LIST ID USAGE 11b: nothing held */
        p[3] = 32;
        p[8] = (uint8_t)(seg_len >> 24);
        p[9] = (uint8_t)(seg_len >> 16);
        p[10] = (uint8_t)(seg_len >> 8);
        p[11] = (uint8_t)seg_len;
        uint8_t *td = p + 16;
        td[0] = 0xe4;
        td[4] = 0x01;
        td[5] = 0x03;
        td[7] = 16;
        memcpy(td + 8, naa, 16);
        td[30] = BS >> 8;
        for (unsigned i = 0; i < opt.segments; i++) {
                uint8_t *s = p + 48 + i * 28;
                s[0] = 0x02;
                s[3] = 0x18;
                s[10] = (uint8_t)(opt.seg_blocks >> 8);
                s[11] = (uint8_t)opt.seg_blocks;
                put64(s + 12, opt.src + (uint64_t)i * opt.seg_blocks);
                put64(s + 20, opt.dst + (uint64_t)i * opt.seg_blocks);
        }
        uint32_t len = 48 + seg_len;
        cdb[12] = (uint8_t)(len >> 8);
        cdb[13] = (uint8_t)len;
        struct scsi_task *t = tdm_client_run(c, cdb, 16, SCSI_XFER_WRITE, p, len, 0);
        int ok = t && t->status == SCSI_STATUS_GOOD;
        if (t && !ok) {
                int ascq, key = tdm_client_sense(t, &ascq);
                fprintf(stderr, "xcopy: EXTENDED COPY: status %d sense %x/%04x\n", t->status, key,
                        ascq);
        }
        if (t)
                scsi_free_scsi_task(t);
        return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {{"seconds", required_argument, NULL, 's'},
                                                 {"segments", required_argument, NULL, 'n'},
                                                 {"segment-blocks", required_argument, NULL, 'b'},
                                                 {"src", required_argument, NULL, 'S'},
                                                 {"dst", required_argument, NULL, 'D'},
                                                 {"liveness", required_argument, NULL, 'v'},
                                                 {0}};
        int ch;
        while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
                switch (ch) {
                case 's':
                        opt.seconds = (unsigned)atoi(optarg);
                        break;
                case 'n':
                        opt.segments = (unsigned)atoi(optarg);
                        break;
                case 'b':
                        opt.seg_blocks = (unsigned)atoi(optarg);
                        break;
                case 'S':
                        opt.src = strtoull(optarg, NULL, 10);
                        break;
                case 'D':
                        opt.dst = strtoull(optarg, NULL, 10);
                        break;
                case 'v':
                        opt.liveness = (unsigned)atoi(optarg);
                        break;
                default:
                        return 2;
                }
        }
        if (optind != argc - 1 || !opt.segments || opt.segments > MAX_SEGMENTS || !opt.seg_blocks ||
            opt.seg_blocks > 65535) {
                fprintf(stderr,
                        "usage: tdm-xcopy URL [--seconds S] [--segments 1..%d] "
                        "[--segment-blocks 1..65535] [--src LBA] [--dst LBA]\n",
                        MAX_SEGMENTS);
                return 2;
        }
        opt.url = argv[optind];
        struct tdm_client c;
        uint8_t naa[16];
        if (tdm_client_open(&c, opt.url, "iqn.2026-11.io.tandem:xcopy", opt.liveness) < 0 ||
            lun_naa(&c, naa) < 0) {
                fprintf(stderr, "tdm-xcopy: cannot log in or read the LUN's NAA\n");
                return 1;
        }
        uint32_t blocks = opt.segments * opt.seg_blocks;
        uint8_t *buf = malloc((size_t)blocks * BS), cdb[16];
        /* What each destination segment may hold: versions from lo[i] to hi[i]. */
        uint64_t lo[MAX_SEGMENTS] = {0}, hi[MAX_SEGMENTS] = {0};
        uint64_t version = 0, copies = 0, copy_errors = 0, errors = 0;
        stamp(buf, 0, blocks);
        cdb_rw16(cdb, 0x8a, opt.dst, blocks);
        struct scsi_task *t = tdm_client_run(&c, cdb, 16, SCSI_XFER_WRITE, buf, blocks * BS, 0);
        errors += !t || t->status != SCSI_STATUS_GOOD;
        if (t)
                scsi_free_scsi_task(t);
        uint64_t end = tdm_client_now_ns() + opt.seconds * 1000000000ull;
        while (tdm_client_now_ns() < end) {
                stamp(buf, ++version, blocks);
                cdb_rw16(cdb, 0x8a, opt.src, blocks);
                t = tdm_client_run(&c, cdb, 16, SCSI_XFER_WRITE, buf, blocks * BS, 0);
                bool wrote = t && t->status == SCSI_STATUS_GOOD;
                if (t)
                        scsi_free_scsi_task(t);
                if (!wrote) {
                        errors++; /* the source's version is unknown now */
                        break;
                }
                for (unsigned i = 0; i < opt.segments; i++)
                        hi[i] = version;
                if (xcopy(&c, naa) == 0) {
                        copies++;
                        for (unsigned i = 0; i < opt.segments; i++)
                                lo[i] = version;
                } else {
                        copy_errors++;
                }
        }
        cdb_rw16(cdb, 0x88, opt.dst, blocks);
        t = tdm_client_run(&c, cdb, 16, SCSI_XFER_READ, NULL, 0, blocks * BS);
        uint64_t torn = 0, wrong = 0;
        if (!t || t->status != SCSI_STATUS_GOOD || t->datain.size < (int)(blocks * BS)) {
                errors++;
        } else {
                for (unsigned i = 0; i < opt.segments; i++) {
                        const uint8_t *seg = t->datain.data + (size_t)i * opt.seg_blocks * BS;
                        uint64_t v = 0;
                        for (int k = 0; k < 8; k++)
                                v = v << 8 | seg[k];
                        uint8_t want[BS];
                        stamp(want, v, 1);
                        for (uint32_t b = 0; b < opt.seg_blocks; b++)
                                if (memcmp(seg + (size_t)b * BS, want, BS) != 0) {
                                        torn++;
                                        break;
                                }
                        if (v < lo[i] || v > hi[i])
                                wrong++;
                }
        }
        if (t)
                scsi_free_scsi_task(t);
        printf("xcopy: copies=%" PRIu64 " copy_errors=%" PRIu64 " segments=%u torn=%" PRIu64
               " wrong=%" PRIu64 " errors=%" PRIu64
               " max_stall_ms=%.0f reconnects=%u ua_retries=%u\n",
               copies, copy_errors, opt.segments, torn, wrong, errors, (double)c.max_stall_ns / 1e6,
               c.reconnects, c.ua_retries);
        tdm_client_close(&c);
        free(buf);
        return torn || wrong || errors || !copies ? 1 : 0;
}
