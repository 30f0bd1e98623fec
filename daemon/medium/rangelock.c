/*
 * LBA range locks of a medium: held ranges in a list, waiters in a FIFO. A request is
 * granted when it overlaps no held range and no earlier waiter it conflicts with, so
 * waiters are served in arrival order among themselves. One mutex per medium, held only
 * for list work; the common case (nothing overlapping) is one lock and one unlock.
 */
#include <pthread.h>

#include "tandem/medium.h"

static bool conflict(const struct tdm_range *a, const struct tdm_range *b)
{
        if (a->shared && b->shared)
                return false;
        return a->off < b->off + b->len && b->off < a->off + a->len;
}

static bool conflicts_held(const struct tdm_range_table *t, const struct tdm_range *r)
{
        for (const struct tdm_range *h = t->held; h; h = h->next)
                if (conflict(h, r))
                        return true;
        return false;
}

/* Any waiter before `before` (NULL: all) that r conflicts with. */
static bool conflicts_waiting(const struct tdm_range_table *t, const struct tdm_range *r,
                              const struct tdm_range *before)
{
        for (const struct tdm_range *w = t->wait_head; w && w != before; w = w->next)
                if (conflict(w, r))
                        return true;
        return false;
}

static void held_push(struct tdm_range_table *t, struct tdm_range *r)
{
        r->prev = NULL;
        r->next = t->held;
        if (t->held)
                t->held->prev = r;
        t->held = r;
}

static void held_unlink(struct tdm_range_table *t, struct tdm_range *r)
{
        if (r->prev)
                r->prev->next = r->next;
        else
                t->held = r->next;
        if (r->next)
                r->next->prev = r->prev;
}

static void wait_push(struct tdm_range_table *t, struct tdm_range *r)
{
        r->waiting = true;
        r->next = NULL;
        r->prev = t->wait_tail;
        if (t->wait_tail)
                t->wait_tail->next = r;
        else
                t->wait_head = r;
        t->wait_tail = r;
}

static void wait_unlink(struct tdm_range_table *t, struct tdm_range *r)
{
        if (r->prev)
                r->prev->next = r->next;
        else
                t->wait_head = r->next;
        if (r->next)
                r->next->prev = r->prev;
        else
                t->wait_tail = r->prev;
        r->waiting = false;
}

/* Enqueues or grants; true when granted now (table locked). */
static bool lock_locked(struct tdm_range_table *t, struct tdm_range *r)
{
        if (r->len == 0)
                return true;
        if (!conflicts_held(t, r) && !conflicts_waiting(t, r, NULL)) {
                held_push(t, r);
                return true;
        }
        wait_push(t, r);
        return false;
}

static void granted_post(struct net_post *p)
{
        struct tdm_range *r = (struct tdm_range *)((char *)p - offsetof(struct tdm_range, post));
        r->granted(r);
}

/* Grants every waiter that may go now; their callbacks run after the table is unlocked. */
static struct tdm_range *grant_waiters_locked(struct tdm_range_table *t)
{
        struct tdm_range *granted = NULL;
        struct tdm_range *w = t->wait_head;
        while (w) {
                struct tdm_range *next = w->next;
                if (!conflicts_held(t, w) && !conflicts_waiting(t, w, w)) {
                        wait_unlink(t, w);
                        held_push(t, w);
                        if (w->waiter) {
                                pthread_cond_signal(w->waiter);
                        } else {
                                w->post.next = (struct net_post *)granted;
                                granted = w;
                        }
                }
                w = next;
        }
        return granted;
}

bool tdm_range_lock(struct tdm_medium *m, struct tdm_range *r)
{
        r->loop = net_loop_current();
        r->waiter = NULL;
        pthread_mutex_lock(&m->ranges.lock);
        bool now = lock_locked(&m->ranges, r);
        pthread_mutex_unlock(&m->ranges.lock);
        return now;
}

void tdm_range_lock_wait(struct tdm_medium *m, struct tdm_range *r)
{
        pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
        r->loop = NULL;
        r->waiter = &cond;
        pthread_mutex_lock(&m->ranges.lock);
        if (!lock_locked(&m->ranges, r))
                while (r->waiting)
                        pthread_cond_wait(&cond, &m->ranges.lock);
        r->waiter = NULL;
        pthread_mutex_unlock(&m->ranges.lock);
        pthread_cond_destroy(&cond);
}

void tdm_range_unlock(struct tdm_medium *m, struct tdm_range *r)
{
        if (r->len == 0)
                return;
        pthread_mutex_lock(&m->ranges.lock);
        held_unlink(&m->ranges, r);
        struct tdm_range *granted = m->ranges.wait_head ? grant_waiters_locked(&m->ranges) : NULL;
        pthread_mutex_unlock(&m->ranges.lock);
        while (granted) {
                struct tdm_range *g = granted;
                granted = (struct tdm_range *)g->post.next;
                g->post.fn = granted_post;
                net_post_to(g->loop, &g->post);
        }
}
