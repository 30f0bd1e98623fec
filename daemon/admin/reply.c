/* The reply a handler fills, and the memory its response points into. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin_internal.h"

void *admin_alloc(struct admin_reply *rep, size_t size)
{
        if (rep->failed)
                return NULL;
        if (rep->n == rep->cap) {
                size_t cap = rep->cap ? rep->cap * 2 : 64;
                void **p = realloc(rep->ptrs, cap * sizeof(*p));
                if (!p) {
                        rep->failed = true;
                        return NULL;
                }
                rep->ptrs = p;
                rep->cap = cap;
        }
        void *m = calloc(1, size ? size : 1);
        if (!m) {
                rep->failed = true;
                return NULL;
        }
        rep->ptrs[rep->n++] = m;
        return m;
}

char *admin_strdup(struct admin_reply *rep, const char *s)
{
        size_t n = strlen(s) + 1;
        char *d = admin_alloc(rep, n);
        if (d)
                memcpy(d, s, n);
        return d;
}

void admin_reply_free(struct admin_reply *rep)
{
        for (size_t i = 0; i < rep->n; i++)
                free(rep->ptrs[i]);
        free(rep->ptrs);
        free(rep->sessions);
}

void admin_fail(struct admin_reply *rep, int rc, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        rep->r.ok = false;
        rep->r.errno_value = rc < 0 ? -rc : rc;
        rep->r.error = admin_strdup(rep, msg);
}

void admin_result(struct admin_reply *rep, int rc, const char *err)
{
        if (rc == 0)
                rep->r.ok = true;
        else
                admin_fail(rep, rc, "%s", err[0] ? err : strerror(-rc));
}

bool admin_copy(struct admin_reply *rep, char *dst, size_t dstlen, const char *src,
                const char *field)
{
        if (strlen(src) >= dstlen) {
                admin_fail(rep, -EINVAL, "%s: too long (at most %zu characters)", field,
                           dstlen - 1);
                return false;
        }
        memcpy(dst, src, strlen(src) + 1);
        return true;
}
