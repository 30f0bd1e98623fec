/*
 * The iSCSI portals and the data-plane workers. Each worker is a net loop that owns the
 * connections dealt to it: every PDU of a connection, every command and every completion
 * runs on that loop's thread, so no lock is shared by all connections on the data path.
 * The control loop accepts and deals new sockets out round-robin.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "limits.h"
#include "tandem/bufcache.h"
#include "tandem/clock.h"
#include "tandem/iscsi_portal.h"
#include "tandem/log.h"
#include "tandem/net_listen.h"

#define MAX_LISTEN   16
#define TICK_MS      500
#define HELD_TICK_MS 50 /* while a login is held: it goes on within this of the promotion */

struct iscsi_worker {
        struct net_loop *loop;
        struct tdm_iscsi_cfg cfg;
        struct iscsi_conn *conns;
        struct iscsi_conn *zombies; /* closed, waiting for commands still in the medium */
        struct iscsi_conn *dirty;   /* output queued this round: flushed at its end */
        bool stopping;
        unsigned held_logins;     /* connections in LOGIN_HELD: the tick runs every HELD_TICK_MS */
        atomic_uint zombies_left; /* read by the stopping thread */
        atomic_bool closed_all;
        struct net_post close_post;
};

/* A socket on its way from the control loop to a worker. */
struct adopt_msg {
        struct net_post post;
        struct iscsi_worker *w;
        int fd;
};

static struct iscsi_worker *workers;
static unsigned n_workers;
static unsigned next_worker;
/* The listening portals, as they were asked for (a reload removes one by its address). */
static struct {
        int fd;
        char host[128];
        uint16_t port;
} listens[MAX_LISTEN];
static size_t n_listen;
static qb_loop_t *control_loop;
static struct iscsi_env portal_env;

const struct iscsi_env *iscsi_env(void)
{
        return &portal_env;
}

const struct tdm_iscsi_cfg *iscsi_worker_cfg(struct iscsi_worker *w)
{
        return &w->cfg;
}

static void conn_update_events(struct iscsi_conn *c)
{
        uint32_t ev = (c->rx_paused ? 0 : EPOLLIN) | (c->want_write ? EPOLLOUT : 0);
        net_loop_mod(c->worker->loop, &c->handler, ev);
}

void iscsi_worker_want_write(struct iscsi_worker *w, struct iscsi_conn *c, bool on)
{
        (void)w;
        c->want_write = on;
        conn_update_events(c);
}

void iscsi_worker_pause_rx(struct iscsi_worker *w, struct iscsi_conn *c, bool paused)
{
        (void)w;
        c->rx_paused = paused;
        conn_update_events(c);
}

static void list_unlink(struct iscsi_conn **head, struct iscsi_conn *c)
{
        if (c->prev)
                c->prev->next = c->next;
        else
                *head = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->next = c->prev = NULL;
}

static void list_push(struct iscsi_conn **head, struct iscsi_conn *c)
{
        c->prev = NULL;
        c->next = *head;
        if (*head)
                (*head)->prev = c;
        *head = c;
}

static void dirty_unlink(struct iscsi_worker *w, struct iscsi_conn *c)
{
        if (!c->is_dirty)
                return;
        for (struct iscsi_conn **p = &w->dirty; *p; p = &(*p)->dirty_next) {
                if (*p == c) {
                        *p = c->dirty_next;
                        break;
                }
        }
        c->is_dirty = false;
}

static void conn_close(struct iscsi_worker *w, struct iscsi_conn *c, int why)
{
        /* A login the timeout ended was logged (once per address) by the tick; a connection
         * past its final answer ends as it should, by the initiator's close or our reset. */
        bool quiet = why == -ECONNRESET || c->state == ISCSI_CONN_AWAIT_CLOSE ||
                     (why == -ETIMEDOUT && c->state == ISCSI_CONN_LOGIN);
        if (!quiet || c->state == ISCSI_CONN_FFP)
                log_info("%s: connection closed (%s)", c->peer,
                         why == -ECONNRESET ? "by peer or logout" : strerror(-why));
        net_loop_del(w->loop, &c->handler);
        list_unlink(&w->conns, c);
        dirty_unlink(w, c);
        if (c->async_pending == 0) {
                iscsi_conn_destroy(c);
                return;
        }
        /* Commands still in the medium point at it: the initiator sees the close now, the
         * memory goes when they complete. */
        shutdown(c->fd, SHUT_RDWR);
        c->state = ISCSI_CONN_CLOSED;
        list_push(&w->zombies, c);
        atomic_fetch_add(&w->zombies_left, 1);
}

