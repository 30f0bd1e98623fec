/*
 * Helpers shared by the libFuzzer targets: an invariant check that aborts (libFuzzer then
 * saves the input as a crash), the wire framing of a PDU sequence inside a fuzz input, and
 * checks of key=value text that the target sends.
 */
#ifndef TANDEM_FUZZ_UTIL_H
#define TANDEM_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tandem/iscsi_pdu.h"
#include "tandem/log.h"

/* A broken invariant is a finding: say which one, then crash so the input is kept. */
#define FUZZ_ASSERT(cond, ...)                                                                     \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "fuzz invariant failed at %s:%d: %s: ", __FILE__,          \
                                __LINE__, #cond);                                                  \
                        fprintf(stderr, __VA_ARGS__);                                              \
                        fputc('\n', stderr);                                                       \
                        abort();                                                                   \
                }                                                                                  \
        } while (0)

/* TANDEM_FUZZ_VERBOSE=1: the targets say what each input did (for triage and seed checks). */
static inline bool fuzz_verbose(void)
{
        static int v = -1;
        if (v < 0) {
                const char *e = getenv("TANDEM_FUZZ_VERBOSE");
                v = e && *e && *e != '0';
        }
        return v;
}

/* With TANDEM_FUZZ_VERBOSE the daemon's own log lines (debug level) go to stderr too. */
__attribute__((constructor)) static void fuzz_log_setup(void)
{
        if (!fuzz_verbose())
                return;
        struct tdm_log_opts opts = {.level = LOG_DEBUG, .use_stderr = 1};
        tdm_log_init("fuzz", &opts);
}

/* A cursor over the fuzz input. */
struct fuzz_in {
        const uint8_t *p;
        size_t left;
};

static inline bool fuzz_take_u8(struct fuzz_in *in, uint8_t *out)
{
        if (in->left < 1)
                return false;
        *out = in->p[0];
        in->p++;
        in->left--;
        return true;
}

/*
 * The next PDU as it travels on the wire: a 48-byte BHS whose DataSegmentLength says how
 * many data bytes follow, then the padding to 4 bytes (skipped, whatever its value). A
 * length running past the input is cut to what is there (the BHS is not rewritten: the
 * code under test must cope with the mismatch). AHS bytes are not expected here.
 */
static inline bool fuzz_next_pdu(struct fuzz_in *in, const uint8_t **bhs, const uint8_t **data,
                                 uint32_t *len)
{
        if (in->left < ISCSI_BHS_LEN)
                return false;
        *bhs = in->p;
        in->p += ISCSI_BHS_LEN;
        in->left -= ISCSI_BHS_LEN;
        uint32_t dsl = iscsi_bhs_dsl(*bhs);
        if (dsl > in->left)
                dsl = (uint32_t)in->left;
        *data = dsl ? in->p : NULL;
        *len = dsl;
        size_t skip = (size_t)dsl + iscsi_pad4(dsl);
        if (skip > in->left)
                skip = in->left;
        in->p += skip;
        in->left -= skip;
        return true;
}

/* Text the target builds: whole "key=value\0" pairs, no empty key, each key at most once. */
static inline void fuzz_check_text(const uint8_t *text, uint32_t len, bool unique_keys)
{
        uint32_t off = 0;
        while (off < len) {
                const char *s = (const char *)text + off;
                size_t n = strnlen(s, len - off);
                FUZZ_ASSERT(n < len - off, "pair at offset %u lacks its NUL", off);
                const char *eq = memchr(s, '=', n);
                FUZZ_ASSERT(eq != NULL && eq != s, "pair at offset %u is not key=value: %.*s", off,
                            (int)n, s);
                if (unique_keys) {
                        size_t kl = (size_t)(eq - s);
                        uint32_t o2 = off + (uint32_t)n + 1;
                        while (o2 < len) {
                                const char *s2 = (const char *)text + o2;
                                size_t n2 = strnlen(s2, len - o2);
                                FUZZ_ASSERT(!(n2 > kl && memcmp(s2, s, kl) == 0 && s2[kl] == '='),
                                            "key %.*s sent twice in one response", (int)kl, s);
                                o2 += (uint32_t)n2 + 1;
                        }
                }
                off += (uint32_t)n + 1;
        }
}

/* Reassembles a response text that spans PDUs (C=1 on all but the last piece). */
struct fuzz_text_acc {
        uint8_t *buf;
        uint32_t len;
};

static inline void fuzz_text_acc_add(struct fuzz_text_acc *a, const uint8_t *p, uint32_t n)
{
        if (!n)
                return;
        uint8_t *nb = realloc(a->buf, (size_t)a->len + n);
        FUZZ_ASSERT(nb != NULL, "out of memory");
        memcpy(nb + a->len, p, n);
        a->buf = nb;
        a->len += n;
}

static inline void fuzz_text_acc_reset(struct fuzz_text_acc *a)
{
        free(a->buf);
        a->buf = NULL;
        a->len = 0;
}

/*
 * Value of key in a text (NULL if absent), copied into out (cut to cap - 1 bytes).
 */
static inline const char *fuzz_text_get(const uint8_t *text, uint32_t len, const char *key,
                                        char *out, size_t cap)
{
        size_t kl = strlen(key);
        uint32_t off = 0;
        while (off < len) {
                const char *s = (const char *)text + off;
                size_t n = strnlen(s, len - off);
                if (n > kl && memcmp(s, key, kl) == 0 && s[kl] == '=') {
                        size_t vl = n - kl - 1;
                        if (vl >= cap)
                                vl = cap - 1;
                        memcpy(out, s + kl + 1, vl);
                        out[vl] = '\0';
                        return out;
                }
                off += (uint32_t)n + 1;
        }
        return NULL;
}

#endif
