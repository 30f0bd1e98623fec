/*
 * Edits of a configuration, as the admin plane applies them (tandemctl target/lun/acl/chap):
 * each checks its arguments, names the field in err when it refuses (0 or -errno) and leaves
 * cfg unchanged then. Implemented in daemon/config/edit.c.
 */
#ifndef TANDEM_CONFIG_EDIT_H
#define TANDEM_CONFIG_EDIT_H

#include <stddef.h>
#include <stdint.h>

#include "tandem/config.h"

int tdm_config_add_target(struct tdm_config *cfg, const char *iqn, char *err, size_t errlen);
int tdm_config_del_target(struct tdm_config *cfg, const char *iqn, char *err, size_t errlen);
/* A LUN without naa and serial gets a fresh identity (tdm_lun_identity_generate). */
int tdm_config_add_lun(struct tdm_config *cfg, const char *iqn, const struct tdm_lun_cfg *lun,
                       char *err, size_t errlen);
int tdm_config_del_lun(struct tdm_config *cfg, const char *iqn, uint64_t lun, char *err,
                       size_t errlen);
/*
 * The size of an existing LUN (lun resize): a multiple of its block size; 0 means "the
 * existing file's or device's size" and is the only size a read-only LUN may have. The
 * caller decides whether the change is a growth.
 */
int tdm_config_set_lun_size(struct tdm_config *cfg, const char *iqn, uint64_t lun, uint64_t size,
                            char *err, size_t errlen);
int tdm_config_add_acl(struct tdm_config *cfg, const char *iqn, const char *initiator, char *err,
                       size_t errlen);
int tdm_config_del_acl(struct tdm_config *cfg, const char *iqn, const char *initiator, char *err,
                       size_t errlen);
int tdm_config_set_chap(struct tdm_config *cfg, const char *iqn /* NULL = discovery */,
                        const struct tdm_chap_cfg *chap, char *err, size_t errlen);

#endif
