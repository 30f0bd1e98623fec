/* The process clock. tdm_now_ns stays alone in this object: a fuzz target (fuzz_pdu_rx)
 * links its own, deterministic one in its place. */
#include <time.h>

#include "tandem/clock.h"

uint64_t tdm_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
