/*
 * The exporter's text from the table of metrics (metrics_table.c): per family its HELP and
 * TYPE lines, then one sample per object of its scope. Prometheus text format 0.0.4, or
 * OpenMetrics 1.0 (counter families named without _total, "# EOF" at the end).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <strings.h>

#include "ctl_internal.h"
#include "metrics.h"
#include "tandem/openmetrics.h"

/* A label value with \, " and newline escaped. */
static void label_value(FILE *out, const char *v)
{
        for (; v && *v; v++) {
                if (*v == '\\' || *v == '"')
                        fprintf(out, "\\%c", *v);
                else if (*v == '\n')
                        fputs("\\n", out);
                else
                        fputc(*v, out);
        }
}

/* The labels of one object: "{target=\"..\",lun=\"0\"" without the closing brace. */
struct labels {
        const char *target;
        int64_t lun; /* < 0: none */
};

static void open_labels(FILE *out, const struct labels *l)
{
        fputc('{', out);
        if (l->target) {
                fputs("target=\"", out);
                label_value(out, l->target);
                fputc('"', out);
        }
        if (l->lun >= 0)
                fprintf(out, "%slun=\"%" PRId64 "\"", l->target ? "," : "", l->lun);
}

static bool has_labels(const struct labels *l)
{
        return l->target || l->lun >= 0;
}

/* A number, a bool or the count of a repeated member, as a sample value. */
static bool member_value(const ProtobufCMessage *m, const char *name, uint64_t *v)
{
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
        if (!f)
                return false;
        const char *p = (const char *)m;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                *v = *(const size_t *)(p + f->quantifier_offset);
                return true;
        }
        switch (f->type) {
        case PROTOBUF_C_TYPE_UINT64:
                *v = *(const uint64_t *)(p + f->offset);
                return true;
        case PROTOBUF_C_TYPE_UINT32:
                *v = *(const uint32_t *)(p + f->offset);
                return true;
        case PROTOBUF_C_TYPE_BOOL:
                *v = *(const protobuf_c_boolean *)(p + f->offset) ? 1 : 0;
                return true;
        default:
                return false;
        }
}

static const char *member_string(const ProtobufCMessage *m, const char *name)
{
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
        if (!f || f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
                return NULL;
        return *(char *const *)((const char *)m + f->offset);
}

static void sample_plain(FILE *out, const struct metric *mt, const ProtobufCMessage *m,
                         const struct labels *l)
{
        uint64_t v;
        if (!member_value(m, mt->member, &v))
                return;
        fputs(mt->name, out);
        if (mt->kind == METRIC_COUNTER)
                fputs("_total", out);
        if (has_labels(l)) {
                open_labels(out, l);
                fputc('}', out);
        }
        fprintf(out, " %" PRIu64 "\n", v);
}

static void sample_states(FILE *out, const struct metric *mt, const ProtobufCMessage *m,
                          const struct labels *l)
{
        const char *now = member_string(m, mt->member);
        for (size_t i = 0; mt->states[i]; i++) {
                fputs(mt->name, out);
                open_labels(out, l);
                fprintf(out, "%s%s=\"%s\"} %d\n", has_labels(l) ? "," : "", mt->label,
                        mt->states[i], now && strcmp(now, mt->states[i]) == 0);
        }
}

/* us microseconds as seconds, exactly: "0.000016", "4.194304", "2". */
static void seconds_text(char *out, size_t n, uint64_t us)
{
        int w = snprintf(out, n, "%" PRIu64 ".%06" PRIu64, us / 1000000, us % 1000000);
        while (w > 0 && out[w - 1] == '0')
                out[--w] = '\0';
        if (w > 0 && out[w - 1] == '.')
                out[--w] = '\0';
}

/* Bucket i of the daemon counts latencies < 2^i us: le = 2^i us, in seconds. */
static void sample_histogram(FILE *out, const struct metric *mt, const ProtobufCMessage *m,
                             const struct labels *l)
{
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(m->descriptor, mt->member);
        if (!f || f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_UINT64)
                return;
        size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
        const uint64_t *h = *(uint64_t *const *)((const char *)m + f->offset);
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++) {
                sum += h[i];
                if (i + 1 == n)
                        break; /* the last bucket has no upper end: +Inf below */
                char le[32];
                seconds_text(le, sizeof(le), 1ull << i);
                fprintf(out, "%s_bucket", mt->name);
                open_labels(out, l);
                fprintf(out, "%sle=\"%s\"} %" PRIu64 "\n", has_labels(l) ? "," : "", le, sum);
        }
        fprintf(out, "%s_bucket", mt->name);
        open_labels(out, l);
        fprintf(out, "%sle=\"+Inf\"} %" PRIu64 "\n", has_labels(l) ? "," : "", sum);
}

