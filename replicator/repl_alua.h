/*
 * ALUA of a replicated LUN (replicator/repl_lun.c): this node's and the peer's target port
 * groups, as the SCSI layer reports them (daemon/scsi/alua.c).
 */
#ifndef TANDEM_REPL_ALUA_H
#define TANDEM_REPL_ALUA_H

struct repl_lun;

/*
 * The peer's role or connection, or this node's role, may have changed: publishes the
 * peer group's state (unavailable unless connected; active/optimized if the peer is
 * Primary, standby if Secondary) and this node's (from lun->standby). If either differs
 * from what was last published, every I_T nexus of the LUN gets ASYMMETRIC ACCESS STATE
 * CHANGED once. Call with r->lock held (it takes no lock), after the fields changed.
 */
void repl_alua_changed(struct repl_lun *r);

#endif
