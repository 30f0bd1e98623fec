/* The process clock: CLOCK_MONOTONIC in nanoseconds (timeouts, latencies, rates). */
#ifndef TANDEM_CLOCK_H
#define TANDEM_CLOCK_H

#include <stdint.h>
#include <time.h>

uint64_t tdm_now_ns(void);

/* The moment ms milliseconds from now on clock (the clock the condition variable waits on),
 * as pthread_cond_timedwait takes it. */
struct timespec tdm_deadline(clockid_t clock, unsigned ms);

#endif
