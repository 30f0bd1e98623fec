/* tandemd: the tandem iSCSI target daemon. */
#include <errno.h>
#include <getopt.h>
#include <qb/qbloop.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tandem/admin_ipc.h"
#include "tandem/cluster.h"
#include "tandem/config.h"
#include "tandem/exporter.h"
#include "tandem/iscsi_portal.h"
#include "tandem/reload.h"
#include "tandem/log.h"
#include "tandem/net.h"
#include "tandem/registry.h"
#include "tandem/repl.h"
#include "tandem/sd_notify.h"

struct daemon_opts {
        bool foreground;
        bool check_config; /* load and validate the config, report, exit */
        const char *config;
        const char *listen[TDM_MAX_LISTEN];
        size_t n_listen;
        const char *state_dir;
        const char *instance;
        const char *log_file;
        int threads;
        int log_level;
};

static void usage(FILE *out)
{
        fprintf(out,
                "usage: tandemd [--foreground] [--config FILE] [--listen ADDR:PORT ...]\n"
                "               [--state-dir DIR] [--instance NAME] [--threads N]\n"
                "               [--log-file FILE] [--debug] [--check-config]\n"
                "\n"
                "Serves iSCSI targets. Targets, LUNs, ACLs and CHAP come from the config file\n"
                "(default STATE_DIR/tandem.conf) and from tandemctl; changes are saved there.\n"
                "--check-config reads and validates the config (with the other options applied),\n"
                "prints what it holds and exits: 0 valid, 1 not (the error names the field).\n"
                "Backing files and devices are opened only when tandemd starts.\n");
}