static void zombie_destroy(struct iscsi_worker *w, struct iscsi_conn *c)
{
        list_unlink(&w->zombies, c);
        iscsi_conn_destroy(c);
        atomic_fetch_sub(&w->zombies_left, 1);
}

/* After output was queued or a command completed: send, and resume reading if paused. */
static int conn_service(struct iscsi_conn *c)
{
        int rc = iscsi_conn_flush(c);
        if (rc == 0 && atomic_load(&c->kill))
                rc = -ECONNRESET;
        /* Resumed: commands left in the buffer get no new EPOLLIN, so parse now. */
        if (rc == 0 && iscsi_conn_check_backpressure(c))
                rc = iscsi_conn_on_readable(c);
        return rc;
}

static void flush_dirty(void *arg)
{
        struct iscsi_worker *w = arg;
        while (w->dirty) {
                struct iscsi_conn *c = w->dirty;
                w->dirty = c->dirty_next;
                c->is_dirty = false;
                int rc = conn_service(c);
                if (rc < 0)
                        conn_close(w, c, rc);
        }
}

void iscsi_conn_mark_dirty(struct iscsi_conn *c)
{
        struct iscsi_worker *w = c->worker;
        if (c->state == ISCSI_CONN_CLOSED) {
                if (c->async_pending == 0)
                        zombie_destroy(w, c);
                return;
        }
        if (c->is_dirty)
                return;
        c->is_dirty = true;
        c->dirty_next = w->dirty;
        w->dirty = c;
        net_loop_at_round_end(w->loop, flush_dirty, w);
}

static void on_conn_event(struct net_handler *h, uint32_t events)
{
        struct iscsi_conn *c =
            (struct iscsi_conn *)((char *)h - offsetof(struct iscsi_conn, handler));
        int rc = 0;
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                rc = iscsi_conn_on_readable(c);
        if (rc == 0 && (events & EPOLLOUT))
                rc = iscsi_conn_flush(c);
        if (rc == 0)
                rc = conn_service(c);
        if (rc < 0)
                conn_close(c->worker, c, rc);
}

static void adopt(struct net_post *p)
{
        struct adopt_msg *m = (struct adopt_msg *)p;
        struct iscsi_worker *w = m->w;
        int fd = m->fd;
        free(m);
        if (w->stopping) {
                iscsi_pending_login_done();
                close(fd);
                return;
        }
        struct iscsi_conn *c = iscsi_conn_create(w, fd);
        if (!c) {
                iscsi_pending_login_done();
                close(fd);
                return;
        }
        c->pending_login = true; /* admitted by hand_to_worker: counted until login ends */
        c->handler.fd = fd;
        c->handler.fn = on_conn_event;
        if (net_loop_add(w->loop, &c->handler, EPOLLIN) < 0) {
                iscsi_conn_destroy(c);
                return;
        }
        list_push(&w->conns, c);
        log_debug("%s: connection accepted", c->peer);
}

