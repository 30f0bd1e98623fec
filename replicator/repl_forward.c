/*
 * Forwarded commands: an initiator sent a state-changing command (PERSISTENT RESERVE OUT)
 * down its path to this node while the peer is Primary. The command goes to the peer on the
 * control channel; the peer runs it on its pool as that initiator's (the SCSI layer's
 * medium.forwarded) and answers. The state record it changed travels on the data channel
 * and is acknowledged by this node before the peer answers, so the answer never overtakes
 * the state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "repl_internal.h"
#include "tandem/clock.h"
#include "tandem/log.h"
#include "wire.h"

/* The Primary runs the command within the I/O hold bound; a little more for the way. */
#define FORWARD_WAIT_MS 15000u
#define FORWARD_POLL_MS 50u

struct repl_fwd_wait {
        struct repl_fwd_wait *next;
        uint64_t id;
        bool done;
        struct tdm_forward_result res;
};

/* The peer serves and runs this forwarded command (r->lock held). */
static bool peer_takes_forward(const struct repl_lun *r, const struct tdm_forward_cmd *cmd)
{
        uint64_t needs = REPL_FEATURE_FORWARD | (cmd->tmf ? REPL_FEATURE_FORWARD_TMF : 0);
        return r->link_up && r->peer.known && r->peer.side.role == REPL_ROLE_PRIMARY &&
               (r->peer_features & needs) == needs && !r->stopping;
}

static void unlink_wait(struct repl_lun *r, struct repl_fwd_wait *w)
{
        for (struct repl_fwd_wait **p = &r->fwd_waits; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        return;
                }
}

static int send_forward(struct repl_lun *r, uint64_t id, const struct tdm_forward_cmd *cmd)
{
        Tandem__Repl__Forward m = TANDEM__REPL__FORWARD__INIT;
        m.id = id;
        m.port_name = (char *)cmd->port_name;
        m.cdb = (ProtobufCBinaryData){cmd->cdb_len, (uint8_t *)cmd->cdb};
        m.param = (ProtobufCBinaryData){cmd->param_len, (uint8_t *)cmd->param};
        m.tmf = cmd->tmf;
        return repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_FORWARD, &m);
}

int repl_forward(struct tdm_medium *m, const struct tdm_forward_cmd *cmd,
                 struct tdm_forward_result *res)
{
        struct repl_lun *r = (struct repl_lun *)m;
        struct repl_fwd_wait w = {0};
        pthread_mutex_lock(&r->lock);
        if (!peer_takes_forward(r, cmd)) {
                pthread_mutex_unlock(&r->lock);
                return -ENOTCONN;
        }
        w.id = ++r->fwd_next_id;
        w.next = r->fwd_waits;
        r->fwd_waits = &w;
        uint64_t gen = r->conn_gen;
        pthread_mutex_unlock(&r->lock);
        int rc = send_forward(r, w.id, cmd);
        uint64_t deadline = tdm_now_ns() + FORWARD_WAIT_MS * 1000000ull;
        pthread_mutex_lock(&r->lock);
        /* Polled: the answer, the connection's end or the deadline, whichever comes first. */
        while (rc == 0 && !w.done) {
                if (r->conn_gen != gen || !r->link_up)
                        rc = -ECONNRESET;
                else if (tdm_now_ns() >= deadline)
                        rc = -ETIMEDOUT;
                else {
                        struct timespec ts = tdm_deadline(CLOCK_REALTIME, FORWARD_POLL_MS);
                        pthread_cond_timedwait(&r->cond, &r->lock, &ts);
                }
        }
        unlink_wait(r, &w);
        pthread_mutex_unlock(&r->lock);
        if (rc == 0)
                *res = w.res;
        return rc;
}

void repl_on_forward_reply(struct repl_lun *r, const Tandem__Repl__ForwardReply *m)
{
        pthread_mutex_lock(&r->lock);
        for (struct repl_fwd_wait *w = r->fwd_waits; w; w = w->next) {
                if (w->id != m->id || w->done)
                        continue;
                w->res = (struct tdm_forward_result){
                    .status = (uint8_t)m->status,
                    .key = (uint8_t)m->sense_key,
                    .asc = (uint8_t)m->asc,
                    .ascq = (uint8_t)m->ascq,
                    .field_valid = m->field_valid && m->field_byte <= UINT16_MAX,
                    .field_byte = (uint16_t)m->field_byte,
                    .field_bit =
                        (int8_t)(m->field_bit >= 0 && m->field_bit <= 7 ? m->field_bit : -1)};
                w->done = true;
                pthread_cond_broadcast(&r->cond);
                break;
        }
        pthread_mutex_unlock(&r->lock); /* an answer nobody waits for any more: dropped */
}

