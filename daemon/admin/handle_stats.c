/*
 * The handler of stats: per-LUN and per-session counters and latency histograms. The
 * counters are read with relaxed loads while the workers go on counting (a scrape sees
 * each counter whole; counters of one LUN may be a few commands apart).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admin_internal.h"
#include "tandem/registry.h"
#include "tandem/session_info.h"

static uint64_t *hist_copy(struct admin_reply *rep, const struct scsi_io_counters *c)
{
        uint64_t *h = admin_alloc(rep, sizeof(c->lat_hist));
        if (h)
                memcpy(h, c->lat_hist, sizeof(c->lat_hist));
        return h;
}

static Tandem__Admin__LunStats *lun_stats(struct admin_reply *rep, const char *iqn,
                                          struct scsi_lun *lun)
{
        Tandem__Admin__LunStats *ls = admin_alloc(rep, sizeof(*ls));
        struct scsi_io_counters c;
        scsi_lun_stats_read(lun, &c);
        uint64_t *hist = hist_copy(rep, &c);
        if (!ls || !hist)
                return NULL;
        tandem__admin__lun_stats__init(ls);
        ls->iqn = (char *)iqn;
        ls->lun = (uint32_t)lun->id;
        ls->reads = c.reads;
        ls->writes = c.writes;
        ls->other = c.other;
        ls->read_bytes = c.read_bytes;
        ls->write_bytes = c.write_bytes;
        ls->errors = c.errors;
        ls->latency_hist_us = hist;
        ls->n_latency_hist_us = SCSI_LAT_BUCKETS;
        return ls;
}

static Tandem__Admin__SessionStats *session_stats(struct admin_reply *rep,
                                                  const struct iscsi_session_info *s)
{
        Tandem__Admin__SessionStats *ss = admin_alloc(rep, sizeof(*ss));
        uint8_t *isid = admin_alloc(rep, sizeof(s->isid));
        uint64_t *hist = hist_copy(rep, &s->io);
        if (!ss || !isid || !hist)
                return NULL;
        tandem__admin__session_stats__init(ss);
        memcpy(isid, s->isid, sizeof(s->isid));
        ss->id = s->id;
        ss->initiator = (char *)s->initiator;
        ss->target = (char *)s->target;
        ss->isid.data = isid;
        ss->isid.len = sizeof(s->isid);
        ss->tsih = s->tsih;
        ss->peer = (char *)s->peer;
        ss->reads = s->io.reads;
        ss->writes = s->io.writes;
        ss->other = s->io.other;
        ss->read_bytes = s->io.read_bytes;
        ss->write_bytes = s->io.write_bytes;
        ss->errors = s->io.errors;
        ss->latency_hist_us = hist;
        ss->n_latency_hist_us = SCSI_LAT_BUCKETS;
        return ss;
}

static void add_luns(struct admin_reply *rep, Tandem__Admin__Stats *stats, const char *only)
{
        const struct tdm_config *cfg = tdm_registry_config();
        for (size_t i = 0; i < cfg->n_targets; i++) {
                const struct tdm_target_cfg *t = &cfg->targets[i];
                if (only && !tdm_iscsi_name_equal(only, t->iqn))
                        continue;
                struct scsi_target *st = tdm_registry_get_target(t->iqn);
                for (size_t j = 0; st && j < t->n_luns; j++) {
                        struct scsi_lun *lun = scsi_target_get_lun(st, t->luns[j].lun);
                        if (!lun)
                                continue;
                        Tandem__Admin__LunStats *ls = lun_stats(rep, t->iqn, lun);
                        scsi_lun_put(lun);
                        if (!ls)
                                break;
                        stats->luns[stats->n_luns++] = ls;
                }
                if (st)
                        scsi_target_put(st);
        }
}

/* Normal sessions (of target only, when given); rows point into rep->sessions. */
static void add_sessions(struct admin_reply *rep, Tandem__Admin__Stats *stats, const char *only)
{
        size_t n = 0;
        rep->sessions = admin_sessions_get(&n);
        stats->sessions = admin_alloc(rep, n * sizeof(*stats->sessions));
        if (!rep->sessions || !stats->sessions)
                return;
        for (size_t i = 0; i < n; i++) {
                const struct iscsi_session_info *s = &rep->sessions[i];
                if (!s->target[0] || (only && !tdm_iscsi_name_equal(only, s->target)))
                        continue;
                Tandem__Admin__SessionStats *ss = session_stats(rep, s);
                if (!ss)
                        return;
                stats->sessions[stats->n_sessions++] = ss;
        }
}

void admin_stats(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__StatsRequest *req = (const void *)request;
        Tandem__Admin__AdminResponse *r = &rep->r;
        const struct tdm_config *cfg = tdm_registry_config();
        const char *only = req && req->iqn && *req->iqn ? req->iqn : NULL;
        if (only && !tdm_config_find_target((struct tdm_config *)cfg, only)) {
                admin_fail(rep, -ENOENT, "iqn: no target \"%s\"", only);
                return;
        }
        Tandem__Admin__Stats *stats = admin_alloc(rep, sizeof(*stats));
        size_t total = 0;
        for (size_t i = 0; i < cfg->n_targets; i++)
                total += cfg->targets[i].n_luns;
        if (!stats)
                return;
        tandem__admin__stats__init(stats);
        stats->luns = admin_alloc(rep, total * sizeof(*stats->luns));
        if (!stats->luns)
                return;
        r->stats = stats;
        add_luns(rep, stats, only);
        add_sessions(rep, stats, only);
        r->ok = true;
}
