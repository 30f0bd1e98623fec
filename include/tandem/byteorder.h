/*
 * Byte order of wire and on-disk fields: big-endian (SCSI, iSCSI, replication frames,
 * metadata) and little-endian (iSCSI digests). The one set of helpers for the whole tree.
 */
#ifndef TANDEM_BYTEORDER_H
#define TANDEM_BYTEORDER_H

#include <stdint.h>

static inline uint16_t get_be16(const uint8_t *p)
{
        return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t get_be24(const uint8_t *p)
{
        return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}

static inline uint32_t get_be32(const uint8_t *p)
{
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t get_be64(const uint8_t *p)
{
        return ((uint64_t)get_be32(p) << 32) | get_be32(p + 4);
}

static inline void put_be16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

static inline void put_be24(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 16);
        p[1] = (uint8_t)(v >> 8);
        p[2] = (uint8_t)v;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
        put_be32(p, (uint32_t)(v >> 32));
        put_be32(p + 4, (uint32_t)v);
}

static inline uint32_t get_le32(const uint8_t *p)
{
        return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
               ((uint32_t)p[3] << 24);
}

static inline void put_le32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
        p[2] = (uint8_t)(v >> 16);
        p[3] = (uint8_t)(v >> 24);
}

static inline uint64_t get_le64(const uint8_t *p)
{
        return (uint64_t)get_le32(p) | ((uint64_t)get_le32(p + 4) << 32);
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
        put_le32(p, (uint32_t)v);
        put_le32(p + 4, (uint32_t)(v >> 32));
}

#endif
