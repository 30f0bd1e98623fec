/*
 * One event loop per thread: epoll over the handlers' descriptors, an eventfd that wakes it
 * for posted work, a tick, and hooks at the end of each round and at exit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tandem/clock.h"
#include "tandem/log.h"
#include "tandem/net.h"

#define EV_BATCH        64
#define DEFAULT_WAIT_MS 1000

struct loop_hook {
        void (*fn)(void *arg);
        void *arg;
};

struct net_loop {
        char name[32];
        pthread_t thread;
        bool started;
        int epfd;
        struct net_handler wake;
        atomic_bool stop;

        pthread_mutex_t post_lock;
        struct net_post *post_head, *post_tail;
        bool wake_pending; /* under post_lock: one eventfd write per batch of posts */

        /* The round in progress: net_loop_del clears entries of a handler it removes. */
        struct epoll_event *batch;
        int batch_n;

        unsigned tick_ms;
        void (*tick_fn)(void *arg);
        void *tick_arg;
        uint64_t last_tick_ns;

        struct loop_hook exit_hooks[NET_LOOP_EXIT_HOOKS];
        unsigned n_exit_hooks;
        struct loop_hook round_hooks[NET_LOOP_ROUND_HOOKS];
        unsigned n_round_hooks;
};

static _Thread_local struct net_loop *current_loop;

struct net_loop *net_loop_current(void)
{
        return current_loop;
}

const char *net_loop_name(const struct net_loop *l)
{
        return l->name;
}

static void post_run_all(struct net_loop *l)
{
        pthread_mutex_lock(&l->post_lock);
        struct net_post *p = l->post_head;
        l->post_head = l->post_tail = NULL;
        l->wake_pending = false;
        pthread_mutex_unlock(&l->post_lock);
        while (p) {
                struct net_post *next = p->next;
                p->fn(p);
                p = next;
        }
}

static void on_wake(struct net_handler *h, uint32_t events)
{
        (void)events;
        uint64_t v;
        if (read(h->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                log_warn("loop wake read: %s", strerror(errno));
}

struct net_loop *net_loop_new(const char *name)
{
        struct net_loop *l = calloc(1, sizeof(*l));
        if (!l)
                return NULL;
        snprintf(l->name, sizeof(l->name), "%s", name);
        pthread_mutex_init(&l->post_lock, NULL);
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        l->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        l->wake.fn = on_wake;
        if (l->epfd < 0 || l->wake.fd < 0 || net_loop_add(l, &l->wake, EPOLLIN) < 0) {
                if (l->epfd >= 0)
                        close(l->epfd);
                if (l->wake.fd >= 0)
                        close(l->wake.fd);
                pthread_mutex_destroy(&l->post_lock);
                free(l);
                return NULL;
        }
        return l;
}

int net_loop_add(struct net_loop *l, struct net_handler *h, uint32_t events)
{
        struct epoll_event ev = {.events = events, .data.ptr = h};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, h->fd, &ev) < 0)
                return -errno;
        h->events = events;
        return 0;
}

int net_loop_mod(struct net_loop *l, struct net_handler *h, uint32_t events)
{
        if (h->events == events)
                return 0;
        struct epoll_event ev = {.events = events, .data.ptr = h};
        if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, h->fd, &ev) < 0)
                return -errno;
        h->events = events;
        return 0;
}

void net_loop_del(struct net_loop *l, struct net_handler *h)
{
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, h->fd, NULL);
        for (int i = 0; i < l->batch_n; i++)
                if (l->batch[i].data.ptr == h)
                        l->batch[i].data.ptr = NULL;
}

void net_loop_post(struct net_loop *l, struct net_post *p)
{
        p->next = NULL;
        pthread_mutex_lock(&l->post_lock);
        if (l->post_tail)
                l->post_tail->next = p;
        else
                l->post_head = p;
        l->post_tail = p;
        bool wake = !l->wake_pending;
        l->wake_pending = true;
        pthread_mutex_unlock(&l->post_lock);
        /* The loop takes the whole list when it wakes: one write per batch is enough. */
        uint64_t one = 1;
        if (wake && write(l->wake.fd, &one, sizeof(one)) < 0)
                log_warn("loop %s wake: %s", l->name, strerror(errno));
}

