/*
 * The admin operations as data, shared by tandemctl and tandemd (daemon/ctl/).
 *
 * One row per command (tandem/admin_ops_table.h): its words on the command line, its
 * arguments and options (how each is checked and which member of the request it fills),
 * the AdminRequest it builds (proto/admin.proto), how tandemctl prints the answer and what
 * tandemd runs. tandemctl parses, builds, checks and prints through the rows; tandemd checks
 * and dispatches a request through the same rows. Adding an operation is adding a row (and
 * its message in admin.proto).
 */
#ifndef TANDEM_ADMIN_OPS_H
#define TANDEM_ADMIN_OPS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "admin.pb-c.h"

/* What an argument is: how it is checked on the command line and stored in the request. */
enum admin_kind {
        ADMIN_IQN,                 /* a target's iSCSI name (string) */
        ADMIN_INITIATOR,           /* an initiator's iSCSI name or ALL (string) */
        ADMIN_LUN,                 /* 0..255 (uint32) */
        ADMIN_PATH,                /* a file or device; a relative path is made absolute (string) */
        ADMIN_SIZE,                /* bytes > 0 with an optional unit, "10G" (uint64) */
        ADMIN_LUN_SIZE,            /* ADMIN_SIZE and a multiple of the request's block_size */
        ADMIN_BLOCK_SIZE,          /* 512, 1024, 2048 or 4096 (uint32) */
        ADMIN_PHYSICAL_BLOCK_SIZE, /* the request's block_size times a power of two (uint32) */
        ADMIN_TEXT,                /* a CHAP user or secret: at most 255 characters (string) */
        ADMIN_SWITCH,  /* one of the two words of its usage word "a|b": true for a (bool) */
        ADMIN_SECONDS, /* whole seconds 1..3600 (uint32) */
};

/* One positional argument, or one value after an option. */
struct admin_arg {
        const char *word;  /* in usage and "missing ..." messages: "IQN", "pause|resume" */
        const char *field; /* the member of the operation's message it fills: "iqn" */
        const char *name;  /* names it in messages, "iqn: ..."; NULL: the command's words */
        enum admin_kind kind;
        unsigned unless; /* ADMIN_OPT_* that stands for it instead (chap --discovery) */
};

/* The positional arguments the rows are made of (daemon/ctl/args.c). */
extern const struct admin_arg admin_arg_iqn, admin_arg_iqn_or_discovery, admin_arg_initiator,
    admin_arg_lun, admin_arg_path, admin_arg_size, admin_arg_user, admin_arg_secret,
    admin_arg_pause_resume;

/* Options: bits of struct admin_op.options; admin_options[] (args.c) spells each. */
enum {
        ADMIN_OPT_BLOCK_SIZE = 1u << 0,
        ADMIN_OPT_PHYSICAL_BLOCK_SIZE = 1u << 1,
        ADMIN_OPT_SIZE = 1u << 2,
        ADMIN_OPT_THIN = 1u << 3,
        ADMIN_OPT_DIRECT = 1u << 4,
        ADMIN_OPT_READONLY = 1u << 5,
        ADMIN_OPT_DISCOVERY = 1u << 6,
        ADMIN_OPT_MUTUAL = 1u << 7,
        ADMIN_OPT_FORCE = 1u << 8,
        ADMIN_OPT_RESYNC = 1u << 9,
        ADMIN_OPT_INTERVAL = 1u << 10,
};
#define ADMIN_MAX_OPTION_VALUES 2

struct admin_option {
        const char *name; /* "block-size" is --block-size */
        unsigned bit;     /* ADMIN_OPT_* */
        const char *flag; /* an option without value: the bool member it sets */
        const struct admin_arg *values[ADMIN_MAX_OPTION_VALUES]; /* what follows it */
};
extern const struct admin_option admin_options[];
extern const size_t admin_n_options;
const struct admin_option *admin_option_by_bit(unsigned bit);
/* How many values follow the option (0: a flag). */
size_t admin_option_n_values(const struct admin_option *o);

struct admin_op;
struct admin_call;
/*
 * tandemd's side (daemon/admin/): runs the request (the operation's message, already checked
 * against the row's arguments) and fills the response.
 */
struct admin_reply;
typedef void admin_handler(struct admin_reply *reply, const ProtobufCMessage *request);
/*
 * tandemctl's side: rules across arguments, once each is checked and in the message (values:
 * what was given). 0 or -EINVAL.
 */
struct admin_values;
typedef int admin_checker(const struct admin_call *call, const struct admin_values *values,
                          char *err, size_t errlen);
