/*
 * tdm-ats: what ESXi does with COMPARE AND WRITE on a VMFS datastore, by several hosts at once
 * through a failover. Each host (its own session and initiator name, its own thread) updates
 * its heartbeat block with COMPARE AND WRITE (old record -> next record: only it writes there,
 * so a miscompare is false, the failure that makes ESXi drop the datastore), and takes and
 * gives back a shared lock block (free -> its record -> free). A lock held by two hosts at
 * once, or taken from its holder, is the other failure.
 *
 * Usage: tdm-ats URL [--hosts N] [--seconds S] [--lba LBA] [--liveness S]
 * Prints: "ats: hosts=N heartbeats=N locks=N false_miscompares=N double_holds=N
 *          lost_locks=N errors=N max_stall_ms=N reconnects=N ua_retries=N"; exits 1 on any
 *          failure (a command sent again after a unit attention is none).
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

#include "tdm_client.h"

#define BS        512
#define MAX_HOSTS 8

struct opts {
        const char *url;
        unsigned hosts, seconds, liveness;
        uint64_t lba; /* lock block; heartbeats follow it */
};

static struct opts opt = {.hosts = 2, .seconds = 12, .liveness = 2, .lba = 400000};
static atomic_int holders;
static atomic_uint_fast64_t n_heartbeats, n_locks, false_miscompares, double_holds, lost_locks,
    errors, max_stall_ns, reconnects, ua_retries;

/* A host's record: who, which update. */
static void record(uint8_t *b, unsigned host, uint64_t seq)
{
        memset(b, 0, BS);
        snprintf((char *)b, BS, "tdm-ats host %u seq %" PRIu64, host, seq);
}

enum caw_result { CAW_GOOD, CAW_MISCOMPARE, CAW_ERROR };

static enum caw_result caw(struct tdm_client *c, uint64_t lba, const uint8_t *old,
                           const uint8_t *new)
{
        uint8_t out[2 * BS], cdb[16] = {0x89};
        memcpy(out, old, BS);
        memcpy(out + BS, new, BS);
        for (int i = 0; i < 8; i++)
                cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
        cdb[13] = 1;
        struct scsi_task *t = tdm_client_run(c, cdb, 16, SCSI_XFER_WRITE, out, sizeof(out), 0);
        if (!t)
                return CAW_ERROR;
        int ascq, key = tdm_client_sense(t, &ascq);
        enum caw_result r = t->status == SCSI_STATUS_GOOD ? CAW_GOOD
                            : key == 0x0e                 ? CAW_MISCOMPARE
                                                          : CAW_ERROR;
        if (r == CAW_ERROR)
                fprintf(stderr, "ats: CAW at %" PRIu64 ": status %d sense %x/%04x\n", lba,
                        t->status, key, ascq);
        scsi_free_scsi_task(t);
        return r;
}

static int write_block(struct tdm_client *c, uint64_t lba, const uint8_t *b)
{
        uint8_t cdb[16] = {0x8a};
        for (int i = 0; i < 8; i++)
                cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
        cdb[13] = 1;
        struct scsi_task *t = tdm_client_run(c, cdb, 16, SCSI_XFER_WRITE, b, BS, 0);
        int ok = t && t->status == SCSI_STATUS_GOOD;
        if (t)
                scsi_free_scsi_task(t);
        return ok ? 0 : -1;
}

