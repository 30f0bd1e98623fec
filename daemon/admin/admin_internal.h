/*
 * What the files of daemon/admin/ share: the reply a handler fills (everything it points to
 * is allocated from it and freed at once after packing: reply.c), and the handlers the
 * table's rows name (handle_*.c).
 */
#ifndef TANDEM_ADMIN_INTERNAL_H
#define TANDEM_ADMIN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/admin_ipc.h"
#include "tandem/admin_ops.h"

struct admin_reply {
        Tandem__Admin__AdminResponse r;
        void **ptrs; /* allocations the response points into */
        size_t n, cap;
        bool failed; /* an allocation failed: the reply becomes "out of memory" */
        struct iscsi_session_info *sessions; /* session rows status points into */
};

/* Zeroed memory that lives until the reply is packed; NULL (and reply->failed) if none. */
void *admin_alloc(struct admin_reply *rep, size_t size);
char *admin_strdup(struct admin_reply *rep, const char *s);
void admin_reply_free(struct admin_reply *rep);

/* The operation failed: errno_value from rc (either sign) and the message. */
__attribute__((format(printf, 3, 4))) void admin_fail(struct admin_reply *rep, int rc,
                                                      const char *fmt, ...);
/* The result of a lower layer's call: ok when rc is 0, else its err text (or strerror). */
void admin_result(struct admin_reply *rep, int rc, const char *err);
/* A request's string into a fixed buffer, refused (false, and the reply says why) if too long. */
bool admin_copy(struct admin_reply *rep, char *dst, size_t dstlen, const char *src,
                const char *field);

/* Session rows (malloc'd, the caller frees), growing the buffer until the snapshot fits. */
struct iscsi_session_info *admin_sessions_get(size_t *n_out);

/* The replication summary status attaches; every replicated LUN (iqn NULL) or one. */
void admin_fill_repl_status(struct admin_reply *rep, const char *iqn, uint64_t lun);

/* Handlers (admin_handler), one per row of tandem/admin_ops_table.h */
admin_handler admin_target_add, admin_target_del, admin_lun_add, admin_lun_del, admin_lun_resize,
    admin_acl_add, admin_acl_del, admin_chap_set, admin_status, admin_stats, admin_repl_status,
    admin_repl_promote, admin_repl_demote, admin_repl_connect, admin_repl_disconnect,
    admin_repl_verify, admin_repl_resync_pause, admin_repl_invalidate,
    admin_repl_resolve_split_brain, admin_repl_skip_initial_sync, admin_reload;

#endif
