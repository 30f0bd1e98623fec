/*
 * What the files of daemon/ctl/ share: members of protobuf messages by name (message.c),
 * the rules and printers the table's rows name (checks.c, print*.c), output helpers.
 */
#ifndef TANDEM_CTL_INTERNAL_H
#define TANDEM_CTL_INTERNAL_H

#include <json-c/json.h>
#include <stdint.h>

#include "tandem/admin_ops.h"

/*
 * The member `name` of message m, which must have the given type: the rows name members by
 * their .proto names and a row naming one that is not there is a bug (the unit tests check
 * every row), so this aborts rather than returns NULL.
 */
void *ctl_member(const ProtobufCMessage *m, const char *name, ProtobufCType type);
#define ctl_string(m, name) (*(char **)ctl_member(m, name, PROTOBUF_C_TYPE_STRING))
#define ctl_u32(m, name)    (*(uint32_t *)ctl_member(m, name, PROTOBUF_C_TYPE_UINT32))
#define ctl_u64(m, name)    (*(uint64_t *)ctl_member(m, name, PROTOBUF_C_TYPE_UINT64))
#define ctl_bool(m, name)   (*(protobuf_c_boolean *)ctl_member(m, name, PROTOBUF_C_TYPE_BOOL))
/* The member as text ("{lun}" in a row's done text); false if m has no such scalar. */
bool ctl_member_text(const ProtobufCMessage *m, const char *name, char *out, size_t outlen);
/* Whether the member has a value other than its default ("", 0, false): an argument given. */
bool ctl_member_set(const ProtobufCMessage *m, const char *name);
/* Whether m has a member name of that type (for the tests of the table). */
bool ctl_has_member(const ProtobufCMessageDescriptor *d, const char *name, ProtobufCType type);
/* The descriptor of the message an AdminRequest carries for op. */
const ProtobufCMessageDescriptor *ctl_request_descriptor(Tandem__Admin__AdminRequest__OpCase op);
/* Puts m into q as the operation op. */
void ctl_request_set(Tandem__Admin__AdminRequest *q, Tandem__Admin__AdminRequest__OpCase op,
                     ProtobufCMessage *m);

/* Rules across arguments (admin_checker) */
int admin_check_lun_add(const struct admin_call *call, const struct admin_values *values, char *err,
                        size_t errlen);
int admin_check_chap(const struct admin_call *call, const struct admin_values *values, char *err,
                     size_t errlen);

/* Printers (admin_printer) */
bool admin_print_resized(FILE *out, const Tandem__Admin__AdminRequest *q,
                         const Tandem__Admin__AdminResponse *r, bool json);
bool admin_print_reloaded(FILE *out, const Tandem__Admin__AdminRequest *q,
                          const Tandem__Admin__AdminResponse *r, bool json);
bool admin_print_chap(FILE *out, const Tandem__Admin__AdminRequest *q,
                      const Tandem__Admin__AdminResponse *r, bool json);
bool admin_print_status(FILE *out, const Tandem__Admin__AdminRequest *q,
                        const Tandem__Admin__AdminResponse *r, bool json);
bool admin_print_stats(FILE *out, const Tandem__Admin__AdminRequest *q,
                       const Tandem__Admin__AdminResponse *r, bool json);
bool admin_print_repl_status(FILE *out, const Tandem__Admin__AdminRequest *q,
                             const Tandem__Admin__AdminResponse *r, bool json);

/* Output helpers (print.c) */
void ctl_human_size(char *out, size_t n, uint64_t bytes); /* "4.0 MiB", "512 B" */
void ctl_print_json(FILE *out, json_object *o);           /* pretty, then frees o */
json_object *ctl_jstr(const char *s);                     /* NULL as "" */

/* The replication part of `status` (print_repl.c) */
json_object *ctl_repl_luns_json(const Tandem__Admin__ReplStatus *s);
void ctl_repl_summary_text(FILE *out, const Tandem__Admin__ReplStatus *s);

#endif