static void sample_info(FILE *out, const struct metric *mt, const ProtobufCMessage *m,
                        bool openmetrics)
{
        fprintf(out, "%s%s{", mt->name, openmetrics ? "_info" : "");
        for (size_t i = 0; mt->info_members[i]; i++) {
                fprintf(out, "%s%s=\"", i ? "," : "", mt->info_members[i]);
                label_value(out, member_string(m, mt->info_members[i]));
                fputc('"', out);
        }
        fputs("} 1\n", out);
}

static void sample(FILE *out, const struct metric *mt, const ProtobufCMessage *m,
                   const struct labels *l, bool openmetrics)
{
        switch (mt->kind) {
        case METRIC_GAUGE:
        case METRIC_COUNTER:
                sample_plain(out, mt, m, l);
                break;
        case METRIC_STATES:
                sample_states(out, mt, m, l);
                break;
        case METRIC_HISTOGRAM:
                sample_histogram(out, mt, m, l);
                break;
        case METRIC_INFO:
                sample_info(out, mt, m, openmetrics);
                break;
        }
}

static const char *type_name(enum metric_kind k, bool openmetrics)
{
        switch (k) {
        case METRIC_COUNTER:
                return "counter";
        case METRIC_HISTOGRAM:
                return "histogram";
        case METRIC_INFO:
                return openmetrics ? "info" : "gauge";
        default:
                return "gauge";
        }
}

static void family(FILE *out, const struct metric *mt, const struct tdm_metrics_input *in,
                   bool openmetrics)
{
        /* 0.0.4 names the family as its samples are named (a counter's with _total). */
        const char *suffix = !openmetrics && mt->kind == METRIC_COUNTER ? "_total" : "";
        fprintf(out, "# HELP %s%s %s\n", mt->name, suffix, mt->help);
        fprintf(out, "# TYPE %s%s %s\n", mt->name, suffix, type_name(mt->kind, openmetrics));
        const struct labels none = {NULL, -1};
        switch (mt->scope) {
        case SCOPE_DAEMON:
                sample(out, mt, &in->status->base, &none, openmetrics);
                break;
        case SCOPE_CLUSTER:
                if (in->status->cluster)
                        sample(out, mt, &in->status->cluster->base, &none, openmetrics);
                break;
        case SCOPE_TARGET:
                for (size_t i = 0; i < in->status->n_targets; i++) {
                        const Tandem__Admin__TargetInfo *t = in->status->targets[i];
                        struct labels l = {t->iqn, -1};
                        sample(out, mt, &t->base, &l, openmetrics);
                }
                break;
        case SCOPE_LUN:
                for (size_t i = 0; in->stats && i < in->stats->n_luns; i++) {
                        const Tandem__Admin__LunStats *s = in->stats->luns[i];
                        struct labels l = {s->iqn, s->lun};
                        sample(out, mt, &s->base, &l, openmetrics);
                }
                break;
        case SCOPE_REPL:
                for (size_t i = 0; in->repl && i < in->repl->n_luns; i++) {
                        const Tandem__Admin__ReplLunStatus *r = in->repl->luns[i];
                        struct labels l = {r->iqn, r->lun};
                        sample(out, mt, &r->base, &l, openmetrics);
                }
                break;
        }
}

int tdm_metrics_format(FILE *out, const struct tdm_metrics_input *in, bool openmetrics)
{
        for (size_t i = 0; i < metrics_table_n; i++)
                family(out, &metrics_table[i], in, openmetrics);
        if (openmetrics)
                fputs("# EOF\n", out);
        return ferror(out) ? -EIO : 0;
}

bool tdm_metrics_wants_openmetrics(const char *accept)
{
        return accept && strcasestr(accept, "application/openmetrics-text") != NULL;
}
