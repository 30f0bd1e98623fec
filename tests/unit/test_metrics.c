/*
 * The exporter's text (daemon/ctl/openmetrics.c) and its table (daemon/ctl/metrics_table.c):
 * every row names a member its scope's message has, and the formats come out as Prometheus
 * 0.0.4 and OpenMetrics 1.0 want them.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/metrics.h"
#include "tandem/openmetrics.h"

static const ProtobufCMessageDescriptor *scope_descriptor(enum metric_scope s)
{
        switch (s) {
        case SCOPE_DAEMON:
                return &tandem__admin__status__descriptor;
        case SCOPE_CLUSTER:
                return &tandem__admin__cluster_info__descriptor;
        case SCOPE_TARGET:
                return &tandem__admin__target_info__descriptor;
        case SCOPE_LUN:
                return &tandem__admin__lun_stats__descriptor;
        case SCOPE_REPL:
                return &tandem__admin__repl_lun_status__descriptor;
        }
        return NULL;
}

static bool name_ok(const char *n)
{
        if (strncmp(n, "tandem_", 7) != 0)
                return false;
        for (; *n; n++)
                if (!islower((unsigned char)*n) && !isdigit((unsigned char)*n) && *n != '_')
                        return false;
        return true;
}

static const ProtobufCFieldDescriptor *field(enum metric_scope s, const char *member)
{
        return protobuf_c_message_descriptor_get_field_by_name(scope_descriptor(s), member);
}

START_TEST(test_table)
{
        ck_assert_uint_ge(metrics_table_n, 20);
        for (size_t i = 0; i < metrics_table_n; i++) {
                const struct metric *m = &metrics_table[i];
                ck_assert_msg(name_ok(m->name), "%s: not a tandem_ name", m->name);
                ck_assert_msg(m->help && *m->help && !strchr(m->help, '\n'), "%s: help", m->name);
                for (size_t j = 0; j < i; j++)
                        ck_assert_msg(strcmp(metrics_table[j].name, m->name), "%s twice", m->name);
                size_t len = strlen(m->name);
                ck_assert_msg(len < 6 || strcmp(m->name + len - 6, "_total"),
                              "%s: a family name never ends in _total", m->name);
                if (m->kind == METRIC_INFO) {
                        for (size_t k = 0; m->info_members[k]; k++) {
                                const ProtobufCFieldDescriptor *f =
                                    field(m->scope, m->info_members[k]);
                                ck_assert_msg(f && f->type == PROTOBUF_C_TYPE_STRING, "%s: %s",
                                              m->name, m->info_members[k]);
                        }
                        continue;
                }
                const ProtobufCFieldDescriptor *f = field(m->scope, m->member);
                ck_assert_msg(f, "%s: its message has no member %s", m->name, m->member);
                switch (m->kind) {
                case METRIC_STATES:
                        ck_assert(f->type == PROTOBUF_C_TYPE_STRING && m->states && m->label);
                        break;
                case METRIC_HISTOGRAM:
                        ck_assert(f->type == PROTOBUF_C_TYPE_UINT64 &&
                                  f->label == PROTOBUF_C_LABEL_REPEATED);
                        break;
                default:
                        ck_assert_msg(f->label == PROTOBUF_C_LABEL_REPEATED ||
                                          f->type == PROTOBUF_C_TYPE_UINT64 ||
                                          f->type == PROTOBUF_C_TYPE_UINT32 ||
                                          f->type == PROTOBUF_C_TYPE_BOOL,
                                      "%s: %s is not a number", m->name, m->member);
                }
        }
}
END_TEST

/* A daemon with one target, one LUN, one replicated LUN. */
struct fixture {
        Tandem__Admin__Status status;
        Tandem__Admin__ClusterInfo cluster;
        Tandem__Admin__TargetInfo target, *targets[1];
        Tandem__Admin__Stats stats;
        Tandem__Admin__LunStats lun, *luns[1];
        uint64_t hist[24];
        Tandem__Admin__ReplStatus repl;
        Tandem__Admin__ReplLunStatus rl, *rls[1];
        uint32_t members[2];
};

