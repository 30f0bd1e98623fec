/*
 * The table of admin operations (struct admin_op in tandem/admin_ops.h): one row per
 * tandemctl command, in the order `tandemctl --help` lists them.
 *
 * Both ends are built from these rows. daemon/ctl/ops.c includes this file for tandemctl and
 * daemon/admin/dispatch.c for tandemd, each defining ADMIN_CLI(x) and ADMIN_DAEMON(x) first:
 * a side keeps its own column (x) and sets the other's to NULL. So tandemctl never links
 * what tandemd runs (nor, through it, Corosync), and tandemd never links tandemctl's
 * printers. Include it once per side.
 */
#if !defined(ADMIN_CLI) || !defined(ADMIN_DAEMON)
#error "define ADMIN_CLI(x) and ADMIN_DAEMON(x) before including tandem/admin_ops_table.h"
#endif

#include "tandem/admin_ops.h"

#define ADMIN_REQUEST(op) TANDEM__ADMIN__ADMIN_REQUEST__OP_##op
#define ADMIN_ARGS(...)   ((const struct admin_arg *const[]){__VA_ARGS__, NULL})
#define ADMIN_LUN_OPTIONS                                                                          \
        (ADMIN_OPT_BLOCK_SIZE | ADMIN_OPT_PHYSICAL_BLOCK_SIZE | ADMIN_OPT_SIZE | ADMIN_OPT_THIN |  \
         ADMIN_OPT_DIRECT | ADMIN_OPT_READONLY)
/* The replication commands that act on one LUN and take nothing else. */
#define ADMIN_REPL_LUN(sub_, op_, handler_, done_)                                                 \
        {                                                                                          \
                .cmd = "repl", .sub = sub_, .request = ADMIN_REQUEST(op_),                         \
                .args = ADMIN_ARGS(&admin_arg_iqn, &admin_arg_lun),                                \
                .done = "LUN {lun} of {iqn}: " done_, .handle = ADMIN_DAEMON(handler_)             \
        }

