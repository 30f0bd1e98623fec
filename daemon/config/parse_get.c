/* Typed reads of libconfig settings; each refusal names the field and what it must be. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "parse.h"

int cfg_check_members(struct cfg_parser *p, const config_setting_t *s, const char *field,
                      const char *const *allowed)
{
        if (!config_setting_is_group(s))
                return cfg_fail(p->err, p->errlen, -EINVAL, field, "must be a group { ... }");
        int n = config_setting_length(s);
        for (int i = 0; i < n; i++) {
                const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
                const char *name = config_setting_name(m);
                bool known = false;
                for (const char *const *a = allowed; *a; a++)
                        if (strcmp(*a, name) == 0)
                                known = true;
                if (!known) {
                        char f[FIELD_MAX];
                        cfg_field_join(f, field, name);
                        return cfg_fail(p->err, p->errlen, -EINVAL, f, "unknown field");
                }
        }
        return 0;
}

const config_setting_t *cfg_member(const config_setting_t *group, const char *name,
                                   const char *field, char f[FIELD_MAX])
{
        cfg_field_join(f, field, name);
        return config_setting_get_member(group, name);
}

int cfg_get_string(struct cfg_parser *p, const config_setting_t *s, const char *f, char *out,
                   size_t outlen)
{
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "must be a string");
        const char *v = config_setting_get_string(s);
        if (strlen(v) >= outlen)
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "too long (at most %zu characters)",
                                outlen - 1);
        memcpy(out, v, strlen(v) + 1);
        return 0;
}

int cfg_get_uint(struct cfg_parser *p, const config_setting_t *s, const char *f, uint64_t lo,
                 uint64_t hi, uint64_t *out)
{
        int type = config_setting_type(s);
        if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64)
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "must be an integer");
        long long v = config_setting_get_int64(s);
        if (v < 0 || (uint64_t)v < lo || (uint64_t)v > hi)
                return cfg_fail(p->err, p->errlen, -EINVAL, f,
                                "must be %" PRIu64 "..%" PRIu64 ", got %lld", lo, hi, v);
        *out = (uint64_t)v;
        return 0;
}

int cfg_get_u32(struct cfg_parser *p, const config_setting_t *s, const char *f, uint64_t lo,
                uint64_t hi, uint32_t *out)
{
        uint64_t v = 0;
        int rc = cfg_get_uint(p, s, f, lo, hi, &v);
        if (rc == 0)
                *out = (uint32_t)v;
        return rc;
}

int cfg_get_bool(struct cfg_parser *p, const config_setting_t *s, const char *f, bool *out)
{
        if (config_setting_type(s) != CONFIG_TYPE_BOOL)
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "must be true or false");
        *out = config_setting_get_bool(s) != 0;
        return 0;
}

int cfg_get_size(struct cfg_parser *p, const config_setting_t *s, const char *f, uint64_t *out)
{
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
                return cfg_get_uint(p, s, f, 0, INT64_MAX, out);
        int rc = tdm_parse_size(config_setting_get_string(s), out);
        if (rc == -ERANGE)
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "too large");
        if (rc < 0)
                return cfg_fail(p->err, p->errlen, -EINVAL, f,
                                "must be bytes or a number with K/M/G/T (KiB..) or KB/MB/GB/TB, "
                                "got \"%s\"",
                                config_setting_get_string(s));
        return 0;
}

int cfg_get_string_list(struct cfg_parser *p, const config_setting_t *s, const char *field,
                        char *slots, size_t slot_len, size_t max, size_t *n_out)
{
        if (config_setting_type(s) == CONFIG_TYPE_STRING) {
                *n_out = 1;
                return cfg_get_string(p, s, field, slots, slot_len);
        }
        if (!config_setting_is_array(s) && !config_setting_is_list(s))
                return cfg_fail(p->err, p->errlen, -EINVAL, field,
                                "must be a string or a list of strings");
        size_t n = (size_t)config_setting_length(s);
        if (n > max)
                return cfg_fail(p->err, p->errlen, -EINVAL, field, "at most %zu entries, got %zu",
                                max, n);
        for (size_t i = 0; i < n; i++) {
                char f[FIELD_MAX];
                cfg_field_index(f, field, i);
                int rc = cfg_get_string(p, config_setting_get_elem(s, (unsigned)i), f,
                                        slots + i * slot_len, slot_len);
                if (rc)
                        return rc;
        }
        *n_out = n;
        return 0;
}
