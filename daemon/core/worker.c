/*
 * Worker threads: each runs its own epoll loop and owns the connections handed to it,
 * so no lock is shared by all connections on the data path. The control thread accepts
 * and deals new sockets out round-robin.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/worker.h"
#include "iscsi/conn.h"
#include "tandem/bufcache.h"
#include "tandem/log.h"

#define MAX_LISTEN 16
#define EV_BATCH   64
#define TICK_MS    500

struct iscsi_worker {
        pthread_t thread;
        int epfd;
        int wakefd;
        pthread_mutex_t lock;
        int *pending; /* accepted fds waiting to be adopted */
        size_t n_pending, cap_pending;
        struct iscsi_conn *conns;
        struct iscsi_conn *zombies;   /* closed, waiting for replication acks of their tasks */
        struct iscsi_task *done_head; /* under lock: tasks whose replication finished */
        atomic_bool stop;
        struct tdm_iscsi_cfg cfg;
};

static struct iscsi_worker *workers;
static char closed_marker; /* epoll batch entries of connections closed earlier in the batch */
static unsigned n_workers;
static unsigned next_worker;
static int listen_fds[MAX_LISTEN];
static size_t n_listen;

uint64_t tdm_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const struct tdm_iscsi_cfg *iscsi_worker_cfg(struct iscsi_worker *w)
{
        return &w->cfg;
}

