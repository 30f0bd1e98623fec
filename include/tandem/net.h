/*
 * The bottom of the data plane: event loops (one thread each), the work posted to them from
 * other threads, a pool of threads for work that may block, and listening sockets. Nothing
 * here knows what the bytes mean.
 *
 * The rule every layer above relies on: work posted to a loop runs on that loop's thread,
 * in the order it was posted. A request that started on a loop completes on it, so the
 * state of a connection and of its commands is only ever touched by one thread.
 */
#ifndef TANDEM_NET_H
#define TANDEM_NET_H

#include <stdbool.h>
#include <stdint.h>

struct net_loop;

/* A callback posted to a loop: embedded in the caller's object, so posting never allocates. */
struct net_post {
        struct net_post *next;
        void (*fn)(struct net_post *p);
};

/* A file descriptor watched by a loop: embedded in the owner's object. */
struct net_handler {
        int fd;
        uint32_t events; /* EPOLLIN / EPOLLOUT as now registered */
        void (*fn)(struct net_handler *h, uint32_t events);
};

struct net_loop *net_loop_new(const char *name);
/* Runs the loop on a new thread; 0 or -errno. */
int net_loop_start(struct net_loop *l);
/*
 * Stops the loop (from another thread) and waits for its thread to end: the exit hooks ran
 * on it, and posts still queued were run. Then frees it.
 */
void net_loop_stop(struct net_loop *l);
const char *net_loop_name(const struct net_loop *l);

/* The loop whose thread is calling, or NULL (a thread that runs no loop). */
struct net_loop *net_loop_current(void);

/* Loop thread only. The handler's fd and fn must be set; events: EPOLLIN|EPOLLOUT. */
int net_loop_add(struct net_loop *l, struct net_handler *h, uint32_t events);
int net_loop_mod(struct net_loop *l, struct net_handler *h, uint32_t events);
/* After this no event reaches h, not even one already fetched in this round. */
void net_loop_del(struct net_loop *l, struct net_handler *h);

/* Any thread: runs p->fn(p) on the loop's thread. */
void net_loop_post(struct net_loop *l, struct net_post *p);
/* Runs p on l, or at once when l is NULL (the caller is on no loop and may block). */
void net_post_to(struct net_loop *l, struct net_post *p);

/* Loop thread only: fn(arg) every ms milliseconds (one tick per loop). */
void net_loop_set_tick(struct net_loop *l, unsigned ms, void (*fn)(void *arg), void *arg);
/*
 * Loop thread only: fn(arg) runs on the loop's thread when it ends (per-thread resources:
 * buffer caches, submission rings). At most NET_LOOP_EXIT_HOOKS.
 */
#define NET_LOOP_EXIT_HOOKS 8
int net_loop_on_exit(struct net_loop *l, void (*fn)(void *arg), void *arg);
/*
 * Loop thread only: fn(arg) runs once at the end of the current round of events, before
 * the loop waits again (batched submissions). Calling it twice with the same arg in one
 * round runs it once.
 */
#define NET_LOOP_ROUND_HOOKS 8
int net_loop_at_round_end(struct net_loop *l, void (*fn)(void *arg), void *arg);

/*
 * Work that may block (a slow disk, fdatasync, a metadata write): run(w) on a pool thread,
 * then done(w) posted to w->loop (set by net_pool_submit to the caller's loop; run at once
 * on the pool thread when the caller was on no loop).
 */
struct net_work {
        struct net_post post; /* done */
        void (*run)(struct net_work *w);
        void (*done)(struct net_work *w);
        struct net_loop *loop;
        struct net_work *next;
};
void net_pool_submit(struct net_work *w);
/* Ends the pool's threads (at exit, after every loop stopped). */
void net_pool_shutdown(void);

#endif
