/* The key=value<NUL> text format of Login and Text PDUs (RFC 7143 6.1): parsing and building. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "login_internal.h"

bool iscsi_key_name_valid(const char *key, size_t len)
{
        if (len == 0 || len > ISCSI_KEY_NAME_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = key[i];
                bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == '@' ||
                          c == '_' || c == '#';
                if (!ok)
                        return false;
        }
        return true;
}

size_t iscsi_key_value_max(const char *key)
{
        /* CHAP challenges and responses are large-binary-values; everything else is simple. */
        if (strcmp(key, "CHAP_C") == 0 || strcmp(key, "CHAP_R") == 0)
                return ISCSI_LARGE_VALUE_MAX;
        return ISCSI_VALUE_MAX;
}

/* All bytes from p to end are NUL: padding some initiators leave after the last pair. */
static bool only_nuls(const char *p, const char *end)
{
        for (; p < end; p++)
                if (*p)
                        return false;
        return true;
}

static int kv_append(struct iscsi_kv_list *l, uint32_t *cap, const char *key, const char *value)
{
        if (l->n == ISCSI_TEXT_PAIRS_MAX)
                return -E2BIG;
        if (l->n == *cap) {
                uint32_t ncap = *cap ? *cap * 2 : 16;
                struct iscsi_kv *nkv = realloc(l->kv, ncap * sizeof(*nkv));
                if (!nkv)
                        return -ENOMEM;
                l->kv = nkv;
                *cap = ncap;
        }
        l->kv[l->n].key = key;
        l->kv[l->n].value = value;
        l->n++;
        return 0;
}

static int parse_pairs(struct iscsi_kv_list *l, char *p, char *end)
{
        uint32_t cap = 0;
        while (p < end) {
                if (*p == '\0') {
                        if (only_nuls(p, end))
                                return 0;
                        return -EINVAL; /* an empty pair in the middle */
                }
                char *nul = memchr(p, '\0', (size_t)(end - p));
                if (!nul)
                        return -EINVAL; /* the last pair lacks its NUL */
                char *eq = memchr(p, '=', (size_t)(nul - p));
                if (!eq || !iscsi_key_name_valid(p, (size_t)(eq - p)))
                        return -EINVAL;
                *eq = '\0';
                const char *value = eq + 1;
                if ((size_t)(nul - value) > iscsi_key_value_max(p))
                        return -EINVAL;
                int rc = kv_append(l, &cap, p, value);
                if (rc)
                        return rc;
                p = nul + 1;
        }
        return 0;
}

int iscsi_text_parse(const void *data, uint32_t len, uint32_t max_total, struct iscsi_kv_list *out)
{
        memset(out, 0, sizeof(*out));
        if (len > max_total)
                return -E2BIG;
        out->buf = malloc(len + 1u);
        if (!out->buf)
                return -ENOMEM;
        if (len)
                memcpy(out->buf, data, len);
        out->buf[len] = '\0';
        int rc = parse_pairs(out, out->buf, out->buf + len);
        if (rc)
                iscsi_kv_list_free(out);
        return rc;
}

void iscsi_kv_list_free(struct iscsi_kv_list *l)
{
        free(l->kv);
        free(l->buf);
        memset(l, 0, sizeof(*l));
}

int iscsi_kv_find(const struct iscsi_kv_list *l, const char *key, uint32_t from)
{
        for (uint32_t i = from; i < l->n; i++)
                if (strcmp(l->kv[i].key, key) == 0)
                        return (int)i;
        return -1;
}

int iscsi_parse_number(const char *s, uint64_t *out)
{
        uint64_t v = 0;
        unsigned base = 10;
        if ((s[0] == '0') && (s[1] == 'x' || s[1] == 'X')) {
                base = 16;
                s += 2;
        }
        if (*s == '\0')
                return -EINVAL;
        for (; *s; s++) {
                unsigned d;
                if (*s >= '0' && *s <= '9')
                        d = (unsigned)(*s - '0');
                else if (base == 16 && *s >= 'a' && *s <= 'f')
                        d = (unsigned)(*s - 'a' + 10);
                else if (base == 16 && *s >= 'A' && *s <= 'F')
                        d = (unsigned)(*s - 'A' + 10);
                else
                        return -EINVAL;
                if (v > (UINT64_MAX - d) / base)
                        return -ERANGE;
                v = v * base + d;
        }
        *out = v;
        return 0;
}

int iscsi_parse_bool(const char *s, bool *out)
{
        if (strcmp(s, "Yes") == 0) {
                *out = true;
                return 0;
        }
        if (strcmp(s, "No") == 0) {
                *out = false;
                return 0;
        }
        return -EINVAL;
}

void iscsi_text_buf_init(struct iscsi_text_buf *b, uint32_t max)
{
        memset(b, 0, sizeof(*b));
        b->max = max;
}

static int buf_reserve(struct iscsi_text_buf *b, size_t need)
{
        if (b->err)
                return b->err;
        if (need > b->max) {
                b->err = -E2BIG;
                return b->err;
        }
        if (need <= b->cap)
                return 0;
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < need)
                ncap *= 2;
        if (ncap > b->max)
                ncap = b->max;
        char *nd = realloc(b->data, ncap);
        if (!nd) {
                b->err = -ENOMEM;
                return b->err;
        }
        b->data = nd;
        b->cap = (uint32_t)ncap;
        return 0;
}

int iscsi_text_buf_add(struct iscsi_text_buf *b, const char *key, const char *value)
{
        size_t kl = strlen(key), vl = strlen(value);
        size_t need = (size_t)b->len + kl + 1 + vl + 1;
        int rc = buf_reserve(b, need);
        if (rc)
                return rc;
        char *p = b->data + b->len;
        memcpy(p, key, kl);
        p[kl] = '=';
        memcpy(p + kl + 1, value, vl);
        p[kl + 1 + vl] = '\0';
        b->len = (uint32_t)need;
        return 0;
}

int iscsi_text_buf_addf(struct iscsi_text_buf *b, const char *key, const char *fmt, ...)
{
        char value[ISCSI_LARGE_VALUE_MAX + 1];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(value, sizeof(value), fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= sizeof(value)) {
                if (!b->err)
                        b->err = -E2BIG;
                return -E2BIG;
        }
        return iscsi_text_buf_add(b, key, value);
}

void iscsi_text_buf_free(struct iscsi_text_buf *b)
{
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}