/* Reads pause while a slow reader has too much queued (backpressure), writes wait for room. */
static void conn_update_events(struct iscsi_worker *w, struct iscsi_conn *c)
{
        struct epoll_event ev = {
            .events = (c->rx_paused ? 0 : EPOLLIN) | (c->want_write ? EPOLLOUT : 0), .data.ptr = c};
        epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

void iscsi_worker_want_write(struct iscsi_worker *w, struct iscsi_conn *c, bool on)
{
        c->want_write = on;
        conn_update_events(w, c);
}

void iscsi_worker_pause_rx(struct iscsi_worker *w, struct iscsi_conn *c, bool paused)
{
        c->rx_paused = paused;
        conn_update_events(w, c);
}

void iscsi_worker_conn_unlink(struct iscsi_worker *w, struct iscsi_conn *c)
{
        if (c->prev)
                c->prev->next = c->next;
        else
                w->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->next = c->prev = NULL;
}

static void conn_close(struct iscsi_worker *w, struct iscsi_conn *c, int why)
{
        if (why != -ECONNRESET || c->state == ISCSI_CONN_FFP)
                log_info("%s: connection closed (%s)", c->peer,
                         why == -ECONNRESET ? "by peer or logout" : strerror(-why));
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        iscsi_worker_conn_unlink(w, c);
        if (c->async_pending == 0) {
                iscsi_conn_destroy(c);
                return;
        }
        /* Replicated writes still point at it: the initiator sees the close now, the
         * memory goes when their acks are in. */
        shutdown(c->fd, SHUT_RDWR);
        c->state = ISCSI_CONN_CLOSED;
        c->next = w->zombies;
        c->prev = NULL;
        if (w->zombies)
                w->zombies->prev = c;
        w->zombies = c;
}

void iscsi_worker_post_done(struct iscsi_worker *w, struct iscsi_task *t)
{
        pthread_mutex_lock(&w->lock);
        bool was_empty = w->done_head == NULL;
        t->done_next = w->done_head;
        w->done_head = t;
        pthread_mutex_unlock(&w->lock);
        /* One wake per batch: the worker takes the whole list when it runs. */
        uint64_t one = 1;
        if (was_empty && write(w->wakefd, &one, sizeof(one)) < 0)
                log_warn("worker wake: %s", strerror(errno));
}

static void zombie_unlink(struct iscsi_worker *w, struct iscsi_conn *c)
{
        if (c->prev)
                c->prev->next = c->next;
        else
                w->zombies = c->next;
        if (c->next)
                c->next->prev = c->prev;
}

/* Answers the tasks whose replication finished, in the order they finished. */
static void drain_done(struct iscsi_worker *w)
{
        pthread_mutex_lock(&w->lock);
        struct iscsi_task *list = w->done_head;
        w->done_head = NULL;
        pthread_mutex_unlock(&w->lock);
        struct iscsi_task *ordered = NULL;
        while (list) {
                struct iscsi_task *t = list;
                list = t->done_next;
                t->done_next = ordered;
                ordered = t;
        }
        while (ordered) {
                struct iscsi_task *t = ordered;
                ordered = t->done_next;
                struct iscsi_conn *c = t->conn;
                iscsi_task_async_complete(t);
                if (c->state == ISCSI_CONN_CLOSED) {
                        if (c->async_pending == 0) {
                                zombie_unlink(w, c);
                                iscsi_conn_destroy(c);
                        }
                        continue;
                }
                int rc = iscsi_conn_flush(c);
                if (rc == 0 && iscsi_conn_check_backpressure(c))
                        rc = iscsi_conn_on_readable(c);
                if (rc < 0)
                        conn_close(w, c, rc);
        }
}

static void adopt_pending(struct iscsi_worker *w)
{
        uint64_t v;
        if (read(w->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                log_warn("worker wake read: %s", strerror(errno));
        pthread_mutex_lock(&w->lock);
        int *fds = w->pending;
        size_t n = w->n_pending;
        w->pending = NULL;
        w->n_pending = w->cap_pending = 0;
        pthread_mutex_unlock(&w->lock);
        for (size_t i = 0; i < n; i++) {
                struct iscsi_conn *c = iscsi_conn_create(w, fds[i]);
                if (!c) {
                        close(fds[i]);
                        continue;
                }
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
                        iscsi_conn_destroy(c);
                        continue;
                }
                c->next = w->conns;
                if (w->conns)
                        w->conns->prev = c;
                w->conns = c;
                log_debug("%s: connection accepted", c->peer);
        }
        free(fds);
}

static void worker_tick(struct iscsi_worker *w)
{
        uint64_t now = tdm_now_ns();
        struct iscsi_conn *c = w->conns;
        while (c) {
                struct iscsi_conn *next = c->next;
                iscsi_conn_tick(c, now);
                if (atomic_load(&c->kill))
                        conn_close(w, c, -ETIMEDOUT);
                c = next;
        }
}

static void *worker_main(void *arg)
{
        struct iscsi_worker *w = arg;
        struct epoll_event evs[EV_BATCH];
        uint64_t last_tick = tdm_now_ns();
        while (!atomic_load(&w->stop)) {
                int n = epoll_wait(w->epfd, evs, EV_BATCH, TICK_MS);
                for (int i = 0; i < n; i++) {
                        if (evs[i].data.ptr == NULL) {
                                adopt_pending(w);
                                drain_done(w);
                                continue;
                        }
                        if (evs[i].data.ptr == &closed_marker)
                                continue;
                        struct iscsi_conn *c = evs[i].data.ptr;
                        int rc = 0;
                        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                                rc = iscsi_conn_on_readable(c);
                        if (rc == 0 && (evs[i].events & EPOLLOUT))
                                rc = iscsi_conn_flush(c);
                        if (rc == 0 && atomic_load(&c->kill))
                                rc = -ECONNRESET;
                        /* Resumed: commands left in the buffer get no new EPOLLIN, so parse now. */
                        if (rc == 0 && iscsi_conn_check_backpressure(c))
                                rc = iscsi_conn_on_readable(c);
                        if (rc < 0) {
                                conn_close(w, c, rc);
                                /* Later events in this batch may name the freed connection. */
                                for (int j = i + 1; j < n; j++)
                                        if (evs[j].data.ptr == c)
                                                evs[j].data.ptr = &closed_marker;
                        }
                }
                uint64_t now = tdm_now_ns();
                if (now - last_tick >= TICK_MS * 1000000ull) {
                        worker_tick(w);
                        last_tick = now;
                }
        }
        while (w->conns) {
                struct iscsi_conn *c = w->conns;
                conn_close(w, c, -ESHUTDOWN);
        }
        /* The replicator completes every request it holds when it stops (before us). */
        for (int waited = 0; w->zombies && waited < 200; waited++) {
                struct epoll_event ev;
                uint64_t v;
                if (epoll_wait(w->epfd, &ev, 1, 50) > 0 && read(w->wakefd, &v, sizeof(v)) < 0 &&
                    errno != EAGAIN)
                        log_warn("worker wake read: %s", strerror(errno));
                drain_done(w);
        }
        if (w->zombies)
                log_warn("worker: connections still waiting for replication acks at exit");
        tdm_buf_cache_drain();
        return NULL;
}

static int worker_init(struct iscsi_worker *w, const struct tdm_iscsi_cfg *cfg)
{
        w->cfg = *cfg;
        pthread_mutex_init(&w->lock, NULL);
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        w->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->epfd < 0 || w->wakefd < 0)
                return -errno;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wakefd, &ev) < 0)
                return -errno;
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        return -rc;
}