/* tandemctl's side: prints a successful answer; false: nothing printed (the default prints). */
typedef bool admin_printer(FILE *out, const Tandem__Admin__AdminRequest *q,
                           const Tandem__Admin__AdminResponse *r, bool json);

struct admin_op {
        const char *cmd, *sub;                       /* tandemctl CMD [SUB] */
        const char *note;                            /* after the usage line, in parentheses */
        Tandem__Admin__AdminRequest__OpCase request; /* the message it builds */
        const struct admin_arg *const *args;         /* positional, NULL-terminated */
        const struct admin_arg *const *optional;     /* after args: all of them or none */
        unsigned options;                            /* ADMIN_OPT_* it takes */
        admin_checker *check;                        /* or NULL */
        admin_printer *print;                        /* or NULL: done, or {"ok": true} */
        /*
         * What a success prints, "{field}" replaced by the request's member; done_flagged
         * instead when the bool member done_flag is true.
         */
        const char *done, *done_flag, *done_flagged;
        admin_handler *handle;
};

/*
 * The i-th positional argument of op: its args, then its optional ones (*optional says
 * which; may be NULL); NULL past the last.
 */
const struct admin_arg *admin_op_arg(const struct admin_op *op, size_t i, bool *optional);

/* The rows as tandemctl sees them (daemon/ctl/ops.c). */
const struct admin_op *admin_ops(size_t *n);
/* The first row of the command cmd (its sub says whether it has subcommands), or NULL. */
const struct admin_op *admin_command(const char *cmd);
/* The row of "CMD SUB", or NULL. */
const struct admin_op *admin_op_find(const char *cmd, const char *sub);

/* The operation's message inside a request (the member of its oneof), or NULL. */
ProtobufCMessage *admin_request_message(const Tandem__Admin__AdminRequest *q);

/*
 * tandemd's check of a request against its row before running it: what the row's arguments
 * require that only the daemon can see missing (an empty IQN or path, a LUN above 255, an
 * argument given together with the option that stands for it). 0, or -EINVAL with err
 * naming the field ("iqn: missing (required)").
 */
int admin_request_check(const struct admin_op *op, const ProtobufCMessage *m, char *err,
                        size_t errlen);

/* ---------------------------------------------------------------- tandemctl */

#define ADMIN_MAX_ARGS    8
#define ADMIN_MAX_OPTIONS 16

/* What the command line gave one operation, as text. */
struct admin_values {
        const char *pos[ADMIN_MAX_ARGS]; /* positional arguments, in order */
        size_t n_pos;
        const char *options[ADMIN_MAX_OPTIONS][ADMIN_MAX_OPTION_VALUES]; /* by admin_options[] */
        unsigned given;                                                  /* ADMIN_OPT_* */
};

/* A request built from the command line, ready to send; strings point into argv or here. */
struct admin_call {
        const struct admin_op *op;
        Tandem__Admin__AdminRequest req;
        union {
                ProtobufCMessage base;
                max_align_t align;
                unsigned char bytes[256]; /* the largest request's (test_ctl checks each) */
        } msg;                            /* the operation's message */
        char path[4096];                  /* an ADMIN_PATH made absolute */
};

/*
 * Fits the values to the row: options it takes, positional arguments counted and matched,
 * each checked by its kind and stored in the request, then the row's rules across values.
 * 0, or -EINVAL with err naming the field (`lun: must be 0..255, got "x"`) or the command
 * (`lun add: missing IQN LUN PATH`).
 */
int admin_call_build(struct admin_call *call, const struct admin_op *op,
                     const struct admin_values *v, char *err, size_t errlen);

/*
 * Prints a successful answer to call (text, or JSON). -EIO when the answer says the
 * operation failed (nothing printed: the caller reports r->error).
 */
int admin_print(FILE *out, const struct admin_call *call, const Tandem__Admin__AdminResponse *r,
                bool json);

/*
 * tandemctl stats --interval: per-LUN and per-session rates between the answers a and b,
 * taken seconds apart (daemon/ctl/print_rates.c). 0.
 */
int admin_print_stats_rates(FILE *out, const Tandem__Admin__Stats *a, const Tandem__Admin__Stats *b,
                            double seconds, bool json);

/* "CMD SUB" of a row, for messages. */
void admin_op_words(const struct admin_op *op, char *out, size_t outlen);

/* err := the formatted text; returns rc. admin_bad: with -EINVAL. */
__attribute__((format(printf, 4, 5))) int admin_error(char *err, size_t errlen, int rc,
                                                      const char *fmt, ...);
#define admin_bad(err, errlen, ...) admin_error(err, errlen, -EINVAL, __VA_ARGS__)

#endif
