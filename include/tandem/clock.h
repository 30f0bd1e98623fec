/* The process clock: CLOCK_MONOTONIC in nanoseconds (timeouts, latencies, rates). */
#ifndef TANDEM_CLOCK_H
#define TANDEM_CLOCK_H

#include <stdint.h>

uint64_t tdm_now_ns(void);

#endif