int iscsi_workers_start(unsigned n, const struct tdm_iscsi_cfg *cfg)
{
        if (n == 0) {
                long cores = sysconf(_SC_NPROCESSORS_ONLN);
                n = cores > 0 ? (unsigned)cores : 1;
        }
        workers = calloc(n, sizeof(*workers));
        if (!workers)
                return -ENOMEM;
        for (unsigned i = 0; i < n; i++) {
                int rc = worker_init(&workers[i], cfg);
                if (rc < 0) {
                        log_err("cannot start worker %u: %s", i, strerror(-rc));
                        n_workers = i;
                        iscsi_workers_stop();
                        return rc;
                }
        }
        n_workers = n;
        log_info("%u data-plane worker threads started", n);
        return 0;
}

void iscsi_workers_stop(void)
{
        for (unsigned i = 0; i < n_workers; i++) {
                struct iscsi_worker *w = &workers[i];
                atomic_store(&w->stop, true);
                uint64_t one = 1;
                if (write(w->wakefd, &one, sizeof(one)) < 0)
                        log_warn("worker wake: %s", strerror(errno));
                pthread_join(w->thread, NULL);
                for (size_t j = 0; j < w->n_pending; j++)
                        close(w->pending[j]);
                free(w->pending);
                close(w->epfd);
                close(w->wakefd);
                pthread_mutex_destroy(&w->lock);
        }
        free(workers);
        workers = NULL;
        n_workers = 0;
}

static void hand_to_worker(int fd)
{
        struct iscsi_worker *w = &workers[next_worker++ % n_workers];
        pthread_mutex_lock(&w->lock);
        if (w->n_pending == w->cap_pending) {
                size_t cap = w->cap_pending ? w->cap_pending * 2 : 16;
                int *p = realloc(w->pending, cap * sizeof(int));
                if (!p) {
                        pthread_mutex_unlock(&w->lock);
                        close(fd);
                        return;
                }
                w->pending = p;
                w->cap_pending = cap;
        }
        w->pending[w->n_pending++] = fd;
        pthread_mutex_unlock(&w->lock);
        uint64_t one = 1;
        if (write(w->wakefd, &one, sizeof(one)) < 0)
                log_warn("worker wake: %s", strerror(errno));
}

static int32_t on_accept(int32_t lfd, int32_t revents, void *data)
{
        (void)revents;
        (void)data;
        for (int i = 0; i < 64; i++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                                log_warn("accept: %s", strerror(errno));
                        break;
                }
                hand_to_worker(fd);
        }
        return 0;
}

static int listen_socket(const char *host, uint16_t port)
{
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV};
        char portstr[8];
        snprintf(portstr, sizeof(portstr), "%u", port);
        struct addrinfo *ai;
        int rc = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &ai);
        if (rc != 0)
                return -EINVAL;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                rc = -errno;
                freeaddrinfo(ai);
                return rc;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ai->ai_family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
                rc = -errno;
                close(fd);
                freeaddrinfo(ai);
                return rc;
        }
        freeaddrinfo(ai);
        return fd;
}

int iscsi_listen_add(qb_loop_t *loop, const char *hostport)
{
        char host[128];
        uint16_t port;
        if (n_listen >= MAX_LISTEN)
                return -ENOSPC;
        if (tdm_parse_hostport(hostport, host, sizeof(host), &port) < 0)
                return -EINVAL;
        int fd = listen_socket(host, port);
        if (fd < 0)
                return fd;
        int rc = qb_loop_poll_add(loop, QB_LOOP_HIGH, fd, POLLIN, NULL, on_accept);
        if (rc < 0) {
                close(fd);
                return rc;
        }
        listen_fds[n_listen++] = fd;
        log_notice("listening for iSCSI on %s", hostport);
        return 0;
}

void iscsi_listen_close_all(qb_loop_t *loop)
{
        for (size_t i = 0; i < n_listen; i++) {
                qb_loop_poll_del(loop, listen_fds[i]);
                close(listen_fds[i]);
        }
        n_listen = 0;
}
