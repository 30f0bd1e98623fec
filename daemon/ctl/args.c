/*
 * The arguments and options the table's rows are made of: for each, the word usage shows,
 * the request member it fills, its name in messages and its kind (how it is checked).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "ctl_internal.h"

const struct admin_arg admin_arg_iqn = {"IQN", "iqn", "iqn", ADMIN_IQN, 0};
const struct admin_arg admin_arg_iqn_or_discovery = {"IQN", "iqn", "iqn", ADMIN_IQN,
                                                     ADMIN_OPT_DISCOVERY};
const struct admin_arg admin_arg_initiator = {"INITIATOR_IQN|ALL", "initiator", "initiator",
                                              ADMIN_INITIATOR, 0};
const struct admin_arg admin_arg_lun = {"LUN", "lun", "lun", ADMIN_LUN, 0};
const struct admin_arg admin_arg_path = {"PATH", "path", "path", ADMIN_PATH, 0};
const struct admin_arg admin_arg_size = {"SIZE", "size", "size", ADMIN_SIZE, 0};
const struct admin_arg admin_arg_user = {"USER", "user", "user", ADMIN_TEXT, 0};
const struct admin_arg admin_arg_secret = {"SECRET", "secret", "secret", ADMIN_TEXT, 0};
/* Its errors name the command ("repl resync: must be pause or resume"). */
const struct admin_arg admin_arg_pause_resume = {"pause|resume", "pause", NULL, ADMIN_SWITCH, 0};

static const struct admin_arg block_size = {"N", "block_size", "block-size", ADMIN_BLOCK_SIZE, 0};
static const struct admin_arg physical_block_size = {
    "N", "physical_block_size", "physical-block-size", ADMIN_PHYSICAL_BLOCK_SIZE, 0};
static const struct admin_arg lun_size = {"BYTES", "size", "size", ADMIN_LUN_SIZE, 0};
static const struct admin_arg mutual_user = {"USER", "mutual_user", "mutual_user", ADMIN_TEXT, 0};
static const struct admin_arg interval = {"SECONDS", "interval_s", "interval", ADMIN_SECONDS, 0};
static const struct admin_arg mutual_secret = {"SECRET", "mutual_secret", "mutual_secret",
                                               ADMIN_TEXT, 0};

/* Values are checked in this order: block-size before the sizes that must be multiples of it. */
const struct admin_option admin_options[] = {
    {"block-size", ADMIN_OPT_BLOCK_SIZE, NULL, {&block_size}},
    {"physical-block-size", ADMIN_OPT_PHYSICAL_BLOCK_SIZE, NULL, {&physical_block_size}},
    {"size", ADMIN_OPT_SIZE, NULL, {&lun_size}},
    {"thin", ADMIN_OPT_THIN, "thin", {NULL}},
    {"direct", ADMIN_OPT_DIRECT, "direct", {NULL}},
    {"readonly", ADMIN_OPT_READONLY, "readonly", {NULL}},
    {"discovery", ADMIN_OPT_DISCOVERY, "discovery", {NULL}},
    {"mutual", ADMIN_OPT_MUTUAL, NULL, {&mutual_user, &mutual_secret}},
    {"force", ADMIN_OPT_FORCE, "force", {NULL}},
    {"resync", ADMIN_OPT_RESYNC, "resync", {NULL}},
    {"interval", ADMIN_OPT_INTERVAL, NULL, {&interval}},
};
const size_t admin_n_options = sizeof(admin_options) / sizeof(admin_options[0]);

const struct admin_option *admin_option_by_bit(unsigned bit)
{
        for (size_t i = 0; i < admin_n_options; i++)
                if (admin_options[i].bit == bit)
                        return &admin_options[i];
        return NULL;
}

size_t admin_option_n_values(const struct admin_option *o)
{
        size_t n = 0;
        while (n < ADMIN_MAX_OPTION_VALUES && o->values[n])
                n++;
        return n;
}

int admin_error(char *err, size_t errlen, int rc, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        return rc;
}

void admin_op_words(const struct admin_op *op, char *out, size_t outlen)
{
        snprintf(out, outlen, "%s%s%s", op->cmd, op->sub ? " " : "", op->sub ? op->sub : "");
}

const struct admin_arg *admin_op_arg(const struct admin_op *op, size_t i, bool *optional)
{
        size_t n = 0;
        while (op->args && op->args[n])
                n++;
        if (optional)
                *optional = i >= n;
        if (i < n)
                return op->args[i];
        for (size_t j = 0; op->optional && op->optional[j]; j++)
                if (i - n == j)
                        return op->optional[j];
        return NULL;
}
