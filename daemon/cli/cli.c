/*
 * tandemctl's command line: global options (getopt_long, before the command), the command
 * and subcommand looked up in the table of operations, then the command's own options and
 * arguments (getopt_long again, in order) handed to the table's request building.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* getopt_long codes of long options without a short form; those of admin_options[] follow. */
enum { OPT_JSON = 256, OPT_TABLE };

static const struct option global_options[] = {
    {"instance", required_argument, NULL, 'i'},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The long options of the commands: every option of the table, and --json, --help. */
static void command_options(struct option *o)
{
        size_t k = 0;
        for (; k < admin_n_options; k++)
                o[k] = (struct option){admin_options[k].name,
                                       admin_option_n_values(&admin_options[k]) ? required_argument
                                                                                : no_argument,
                                       NULL, OPT_TABLE + (int)k};
        o[k++] = (struct option){"json", no_argument, NULL, OPT_JSON};
        o[k++] = (struct option){"help", no_argument, NULL, 'h'};
        o[k] = (struct option){NULL, 0, NULL, 0};
}

/* What getopt_long refused (the last element it read is argv[optind - 1]). */
static int refused(const char *prefix, char **argv, const struct option *longopts, char *err,
                   size_t errlen)
{
        for (const struct option *o = longopts; optopt > 255 && o->name; o++)
                if (o->val == optopt)
                        return admin_bad(err, errlen, "%s--%s takes no value", prefix, o->name);
        if (optopt > 0 && optopt < 256)
                return admin_bad(err, errlen, "%sunknown option \"-%c\"", prefix, optopt);
        return admin_bad(err, errlen, "%sunknown option \"%s\"", prefix, argv[optind - 1]);
}

/* An option given without all the values that follow it. */
static int needs_values(const char *prefix, const struct admin_option *o, char *err, size_t errlen)
{
        if (admin_option_n_values(o) > 1)
                return admin_bad(err, errlen, "%s--%s needs %s and %s", prefix, o->name,
                                 o->values[0]->word, o->values[1]->word);
        return admin_bad(err, errlen, "%s--%s needs a value", prefix, o->name);
}

static int parse_globals(struct cli *c, int argc, char **argv, char *err, size_t errlen)
{
        int ch;
        optind = 0; /* a fresh scan, also for the next call */
        opterr = 0;
        while ((ch = getopt_long(argc, argv, "+:hi:", global_options, NULL)) != -1) {
                switch (ch) {
                case 'h':
                        c->help = true;
                        return 0;
                case OPT_JSON:
                        c->json = true;
                        break;
                case 'i':
                        if (!tdm_instance_name_valid(optarg))
                                return admin_bad(err, errlen,
                                                 "instance: must be 1..63 characters of A-Z a-z "
                                                 "0-9 - _ . (not starting with .), got \"%s\"",
                                                 optarg);
                        snprintf(c->instance, sizeof(c->instance), "%s", optarg);
                        break;
                case ':':
                        return admin_bad(err, errlen, "instance: --instance needs a NAME");
                default:
                        return refused("", argv, global_options, err, errlen);
                }
        }
        return 0;
}

/*
 * The command's options and positional arguments, in order (argv[0] is the last word of the
 * command). A --help anywhere asks for the command's usage.
 */
static int collect(struct cli *c, const char *cmd, int argc, char **argv, struct admin_values *v,
                   char *err, size_t errlen)
{
        struct option longopts[ADMIN_MAX_OPTIONS + 3];
        char prefix[72];
        int ch;
        command_options(longopts);
        snprintf(prefix, sizeof(prefix), "%s: ", cmd);
        optind = 0;
        opterr = 0;
        while ((ch = getopt_long(argc, argv, "-:h", longopts, NULL)) != -1) {
                if (ch == 1) {
                        if (v->n_pos == ADMIN_MAX_ARGS)
                                return admin_bad(err, errlen, "%sunexpected argument \"%s\"",
                                                 prefix, optarg);
                        v->pos[v->n_pos++] = optarg;
                } else if (ch == 'h') {
                        c->help = true;
                } else if (ch == OPT_JSON) {
                        c->json = true;
                } else if (ch == ':') {
                        return needs_values(prefix, &admin_options[optopt - OPT_TABLE], err,
                                            errlen);
                } else if (ch >= OPT_TABLE) {
                        size_t k = (size_t)(ch - OPT_TABLE);
                        const struct admin_option *o = &admin_options[k];
                        v->options[k][0] = optarg;
                        for (size_t j = 1; j < admin_option_n_values(o); j++) {
                                if (optind >= argc)
                                        return needs_values(prefix, o, err, errlen);
                                v->options[k][j] = argv[optind++];
                        }
                        v->given |= o->bit;
                } else {
                        return refused(prefix, argv, longopts, err, errlen);
                }
        }
        for (; optind < argc; optind++) /* after "--" */
                if (v->n_pos < ADMIN_MAX_ARGS)
                        v->pos[v->n_pos++] = argv[optind];
                else
                        return admin_bad(err, errlen, "%sunexpected argument \"%s\"", prefix,
                                         argv[optind]);
        return 0;
}

/* "add|del|resize": the subcommands of cmd, for messages. */
static void subcommands(const char *cmd, char *out, size_t outlen)
{
        size_t n_ops, n = 0;
        const struct admin_op *ops = admin_ops(&n_ops);
        out[0] = '\0';
        for (size_t i = 0; i < n_ops && n < outlen; i++)
                if (strcmp(ops[i].cmd, cmd) == 0) {
                        int w = snprintf(out + n, outlen - n, "%s%s", n ? "|" : "", ops[i].sub);
                        n += w > 0 ? (size_t)w : 0;
                }
}

static bool is_help(const char *s)
{
        return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0;
}

int cli_parse(struct cli *c, int argc, char **argv, char *err, size_t errlen)
{
        memset(c, 0, sizeof(*c));
        snprintf(c->instance, sizeof(c->instance), "%s", TDM_DEFAULT_INSTANCE);
        int rc = parse_globals(c, argc, argv, err, errlen);
        if (rc || c->help)
                return rc;
        int i = optind;
        if (i >= argc)
                return admin_bad(err, errlen, "missing COMMAND");
        const char *cmd = argv[i++];
        if (strcmp(cmd, "help") == 0) {
                c->help = true;
                c->topic = i < argc ? argv[i] : NULL;
                return 0;
        }
        const struct admin_op *op = admin_command(cmd);
        if (!op)
                return admin_bad(err, errlen, "unknown command \"%s\"", cmd);
        c->topic = op->cmd;
        if (op->sub) {
                char subs[192];
                subcommands(cmd, subs, sizeof(subs));
                if (i >= argc)
                        return admin_bad(err, errlen, "%s: missing %s", cmd, subs);
                if (is_help(argv[i])) {
                        c->help = true;
                        return 0;
                }
                if (!(op = admin_op_find(cmd, argv[i])))
                        return admin_bad(err, errlen, "%s: unknown subcommand \"%s\" (%s)", cmd,
                                         argv[i], subs);
                i++;
        }
        struct admin_values v = {0};
        char words[64];
        admin_op_words(op, words, sizeof(words));
        if ((rc = collect(c, words, argc - i + 1, argv + i - 1, &v, err, errlen)) || c->help)
                return rc;
        return admin_call_build(&c->call, op, &v, err, errlen);
}
