/*
 * Field paths and error messages: every refusal in daemon/config/ names the field
 * ("targets[0].luns[1].size: must be ...") through these. Also the small text predicates
 * the other files share.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config_internal.h"

int cfg_fail(char *err, size_t errlen, int rc, const char *field, const char *fmt, ...)
{
        if (err && errlen) {
                size_t n = 0;
                if (field && *field) {
                        int w = snprintf(err, errlen, "%s: ", field);
                        n = w < 0 ? 0 : (size_t)w;
                        if (n >= errlen)
                                n = errlen - 1;
                }
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(err + n, errlen - n, fmt, ap);
                va_end(ap);
        }
        return rc;
}

void cfg_field_join(char out[FIELD_MAX], const char *prefix, const char *name)
{
        int n = (prefix && *prefix) ? snprintf(out, FIELD_MAX, "%s.%s", prefix, name)
                                    : snprintf(out, FIELD_MAX, "%s", name);
        if (n >= FIELD_MAX)
                out[FIELD_MAX - 1] = '\0';
}

void cfg_field_index(char out[FIELD_MAX], const char *prefix, size_t i)
{
        if (snprintf(out, FIELD_MAX, "%s[%zu]", prefix, i) >= FIELD_MAX)
                out[FIELD_MAX - 1] = '\0';
}

int cfg_check_range(uint64_t v, uint64_t lo, uint64_t hi, const char *field, char *err,
                    size_t errlen)
{
        if (v < lo || v > hi)
                return cfg_fail(err, errlen, -EINVAL, field,
                                "must be %" PRIu64 "..%" PRIu64 ", got %" PRIu64, lo, hi, v);
        return 0;
}

bool cfg_path_absolute(const char *path)
{
        return path[0] == '/';
}

bool cfg_printable(const char *s)
{
        for (; *s; s++)
                if (!isprint((unsigned char)*s))
                        return false;
        return true;
}

bool cfg_plain_name_ok(const char *s, size_t max)
{
        size_t n = strlen(s);
        if (n == 0 || n > max)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

bool cfg_all_digits(const char *s, size_t n)
{
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isdigit((unsigned char)s[i]))
                        return false;
        return true;
}
