/*
 * The synchronous block replicator as the rest of tandemd sees it: per-LUN state in DRBD's
 * words, admin operations, and the status the CLI prints.
 */
#ifndef TANDEM_REPL_H
#define TANDEM_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum repl_role {
        REPL_ROLE_SECONDARY = 0,
        REPL_ROLE_PRIMARY = 1,
};

enum repl_disk_state {
        REPL_DISK_DISKLESS = 0,
        REPL_DISK_INCONSISTENT = 1,
        REPL_DISK_OUTDATED = 2,
        REPL_DISK_UPTODATE = 3,
        REPL_DISK_UNKNOWN = 4, /* the peer's, while not connected and never marked */
};

enum repl_conn_state {
        REPL_CONN_STANDALONE = 0,
        REPL_CONN_CONNECTING = 1,
        REPL_CONN_CONNECTED = 2,
        REPL_CONN_SYNC_SOURCE = 3,
        REPL_CONN_SYNC_TARGET = 4,
        REPL_CONN_VERIFY_SOURCE = 5,
        REPL_CONN_VERIFY_TARGET = 6,
};

/* Split-brain policies (config: replication.split_brain). */
enum repl_sb_policy {
        REPL_SB_DISCONNECT = 0, /* both StandAlone until the admin resolves it */
        REPL_SB_DISCARD_ZERO_CHANGES = 1,
        REPL_SB_DISCARD_YOUNGER_PRIMARY = 2,
        REPL_SB_DISCARD_NODE = 3, /* discard-node-NAME */
};

const char *repl_role_name(enum repl_role r);
const char *repl_disk_name(enum repl_disk_state d);
const char *repl_conn_name(enum repl_conn_state c);

struct repl_status {
        char iqn[224];
        uint64_t lun;
        char naa[33];
        enum repl_role role;
        enum repl_disk_state disk;
        enum repl_disk_state peer_disk;
        enum repl_conn_state conn;
        uint32_t node_id;
        uint32_t peer_node_id;
        char peer_name[64];
        char peer_address[160];
        uint64_t size_bytes;
        uint64_t out_of_sync_bytes;
        /* Resync (or verify) progress. */
        uint64_t sync_total_bytes;
        uint64_t sync_done_bytes;
        uint64_t sync_rate_bps; /* recent bytes per second */
        uint64_t sync_eta_s;
        bool sync_paused;
        uint64_t verify_oos_bytes; /* out-of-sync bytes the last/current verify found */
        bool split_brain;
        char last_error[256]; /* why the connection was last refused or dropped */
        uint64_t gen_current, gen_bitmap, gen_history[2];
        uint64_t writes_replicated;
        uint64_t resync_bytes_sent;     /* since start, as sync source */
        uint64_t resync_bytes_received; /* since start, as sync target */
        uint64_t promotions;            /* times this node was promoted since start */
        uint64_t promote_epoch;         /* promotions of the pair, ever (Lamport count) */
};

/*
 * Status of every replicated LUN, in configuration order: calls cb once per LUN.
 * Control-plane thread.
 */
void repl_for_each_status(void (*cb)(void *arg, const struct repl_status *st), void *arg);

/*
 * Admin operations on the replicated LUN `lun` of target `iqn`. Each returns 0 or a
 * negative errno with err naming the reason ("promote: disk is Outdated; use --force ...").
 */
int repl_admin_promote(const char *iqn, uint64_t lun, bool force, char *err, size_t errlen);
int repl_admin_demote(const char *iqn, uint64_t lun, char *err, size_t errlen);
int repl_admin_connect(const char *iqn, uint64_t lun, char *err, size_t errlen);
int repl_admin_disconnect(const char *iqn, uint64_t lun, char *err, size_t errlen);
/* Online verify; with resync the blocks found out of sync are resynced afterwards. */
int repl_admin_verify(const char *iqn, uint64_t lun, bool resync, char *err, size_t errlen);
int repl_admin_resync_pause(const char *iqn, uint64_t lun, bool pause, char *err, size_t errlen);
/* Declares the local data bad: the whole LUN is resynced from the peer (SyncTarget). */
int repl_admin_invalidate(const char *iqn, uint64_t lun, char *err, size_t errlen);
/*
 * Split brain, run on the node whose changes since the split are to be thrown away: it
 * becomes SyncTarget of the other on the next connect.
 */
int repl_admin_resolve_split_brain(const char *iqn, uint64_t lun, char *err, size_t errlen);
/*
 * Brand-new pair whose disks are known to be identical (both all zeroes): run on one node
 * while Connected and both are Inconsistent with no history; both become UpToDate without
 * the initial full sync.
 */
int repl_admin_skip_initial_sync(const char *iqn, uint64_t lun, char *err, size_t errlen);

/* ---- The daemon's side: lifecycle (the target registry). ---- */

struct tdm_lun_cfg;
struct tdm_medium;
struct repl_lun;

/*
 * Opens the LUN's replication metadata (creating it for a new pair) and wraps local (this
 * node's medium; the replicator owns it from here) in a replicated medium: the LUN's medium
 * is repl_lun_medium(). Nothing runs before repl_lun_start(); the LUN starts Secondary
 * (standby). 0 or -errno with err naming the field or file; on failure local is the
 * caller's still.
 */
int repl_lun_create(struct tdm_medium *local, const struct tdm_lun_cfg *cfg, const char *iqn,
                    uint32_t node_id, const char *state_dir, struct repl_lun **out, char *err,
                    size_t errlen);
int repl_lun_start(struct repl_lun *r);
struct tdm_medium *repl_lun_medium(struct repl_lun *r);
/* This node's medium under it. */
struct tdm_medium *repl_lun_local(struct repl_lun *r);
/* The replicated LUN whose medium m is, or NULL (a LUN of this node alone). */
struct repl_lun *repl_lun_from_medium(struct tdm_medium *m);
/*
 * Daemon shutdown, before the iSCSI workers stop: new commands get NOT READY, changes in
 * flight complete (waiting for the peer at most the hold bound), then every peer connection
 * closes.
 */
void repl_quiesce_all(void);
/*
 * Control thread, before the LUN leaves its target: stops serving, waits for changes in
 * flight, stops the threads and closes the metadata cleanly. The medium stays valid (it
 * refuses changes) until the LUN's last reference destroys it.
 */
void repl_lun_stop(struct repl_lun *r);
/*
 * Control thread: grows the replicated LUN to size bytes on both nodes (this node's store,
 * then the peer's, then both bitmaps). Only a Primary connected to an UpToDate peer; the
 * peer extends a file itself, a block device must be grown there first. new_range_differs:
 * this node's new range is not known to equal the peer's (a block device): it is marked out
 * of sync. 0 or -errno with err saying why (nothing changed but this node's store).
 */
int repl_lun_grow(struct repl_lun *r, uint64_t size, bool new_range_differs, char *err,
                  size_t errlen);

#endif