void net_post_to(struct net_loop *l, struct net_post *p)
{
        if (l)
                net_loop_post(l, p);
        else
                p->fn(p);
}

void net_loop_set_tick(struct net_loop *l, unsigned ms, void (*fn)(void *arg), void *arg)
{
        l->tick_ms = ms;
        l->tick_fn = fn;
        l->tick_arg = arg;
        l->last_tick_ns = tdm_now_ns();
}

int net_loop_on_exit(struct net_loop *l, void (*fn)(void *arg), void *arg)
{
        if (l->n_exit_hooks == NET_LOOP_EXIT_HOOKS)
                return -ENOSPC;
        l->exit_hooks[l->n_exit_hooks++] = (struct loop_hook){fn, arg};
        return 0;
}

int net_loop_at_round_end(struct net_loop *l, void (*fn)(void *arg), void *arg)
{
        for (unsigned i = 0; i < l->n_round_hooks; i++)
                if (l->round_hooks[i].fn == fn && l->round_hooks[i].arg == arg)
                        return 0;
        if (l->n_round_hooks == NET_LOOP_ROUND_HOOKS)
                return -ENOSPC;
        l->round_hooks[l->n_round_hooks++] = (struct loop_hook){fn, arg};
        return 0;
}

static void run_round_hooks(struct net_loop *l)
{
        /* A hook may queue work that registers hooks again: those run next round. */
        while (l->n_round_hooks) {
                struct loop_hook hooks[NET_LOOP_ROUND_HOOKS];
                unsigned n = l->n_round_hooks;
                memcpy(hooks, l->round_hooks, n * sizeof(hooks[0]));
                l->n_round_hooks = 0;
                for (unsigned i = 0; i < n; i++)
                        hooks[i].fn(hooks[i].arg);
        }
}

static void run_tick(struct net_loop *l)
{
        if (!l->tick_fn)
                return;
        uint64_t now = tdm_now_ns();
        if (now - l->last_tick_ns < l->tick_ms * 1000000ull)
                return;
        l->last_tick_ns = now;
        l->tick_fn(l->tick_arg);
}

static int wait_ms(const struct net_loop *l)
{
        if (!l->tick_fn)
                return DEFAULT_WAIT_MS;
        uint64_t due = l->last_tick_ns + l->tick_ms * 1000000ull;
        uint64_t now = tdm_now_ns();
        return due <= now ? 0 : (int)((due - now) / 1000000ull) + 1;
}

static void *loop_main(void *arg)
{
        struct net_loop *l = arg;
        current_loop = l;
        struct epoll_event evs[EV_BATCH];
        while (!atomic_load_explicit(&l->stop, memory_order_acquire)) {
                int n = epoll_wait(l->epfd, evs, EV_BATCH, l->n_round_hooks ? 0 : wait_ms(l));
                l->batch = evs;
                l->batch_n = n > 0 ? n : 0;
                for (int i = 0; i < l->batch_n; i++) {
                        struct net_handler *h = evs[i].data.ptr;
                        if (h)
                                h->fn(h, evs[i].events);
                }
                l->batch_n = 0;
                post_run_all(l);
                run_round_hooks(l);
                run_tick(l);
        }
        post_run_all(l);
        run_round_hooks(l);
        for (unsigned i = l->n_exit_hooks; i-- > 0;)
                l->exit_hooks[i].fn(l->exit_hooks[i].arg);
        current_loop = NULL;
        return NULL;
}

int net_loop_start(struct net_loop *l)
{
        int rc = pthread_create(&l->thread, NULL, loop_main, l);
        if (rc)
                return -rc;
        l->started = true;
        pthread_setname_np(l->thread, l->name);
        return 0;
}

void net_loop_stop(struct net_loop *l)
{
        if (!l)
                return;
        atomic_store_explicit(&l->stop, true, memory_order_release);
        uint64_t one = 1;
        if (write(l->wake.fd, &one, sizeof(one)) < 0)
                log_warn("loop %s wake: %s", l->name, strerror(errno));
        if (l->started)
                pthread_join(l->thread, NULL);
        close(l->wake.fd);
        close(l->epfd);
        pthread_mutex_destroy(&l->post_lock);
        free(l);
}
