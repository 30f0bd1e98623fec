/*
 * Members of protobuf-c messages by their .proto names, through the messages' descriptors:
 * how the table's rows say where an argument goes and what a printout shows.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl_internal.h"

static const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *d,
                                                const char *name, ProtobufCType type)
{
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(d, name);
        return f && f->type == type && f->label != PROTOBUF_C_LABEL_REPEATED ? f : NULL;
}

bool ctl_has_member(const ProtobufCMessageDescriptor *d, const char *name, ProtobufCType type)
{
        return field_of(d, name, type) != NULL;
}

void *ctl_member(const ProtobufCMessage *m, const char *name, ProtobufCType type)
{
        const ProtobufCFieldDescriptor *f = field_of(m->descriptor, name, type);
        if (!f) {
                fprintf(stderr, "tandem: %s has no member %s of type %d (admin table bug)\n",
                        m->descriptor->name, name, (int)type);
                abort();
        }
        return (char *)m + f->offset;
}

/* A scalar member of m by name (its descriptor in *f), or NULL. */
static const void *scalar(const ProtobufCMessage *m, const char *name,
                          const ProtobufCFieldDescriptor **f)
{
        *f = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
        return *f && (*f)->label != PROTOBUF_C_LABEL_REPEATED ? (const char *)m + (*f)->offset
                                                              : NULL;
}

bool ctl_member_text(const ProtobufCMessage *m, const char *name, char *out, size_t outlen)
{
        const ProtobufCFieldDescriptor *f;
        const void *p = scalar(m, name, &f);
        if (p && f->type == PROTOBUF_C_TYPE_STRING)
                snprintf(out, outlen, "%s", *(char *const *)p);
        else if (p && f->type == PROTOBUF_C_TYPE_UINT32)
                snprintf(out, outlen, "%" PRIu32, *(const uint32_t *)p);
        else if (p && f->type == PROTOBUF_C_TYPE_UINT64)
                snprintf(out, outlen, "%" PRIu64, *(const uint64_t *)p);
        else
                return false;
        return true;
}

bool ctl_member_set(const ProtobufCMessage *m, const char *name)
{
        const ProtobufCFieldDescriptor *f;
        const void *p = scalar(m, name, &f);
        switch (p ? f->type : PROTOBUF_C_TYPE_MESSAGE) {
        case PROTOBUF_C_TYPE_STRING:
                return **(char *const *)p != '\0';
        case PROTOBUF_C_TYPE_UINT32:
                return *(const uint32_t *)p != 0;
        case PROTOBUF_C_TYPE_UINT64:
                return *(const uint64_t *)p != 0;
        case PROTOBUF_C_TYPE_BOOL:
                return *(const protobuf_c_boolean *)p != 0;
        default:
                return false;
        }
}

/* In protobuf-c the oneof's case values are the members' field numbers. */
static const ProtobufCFieldDescriptor *op_field(Tandem__Admin__AdminRequest__OpCase op)
{
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(
            &tandem__admin__admin_request__descriptor, (unsigned)op);
        return f && f->type == PROTOBUF_C_TYPE_MESSAGE && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
                   ? f
                   : NULL;
}

const ProtobufCMessageDescriptor *ctl_request_descriptor(Tandem__Admin__AdminRequest__OpCase op)
{
        const ProtobufCFieldDescriptor *f = op_field(op);
        return f ? f->descriptor : NULL;
}

void ctl_request_set(Tandem__Admin__AdminRequest *q, Tandem__Admin__AdminRequest__OpCase op,
                     ProtobufCMessage *m)
{
        q->op_case = op;
        *(ProtobufCMessage **)((char *)q + op_field(op)->offset) = m;
}

ProtobufCMessage *admin_request_message(const Tandem__Admin__AdminRequest *q)
{
        const ProtobufCFieldDescriptor *f = op_field(q->op_case);
        return f ? *(ProtobufCMessage **)((char *)q + f->offset) : NULL;
}
