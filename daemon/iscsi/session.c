/* Sessions: creation from a finished login, reinstatement, CmdSN window, the global table. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conn.h"
#include "limits.h"
#include "tandem/log.h"
#include "tandem/scsi_nexus.h"
#include "tandem/session_info.h"

static pthread_mutex_t sessions_lock = PTHREAD_MUTEX_INITIALIZER;
static struct iscsi_session *sessions;
static atomic_uint_fast64_t next_session_id = 1;
static atomic_uint next_tsih = 1;

uint16_t iscsi_session_alloc_tsih(void *arg)
{
        (void)arg;
        uint16_t tsih;
        do {
                tsih = (uint16_t)atomic_fetch_add(&next_tsih, 1);
        } while (tsih == 0);
        return tsih;
}

/* The session fresh would replace (reinstatement), which therefore does not count. */
static bool replaced_by(const struct iscsi_session *s, const struct iscsi_session *fresh)
{
        return s->type == fresh->type && memcmp(s->isid, fresh->isid, 6) == 0 &&
               strcmp(s->initiator, fresh->initiator) == 0 &&
               strcmp(s->target_name, fresh->target_name) == 0;
}

/*
 * A new leading login with the same initiator, ISID and target replaces the old session
 * (RFC 7143 6.3.5): its connection is shut down and its owner thread frees it.
 */
static void reinstate_locked(const struct iscsi_session *fresh)
{
        for (struct iscsi_session *s = sessions; s; s = s->next) {
                if (!replaced_by(s, fresh))
                        continue;
                log_notice("%s: session reinstatement replaces tsih %u of %s", fresh->conn->peer,
                           s->tsih, s->initiator);
                if (s->conn) {
                        atomic_store(&s->conn->kill, true);
                        shutdown(s->conn->fd, SHUT_RDWR);
                }
        }
}

/* Whether fresh stays within iscsi.max_sessions(_per_initiator); else the reason in why. */
static int over_limits_locked(const struct iscsi_session *fresh, const struct tdm_iscsi_cfg *cfg,
                              char *why, size_t len)
{
        uint32_t max_all = cfg->max_sessions ? cfg->max_sessions : TDM_DEFAULT_MAX_SESSIONS;
        uint32_t max_one = cfg->max_sessions_per_initiator ? cfg->max_sessions_per_initiator
                                                           : TDM_DEFAULT_MAX_SESSIONS_PER_INIT;
        uint32_t all = 0, same = 0;
        for (const struct iscsi_session *s = sessions; s; s = s->next) {
                if (replaced_by(s, fresh))
                        continue;
                all++;
                same += strcmp(s->initiator, fresh->initiator) == 0;
        }
        if (same >= max_one) {
                snprintf(why, len,
                         "login of %s refused with status 03/02: it has %u sessions "
                         "(iscsi.max_sessions_per_initiator)",
                         fresh->initiator, same);
                return ISCSI_REFUSE_SESSIONS_INIT;
        }
        if (all >= max_all) {
                snprintf(why, len,
                         "login of %s refused with status 03/02: %u sessions already "
                         "(iscsi.max_sessions)",
                         fresh->initiator, all);
                return ISCSI_REFUSE_SESSIONS;
        }
        return -1;
}

struct iscsi_session *iscsi_session_create(struct iscsi_conn *c, struct iscsi_login *l,
                                           int *refusal, char *refused, size_t refused_len)
{
        *refusal = -1;
        struct iscsi_session *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->id = atomic_fetch_add(&next_session_id, 1);
        s->type = l->type;
        memcpy(s->isid, l->isid, 6);
        s->tsih = l->tsih;
        snprintf(s->initiator, sizeof(s->initiator), "%s", l->initiator_name);
        snprintf(s->target_name, sizeof(s->target_name), "%s", l->target_name);
        s->target = l->target; /* the login's reference moves to the session */
        l->target = NULL;
        s->params = l->params;
        if (s->params.max_xmit_dsl == 0)
                s->params.max_xmit_dsl = 8192;
        if (s->params.max_outstanding_r2t == 0)
                s->params.max_outstanding_r2t = 1;
        s->exp_cmdsn = l->cmdsn;
        s->stat_sn = l->stat_sn;
        const struct tdm_iscsi_cfg *cfg = iscsi_worker_cfg(c->worker);
        s->queue_depth = cfg->queue_depth ? cfg->queue_depth : 128;
        s->conn = c;
        if (s->target) {
                scsi_nexus_init(&s->nexus, s->target, s->initiator);
                /* Name plus ISID: the same I_T nexus on either node and after a relogin. */
                scsi_nexus_set_isid(&s->nexus, s->isid);
                s->nexus.id = s->id;
                s->lun_cache_gen = atomic_load(&s->target->luns_gen);
        }
        /* Counted and inserted under one lock: logins on other workers cannot slip past. */
        pthread_mutex_lock(&sessions_lock);
        *refusal = over_limits_locked(s, cfg, refused, refused_len);
        if (*refusal >= 0) {
                pthread_mutex_unlock(&sessions_lock);
                if (s->target)
                        scsi_nexus_fini(&s->nexus);
                l->target = s->target; /* the login keeps its reference: fini drops it */
                free(s);
                return NULL;
        }
        reinstate_locked(s);
        s->next = sessions;
        sessions = s;
        pthread_mutex_unlock(&sessions_lock);
        return s;
}