/* ---- the Primary's side: the peer's command on the pool ---- */

struct fwd_job {
        struct net_work work;
        struct repl_lun *r;
        uint64_t id;
        struct tdm_forward_cmd cmd;
        uint8_t param[]; /* cmd.param points here */
};

static void job_run(struct net_work *work)
{
        struct fwd_job *j = (struct fwd_job *)work;
        struct repl_lun *r = j->r;
        struct tdm_forward_result res = {.status = 0x02, .key = 0x5, .asc = 0x20, .field_bit = -1};
        void (*run)(void *, const struct tdm_forward_cmd *, struct tdm_forward_result *) =
            r->medium.forwarded;
        if (run && !atomic_load(&r->stopped))
                run(r->medium.access_arg, &j->cmd, &res);
        else
                res = (struct tdm_forward_result){
                    .status = 0x02, .key = 0x2, .asc = 0x04, .ascq = 0x0b, .field_bit = -1};
        Tandem__Repl__ForwardReply m = TANDEM__REPL__FORWARD_REPLY__INIT;
        m.id = j->id;
        m.status = res.status;
        m.sense_key = res.key;
        m.asc = res.asc;
        m.ascq = res.ascq;
        m.field_valid = res.field_valid;
        m.field_byte = res.field_byte;
        m.field_bit = res.field_bit;
        if (repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_FORWARD_REPLY, &m) < 0)
                log_warn("replication %s lun %llu: cannot answer a forwarded command", r->iqn,
                         (unsigned long long)r->lun_id);
}

static void job_done(struct net_work *work)
{
        struct fwd_job *j = (struct fwd_job *)work;
        struct repl_lun *r = j->r;
        free(j);
        pthread_mutex_lock(&r->lock);
        r->fwd_jobs--;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
}

/* A command (a CDB, its initiator port named) or a task management function (no CDB). */
static bool forward_well_formed(const Tandem__Repl__Forward *m, size_t name_len)
{
        if (m->param.len > TDM_FORWARD_PARAM_MAX || name_len >= TDM_FORWARD_PORT_NAME_MAX)
                return false;
        if (m->tmf != TDM_FORWARD_TMF_NONE)
                return m->tmf == TDM_FORWARD_TMF_LU_RESET && m->cdb.len == 0 && m->param.len == 0;
        return m->cdb.len >= 6 && m->cdb.len <= sizeof(((struct tdm_forward_cmd *)0)->cdb) &&
               name_len > 0;
}

int repl_on_forward(struct repl_lun *r, const Tandem__Repl__Forward *m)
{
        size_t name_len = m->port_name ? strlen(m->port_name) : 0;
        if (!forward_well_formed(m, name_len)) {
                repl_disconnect(r, "malformed forwarded command");
                return -EPROTO;
        }
        struct fwd_job *j = calloc(1, sizeof(*j) + m->param.len);
        if (!j) {
                repl_disconnect(r, "out of memory for a forwarded command");
                return -ENOMEM;
        }
        *j = (struct fwd_job){.work = {.run = job_run, .done = job_done}, .r = r, .id = m->id};
        if (name_len)
                memcpy(j->cmd.port_name, m->port_name, name_len + 1);
        if (m->cdb.len)
                memcpy(j->cmd.cdb, m->cdb.data, m->cdb.len);
        j->cmd.cdb_len = (uint8_t)m->cdb.len;
        j->cmd.tmf = (uint8_t)m->tmf;
        if (m->param.len)
                memcpy(j->param, m->param.data, m->param.len);
        j->cmd.param = j->param;
        j->cmd.param_len = (uint32_t)m->param.len;
        pthread_mutex_lock(&r->lock);
        r->fwd_jobs++;
        pthread_mutex_unlock(&r->lock);
        net_pool_submit(&j->work);
        return 0;
}

void repl_forward_wait_idle(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        while (r->fwd_jobs)
                pthread_cond_wait(&r->cond, &r->lock);
        pthread_mutex_unlock(&r->lock);
}