static int parse_args(int argc, char **argv, struct daemon_opts *o)
{
        static const struct option longopts[] = {
            {"foreground", no_argument, NULL, 'f'},
            {"config", required_argument, NULL, 'c'},
            {"listen", required_argument, NULL, 'l'},
            {"state-dir", required_argument, NULL, 's'},
            {"instance", required_argument, NULL, 'i'},
            {"threads", required_argument, NULL, 't'},
            {"log-file", required_argument, NULL, 'L'},
            {"debug", no_argument, NULL, 'd'},
            {"check-config", no_argument, NULL, 'C'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        int ch;
        o->threads = -1;
        o->log_level = -1;
        while ((ch = getopt_long(argc, argv, "fc:l:s:i:t:L:dhC", longopts, NULL)) != -1) {
                switch (ch) {
                case 'f':
                        o->foreground = true;
                        break;
                case 'c':
                        o->config = optarg;
                        break;
                case 'l':
                        if (o->n_listen >= TDM_MAX_LISTEN) {
                                fprintf(stderr, "tandemd: --listen: at most %d addresses\n",
                                        TDM_MAX_LISTEN);
                                return -1;
                        }
                        o->listen[o->n_listen++] = optarg;
                        break;
                case 's':
                        o->state_dir = optarg;
                        break;
                case 'i':
                        o->instance = optarg;
                        break;
                case 't': {
                        char *end;
                        long v = strtol(optarg, &end, 10);
                        if (*end || v < 0 || v > 256) {
                                fprintf(stderr, "tandemd: --threads: must be 0..256, got \"%s\"\n",
                                        optarg);
                                return -1;
                        }
                        o->threads = (int)v;
                        break;
                }
                case 'L':
                        o->log_file = optarg;
                        break;
                case 'd':
                        o->log_level = LOG_DEBUG;
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                case 'C':
                        o->check_config = true;
                        break;
                default:
                        usage(stderr);
                        return -1;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "tandemd: unexpected argument \"%s\"\n", argv[optind]);
                return -1;
        }
        return 0;
}

/* Command-line settings override the file's. */
static int apply_overrides(const struct daemon_opts *o, struct tdm_config *cfg)
{
        if (o->n_listen) {
                cfg->n_listen = o->n_listen;
                for (size_t i = 0; i < o->n_listen; i++)
                        snprintf(cfg->listen[i], sizeof(cfg->listen[i]), "%s", o->listen[i]);
        }
        if (o->state_dir)
                snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", o->state_dir);
        if (o->instance)
                snprintf(cfg->instance, sizeof(cfg->instance), "%s", o->instance);
        if (o->threads >= 0)
                cfg->threads = (unsigned)o->threads;
        if (o->log_file)
                snprintf(cfg->log_file, sizeof(cfg->log_file), "%s", o->log_file);
        if (o->log_level >= 0)
                cfg->log_level = o->log_level;
        return 0;
}

static int load_config(const struct daemon_opts *o, struct tdm_config *cfg, char *path,
                       size_t pathlen)
{
        char err[512] = "";
        tdm_config_defaults(cfg);
        const char *state_dir = o->state_dir ? o->state_dir : "/var/lib/tandem";
        if (o->config)
                snprintf(path, pathlen, "%s", o->config);
        else
                snprintf(path, pathlen, "%s/tandem.conf", state_dir);
        if (access(path, F_OK) == 0) {
                if (tdm_config_load(path, cfg, err, sizeof(err)) < 0) {
                        fprintf(stderr, "tandemd: %s: %s\n", path, err);
                        return -1;
                }
        } else if (o->config) {
                fprintf(stderr, "tandemd: --config: %s: %s\n", path, strerror(errno));
                return -1;
        }
        apply_overrides(o, cfg);
        if (!cfg->state_dir[0])
                snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", state_dir);
        if (!cfg->instance[0])
                snprintf(cfg->instance, sizeof(cfg->instance), "default");
        if (tdm_config_validate(cfg, err, sizeof(err)) < 0) {
                fprintf(stderr, "tandemd: %s: %s\n", path, err);
                return -1;
        }
        return 0;
}

/* What --check-config prints for a valid config: enough to see it is the file one meant. */
static void print_config_summary(const char *path, const struct tdm_config *cfg)
{
        size_t luns = 0, replicated = 0;
        for (size_t t = 0; t < cfg->n_targets; t++) {
                luns += cfg->targets[t].n_luns;
                for (size_t l = 0; l < cfg->targets[t].n_luns; l++)
                        replicated += cfg->targets[t].luns[l].repl.enabled;
        }
        printf("tandemd: %s: valid: instance %s, %zu listen address%s, %zu target%s, %zu LUN%s "
               "(%zu replicated), node_id %u, cluster mode %s\n",
               path, cfg->instance, cfg->n_listen, cfg->n_listen == 1 ? "" : "es", cfg->n_targets,
               cfg->n_targets == 1 ? "" : "s", luns, luns == 1 ? "" : "s", replicated, cfg->node_id,
               cfg->cluster.enabled ? "on" : "off");
        /* Replicated LUNs must have them (validation says so); others get them at start. */
        if (cfg->identities_generated)
                printf("tandemd: %s: note: LUNs without naa/serial get generated ones at start, "
                       "saved to the file\n",
                       path);
}

static qb_loop_t *main_loop;

static int32_t on_stop_signal(int32_t sig, void *data)
{
        (void)data;
        log_notice("signal %d: shutting down", sig);
        tdm_sd_notifyf("STOPPING=1\nSTATUS=shutting down (signal %d)", sig);
        qb_loop_stop(main_loop);
        return 0;
}

/*
 * systemd's watchdog (WatchdogSec= in the unit): WATCHDOG=1 from a timer on the main loop at
 * half the timeout, so a main loop that stops turning (admin IPC, Corosync callbacks, signals)
 * gets tandemd restarted. The data-plane workers run their own loops and are not covered.
 */
static qb_loop_timer_handle watchdog_timer;
static uint64_t watchdog_period_ns;

static void on_watchdog(void *data)
{
        (void)data;
        tdm_sd_notify("WATCHDOG=1");
        qb_loop_timer_add(main_loop, QB_LOOP_HIGH, watchdog_period_ns, NULL, on_watchdog,
                          &watchdog_timer);
}

static void watchdog_start(void)
{
        uint64_t usec;
        int rc = tdm_sd_watchdog_enabled(&usec);
        if (rc < 0)
                log_warn("WATCHDOG_USEC/WATCHDOG_PID malformed: no watchdog notifications");
        if (rc <= 0)
                return;
        watchdog_period_ns = usec * 1000 / 2;
        log_info("service manager watchdog: %llu ms, notifying every %llu ms",
                 (unsigned long long)(usec / 1000),
                 (unsigned long long)(watchdog_period_ns / 1000000));
        on_watchdog(NULL);
}

/* SIGHUP: the config file again, its changes applied live (as tandemctl reload). */
static int32_t on_reload_signal(int32_t sig, void *data)
{
        (void)sig;
        (void)data;
        char err[1024] = "";
        if (tdm_reload(NULL, NULL, err, sizeof(err)) < 0)
                log_err("reload (SIGHUP): %s", err);
        return 0;
}

static int start_listeners(const struct tdm_config *cfg)
{
        for (size_t i = 0; i < cfg->n_listen; i++) {
                char host[128];
                uint16_t port;
                int rc = tdm_parse_hostport(cfg->listen[i], host, sizeof(host), &port) < 0
                             ? -EINVAL
                             : iscsi_listen_add(main_loop, host, port);
                if (rc < 0) {
                        log_err("cannot listen on %s: %s", cfg->listen[i], strerror(-rc));
                        return rc;
                }
                log_notice("listening for iSCSI on %s", cfg->listen[i]);
        }
        return 0;
}

/* The iSCSI layer looks targets up in the registry: wired here, above both. */
static const struct iscsi_env registry_env = {
    .lookup_target = tdm_registry_login_target,
    .discovery_auth = tdm_registry_discovery_auth,
    .for_each_visible = tdm_registry_for_each_visible,
};

int main(int argc, char **argv)
{
        struct daemon_opts opts = {0};
        if (parse_args(argc, argv, &opts) < 0)
                return 2;
        static struct tdm_config cfg;
        char path[4096];
        if (load_config(&opts, &cfg, path, sizeof(path)) < 0)
                return 1;
        if (opts.check_config) {
                print_config_summary(path, &cfg);
                tdm_config_free(&cfg);
                return 0;
        }
        if (mkdir(cfg.state_dir, 0700) < 0 && errno != EEXIST) {
                fprintf(stderr, "tandemd: state-dir %s: %s\n", cfg.state_dir, strerror(errno));
                return 1;
        }
        if (!opts.foreground && daemon(0, 0) < 0) {
                fprintf(stderr, "tandemd: cannot detach: %s\n", strerror(errno));
                return 1;
        }
        struct tdm_log_opts lo = {.file = cfg.log_file,
                                  .level = cfg.log_level ? cfg.log_level : LOG_INFO,
                                  .use_syslog = cfg.log_syslog || !opts.foreground,
                                  .use_stderr = opts.foreground};
        char ident[96];
        snprintf(ident, sizeof(ident), "tandemd-%s", cfg.instance);
        tdm_log_init(ident, &lo);
        signal(SIGPIPE, SIG_IGN);

        int status = 1;
        char err[512] = "";
        main_loop = qb_loop_create();
        cluster_set_fence_peer(cfg.cluster.fence_peer); /* before replicated LUNs start */
        if (tdm_registry_init(&cfg, path, err, sizeof(err)) < 0) {
                log_err("%s: %s", path, err);
                goto out_loop;
        }
        /* ---- cluster (issue 4): membership and quorum once the registry is up ---- */
        if (cfg.cluster.enabled &&
            cluster_start(main_loop, cfg.node_id, cfg.cluster.group, err, sizeof(err)) < 0) {
                log_err("%s", err);
                goto out_registry;
        }
        /* ---- end cluster ---- */
        if (iscsi_workers_start(cfg.threads, &cfg.iscsi, &registry_env) < 0)
                goto out_cluster;
        if (start_listeners(&cfg) < 0)
                goto out_workers;
        if (admin_ipc_start(main_loop, cfg.instance) < 0) {
                log_err("cannot start the admin IPC service for instance %s", cfg.instance);
                goto out_listen;
        }
        if (cfg.metrics.listen[0] &&
            exporter_start(main_loop, cfg.metrics.listen, err, sizeof(err)) < 0) {
                log_err("%s", err);
                goto out_admin;
        }
        qb_loop_signal_add(main_loop, QB_LOOP_HIGH, SIGINT, NULL, on_stop_signal, NULL);
        qb_loop_signal_add(main_loop, QB_LOOP_HIGH, SIGTERM, NULL, on_stop_signal, NULL);
        qb_loop_signal_add(main_loop, QB_LOOP_HIGH, SIGHUP, NULL, on_reload_signal, NULL);
        log_notice("tandemd instance %s ready (config %s)", cfg.instance, path);
        /* Listening, the registry loaded, the admin IPC up: the service manager may go on. */
        tdm_sd_notifyf("READY=1\nSTATUS=serving %zu target%s on %zu portal%s, instance %s",
                       cfg.n_targets, cfg.n_targets == 1 ? "" : "s", cfg.n_listen,
                       cfg.n_listen == 1 ? "" : "s", cfg.instance);
        watchdog_start();
        qb_loop_run(main_loop);
        status = 0;
        exporter_stop();
out_admin:
        admin_ipc_stop();
out_listen:
        iscsi_listen_close_all();
out_workers:
        repl_quiesce_all(); /* completes what waits for a peer before the workers go */
        iscsi_workers_stop();
out_cluster:
        cluster_stop(); /* cluster (issue 4): pending Outdate requests end with -ECANCELED */
out_registry:
        tdm_registry_fini();
        net_pool_shutdown();
out_loop:
        qb_loop_destroy(main_loop);
        tdm_log_fini();
        return status;
}