void iscsi_session_destroy(struct iscsi_session *s)
{
        pthread_mutex_lock(&sessions_lock);
        for (struct iscsi_session **pp = &sessions; *pp; pp = &(*pp)->next) {
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        }
        pthread_mutex_unlock(&sessions_lock);
        for (size_t i = 0; i < SCSI_MAX_LUNS; i++)
                if (s->lun_cache[i])
                        scsi_lun_put(s->lun_cache[i]);
        if (s->target) {
                /* The I_T nexus ends here: its RESERVE(6/10) reservations go with it. */
                scsi_nexus_fini(&s->nexus);
                scsi_target_put(s->target);
        }
        free(s);
}

void iscsi_sessions_drop_target(const struct scsi_target *t, const struct iscsi_conn *except)
{
        pthread_mutex_lock(&sessions_lock);
        for (struct iscsi_session *s = sessions; s; s = s->next) {
                if (s->target != t || !s->conn || s->conn == except)
                        continue;
                atomic_store(&s->conn->kill, true);
                shutdown(s->conn->fd, SHUT_RDWR);
        }
        pthread_mutex_unlock(&sessions_lock);
}

static void lun_cache_flush(struct iscsi_session *s)
{
        for (size_t i = 0; i < SCSI_MAX_LUNS; i++) {
                if (s->lun_cache[i]) {
                        scsi_lun_put(s->lun_cache[i]);
                        s->lun_cache[i] = NULL;
                }
        }
}

struct scsi_lun *iscsi_session_lun(struct iscsi_session *s, uint64_t id)
{
        if (!s->target || id >= SCSI_MAX_LUNS)
                return NULL;
        unsigned gen = atomic_load_explicit(&s->target->luns_gen, memory_order_acquire);
        if (gen != s->lun_cache_gen) {
                lun_cache_flush(s);
                s->lun_cache_gen = gen;
        }
        struct scsi_lun *lun = s->lun_cache[id];
        if (!lun) {
                lun = scsi_target_get_lun(s->target, id);
                if (!lun)
                        return NULL;
                s->lun_cache[id] = lun;
        }
        scsi_lun_get(lun);
        return lun;
}

uint32_t iscsi_session_max_cmdsn(const struct iscsi_session *s)
{
        return s->exp_cmdsn + s->queue_depth - 1;
}

bool iscsi_session_check_cmdsn(struct iscsi_session *s, const uint8_t *bhs)
{
        uint32_t cmdsn = be32_get(((const struct iscsi_req_hdr *)bhs)->cmdsn);
        if (iscsi_bhs_immediate(bhs))
                return true;
        if (cmdsn == s->exp_cmdsn) {
                s->exp_cmdsn++;
                return true;
        }
        if (iscsi_sn_lt(s->exp_cmdsn, cmdsn) && iscsi_sn_le(cmdsn, iscsi_session_max_cmdsn(s))) {
                /* One connection keeps commands in order; a gap means the initiator skipped. */
                log_warn("%s: CmdSN %u ahead of ExpCmdSN %u", s->conn->peer, cmdsn, s->exp_cmdsn);
                s->exp_cmdsn = cmdsn + 1;
                return true;
        }
        log_warn("%s: CmdSN %u outside the window [%u, %u]: dropped", s->conn->peer, cmdsn,
                 s->exp_cmdsn, iscsi_session_max_cmdsn(s));
        return false;
}

static const char *conn_state_name(const struct iscsi_conn *c)
{
        switch (c->state) {
        case ISCSI_CONN_LOGIN:
                return "login";
        case ISCSI_CONN_FFP:
                return "full-feature";
        case ISCSI_CONN_LOGOUT:
                return "logout";
        case ISCSI_CONN_AWAIT_CLOSE:
                return "closing";
        default:
                return "closed";
        }
}

size_t iscsi_sessions_snapshot(struct iscsi_session_info *out, size_t max)
{
        size_t n = 0;
        pthread_mutex_lock(&sessions_lock);
        for (struct iscsi_session *s = sessions; s; s = s->next, n++) {
                if (n >= max)
                        continue;
                struct iscsi_session_info *r = &out[n];
                memset(r, 0, sizeof(*r));
                snprintf(r->initiator, sizeof(r->initiator), "%s", s->initiator);
                if (s->type == ISCSI_SESSION_NORMAL)
                        snprintf(r->target, sizeof(r->target), "%s", s->target_name);
                memcpy(r->isid, s->isid, sizeof(r->isid));
                r->tsih = s->tsih;
                r->id = s->id;
                if (s->target)
                        scsi_nexus_stats_read(&s->nexus, &r->io);
                /* The connection outlives its listing: destroy unlinks the session under this lock.
                 */
                if (s->conn) {
                        snprintf(r->peer, sizeof(r->peer), "%s", s->conn->peer);
                        r->cid = s->conn->login.cid;
                        snprintf(r->state, sizeof(r->state), "%s", conn_state_name(s->conn));
                        r->commands_in_flight = s->conn->tasks_active;
                }
        }
        pthread_mutex_unlock(&sessions_lock);
        return n;
}
