/*
 * What the exporter shows: one row per metric family. A row names the member of an admin
 * message (proto/admin.proto) its samples come from; test_metrics checks every row against
 * the messages, so a renamed member fails the tests, not a scrape.
 */
#include "metrics.h"

static const char *const roles[] = {"Primary", "Secondary", NULL};
static const char *const disks[] = {"UpToDate", "Outdated", "Inconsistent",
                                    "Diskless", "DUnknown", NULL};
static const char *const connections[] = {"StandAlone",   "Connecting", "Connected",
                                          "SyncSource",   "SyncTarget", "VerifySource",
                                          "VerifyTarget", NULL};
static const char *const info_labels[] = {"version", "instance", NULL};

#define STATES(label_, list_) .label = label_, .states = list_
/* name, kind, scope, member, help[, STATES(...) or .info_members = ...] */
#define M(name_, kind_, scope_, member_, help_, ...)                                               \
        {                                                                                          \
                .name = name_, .kind = kind_, .scope = scope_, .member = member_, .help = help_,   \
                __VA_ARGS__                                                                        \
        }

const struct metric metrics_table[] = {
    M("tandem_info", METRIC_INFO, SCOPE_DAEMON, NULL, "tandemd's version and instance",
      .info_members = info_labels),
    M("tandem_uptime_seconds", METRIC_GAUGE, SCOPE_DAEMON, "uptime_s",
      "Seconds since tandemd started"),
    M("tandem_cluster_enabled", METRIC_GAUGE, SCOPE_CLUSTER, "enabled",
      "1 when tandemd is in Corosync cluster mode"),
    M("tandem_cluster_quorate", METRIC_GAUGE, SCOPE_CLUSTER, "quorate",
      "1 when this node's cluster partition has quorum"),
    M("tandem_cluster_members", METRIC_GAUGE, SCOPE_CLUSTER, "members",
      "Nodes in tandemd's CPG group"),
    M("tandem_sessions", METRIC_GAUGE, SCOPE_TARGET, "sessions",
      "iSCSI sessions logged in to the target"),
    M("tandem_lun_reads", METRIC_COUNTER, SCOPE_LUN, "reads", "Read commands"),
    M("tandem_lun_writes", METRIC_COUNTER, SCOPE_LUN, "writes", "Write commands"),
    M("tandem_lun_other_commands", METRIC_COUNTER, SCOPE_LUN, "other",
      "Commands other than reads and writes"),
    M("tandem_lun_errors", METRIC_COUNTER, SCOPE_LUN, "errors",
      "Commands answered with a status other than GOOD"),
    M("tandem_lun_read_bytes", METRIC_COUNTER, SCOPE_LUN, "read_bytes",
      "Bytes read by read commands"),
    M("tandem_lun_written_bytes", METRIC_COUNTER, SCOPE_LUN, "write_bytes",
      "Bytes written by write commands"),
    M("tandem_lun_latency_seconds", METRIC_HISTOGRAM, SCOPE_LUN, "latency_hist_us",
      "Command latency from receipt to answer (no _sum: the data path keeps none)"),
    M("tandem_replication_role", METRIC_STATES, SCOPE_REPL, "role",
      "This node's role for the LUN (1 for the current one)", STATES("role", roles)),
    M("tandem_replication_disk_state", METRIC_STATES, SCOPE_REPL, "disk",
      "This node's disk state (1 for the current one)", STATES("state", disks)),
    M("tandem_replication_peer_disk_state", METRIC_STATES, SCOPE_REPL, "peer_disk",
      "The peer's disk state as this node knows it (1 for the current one)",
      STATES("state", disks)),
    M("tandem_replication_connection_state", METRIC_STATES, SCOPE_REPL, "connection",
      "The replication link's state (1 for the current one)", STATES("state", connections)),
    M("tandem_replication_out_of_sync_bytes", METRIC_GAUGE, SCOPE_REPL, "out_of_sync_bytes",
      "Bytes marked out of sync with the peer"),
    M("tandem_replication_resync_rate_bytes_per_second", METRIC_GAUGE, SCOPE_REPL, "sync_rate_bps",
      "Resync (or verify) rate now"),
    M("tandem_replication_resync_total_bytes", METRIC_GAUGE, SCOPE_REPL, "sync_total_bytes",
      "Bytes the running resync or verify covers"),
    M("tandem_replication_resync_done_bytes", METRIC_GAUGE, SCOPE_REPL, "sync_done_bytes",
      "Bytes the running resync or verify has done"),
    M("tandem_replication_split_brain", METRIC_GAUGE, SCOPE_REPL, "split_brain",
      "1 when the nodes refused to connect after a split brain"),
    M("tandem_replication_promotions", METRIC_COUNTER, SCOPE_REPL, "promotions",
      "Times this node was promoted to Primary since tandemd started"),
    M("tandem_replication_promote_epoch", METRIC_GAUGE, SCOPE_REPL, "promote_epoch",
      "Promotions of the pair ever (a count both nodes keep)"),
    M("tandem_replication_writes", METRIC_COUNTER, SCOPE_REPL, "writes_replicated",
      "Writes sent to the peer"),
    M("tandem_replication_resync_sent_bytes", METRIC_COUNTER, SCOPE_REPL, "resync_bytes_sent",
      "Bytes sent as resync source since start"),
    M("tandem_replication_resync_received_bytes", METRIC_COUNTER, SCOPE_REPL,
      "resync_bytes_received", "Bytes received as resync target since start"),
};
const size_t metrics_table_n = sizeof(metrics_table) / sizeof(metrics_table[0]);