static void *host_main(void *arg)
{
        unsigned host = (unsigned)(uintptr_t)arg;
        char initiator[128];
        snprintf(initiator, sizeof(initiator), "iqn.2026-11.io.tandem:ats-host-%u", host);
        struct tdm_client c;
        if (tdm_client_open(&c, opt.url, initiator, opt.liveness) < 0) {
                atomic_fetch_add(&errors, 1);
                return NULL;
        }
        uint64_t hb_lba = opt.lba + 1 + host, seq = 0;
        uint8_t hb[BS], next[BS], mine[BS], free_rec[BS] = {0};
        record(hb, host, seq);
        if (write_block(&c, hb_lba, hb) < 0)
                atomic_fetch_add(&errors, 1);
        uint64_t end = tdm_client_now_ns() + opt.seconds * 1000000000ull;
        while (tdm_client_now_ns() < end) {
                record(next, host, ++seq);
                enum caw_result r = caw(&c, hb_lba, hb, next);
                if (r == CAW_GOOD) {
                        memcpy(hb, next, BS);
                        atomic_fetch_add(&n_heartbeats, 1);
                } else if (r == CAW_MISCOMPARE) {
                        atomic_fetch_add(&false_miscompares, 1);
                        break; /* ESXi: lost access to the volume */
                } else {
                        atomic_fetch_add(&errors, 1);
                }
                record(mine, host, seq);
                if (caw(&c, opt.lba, free_rec, mine) != CAW_GOOD)
                        continue; /* held by another host (or an error, counted) */
                if (atomic_fetch_add(&holders, 1) != 0)
                        atomic_fetch_add(&double_holds, 1);
                atomic_fetch_add(&n_locks, 1);
                usleep(5000);
                atomic_fetch_sub(&holders, 1);
                enum caw_result rel = caw(&c, opt.lba, mine, free_rec);
                if (rel == CAW_MISCOMPARE)
                        atomic_fetch_add(&lost_locks, 1);
                else if (rel == CAW_ERROR)
                        atomic_fetch_add(&errors, 1);
        }
        uint64_t stall = c.max_stall_ns, cur = atomic_load(&max_stall_ns);
        while (stall > cur && !atomic_compare_exchange_weak(&max_stall_ns, &cur, stall))
                ;
        atomic_fetch_add(&reconnects, c.reconnects);
        atomic_fetch_add(&ua_retries, c.ua_retries);
        tdm_client_close(&c);
        return NULL;
}

int main(int argc, char **argv)
{
        static const struct option lo[] = {{"hosts", required_argument, NULL, 'h'},
                                           {"seconds", required_argument, NULL, 's'},
                                           {"lba", required_argument, NULL, 'l'},
                                           {"liveness", required_argument, NULL, 'v'},
                                           {0}};
        int ch;
        while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
                if (ch == 'h')
                        opt.hosts = (unsigned)atoi(optarg);
                else if (ch == 's')
                        opt.seconds = (unsigned)atoi(optarg);
                else if (ch == 'l')
                        opt.lba = strtoull(optarg, NULL, 10);
                else if (ch == 'v')
                        opt.liveness = (unsigned)atoi(optarg);
                else
                        return 2;
        }
        if (optind != argc - 1 || opt.hosts < 1 || opt.hosts > MAX_HOSTS) {
                fprintf(stderr,
                        "usage: tdm-ats URL [--hosts 1..%d] [--seconds S] [--lba LBA] "
                        "[--liveness S]\n",
                        MAX_HOSTS);
                return 2;
        }
        opt.url = argv[optind];
        /* The lock starts free. */
        struct tdm_client c;
        uint8_t free_rec[BS] = {0};
        if (tdm_client_open(&c, opt.url, "iqn.2026-11.io.tandem:ats-setup", 0) < 0 ||
            write_block(&c, opt.lba, free_rec) < 0) {
                fprintf(stderr, "tdm-ats: cannot set the lock block up\n");
                return 1;
        }
        tdm_client_close(&c);
        pthread_t t[MAX_HOSTS];
        for (unsigned i = 0; i < opt.hosts; i++)
                pthread_create(&t[i], NULL, host_main, (void *)(uintptr_t)i);
        for (unsigned i = 0; i < opt.hosts; i++)
                pthread_join(t[i], NULL);
        uint64_t bad = atomic_load(&false_miscompares) + atomic_load(&double_holds) +
                       atomic_load(&lost_locks) + atomic_load(&errors);
        printf("ats: hosts=%u heartbeats=%" PRIu64 " locks=%" PRIu64 " false_miscompares=%" PRIu64
               " double_holds=%" PRIu64 " lost_locks=%" PRIu64 " errors=%" PRIu64
               " max_stall_ms=%.0f reconnects=%" PRIu64 " ua_retries=%" PRIu64 "\n",
               opt.hosts, (uint64_t)atomic_load(&n_heartbeats), (uint64_t)atomic_load(&n_locks),
               (uint64_t)atomic_load(&false_miscompares), (uint64_t)atomic_load(&double_holds),
               (uint64_t)atomic_load(&lost_locks), (uint64_t)atomic_load(&errors),
               (double)atomic_load(&max_stall_ns) / 1e6, (uint64_t)atomic_load(&reconnects),
               (uint64_t)atomic_load(&ua_retries));
        return bad || !atomic_load(&n_heartbeats) ? 1 : 0;
}
