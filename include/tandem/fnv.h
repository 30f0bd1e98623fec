/*
 * FNV-1a, 64 bits: the one non-cryptographic hash of the tree (state file checksums, default
 * LUN identities, the digests of applied COMPARE AND WRITEs). Incremental: start from
 * TDM_FNV1A_INIT and feed the bytes in as many calls as convenient.
 */
#ifndef TANDEM_FNV_H
#define TANDEM_FNV_H

#include <stddef.h>
#include <stdint.h>

#define TDM_FNV1A_INIT 0xcbf29ce484222325ull

static inline uint64_t tdm_fnv1a(uint64_t h, const void *buf, size_t len)
{
        const uint8_t *p = buf;
        for (size_t i = 0; i < len; i++)
                h = (h ^ p[i]) * 0x100000001b3ull;
        return h;
}

#endif
