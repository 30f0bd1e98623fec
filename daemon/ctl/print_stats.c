/* tandemctl stats: per-LUN counters and latency percentiles from the histogram. */
#include <inttypes.h>

#include "ctl_internal.h"

/* Upper bound (µs) of the bucket where fraction p of the commands have completed; 0: none. */
static uint64_t percentile_us(const Tandem__Admin__LunStats *s, double p)
{
        uint64_t total = 0, seen = 0;
        for (size_t i = 0; i < s->n_latency_hist_us; i++)
                total += s->latency_hist_us[i];
        if (total == 0)
                return 0;
        for (size_t i = 0; i < s->n_latency_hist_us; i++) {
                seen += s->latency_hist_us[i];
                if ((double)seen >= p * (double)total)
                        return 1ull << i;
        }
        return 1ull << s->n_latency_hist_us;
}

static json_object *stats_json(const Tandem__Admin__Stats *s)
{
        json_object *o = json_object_new_object();
        json_object *luns = json_object_new_array();
        for (size_t i = 0; i < s->n_luns; i++) {
                const Tandem__Admin__LunStats *l = s->luns[i];
                json_object *lj = json_object_new_object();
                json_object_object_add(lj, "target", ctl_jstr(l->iqn));
                json_object_object_add(lj, "lun", json_object_new_int64(l->lun));
                json_object_object_add(lj, "reads", json_object_new_uint64(l->reads));
                json_object_object_add(lj, "writes", json_object_new_uint64(l->writes));
                json_object_object_add(lj, "other", json_object_new_uint64(l->other));
                json_object_object_add(lj, "read_bytes", json_object_new_uint64(l->read_bytes));
                json_object_object_add(lj, "write_bytes", json_object_new_uint64(l->write_bytes));
                json_object_object_add(lj, "errors", json_object_new_uint64(l->errors));
                json_object_object_add(lj, "p50_us_below",
                                       json_object_new_uint64(percentile_us(l, 0.5)));
                json_object_object_add(lj, "p99_us_below",
                                       json_object_new_uint64(percentile_us(l, 0.99)));
                json_object *h = json_object_new_array();
                for (size_t j = 0; j < l->n_latency_hist_us; j++)
                        json_object_array_add(h, json_object_new_uint64(l->latency_hist_us[j]));
                json_object_object_add(lj, "latency_hist_us", h);
                json_object_array_add(luns, lj);
        }
        json_object_object_add(o, "luns", luns);
        return o;
}

static void stats_text(FILE *out, const Tandem__Admin__Stats *s)
{
        if (s->n_luns == 0) {
                fprintf(out, "no LUNs\n");
                return;
        }
        fprintf(out, "%-44s %3s %12s %12s %10s %10s %8s %9s %9s\n", "TARGET", "LUN", "READS",
                "WRITES", "READ", "WRITTEN", "ERRORS", "P50<us", "P99<us");
        for (size_t i = 0; i < s->n_luns; i++) {
                const Tandem__Admin__LunStats *l = s->luns[i];
                char rd[32], wr[32];
                ctl_human_size(rd, sizeof(rd), l->read_bytes);
                ctl_human_size(wr, sizeof(wr), l->write_bytes);
                fprintf(out,
                        "%-44s %3u %12" PRIu64 " %12" PRIu64 " %10s %10s %8" PRIu64 " %9" PRIu64
                        " %9" PRIu64 "\n",
                        l->iqn, l->lun, l->reads, l->writes, rd, wr, l->errors,
                        percentile_us(l, 0.5), percentile_us(l, 0.99));
        }
}

bool admin_print_stats(FILE *out, const Tandem__Admin__AdminRequest *q,
                       const Tandem__Admin__AdminResponse *r, bool json)
{
        (void)q;
        if (!r->stats)
                return false;
        if (json)
                ctl_print_json(out, stats_json(r->stats));
        else
                stats_text(out, r->stats);
        return true;
}
