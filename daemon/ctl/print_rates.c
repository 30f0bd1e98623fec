/*
 * tandemctl stats --interval: per-LUN and per-session rates (IOPS, bytes per second,
 * latency percentiles) from two answers taken seconds apart.
 */
#include <inttypes.h>
#include <string.h>

#include "ctl_internal.h"
#include "tandem/io_rates.h"

static struct tdm_io_totals lun_totals(const Tandem__Admin__LunStats *l)
{
        return (struct tdm_io_totals){l->reads,           l->writes,           l->other,
                                      l->read_bytes,      l->write_bytes,      l->errors,
                                      l->latency_hist_us, l->n_latency_hist_us};
}

static struct tdm_io_totals session_totals(const Tandem__Admin__SessionStats *s)
{
        return (struct tdm_io_totals){s->reads,           s->writes,           s->other,
                                      s->read_bytes,      s->write_bytes,      s->errors,
                                      s->latency_hist_us, s->n_latency_hist_us};
}

static const Tandem__Admin__LunStats *find_lun(const Tandem__Admin__Stats *s, const char *iqn,
                                               uint32_t lun)
{
        for (size_t i = 0; i < s->n_luns; i++)
                if (s->luns[i]->lun == lun && strcmp(s->luns[i]->iqn, iqn) == 0)
                        return s->luns[i];
        return NULL;
}

static const Tandem__Admin__SessionStats *find_session(const Tandem__Admin__Stats *s, uint64_t id)
{
        for (size_t i = 0; i < s->n_sessions; i++)
                if (s->sessions[i]->id == id)
                        return s->sessions[i];
        return NULL;
}

static json_object *jlat(double us)
{
        return us < 0 ? NULL : json_object_new_double(us);
}

static void rates_json_add(json_object *o, const struct tdm_io_rates *r)
{
        json_object_object_add(o, "reads", json_object_new_uint64(r->reads));
        json_object_object_add(o, "writes", json_object_new_uint64(r->writes));
        json_object_object_add(o, "other", json_object_new_uint64(r->other));
        json_object_object_add(o, "errors", json_object_new_uint64(r->errors));
        json_object_object_add(o, "read_bytes", json_object_new_uint64(r->read_bytes));
        json_object_object_add(o, "write_bytes", json_object_new_uint64(r->write_bytes));
        json_object_object_add(o, "iops", json_object_new_double(r->iops));
        json_object_object_add(o, "read_iops", json_object_new_double(r->read_iops));
        json_object_object_add(o, "write_iops", json_object_new_double(r->write_iops));
        json_object_object_add(o, "read_bps", json_object_new_double(r->read_bps));
        json_object_object_add(o, "write_bps", json_object_new_double(r->write_bps));
        json_object_object_add(o, "p50_us", jlat(r->p50_us));
        json_object_object_add(o, "p99_us", jlat(r->p99_us));
}

static void lat_text(char *out, size_t n, double us)
{
        if (us < 0)
                snprintf(out, n, "-");
        else
                snprintf(out, n, "%.0f", us);
}

static void rates_text(FILE *out, const char *name, const char *peer, const struct tdm_io_rates *r)
{
        char p50[32], p99[32];
        lat_text(p50, sizeof(p50), r->p50_us);
        lat_text(p99, sizeof(p99), r->p99_us);
        fprintf(out, "%-52s %-22s %9.1f %9.1f %9.2f %9.2f %9s %9s\n", name, peer, r->read_iops,
                r->write_iops, r->read_bps / 1e6, r->write_bps / 1e6, p50, p99);
}

static void header(FILE *out, const char *what, const char *peer)
{
        fprintf(out, "%-52s %-22s %9s %9s %9s %9s %9s %9s\n", what, peer, "READ/s", "WRITE/s",
                "RD MB/s", "WR MB/s", "P50 us", "P99 us");
}

int admin_print_stats_rates(FILE *out, const Tandem__Admin__Stats *a, const Tandem__Admin__Stats *b,
                            double seconds, bool json)
{
        struct tdm_io_rates r;
        json_object *o = json ? json_object_new_object() : NULL;
        json_object *luns = json ? json_object_new_array() : NULL;
        json_object *sessions = json ? json_object_new_array() : NULL;
        if (json)
                json_object_object_add(o, "interval_s", json_object_new_double(seconds));
        else
                fprintf(out, "interval %.3f s\n", seconds);
        if (!json && b->n_luns)
                header(out, "TARGET LUN", "");
        for (size_t i = 0; i < b->n_luns; i++) {
                const Tandem__Admin__LunStats *l = b->luns[i];
                const Tandem__Admin__LunStats *before = find_lun(a, l->iqn, l->lun);
                struct tdm_io_totals tb = before ? lun_totals(before) : (struct tdm_io_totals){0};
                struct tdm_io_totals ta = lun_totals(l);
                if (tdm_io_rates(before ? &tb : NULL, &ta, seconds, &r) < 0)
                        continue; /* the LUN was replaced in between */
                if (json) {
                        json_object *lj = json_object_new_object();
                        json_object_object_add(lj, "target", ctl_jstr(l->iqn));
                        json_object_object_add(lj, "lun", json_object_new_int64(l->lun));
                        rates_json_add(lj, &r);
                        json_object_array_add(luns, lj);
                } else {
                        char name[300];
                        snprintf(name, sizeof(name), "%s %u", l->iqn, l->lun);
                        rates_text(out, name, "", &r);
                }
        }
        if (!json && b->n_sessions)
                header(out, "SESSION (INITIATOR)", "PEER");
        for (size_t i = 0; i < b->n_sessions; i++) {
                const Tandem__Admin__SessionStats *s = b->sessions[i];
                const Tandem__Admin__SessionStats *before = find_session(a, s->id);
                struct tdm_io_totals tb =
                    before ? session_totals(before) : (struct tdm_io_totals){0};
                struct tdm_io_totals ta = session_totals(s);
                if (tdm_io_rates(before ? &tb : NULL, &ta, seconds, &r) < 0)
                        continue;
                if (json) {
                        json_object *sj = json_object_new_object();
                        json_object_object_add(sj, "id", json_object_new_uint64(s->id));
                        json_object_object_add(sj, "initiator", ctl_jstr(s->initiator));
                        json_object_object_add(sj, "target", ctl_jstr(s->target));
                        json_object_object_add(sj, "tsih", json_object_new_int64(s->tsih));
                        json_object_object_add(sj, "peer", ctl_jstr(s->peer));
                        rates_json_add(sj, &r);
                        json_object_array_add(sessions, sj);
                } else {
                        rates_text(out, s->initiator, s->peer, &r);
                }
        }
        if (json) {
                json_object_object_add(o, "luns", luns);
                json_object_object_add(o, "sessions", sessions);
                ctl_print_json(out, o);
        } else if (!b->n_luns && !b->n_sessions) {
                fprintf(out, "no LUNs\n");
        }
        return 0;
}