static void worker_tick(void *arg)
{
        struct iscsi_worker *w = arg;
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

void iscsi_worker_hold_login(struct iscsi_worker *w, bool held)
{
        unsigned before = w->held_logins;
        w->held_logins = held ? before + 1 : before - 1;
        if ((before == 0) != (w->held_logins == 0))
                net_loop_set_tick(w->loop, w->held_logins ? HELD_TICK_MS : TICK_MS, worker_tick, w);
}

/* Shutdown, first step: every connection closes; their commands still complete here. */
static void close_all(struct net_post *p)
{
        struct iscsi_worker *w =
            (struct iscsi_worker *)((char *)p - offsetof(struct iscsi_worker, close_post));
        w->stopping = true;
        while (w->conns)
                conn_close(w, w->conns, -ESHUTDOWN);
        atomic_store(&w->closed_all, true);
}

static void worker_exit(void *arg)
{
        struct iscsi_worker *w = arg;
        while (w->conns)
                conn_close(w, w->conns, -ESHUTDOWN);
        if (w->zombies)
                log_warn("worker %s: connections with commands still in the medium at exit",
                         net_loop_name(w->loop));
        tdm_buf_cache_drain();
}

/* Posted to each worker when it starts: its tick and exit work run on its own thread. */
struct start_msg {
        struct net_post post;
        struct iscsi_worker *w;
};

static void worker_setup(struct net_post *p)
{
        struct start_msg *m = (struct start_msg *)p;
        struct iscsi_worker *w = m->w;
        free(m);
        net_loop_set_tick(w->loop, TICK_MS, worker_tick, w);
        net_loop_on_exit(w->loop, worker_exit, w);
}

static int worker_start(struct iscsi_worker *w, unsigned i, const struct tdm_iscsi_cfg *cfg)
{
        char name[32];
        snprintf(name, sizeof(name), "iscsi-%u", i);
        w->cfg = *cfg;
        w->loop = net_loop_new(name);
        struct start_msg *m = calloc(1, sizeof(*m));
        if (!w->loop || !m) {
                free(m);
                return -ENOMEM;
        }
        m->w = w;
        m->post.fn = worker_setup;
        net_loop_post(w->loop, &m->post);
        return net_loop_start(w->loop);
}

int iscsi_workers_start(unsigned n, const struct tdm_iscsi_cfg *cfg, const struct iscsi_env *env)
{
        if (env)
                portal_env = *env;
        if (n == 0) {
                long cores = sysconf(_SC_NPROCESSORS_ONLN);
                n = cores > 0 ? (unsigned)cores : 1;
        }
        workers = calloc(n, sizeof(*workers));
        if (!workers)
                return -ENOMEM;
        iscsi_admission_configure(cfg);
        for (unsigned i = 0; i < n; i++) {
                int rc = worker_start(&workers[i], i, cfg);
                n_workers = i + 1;
                if (rc < 0) {
                        log_err("cannot start worker %u: %s", i, strerror(-rc));
                        iscsi_workers_stop();
                        return rc;
                }
        }
        log_info("%u data-plane worker threads started", n);
        return 0;
}

/* Every worker closed its connections and their commands left the medium (10 s at most). */
static void wait_workers_idle(void)
{
        for (int waited = 0; waited < 1000; waited++) {
                bool idle = true;
                for (unsigned i = 0; i < n_workers; i++)
                        idle &= atomic_load(&workers[i].closed_all) &&
                                atomic_load(&workers[i].zombies_left) == 0;
                if (idle)
                        return;
                usleep(10000);
        }
}

void iscsi_workers_stop(void)
{
        for (unsigned i = 0; i < n_workers; i++) {
                workers[i].close_post.fn = close_all;
                if (workers[i].loop)
                        net_loop_post(workers[i].loop, &workers[i].close_post);
        }
        wait_workers_idle();
        for (unsigned i = 0; i < n_workers; i++)
                net_loop_stop(workers[i].loop);
        free(workers);
        workers = NULL;
        n_workers = 0;
}

static void hand_to_worker(void *arg, int fd)
{
        (void)arg;
        if (!iscsi_admit_connection(fd)) {
                close(fd);
                return;
        }
        struct adopt_msg *m = calloc(1, sizeof(*m));
        if (!m || n_workers == 0) {
                free(m);
                iscsi_pending_login_done();
                close(fd);
                return;
        }
        m->w = &workers[next_worker++ % n_workers];
        m->fd = fd;
        m->post.fn = adopt;
        net_loop_post(m->w->loop, &m->post);
}

static int32_t on_accept(int32_t lfd, int32_t revents, void *data)
{
        (void)revents;
        (void)data;
        int rc = net_accept_batch(lfd, 64, hand_to_worker, NULL);
        if (rc < 0)
                log_warn("accept: %s", strerror(-rc));
        return 0;
}

int iscsi_listen_add(qb_loop_t *loop, const char *host, uint16_t port)
{
        if (n_listen >= MAX_LISTEN)
                return -ENOSPC;
        int fd = net_listen_tcp(host, port);
        if (fd < 0)
                return fd;
        int rc = qb_loop_poll_add(loop, QB_LOOP_HIGH, fd, POLLIN, NULL, on_accept);
        if (rc < 0) {
                close(fd);
                return rc;
        }
        control_loop = loop;
        listens[n_listen].fd = fd;
        snprintf(listens[n_listen].host, sizeof(listens[n_listen].host), "%s", host);
        listens[n_listen].port = port;
        n_listen++;
        return 0;
}

static void listen_close(size_t i)
{
        qb_loop_poll_del(control_loop, listens[i].fd);
        close(listens[i].fd);
}

int iscsi_listen_del(const char *host, uint16_t port)
{
        for (size_t i = 0; i < n_listen; i++) {
                if (listens[i].port != port || strcmp(listens[i].host, host) != 0)
                        continue;
                listen_close(i);
                listens[i] = listens[--n_listen];
                return 0;
        }
        return -ENOENT;
}

void iscsi_listen_close_all(void)
{
        for (size_t i = 0; i < n_listen; i++)
                listen_close(i);
        n_listen = 0;
}
