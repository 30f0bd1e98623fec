/* Absolute timeouts for pthread_cond_timedwait (tandem/clock.h). */
#include <time.h>

#include "tandem/clock.h"

struct timespec tdm_deadline(clockid_t clock, unsigned ms)
{
        struct timespec ts;
        clock_gettime(clock, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}
