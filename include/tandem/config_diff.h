/*
 * What a reload changes (daemon/config/diff.c): the operations that turn the running
 * configuration into the one the file now holds, each of which tandemd can apply while it
 * serves (the same ones tandemctl edits make), or a refusal naming the first field whose
 * change cannot apply live.
 */
#ifndef TANDEM_CONFIG_DIFF_H
#define TANDEM_CONFIG_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "tandem/config.h"

enum tdm_change_kind {
        TDM_CHANGE_LISTEN_ADD,
        TDM_CHANGE_TARGET_ADD,
        TDM_CHANGE_LUN_ADD,
        TDM_CHANGE_ACL_ADD,
        TDM_CHANGE_CHAP_SET, /* iqn NULL: discovery */
        TDM_CHANGE_LUN_RESIZE,
        TDM_CHANGE_ACL_DEL,
        TDM_CHANGE_LUN_DEL,
        TDM_CHANGE_TARGET_DEL,
        TDM_CHANGE_LISTEN_DEL,
};

/* One operation; its pointers point into the configurations given to tdm_config_diff. */
struct tdm_change {
        enum tdm_change_kind kind;
        const char *iqn;
        const struct tdm_lun_cfg *lun;   /* LUN_ADD: the new LUN */
        uint64_t lun_id;                 /* LUN_DEL, LUN_RESIZE */
        uint64_t size;                   /* LUN_RESIZE: bytes */
        const char *initiator;           /* ACL_* */
        const struct tdm_chap_cfg *chap; /* CHAP_SET */
        const char *listen;              /* LISTEN_* */
};

struct tdm_changes {
        struct tdm_change *v;
        size_t n, cap;
};

/*
 * The changes from cur (the running configuration) to next (the file), in the order they
 * apply: additions first (portals, targets, then what lives in them), deletions last. base
 * is the file as tandemd started from it: a daemon-wide setting that differs between base
 * and next was edited and cannot change live (listen can, unless --listen overrides the
 * file's). 0 with *out filled (free with tdm_changes_free), or -EINVAL with err naming the
 * field in next ("targets[1].luns[0].block_size: ...").
 */
int tdm_config_diff(const struct tdm_config *base, const struct tdm_config *cur,
                    const struct tdm_config *next, struct tdm_changes *out, char *err,
                    size_t errlen);
void tdm_changes_free(struct tdm_changes *c);
/* "LUN 2 of iqn... added (/path)" and so on, for the log and tandemctl. */
void tdm_change_describe(const struct tdm_change *c, char *buf, size_t cap);

#endif
