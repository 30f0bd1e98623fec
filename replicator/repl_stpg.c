/*
 * Explicit ALUA on a replicated LUN: an initiator's SET TARGET PORT GROUPS asks for this
 * node's group, so the Primary must move here. The cluster manager owns the roles, so the
 * move is asked of it through the admin's stpg_handler (shipped: tandem-stpg, which asks
 * Pacemaker to promote this node); the request is done once this node is Primary.
 *
 * One mover thread per LUN at a time: every request that comes while it runs waits for the
 * same move. Meanwhile this node's group reports transitioning. The mover never holds the
 * LUN's lock while the handler runs or while it waits.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "repl_internal.h"
#include "tandem/clock.h"
#include "tandem/handler.h"
#include "tandem/log.h"

/* The whole move: the handler and the promotion it leads to (the initiator's STPG waits). */
#define STPG_MOVE_MS 25000u
#define STPG_POLL_MS 50u

static bool serving(const struct repl_lun *r)
{
        return r->sb.role == REPL_ROLE_PRIMARY && !r->demoting && !r->quiesced;
}

static bool move_cancelled(void *arg)
{
        struct repl_lun *r = arg;
        return atomic_load(&r->stopped);
}

static uint64_t now_ms(void)
{
        return tdm_now_ns() / 1000000u;
}

/* Runs the handler: 0 once it asked the cluster to move the Primary here. */
static int ask_cluster(struct repl_lun *r, unsigned timeout_ms)
{
        char lun[24];
        snprintf(lun, sizeof(lun), "%" PRIu64, r->lun_id);
        char *argv[] = {r->cfg.stpg_handler, r->iqn, lun, r->self_name, NULL};
        log_notice("replication %s lun %" PRIu64 ": SET TARGET PORT GROUPS: asking for the "
                   "Primary here through %s",
                   r->iqn, r->lun_id, r->cfg.stpg_handler);
        int status = tdm_handler_run(&(struct tdm_handler_call){
            .argv = argv, .timeout_ms = timeout_ms, .cancelled = move_cancelled, .arg = r});
        if (tdm_handler_ok(status))
                return 0;
        char why[96];
        tdm_handler_describe(status, why, sizeof(why));
        log_warn("replication %s lun %" PRIu64 ": stpg_handler %s: %s", r->iqn, r->lun_id,
                 r->cfg.stpg_handler, why);
        return status == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
}

/* Waits until this node serves, the deadline passes or the LUN stops. */
static int wait_promoted(struct repl_lun *r, uint64_t deadline)
{
        for (;;) {
                pthread_mutex_lock(&r->lock);
                bool done = serving(r);
                pthread_mutex_unlock(&r->lock);
                if (done)
                        return 0;
                if (atomic_load(&r->stopped))
                        return -ESHUTDOWN;
                if (now_ms() >= deadline)
                        return -ETIMEDOUT;
                struct timespec ts = {0, (long)STPG_POLL_MS * 1000000L};
                nanosleep(&ts, NULL);
        }
}

static void complete_all(struct tdm_mio *waiters, int rc)
{
        while (waiters) {
                struct tdm_mio *next = waiters->impl;
                tdm_mio_complete(waiters, rc);
                waiters = next;
        }
}

static void *mover_main(void *arg)
{
        struct repl_lun *r = arg;
        uint64_t deadline = now_ms() + STPG_MOVE_MS;
        int rc = ask_cluster(r, STPG_MOVE_MS);
        if (rc == 0)
                rc = wait_promoted(r, deadline);
        if (rc == -ETIMEDOUT)
                log_warn("replication %s lun %" PRIu64 ": SET TARGET PORT GROUPS: not Primary "
                         "within %u ms",
                         r->iqn, r->lun_id, STPG_MOVE_MS);
        pthread_mutex_lock(&r->lock);
        r->moving = false;
        struct tdm_mio *waiters = r->move_waiters;
        r->move_waiters = NULL;
        repl_publish_access(r);
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        /* r may be gone from here on (its stop waited for moving to clear). */
        complete_all(waiters, rc);
        return NULL;
}

void repl_request_active(struct tdm_medium *m, struct tdm_mio *io)
{
        struct repl_lun *r = (struct repl_lun *)m;
        pthread_mutex_lock(&r->lock);
        int rc = 0;
        if (serving(r))
                goto done;
        rc = -ESHUTDOWN;
        if (r->quiesced || r->stopping || atomic_load(&r->stopped))
                goto done;
        rc = -EOPNOTSUPP;
        if (!r->cfg.alua_explicit || !r->cfg.stpg_handler[0])
                goto done;
        io->impl = r->move_waiters;
        r->move_waiters = io;
        if (r->moving) {
                pthread_mutex_unlock(&r->lock);
                return;
        }
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r->moving = true;
        repl_publish_access(r); /* transitioning */
        rc = -pthread_create(&t, &attr, mover_main, r);
        pthread_attr_destroy(&attr);
        if (rc == 0) {
                pthread_mutex_unlock(&r->lock);
                return;
        }
        r->moving = false;
        r->move_waiters = NULL;
        repl_publish_access(r);
        pthread_mutex_unlock(&r->lock);
        complete_all(io, rc);
        return;
done:
        pthread_mutex_unlock(&r->lock);
        tdm_mio_complete(io, rc);
}

void repl_stpg_wait_idle(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        while (r->moving)
                pthread_cond_wait(&r->cond, &r->lock);
        pthread_mutex_unlock(&r->lock);
}
