/*
 * Threads for work that may block. The pool grows while every thread is busy (up to
 * POOL_MAX), so one stalled disk holds only the threads waiting on it, not the queue of
 * everyone else; idle threads above POOL_KEEP end after POOL_IDLE_S seconds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "tandem/clock.h"
#include "tandem/log.h"
#include "tandem/net.h"

#define POOL_MAX    128
#define POOL_KEEP   4
#define POOL_IDLE_S 30

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t pool_gone = PTHREAD_COND_INITIALIZER;
static struct net_work *queue_head, *queue_tail;
static unsigned n_threads, n_idle, n_queued;
static bool shutting_down;

static void work_finish(struct net_post *p)
{
        struct net_work *w = (struct net_work *)p;
        w->done(w);
}

/* Takes the next job, or NULL when this thread should end (lock held). */
static struct net_work *take_locked(void)
{
        while (!queue_head) {
                if (shutting_down)
                        return NULL;
                struct timespec until = tdm_deadline(CLOCK_REALTIME, POOL_IDLE_S * 1000u);
                n_idle++;
                int rc = pthread_cond_timedwait(&pool_cond, &pool_lock, &until);
                n_idle--;
                if (rc == ETIMEDOUT && !queue_head && n_threads > POOL_KEEP)
                        return NULL;
        }
        struct net_work *w = queue_head;
        n_queued--;
        queue_head = w->next;
        if (!queue_head)
                queue_tail = NULL;
        return w;
}

static void *pool_main(void *arg)
{
        (void)arg;
        pthread_mutex_lock(&pool_lock);
        for (;;) {
                struct net_work *w = take_locked();
                if (!w)
                        break;
                pthread_mutex_unlock(&pool_lock);
                w->run(w);
                w->post.fn = work_finish;
                net_post_to(w->loop, &w->post);
                pthread_mutex_lock(&pool_lock);
        }
        n_threads--;
        pthread_cond_broadcast(&pool_gone);
        pthread_mutex_unlock(&pool_lock);
        return NULL;
}

static void grow_locked(void)
{
        /* An idle thread counts as idle until it wakes: grow unless one waits for each job. */
        if (n_queued <= n_idle || n_threads >= POOL_MAX)
                return;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        int rc = pthread_create(&t, &attr, pool_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc == 0) {
                n_threads++;
                pthread_setname_np(t, "tandem-pool");
        } else if (n_threads == 0) {
                log_err("pool: cannot start a thread: %s", strerror(rc));
        }
}

void net_pool_submit(struct net_work *w)
{
        w->loop = net_loop_current();
        w->next = NULL;
        pthread_mutex_lock(&pool_lock);
        shutting_down = false;
        if (queue_tail)
                queue_tail->next = w;
        else
                queue_head = w;
        queue_tail = w;
        n_queued++;
        grow_locked();
        pthread_cond_signal(&pool_cond);
        pthread_mutex_unlock(&pool_lock);
}

void net_pool_shutdown(void)
{
        pthread_mutex_lock(&pool_lock);
        shutting_down = true;
        pthread_cond_broadcast(&pool_cond);
        while (n_threads > 0)
                pthread_cond_wait(&pool_gone, &pool_lock);
        pthread_mutex_unlock(&pool_lock);
}