static void fixture_init(struct fixture *f)
{
        memset(f, 0, sizeof(*f));
        tandem__admin__status__init(&f->status);
        tandem__admin__cluster_info__init(&f->cluster);
        tandem__admin__target_info__init(&f->target);
        tandem__admin__stats__init(&f->stats);
        tandem__admin__lun_stats__init(&f->lun);
        tandem__admin__repl_status__init(&f->repl);
        tandem__admin__repl_lun_status__init(&f->rl);
        f->status.version = "1.2.3";
        f->status.instance = "in\"st\\a";
        f->status.uptime_s = 42;
        f->status.cluster = &f->cluster;
        f->cluster.enabled = true;
        f->cluster.quorate = true;
        f->members[0] = 1;
        f->members[1] = 2;
        f->cluster.members = f->members;
        f->cluster.n_members = 2;
        f->target.iqn = "iqn.2026-11.io.tandem:t";
        f->target.sessions = 3;
        f->targets[0] = &f->target;
        f->status.targets = f->targets;
        f->status.n_targets = 1;
        f->lun.iqn = "iqn.2026-11.io.tandem:t";
        f->lun.lun = 7;
        f->lun.reads = 11;
        f->lun.writes = 22;
        f->lun.read_bytes = 11 * 4096;
        f->lun.write_bytes = 22 * 4096;
        f->hist[0] = 1;  /* < 1 us */
        f->hist[5] = 30; /* [16, 32) us */
        f->hist[23] = 2; /* >= 2^22 us */
        f->lun.latency_hist_us = f->hist;
        f->lun.n_latency_hist_us = 24;
        f->luns[0] = &f->lun;
        f->stats.luns = f->luns;
        f->stats.n_luns = 1;
        f->rl.iqn = "iqn.2026-11.io.tandem:t";
        f->rl.lun = 7;
        f->rl.role = "Primary";
        f->rl.disk = "UpToDate";
        f->rl.peer_disk = "Outdated";
        f->rl.connection = "SyncSource";
        f->rl.out_of_sync_bytes = 1048576;
        f->rl.sync_rate_bps = 5000000;
        f->rl.promotions = 2;
        f->rl.promote_epoch = 9;
        f->rls[0] = &f->rl;
        f->repl.luns = f->rls;
        f->repl.n_luns = 1;
}

static char *format(struct fixture *f, bool om)
{
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        struct tdm_metrics_input in = {&f->status, &f->repl, &f->stats};
        ck_assert_int_eq(tdm_metrics_format(out, &in, om), 0);
        fclose(out);
        return text;
}

#define HAS(text, line) ck_assert_msg(strstr(text, line "\n"), "no line \"%s\"", line)
#define LBL             "{target=\"iqn.2026-11.io.tandem:t\",lun=\"7\""

