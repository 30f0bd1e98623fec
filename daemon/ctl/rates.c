/* Rates and latency percentiles over an interval from two counter snapshots. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "tandem/io_rates.h"

#define MAX_BUCKETS 64

double tdm_hist_quantile_us(const uint64_t *counts, size_t n, double q)
{
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
                total += counts[i];
        if (total == 0 || n == 0)
                return -1;
        if (q < 0)
                q = 0;
        if (q > 1)
                q = 1;
        double rank = q * (double)total, seen = 0;
        for (size_t i = 0; i < n; i++) {
                if (counts[i] == 0)
                        continue;
                double lower = i == 0 ? 0 : (double)(1ull << (i - 1));
                if (i == n - 1 && n > 1)
                        return lower; /* open-ended: its lower bound */
                double upper = (double)(1ull << i);
                if (seen + (double)counts[i] >= rank)
                        return lower + (upper - lower) * (rank - seen) / (double)counts[i];
                seen += (double)counts[i];
        }
        return (double)(1ull << (n - 1)); /* not reached: rank <= total */
}

static bool delta(uint64_t a, uint64_t b, uint64_t *out)
{
        if (b < a)
                return false;
        *out = b - a;
        return true;
}

int tdm_io_rates(const struct tdm_io_totals *before, const struct tdm_io_totals *after,
                 double seconds, struct tdm_io_rates *out)
{
        static const struct tdm_io_totals zero;
        const struct tdm_io_totals *a = before ? before : &zero;
        if (!(seconds > 0) || after->n_hist > MAX_BUCKETS ||
            (before && before->n_hist != after->n_hist))
                return -EINVAL;
        memset(out, 0, sizeof(*out));
        uint64_t hist[MAX_BUCKETS];
        if (!delta(a->reads, after->reads, &out->reads) ||
            !delta(a->writes, after->writes, &out->writes) ||
            !delta(a->other, after->other, &out->other) ||
            !delta(a->errors, after->errors, &out->errors) ||
            !delta(a->read_bytes, after->read_bytes, &out->read_bytes) ||
            !delta(a->write_bytes, after->write_bytes, &out->write_bytes))
                return -ERANGE;
        for (size_t i = 0; i < after->n_hist; i++)
                if (!delta(before ? before->hist[i] : 0, after->hist[i], &hist[i]))
                        return -ERANGE;
        out->read_iops = (double)out->reads / seconds;
        out->write_iops = (double)out->writes / seconds;
        out->iops = (double)(out->reads + out->writes + out->other) / seconds;
        out->read_bps = (double)out->read_bytes / seconds;
        out->write_bps = (double)out->write_bytes / seconds;
        out->p50_us = tdm_hist_quantile_us(hist, after->n_hist, 0.5);
        out->p99_us = tdm_hist_quantile_us(hist, after->n_hist, 0.99);
        return 0;
}
