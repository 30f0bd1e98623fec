/* Data-plane worker threads and the listening sockets that feed them. */
#ifndef TANDEM_WORKER_H
#define TANDEM_WORKER_H

#include <qb/qbloop.h>

#include "tandem/config.h"

/* Starts n worker threads (0 = one per core). */
int iscsi_workers_start(unsigned n, const struct tdm_iscsi_cfg *cfg);
void iscsi_workers_stop(void);
/* Opens the listening socket for "ADDR:PORT" and accepts on the control loop. */
int iscsi_listen_add(qb_loop_t *loop, const char *hostport);
void iscsi_listen_close_all(qb_loop_t *loop);

#endif