START_TEST(test_prometheus_text)
{
        struct fixture f;
        fixture_init(&f);
        char *t = format(&f, false);
        HAS(t, "# TYPE tandem_lun_reads_total counter");
        HAS(t, "tandem_lun_reads_total" LBL "} 11");
        HAS(t, "tandem_lun_written_bytes_total" LBL "} 90112");
        HAS(t, "tandem_info{version=\"1.2.3\",instance=\"in\\\"st\\\\a\"} 1");
        HAS(t, "tandem_uptime_seconds 42");
        HAS(t, "tandem_cluster_members 2");
        HAS(t, "tandem_cluster_quorate 1");
        HAS(t, "tandem_sessions{target=\"iqn.2026-11.io.tandem:t\"} 3");
        /* Cumulative buckets, le in seconds, the last one +Inf. */
        HAS(t, "# TYPE tandem_lun_latency_seconds histogram");
        HAS(t, "tandem_lun_latency_seconds_bucket" LBL ",le=\"0.000001\"} 1");
        HAS(t, "tandem_lun_latency_seconds_bucket" LBL ",le=\"0.000016\"} 1");
        HAS(t, "tandem_lun_latency_seconds_bucket" LBL ",le=\"0.000032\"} 31");
        HAS(t, "tandem_lun_latency_seconds_bucket" LBL ",le=\"4.194304\"} 31");
        HAS(t, "tandem_lun_latency_seconds_bucket" LBL ",le=\"+Inf\"} 33");
        ck_assert_ptr_null(strstr(t, "le=\"8.388608\""));
        HAS(t, "tandem_replication_role" LBL ",role=\"Primary\"} 1");
        HAS(t, "tandem_replication_role" LBL ",role=\"Secondary\"} 0");
        HAS(t, "tandem_replication_disk_state" LBL ",state=\"UpToDate\"} 1");
        HAS(t, "tandem_replication_peer_disk_state" LBL ",state=\"Outdated\"} 1");
        HAS(t, "tandem_replication_connection_state" LBL ",state=\"SyncSource\"} 1");
        HAS(t, "tandem_replication_connection_state" LBL ",state=\"Connected\"} 0");
        HAS(t, "tandem_replication_out_of_sync_bytes" LBL "} 1048576");
        HAS(t, "tandem_replication_resync_rate_bytes_per_second" LBL "} 5000000");
        HAS(t, "tandem_replication_promotions_total" LBL "} 2");
        ck_assert_ptr_null(strstr(t, "# EOF"));
        /* Every sample line's family was announced by a TYPE line before it. */
        for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n"))
                ck_assert_msg(line[0] == '#' || strncmp(line, "tandem_", 7) == 0, "%s", line);
        free(t);
}
END_TEST

START_TEST(test_openmetrics)
{
        struct fixture f;
        fixture_init(&f);
        char *t = format(&f, true);
        HAS(t, "# TYPE tandem_lun_reads counter");
        HAS(t, "tandem_lun_reads_total" LBL "} 11");
        HAS(t, "# TYPE tandem_info info");
        HAS(t, "tandem_info_info{version=\"1.2.3\",instance=\"in\\\"st\\\\a\"} 1");
        size_t n = strlen(t);
        ck_assert(n > 6 && strcmp(t + n - 6, "# EOF\n") == 0);
        free(t);
}
END_TEST

/* No replicated LUN, no LUN: families stay, samples go. */
START_TEST(test_empty)
{
        struct fixture f;
        fixture_init(&f);
        f.repl.n_luns = 0;
        f.stats.n_luns = 0;
        char *t = format(&f, false);
        HAS(t, "# TYPE tandem_replication_role gauge");
        ck_assert_ptr_null(strstr(t, "tandem_replication_role{"));
        ck_assert_ptr_null(strstr(t, "tandem_lun_reads_total{"));
        free(t);
        struct tdm_metrics_input in = {&f.status, NULL, NULL};
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        ck_assert_int_eq(tdm_metrics_format(out, &in, true), 0);
        fclose(out);
        ck_assert_ptr_nonnull(strstr(text, "tandem_uptime_seconds 42\n"));
        free(text);
}
END_TEST

START_TEST(test_accept)
{
        ck_assert(!tdm_metrics_wants_openmetrics(NULL));
        ck_assert(!tdm_metrics_wants_openmetrics("*/*"));
        ck_assert(!tdm_metrics_wants_openmetrics("text/plain;version=0.0.4"));
        ck_assert(tdm_metrics_wants_openmetrics(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"));
}
END_TEST

int main(void)
{
        Suite *s = suite_create("metrics");
        TCase *tc = tcase_create("core");
        tcase_add_test(tc, test_table);
        tcase_add_test(tc, test_prometheus_text);
        tcase_add_test(tc, test_openmetrics);
        tcase_add_test(tc, test_empty);
        tcase_add_test(tc, test_accept);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
