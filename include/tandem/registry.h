/*
 * The live registry: the configuration plus the targets and LUNs built from it.
 * The control plane (admin IPC) changes it; data-plane threads look things up at login.
 */
#ifndef TANDEM_REGISTRY_H
#define TANDEM_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "tandem/config.h"
#include "tandem/scsi.h"

/*
 * Builds the live targets and LUNs (opening every backing store) from a deep copy of cfg;
 * the caller keeps cfg. Fails, naming the field, if any LUN cannot be opened.
 * config_path: the file admin changes are saved to (NULL: not persisted, for tests). The
 * saved file keeps the daemon-wide settings the file itself has (command-line overrides
 * applied to cfg are not written back) plus the live targets and discovery CHAP. If
 * cfg->identities_generated, the file is saved at once so the new LUN identities last.
 */
int tdm_registry_init(struct tdm_config *cfg, const char *config_path, char *err, size_t errlen);
void tdm_registry_fini(void);

/*
 * Login-time lookup: returns 0 and a referenced target when initiator may log in to iqn,
 * -ENOENT when no such target, -EACCES when the ACL refuses the initiator.
 * *auth receives the CHAP settings that apply.
 */
int tdm_registry_login_target(const char *iqn, const char *initiator, struct scsi_target **out,
                              struct tdm_auth *auth);
void tdm_registry_discovery_auth(struct tdm_auth *auth);

/*
 * SendTargets: calls cb for each target the initiator may log in to (all, or only `only`
 * when non-NULL).
 */
void tdm_registry_for_each_visible(const char *initiator, const char *only,
                                   void (*cb)(void *arg, const char *iqn, uint16_t tpgt),
                                   void *arg);

/*
 * Admin operations (control-plane thread; they are also serialised internally). Each
 * validates, prepares the live objects, saves the config atomically and only then applies:
 * on failure (error text names the field: "lun: 3 already exists in iqn...") neither the
 * file nor the live state changed. lun_add generates the LUN identity when naa and serial
 * are empty, creates (sparse) or grows a regular file when size > 0, and raises REPORTED
 * LUNS DATA HAS CHANGED on the target's sessions. target_del removes the target's LUNs
 * too (backing files are kept). ACL and CHAP changes apply to the next login.
 */
int tdm_registry_target_add(const char *iqn, char *err, size_t errlen);
int tdm_registry_target_del(const char *iqn, char *err, size_t errlen);
int tdm_registry_lun_add(const char *iqn, const struct tdm_lun_cfg *lun, char *err, size_t errlen);
int tdm_registry_lun_del(const char *iqn, uint64_t lun, char *err, size_t errlen);
/*
 * lun_resize grows a LUN while initiators use it. On a file, size is the new size in bytes
 * (a multiple of the block size, at least the LUN's and the file's size now); the file is
 * extended sparsely. On a block device, size 0 re-reads the device's size (after lvextend);
 * a nonzero size must equal it (tandem cannot resize a device). Shrinking is refused. The
 * config's size is saved first (a device LUN whose config has no size keeps none), then
 * the LUN takes the new size and every session gets UNIT ATTENTION CAPACITY DATA HAS
 * CHANGED. The same size again succeeds and changes nothing. *old_size / *new_size
 * (either may be NULL) receive the LUN's size in bytes before and after.
 * At start (init, lun_add) a LUN always exposes its whole file or device, so one that grew
 * while tandemd was down comes up with its real size; a configured size is a minimum.
 * A replicated LUN grows only on its Primary, with the peer connected: both nodes' stores
 * and metadata grow (repl_lun_grow), or nothing changes but this node's file length.
 */
int tdm_registry_lun_resize(const char *iqn, uint64_t lun, uint64_t size, uint64_t *old_size,
                            uint64_t *new_size, char *err, size_t errlen);
int tdm_registry_acl_add(const char *iqn, const char *initiator, char *err, size_t errlen);
int tdm_registry_acl_del(const char *iqn, const char *initiator, char *err, size_t errlen);
int tdm_registry_chap_set(const char *iqn /* NULL = discovery */, const struct tdm_chap_cfg *chap,
                          char *err, size_t errlen);

/*
 * The live configuration. Its daemon-wide fields never change after init (any thread may
 * read them); targets and discovery_chap change with admin operations, so only the
 * control thread may read those through this pointer.
 */
const struct tdm_config *tdm_registry_config(void);
/* The file's daemon-wide settings as tandemd started from it (a reload compares with them). */
const struct tdm_config *tdm_registry_file_base(void);
/* A reload changed the portals: next's listen list is now the running one and the file's
 * (saved). 0 or -errno with err. */
int tdm_registry_set_listen(const struct tdm_config *next, char *err, size_t errlen);
/* The file admin changes are saved to ("" when not persisted). */
const char *tdm_registry_config_path(void);
/* Referenced live target by name, or NULL. */
struct scsi_target *tdm_registry_get_target(const char *iqn);

#endif
