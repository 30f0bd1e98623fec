/*
 * Rates over an interval from two snapshots of cumulative I/O counters (tandemctl stats
 * --interval): operations and bytes per second, and latency percentiles from the
 * difference of two latency histograms. Pure functions (daemon/ctl/rates.c).
 */
#ifndef TANDEM_IO_RATES_H
#define TANDEM_IO_RATES_H

#include <stddef.h>
#include <stdint.h>

/* Cumulative counters as the daemon reports them (LunStats, SessionStats). */
struct tdm_io_totals {
        uint64_t reads, writes, other, read_bytes, write_bytes, errors;
        const uint64_t *hist; /* bucket i: latency < 2^i us (and >= 2^(i-1)); last: the rest */
        size_t n_hist;
};

struct tdm_io_rates {
        uint64_t reads, writes, other, errors, read_bytes, write_bytes; /* in the interval */
        double read_iops, write_iops, iops; /* iops: reads, writes and other */
        double read_bps, write_bps;         /* bytes per second */
        double p50_us, p99_us;              /* latency percentiles; -1: no command */
};

/*
 * Quantile q (0..1) of the latencies a histogram counts, in microseconds, interpolated
 * linearly inside the bucket the q-th command falls in (bucket i spans [2^(i-1), 2^i), bucket
 * 0 [0, 1)); the last bucket has no upper end and gives its lower one. -1 when it is empty.
 */
double tdm_hist_quantile_us(const uint64_t *counts, size_t n, double q);

/*
 * The rates between before (NULL: all zeros, e.g. a session that began in the interval) and
 * after, seconds apart. 0; -EINVAL when seconds <= 0 or the histograms differ in length;
 * -ERANGE when a counter went backwards (not the same LUN or session).
 */
int tdm_io_rates(const struct tdm_io_totals *before, const struct tdm_io_totals *after,
                 double seconds, struct tdm_io_rates *out);

#endif
