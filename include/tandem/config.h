/*
 * The configuration model: daemon settings plus targets, LUNs, ACLs and CHAP; loading,
 * validating and saving it (daemon/config/). Also provides, through the headers it includes,
 * the names and values it is written in and the edits the admin plane makes.
 */
#ifndef TANDEM_CONFIG_H
#define TANDEM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/config_names.h"
#include "tandem/config_values.h"

#define TDM_CHAP_MAX        256
#define TDM_MAX_LISTEN      8
#define TDM_MAX_ACL         64
#define TDM_LUN_ID_MAX      255 /* LUN ids are 0..255 (flat addressing of SCSI_MAX_LUNS) */
#define TDM_CHAP_SECRET_MIN 12  /* RFC 7143 12.1.3: at least 96 bits of secret */

/*
 * Defaults (see deploy/examples/tandem.conf for the reasoning behind each).
 * MaxBurstLength may be at most 2^24-1 (RFC 7143 13.13), so "16 MiB" is 16 MiB - 1 KiB,
 * the largest multiple of 512 below the limit (open-iscsi's default too).
 */
#define TDM_DEFAULT_LISTEN              "0.0.0.0:3260"
#define TDM_DEFAULT_STATE_DIR           "/var/lib/tandem"
#define TDM_DEFAULT_INSTANCE            "default"
#define TDM_DEFAULT_MAX_RECV_DSL        262144u
#define TDM_DEFAULT_MAX_BURST           16776192u
#define TDM_DEFAULT_FIRST_BURST         65536u
#define TDM_DEFAULT_MAX_OUTSTANDING_R2T 1u
#define TDM_DEFAULT_QUEUE_DEPTH         128u
#define TDM_DEFAULT_NOP_INTERVAL_S      5u
#define TDM_DEFAULT_NOP_TIMEOUT_S       10u
#define TDM_DEFAULT_LOGIN_TIMEOUT_S     15u
/* Resource limits (docs/man/tandem.conf.5, ISCSI): what one initiator or address may take. */
#define TDM_DEFAULT_MAX_SESSIONS          256u
#define TDM_DEFAULT_MAX_SESSIONS_PER_INIT 64u
#define TDM_DEFAULT_MAX_PENDING_LOGINS    256u
#define TDM_DEFAULT_LOGIN_RATE            8u  /* new connections per second per address */
#define TDM_DEFAULT_LOGIN_BURST           64u /* ... at once (a host logging in everything) */
#define TDM_DEFAULT_MAX_CONN_OUTPUT       (64u << 20)
#define TDM_DEFAULT_MAX_CONN_WRITE_DATA   (256u << 20)
#define TDM_DEFAULT_OUTPUT_TIMEOUT_S      30u
#define TDM_DEFAULT_BLOCK_SIZE            512u
#define TDM_MAX_PHYSICAL_BLOCK_SIZE       65536u
#define TDM_DEFAULT_TPGT                  1u

/*
 * CHAP: user/secret are what the initiator must present (the target checks them);
 * mutual_user/mutual_secret are what the target answers with when the initiator
 * challenges it back (mutual CHAP). enabled = false: no CHAP required.
 */
struct tdm_chap_cfg {
        bool enabled;
        char user[TDM_CHAP_MAX];
        char secret[TDM_CHAP_MAX];
        bool mutual;
        char mutual_user[TDM_CHAP_MAX];
        char mutual_secret[TDM_CHAP_MAX];
};

/* Credentials a login must present (the iSCSI layer checks; the target registry decides). */
struct tdm_auth {
        struct tdm_chap_cfg chap;
};

#define TDM_REPL_MAX_NODES          2 /* this node and one peer per replicated LUN (for now) */
#define TDM_REPL_SECRET_MIN         12
#define TDM_DEFAULT_REPL_TIMEOUT_MS 2000u
#define TDM_REPL_TIMEOUT_MAX_MS     10000u /* well below the initiators' 15 s abort timer */
#define TDM_REPL_TIMEOUT_MIN_MS     200u
#define TDM_DEFAULT_RESYNC_RATE     (100ull * 1024 * 1024) /* bytes/s */
#define TDM_DEFAULT_RESYNC_MIN_RATE (10ull * 1024 * 1024)  /* floor under live writes */

/* One node of a replicated LUN ("replication.nodes" entries). */
struct tdm_repl_node {
        uint32_t id;       /* 1..255, unique in the list; one entry is this node (node_id) */
        char name[64];     /* for messages and discard-node-NAME; default "node<id>" */
        char address[128]; /* "HOST" or "HOST:PORT" where this node's replicator listens */
};

