/*
 * What the files of daemon/config/ share: field paths and error messages (fields.c), the
 * limits of the model that parsing and validation both apply (model.c), and the pieces of
 * validation that edits reuse (validate.c, validate_repl.c, replication.c).
 */
#ifndef TANDEM_CONFIG_INTERNAL_H
#define TANDEM_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/config.h"

/* Longest field path we build: "targets[N].luns[N].replication.nodes[N].address". */
#define FIELD_MAX 160

/* Writes "field: reason" into err (just the reason when field is NULL or ""); returns rc. */
__attribute__((format(printf, 5, 6))) int cfg_fail(char *err, size_t errlen, int rc,
                                                   const char *field, const char *fmt, ...);
/* "prefix.name", or "name" at the top level; "prefix[i]". Truncated paths still name the place. */
void cfg_field_join(char out[FIELD_MAX], const char *prefix, const char *name);
void cfg_field_index(char out[FIELD_MAX], const char *prefix, size_t i);
/* "field: must be lo..hi, got v" unless lo <= v <= hi. */
int cfg_check_range(uint64_t v, uint64_t lo, uint64_t hi, const char *field, char *err,
                    size_t errlen);
bool cfg_path_absolute(const char *path);
bool cfg_all_digits(const char *s, size_t n); /* n > 0 and s[0..n) all 0-9 */
bool cfg_printable(const char *s);
/* 1..max characters of A-Z a-z 0-9 - _ . (names that end up in files, sockets, messages). */
bool cfg_plain_name_ok(const char *s, size_t max);

/* ---- model.c: limits the file format and validation share */

/* log.level names, by syslog level. */
extern const char *const cfg_log_levels[8];
/* A numeric iscsi.* setting: its name in the file, where it lives, its range. */
struct cfg_iscsi_rule {
        const char *name;
        size_t offset; /* in struct tdm_iscsi_cfg, of a uint32_t */
        uint32_t lo, hi;
};
extern const struct cfg_iscsi_rule cfg_iscsi_rules[];
extern const size_t cfg_n_iscsi_rules;
static inline uint32_t *cfg_iscsi_slot(struct tdm_iscsi_cfg *c, const struct cfg_iscsi_rule *r)
{
        return (uint32_t *)((char *)c + r->offset);
}
static inline uint32_t cfg_iscsi_value(const struct tdm_iscsi_cfg *c,
                                       const struct cfg_iscsi_rule *r)
{
        return *(const uint32_t *)((const char *)c + r->offset);
}
bool cfg_block_size_ok(uint32_t block_size);
/* Frees a target's arrays (the target itself stays, emptied). */
void cfg_target_free(struct tdm_target_cfg *t);

/* ---- validation pieces */

/* A read-only LUN exports its file or device as it is: nothing may create or grow it. */
#define CFG_READONLY_SIZE_MSG                                                                      \
        "a read-only LUN cannot create or grow its backing store: leave size out (the existing "   \
        "size is used)"

/*
 * One LUN on its own (field: "targets[0].luns[1]", or "" for the admin's fields "lun",
 * "path", ...): ranges, block sizes, size, read-only rules and identity.
 */
int cfg_validate_lun(const struct tdm_lun_cfg *l, const char *field, char *err, size_t errlen);
/* The replication group of targets[ti].luns[li], against the rest of cfg (validate_repl.c). */
int cfg_validate_repl(const struct tdm_config *cfg, size_t ti, size_t li, const char *field,
                      char *err, size_t errlen);

/* ---- replication.c: split_brain policy names */

#define CFG_SB_DISCARD_NODE_PREFIX "discard-node-"
/* "disconnect", ..., "discard-node-NAME" into r->split_brain(_node); 0 or -EINVAL. */
int cfg_split_brain_parse(const char *v, struct tdm_repl_cfg *r);

#endif
