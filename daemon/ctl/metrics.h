/*
 * The table of exported metrics (metrics_table.c) as daemon/ctl/openmetrics.c reads it: each
 * row is one metric family, where its samples come from (a member of an admin message, by
 * its .proto name) and how it is shown.
 */
#ifndef TANDEM_CTL_METRICS_H
#define TANDEM_CTL_METRICS_H

#include <stddef.h>

enum metric_kind {
        METRIC_GAUGE,
        METRIC_COUNTER,   /* family name without _total; samples get it */
        METRIC_STATES,    /* a gauge per state: 1 for the member's current value, else 0 */
        METRIC_HISTOGRAM, /* latency buckets of 2^i us, shown in seconds (cumulative, +Inf) */
        METRIC_INFO,      /* one sample of 1 whose labels are the members named */
};

enum metric_scope {
        SCOPE_DAEMON,  /* Status */
        SCOPE_CLUSTER, /* Status.cluster */
        SCOPE_TARGET,  /* each TargetInfo: label target */
        SCOPE_LUN,     /* each LunStats: labels target, lun */
        SCOPE_REPL,    /* each ReplLunStatus: labels target, lun */
};

struct metric {
        const char *name; /* tandem_... */
        enum metric_kind kind;
        enum metric_scope scope;
        const char *member; /* of the scope's message: a number, bool, string, repeated uint64 */
        const char *help;
        const char *label;               /* METRIC_STATES: the state's label */
        const char *const *states;       /* METRIC_STATES: NULL-terminated */
        const char *const *info_members; /* METRIC_INFO: members that become labels */
};

extern const struct metric metrics_table[];
extern const size_t metrics_table_n;

#endif