/*
 * Replication of one LUN (absent: not replicated). The same block goes into the config of
 * every node; only the top-level node_id differs. Policy names are those of enum
 * repl_sb_policy: "disconnect", "discard-zero-changes", "discard-younger-primary",
 * "discard-node-NAME" (then split_brain_node holds NAME).
 */
struct tdm_repl_cfg {
        bool enabled;
        uint16_t port; /* default port of nodes[] addresses without one; default 7789 */
        char secret[TDM_CHAP_MAX];
        struct tdm_repl_node nodes[TDM_REPL_MAX_NODES];
        size_t n_nodes;
        char metadata[4096];      /* metadata file; "" = <state_dir>/repl-<naa>.md */
        uint32_t timeout_ms;      /* a silent peer is dropped from the ack set after this */
        uint64_t resync_rate;     /* bytes/s, upper bound */
        uint64_t resync_min_rate; /* bytes/s the resync keeps even under live writes */
        int split_brain;          /* enum repl_sb_policy */
        char split_brain_node[64];
        /*
         * How initiators see the pair's target ports: false ("shared", the default) one port
         * and one port group that moves with the floating portal IP; true ("per_node") one
         * port group per node (id = node id) for ALUA multipath to both nodes.
         */
        bool ports_per_node;
        /*
         * ALUA transitions: false ("implicit", the default) only the cluster moves the
         * Primary; true ("explicit") an initiator may also ask with SET TARGET PORT GROUPS,
         * which runs stpg_handler (absolute path) to move it. Needs ports_per_node.
         */
        bool alua_explicit;
        char stpg_handler[4096];
        /*
         * The link's frames after the handshake: 0 ("authenticate", the default) each carries
         * an AEAD tag over all of it; 1 ("encrypt") its message and data are encrypted too.
         * Both nodes must have the same (TDM_LINK_PROTECT_*).
         */
        int link_protection;
};
#define TDM_LINK_PROTECT_AUTHENTICATE 0
#define TDM_LINK_PROTECT_ENCRYPT      1

struct tdm_lun_cfg {
        uint64_t lun;
        char path[4096];
        uint64_t size; /* bytes; 0 = use the existing file/device size */
        bool thin;
        bool direct; /* O_DIRECT */
        uint32_t block_size;
        /*
         * Physical block size reported to initiators (READ CAPACITY(16) exponent), e.g. 4096
         * on 512-byte blocks for "512e". 0 = block_size; else block_size times a power of
         * two, at most TDM_MAX_PHYSICAL_BLOCK_SIZE.
         */
        uint32_t physical_block_size;
        char naa[33];    /* 32 hex digits: NAA type 6 designator; generated on add */
        char serial[33]; /* generated on add */
        bool wce;        /* write cache enabled at start */
        bool readonly;   /* write protected: opened read-only, every medium change refused */
        /* naa and serial were generated when the file was read (it names none): a reload
         * keeps the identity the LUN runs with. */
        bool identity_generated;
        struct tdm_repl_cfg repl;
};

struct tdm_target_cfg {
        char iqn[TDM_IQN_MAX];
        char alias[256];
        uint16_t tpgt;
        struct tdm_lun_cfg *luns;
        size_t n_luns;
        char (*acl)[TDM_IQN_MAX]; /* initiator IQNs; "ALL" allows everyone */
        size_t n_acl;
        struct tdm_chap_cfg chap;
};

struct tdm_iscsi_cfg {
        uint32_t max_recv_dsl; /* what the target accepts per PDU */
        uint32_t max_burst;
        uint32_t first_burst;
        bool initial_r2t;
        bool immediate_data;
        uint32_t max_outstanding_r2t;
        uint32_t queue_depth;    /* CmdSN window per session */
        uint32_t nop_interval_s; /* 0 disables target pings */
        uint32_t nop_timeout_s;
        uint32_t login_timeout_s;
        /* Resource limits against hostile or broken initiators. */
        uint32_t max_sessions;               /* sessions of every initiator together */
        uint32_t max_sessions_per_initiator; /* sessions of one initiator name */
        uint32_t max_pending_logins;         /* connections that have not finished login */
        uint32_t login_rate;                 /* new connections per second from one address */
        uint32_t login_burst;                /* ... taken at once before the rate applies */
        uint32_t max_conn_output;     /* bytes of unsent output before a connection stops reading */
        uint32_t max_conn_write_data; /* bytes of write data one connection holds at once */
        uint32_t output_timeout_s;    /* queued output unread this long: the connection drops */
};

