/* Small PDU helpers: LUN field codec and CRC32C digests. */
#include <isa-l/crc.h>

#include "tandem/iscsi_pdu.h"

bool iscsi_lun_decode(const uint8_t *p, uint64_t *lun)
{
        uint8_t method = p[0] >> 6;
        /* Single-level LUNs only: the remaining six bytes must be zero. */
        for (int i = 2; i < 8; i++)
                if (p[i] != 0)
                        return false;
        switch (method) {
        case 0: /* peripheral device addressing, bus 0 */
                if (p[0] != 0)
                        return false;
                *lun = p[1];
                return true;
        case 1: /* flat space addressing */
                *lun = ((uint64_t)(p[0] & 0x3f) << 8) | p[1];
                return true;
        default:
                return false;
        }
}

void iscsi_lun_encode(uint8_t *p, uint64_t lun)
{
        memset(p, 0, 8);
        if (lun < 256) {
                p[1] = (uint8_t)lun;
        } else {
                p[0] = (uint8_t)(0x40 | ((lun >> 8) & 0x3f));
                p[1] = (uint8_t)lun;
        }
}

uint32_t iscsi_crc32c(const void *buf, size_t len, uint32_t seed)
{
        /* crc32_iscsi takes and returns the running value without the final inversion. */
        return crc32_iscsi((unsigned char *)buf, (int)len, seed);
}

uint32_t iscsi_crc32c_iov(const void *const *bufs, const size_t *lens, int n)
{
        uint32_t crc = ISCSI_CRC32C_SEED;
        for (int i = 0; i < n; i++)
                crc = iscsi_crc32c(bufs[i], lens[i], crc);
        return crc ^ ISCSI_CRC32C_SEED;
}
