/*
 * Names and identities: iSCSI names (RFC 3720 3.2.6), NAA type 6 designators and serials of
 * LUNs (generated for new LUNs), instance names.
 */
#include <ctype.h>
#include <errno.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "config_internal.h"

static bool all_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!isxdigit((unsigned char)s[i]))
                        return false;
        return true;
}

/* RFC 3720 3.2.6.2: after normalisation only a-z, 0-9, '-', '.', ':' (we accept A-Z too). */
static bool name_char_ok(char c)
{
        return isalnum((unsigned char)c) || c == '-' || c == '.' || c == ':';
}

/* Reversed domain name: labels of [A-Za-z0-9-], separated by single dots. */
static bool domain_ok(const char *s, size_t n)
{
        if (n == 0 || s[0] == '.' || s[n - 1] == '.')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (c == '.') {
                        if (s[i + 1] == '.')
                                return false;
                } else if (!isalnum((unsigned char)c) && c != '-') {
                        return false;
                }
        }
        return true;
}

static bool iqn_valid(const char *s)
{
        /* iqn.YYYY-MM.reversed.domain[:unique] */
        const char *p = s + 4;
        if (!cfg_all_digits(p, 4) || p[4] != '-' || !cfg_all_digits(p + 5, 2) || p[7] != '.')
                return false;
        int month = (p[5] - '0') * 10 + (p[6] - '0');
        if (month < 1 || month > 12)
                return false;
        p += 8;
        const char *colon = strchr(p, ':');
        size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
        if (!domain_ok(p, dlen))
                return false;
        if (!colon)
                return true;
        const char *u = colon + 1;
        if (*u == '\0')
                return false;
        for (; *u; u++)
                if (!name_char_ok(*u))
                        return false;
        return true;
}

bool tdm_iscsi_name_valid(const char *name)
{
        if (!name)
                return false;
        size_t n = strlen(name);
        if (n < 5 || n >= TDM_IQN_MAX)
                return false;
        if (strncasecmp(name, "iqn.", 4) == 0)
                return iqn_valid(name);
        if (strncasecmp(name, "eui.", 4) == 0)
                return n == 4 + 16 && all_hex(name + 4, 16);
        if (strncasecmp(name, "naa.", 4) == 0)
                return (n == 4 + 16 || n == 4 + 32) && all_hex(name + 4, n - 4);
        return false;
}

bool tdm_iscsi_name_equal(const char *a, const char *b)
{
        return strcasecmp(a, b) == 0;
}

bool tdm_naa_valid(const char *hex)
{
        return hex && strlen(hex) == 32 && all_hex(hex, 32) && hex[0] == '6';
}

static int hex_nibble(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        return tolower((unsigned char)c) - 'a' + 10;
}

int tdm_naa_to_bytes(const char *hex, uint8_t out[16])
{
        if (!tdm_naa_valid(hex))
                return -EINVAL;
        for (int i = 0; i < 16; i++)
                out[i] = (uint8_t)(hex_nibble(hex[2 * i]) << 4 | hex_nibble(hex[2 * i + 1]));
        return 0;
}

bool tdm_serial_valid(const char *serial)
{
        return cfg_plain_name_ok(serial, 32);
}

bool tdm_instance_name_valid(const char *name)
{
        return cfg_plain_name_ok(name, TDM_INSTANCE_MAX - 1) && name[0] != '.';
}

/* ---------------------------------------------------------------- identity */

static void random_bytes(uint8_t *buf, size_t n)
{
        size_t got = 0;
        while (got < n) {
                ssize_t r = getrandom(buf + got, n - got, 0);
                if (r > 0) {
                        got += (size_t)r;
                        continue;
                }
                if (r < 0 && errno == EINTR)
                        continue;
                break;
        }
        if (got == n)
                return;
        /* getrandom unavailable: OpenSSL's generator; a LUN identity must never be guessable
         * or repeated, so there is no weaker fallback. */
        if (RAND_bytes(buf, (int)n) != 1)
                abort();
}

static void to_hex(const uint8_t *in, size_t n, char *out)
{
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 0xf];
        }
        out[2 * n] = '\0';
}

void tdm_lun_identity_generate(struct tdm_lun_cfg *lun)
{
        uint8_t r[21];
        random_bytes(r, sizeof(r));
        /*
         * NAA IEEE Registered Extended (SPC-4 7.8.6.6.5): NAA 6, 24-bit company id,
         * 36-bit vendor specific identifier, 64-bit vendor specific extension.
         */
        uint32_t cid = TDM_NAA_COMPANY_ID;
        uint8_t naa[16];
        naa[0] = (uint8_t)(0x60 | ((cid >> 20) & 0x0f));
        naa[1] = (uint8_t)(cid >> 12);
        naa[2] = (uint8_t)(cid >> 4);
        naa[3] = (uint8_t)(((cid & 0x0f) << 4) | (r[0] & 0x0f));
        memcpy(naa + 4, r + 1, 12);
        to_hex(naa, sizeof(naa), lun->naa);
        to_hex(r + 13, 8, lun->serial);
}