/*
 * Corosync membership ("cluster = { enabled = true; group = \"tandem\"; }"). Enabled needs
 * node_id, and corosync.conf's nodeid of this node must equal it (see daemon/cluster/).
 */
#define TDM_DEFAULT_CLUSTER_GROUP "tandem"
struct tdm_cluster_cfg {
        bool enabled;
        char group[64]; /* CPG group name; default "tandem" */
        /*
         * Absolute path of the fence-peer handler ("" none). A two_node cluster needs it: a
         * Primary whose peer left the membership holds writes until the handler says the peer
         * is fenced (see include/tandem/cluster.h).
         */
        char fence_peer[4096];
};
/*
 * The OpenMetrics exporter ("metrics = { listen = \"127.0.0.1:9750\"; };"): an HTTP endpoint
 * serving GET /metrics on a numeric IP:PORT. Off ("" listen) unless configured.
 */
struct tdm_metrics_cfg {
        char listen[128]; /* "IP:PORT" or "[IPV6]:PORT"; "" = off */
};

/* In cluster mode a dead peer must be noticed within 2 s (replication.timeout at most this). */
#define TDM_CLUSTER_REPL_TIMEOUT_MAX_MS 2000u
/* Writes of a Primary are never held longer than this: replication.timeout + the hold. */
#define TDM_CLUSTER_IO_HOLD_MAX_MS 10000u

struct tdm_config {
        char listen[TDM_MAX_LISTEN][128]; /* "ADDR:PORT" or "[V6]:PORT" */
        size_t n_listen;
        char state_dir[4096];
        char instance[TDM_INSTANCE_MAX];
        unsigned threads; /* 0 = number of cores */
        char log_file[4096];
        int log_level; /* syslog level */
        bool log_syslog;
        struct tdm_iscsi_cfg iscsi;
        struct tdm_chap_cfg discovery_chap;
        uint32_t node_id; /* this node (replication.nodes ids); 0 = no replicated LUNs allowed */
        /* ---- cluster (issue 4): Corosync CPG membership and quorum ---- */
        struct tdm_cluster_cfg cluster;
        /* ---- end cluster ---- */
        struct tdm_metrics_cfg metrics;
        struct tdm_target_cfg *targets;
        size_t n_targets;
        /* Set by load/parse when LUNs lacked naa/serial and got fresh ones: save to keep them. */
        bool identities_generated;
};

/*
 * Error text is written to err (naming the field and the reason). All return 0 or -errno.
 * load/parse start from the defaults, generate missing LUN identities (setting
 * identities_generated) and validate; on failure cfg is left empty (safe to free).
 */
void tdm_config_defaults(struct tdm_config *cfg);
/* A LUN with defaults (block size 512, wce on, not thin, not direct, writable, size 0). */
void tdm_lun_defaults(struct tdm_lun_cfg *lun);
int tdm_config_load(const char *path, struct tdm_config *cfg, char *err, size_t errlen);
int tdm_config_parse_string(const char *text, struct tdm_config *cfg, char *err, size_t errlen);
/* Atomic save: temp file, fsync, rename, fsync of the directory. Validates first. */
int tdm_config_save(const char *path, const struct tdm_config *cfg, char *err, size_t errlen);
int tdm_config_validate(const struct tdm_config *cfg, char *err, size_t errlen);
void tdm_config_free(struct tdm_config *cfg);
/*
 * Deep copy: dst receives its own arrays (free with tdm_config_free); on failure dst is left
 * empty.
 */
int tdm_config_copy(struct tdm_config *dst, const struct tdm_config *src);

/* Queries: the target (iSCSI names compare case-insensitively) or LUN, or NULL. */
struct tdm_target_cfg *tdm_config_find_target(struct tdm_config *cfg, const char *iqn);
struct tdm_lun_cfg *tdm_config_find_lun(struct tdm_target_cfg *t, uint64_t lun);

/*
 * Checks the admin plane and tandemctl share with validation. field names the place in
 * messages: "targets[0].luns[1].physical_block_size", "physical-block-size"; for CHAP the
 * prefix of its fields ("chap", "discovery.chap"; "" for none).
 */
/* physical_block_size against block_size (0 passes: it means block_size). */
int tdm_physical_block_size_check(uint32_t physical_block_size, uint32_t block_size,
                                  const char *field, char *err, size_t errlen);
int tdm_chap_check(const struct tdm_chap_cfg *chap, const char *field, char *err, size_t errlen);

#include "tandem/config_edit.h"

#endif