static const struct admin_op admin_op_table[] = {
    {.cmd = "target",
     .sub = "add",
     .request = ADMIN_REQUEST(TARGET_ADD),
     .args = ADMIN_ARGS(&admin_arg_iqn),
     .done = "target {iqn} added",
     .handle = ADMIN_DAEMON(admin_target_add)},
    {.cmd = "target",
     .sub = "del",
     .note = "its LUNs go too; backing files are kept",
     .request = ADMIN_REQUEST(TARGET_DEL),
     .args = ADMIN_ARGS(&admin_arg_iqn),
     .done = "target {iqn} deleted",
     .handle = ADMIN_DAEMON(admin_target_del)},
    {.cmd = "lun",
     .sub = "add",
     .request = ADMIN_REQUEST(LUN_ADD),
     .args = ADMIN_ARGS(&admin_arg_iqn, &admin_arg_lun, &admin_arg_path),
     .options = ADMIN_LUN_OPTIONS,
     .check = ADMIN_CLI(admin_check_lun_add),
     .done = "LUN {lun} of {iqn} added ({path})",
     .handle = ADMIN_DAEMON(admin_lun_add)},
    {.cmd = "lun",
     .sub = "del",
     .request = ADMIN_REQUEST(LUN_DEL),
     .args = ADMIN_ARGS(&admin_arg_iqn, &admin_arg_lun),
     .done = "LUN {lun} of {iqn} deleted",
     .handle = ADMIN_DAEMON(admin_lun_del)},
    {.cmd = "lun",
     .sub = "resize",
     .note = "grow online; no SIZE: re-read a block device",
     .request = ADMIN_REQUEST(LUN_RESIZE),
     .args = ADMIN_ARGS(&admin_arg_iqn, &admin_arg_lun),
     .optional = ADMIN_ARGS(&admin_arg_size),
     .print = ADMIN_CLI(admin_print_resized),
     .handle = ADMIN_DAEMON(admin_lun_resize)},
    {.cmd = "acl",
     .sub = "add",
     .request = ADMIN_REQUEST(ACL_ADD),
     .args = ADMIN_ARGS(&admin_arg_iqn, &admin_arg_initiator),
     .done = "{initiator} may log in to {iqn}",
     .handle = ADMIN_DAEMON(admin_acl_add)},
    {.cmd = "acl",
     .sub = "del",
     .request = ADMIN_REQUEST(ACL_DEL),
     .args = ADMIN_ARGS(&admin_arg_iqn, &admin_arg_initiator),
     .done = "{initiator} removed from the ACL of {iqn}",
     .handle = ADMIN_DAEMON(admin_acl_del)},
    {.cmd = "chap",
     .sub = "set",
     .request = ADMIN_REQUEST(CHAP_SET),
     .args = ADMIN_ARGS(&admin_arg_iqn_or_discovery, &admin_arg_user, &admin_arg_secret),
     .options = ADMIN_OPT_DISCOVERY | ADMIN_OPT_MUTUAL,
     .check = ADMIN_CLI(admin_check_chap),
     .print = ADMIN_CLI(admin_print_chap),
     .handle = ADMIN_DAEMON(admin_chap_set)},
    {.cmd = "chap",
     .sub = "clear",
     .request = ADMIN_REQUEST(CHAP_SET), /* with no user */
     .args = ADMIN_ARGS(&admin_arg_iqn_or_discovery),
     .options = ADMIN_OPT_DISCOVERY,
     .print = ADMIN_CLI(admin_print_chap),
     .handle = ADMIN_DAEMON(admin_chap_set)},
    {.cmd = "reload",
     .note = "re-read the config file and apply the changes live, as SIGHUP does",
     .request = ADMIN_REQUEST(RELOAD),
     .print = ADMIN_CLI(admin_print_reloaded),
     .handle = ADMIN_DAEMON(admin_reload)},
    {.cmd = "status",
     .request = ADMIN_REQUEST(STATUS),
     .print = ADMIN_CLI(admin_print_status),
     .handle = ADMIN_DAEMON(admin_status)},
    {.cmd = "stats",
     .request = ADMIN_REQUEST(STATS),
     .optional = ADMIN_ARGS(&admin_arg_iqn),
     .options = ADMIN_OPT_INTERVAL,
     .print = ADMIN_CLI(admin_print_stats),
     .handle = ADMIN_DAEMON(admin_stats)},
    {.cmd = "repl",
     .sub = "status",
     .request = ADMIN_REQUEST(REPL_STATUS),
     .optional = ADMIN_ARGS(&admin_arg_iqn, &admin_arg_lun),
     .print = ADMIN_CLI(admin_print_repl_status),
     .handle = ADMIN_DAEMON(admin_repl_status)},
    {.cmd = "repl",
     .sub = "promote",
     .request = ADMIN_REQUEST(REPL_PROMOTE),
     .args = ADMIN_ARGS(&admin_arg_iqn, &admin_arg_lun),
     .options = ADMIN_OPT_FORCE,
     .done = "LUN {lun} of {iqn}: is now Primary",
     .done_flag = "force",
     .done_flagged = "LUN {lun} of {iqn}: is now Primary (forced: this node's data is the truth)",
     .handle = ADMIN_DAEMON(admin_repl_promote)},
    ADMIN_REPL_LUN("demote", REPL_DEMOTE, admin_repl_demote, "is now Secondary"),
    ADMIN_REPL_LUN("connect", REPL_CONNECT, admin_repl_connect, "connecting to the peer"),
    ADMIN_REPL_LUN("disconnect", REPL_DISCONNECT, admin_repl_disconnect,
                   "disconnected (StandAlone)"),
    {.cmd = "repl",
     .sub = "verify",
     .request = ADMIN_REQUEST(REPL_VERIFY),
     .args = ADMIN_ARGS(&admin_arg_iqn, &admin_arg_lun),
     .options = ADMIN_OPT_RESYNC,
     .done = "LUN {lun} of {iqn}: verify started (`tandemctl repl status` shows progress)",
     .done_flag = "resync",
     .done_flagged = "LUN {lun} of {iqn}: verify started; blocks found out of sync will be "
                     "resynced",
     .handle = ADMIN_DAEMON(admin_repl_verify)},
    {.cmd = "repl",
     .sub = "resync",
     .request = ADMIN_REQUEST(REPL_RESYNC_PAUSE),
     .args = ADMIN_ARGS(&admin_arg_pause_resume, &admin_arg_iqn, &admin_arg_lun),
     .done = "LUN {lun} of {iqn}: resync resumed",
     .done_flag = "pause",
     .done_flagged = "LUN {lun} of {iqn}: resync paused",
     .handle = ADMIN_DAEMON(admin_repl_resync_pause)},
    ADMIN_REPL_LUN("invalidate", REPL_INVALIDATE, admin_repl_invalidate,
                   "local data invalidated; the whole LUN is resynced from the peer"),
    ADMIN_REPL_LUN("resolve-split-brain", REPL_RESOLVE_SPLIT_BRAIN, admin_repl_resolve_split_brain,
                   "this node's changes since the split will be discarded (SyncTarget at the "
                   "next connect)"),
    ADMIN_REPL_LUN("skip-initial-sync", REPL_SKIP_INITIAL_SYNC, admin_repl_skip_initial_sync,
                   "initial sync skipped; both disks UpToDate"),
};
