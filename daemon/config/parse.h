/*
 * Reading the libconfig tree into struct tdm_config: typed reads of settings that name the
 * field when they refuse (parse_get.c), shared by parse.c and parse_repl.c.
 */
#ifndef TANDEM_CONFIG_PARSE_H
#define TANDEM_CONFIG_PARSE_H

#include <libconfig.h>

#include "config_internal.h"

struct cfg_parser {
        char *err;
        size_t errlen;
        struct tdm_config *cfg;
};

/* s must be a group whose members are all in allowed (NULL-terminated). */
int cfg_check_members(struct cfg_parser *p, const config_setting_t *s, const char *field,
                      const char *const *allowed);
/* Member name of group, or NULL; f receives its field path ("field.name"). */
const config_setting_t *cfg_member(const config_setting_t *group, const char *name,
                                   const char *field, char f[FIELD_MAX]);
int cfg_get_string(struct cfg_parser *p, const config_setting_t *s, const char *f, char *out,
                   size_t outlen);
int cfg_get_uint(struct cfg_parser *p, const config_setting_t *s, const char *f, uint64_t lo,
                 uint64_t hi, uint64_t *out);
int cfg_get_u32(struct cfg_parser *p, const config_setting_t *s, const char *f, uint64_t lo,
                uint64_t hi, uint32_t *out);
int cfg_get_bool(struct cfg_parser *p, const config_setting_t *s, const char *f, bool *out);
/* A size: an integer number of bytes or a string with a unit ("10G", "512MiB"). */
int cfg_get_size(struct cfg_parser *p, const config_setting_t *s, const char *f, uint64_t *out);
/* A string or an array/list of strings, into max slots of slot_len bytes. */
int cfg_get_string_list(struct cfg_parser *p, const config_setting_t *s, const char *field,
                        char *slots, size_t slot_len, size_t max, size_t *n_out);

/* A LUN's "replication" group (parse_repl.c). */
int cfg_parse_repl(struct cfg_parser *p, const config_setting_t *s, const char *field,
                   struct tdm_repl_cfg *r);

#endif
