/*
 * Names and identities in the configuration: iSCSI names (targets, initiators), a LUN's NAA
 * designator and serial, instance names. Implemented in daemon/config/names.c.
 */
#ifndef TANDEM_CONFIG_NAMES_H
#define TANDEM_CONFIG_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#define TDM_IQN_MAX 224

/* NAA type 6 company id: a locally administered CID (U/L bit set, M bit clear), our choice. */
#define TDM_NAA_COMPANY_ID 0x7A6E64u

/* The forms an iSCSI name takes, for messages: `"x" is not an iSCSI name ` TDM_ISCSI_NAME_FORMS. */
#define TDM_ISCSI_NAME_FORMS "(iqn.YYYY-MM.domain[:id], eui.<16 hex>, naa.<16|32 hex>)"

/* Syntax check of an iSCSI name (iqn./eui./naa. forms, RFC 3720 3.2.6). */
bool tdm_iscsi_name_valid(const char *name);
/* iSCSI names compare case-insensitively (RFC 3722 normalises them to lower case). */
bool tdm_iscsi_name_equal(const char *a, const char *b);

/* 32 hex digits of a NAA type 6 designator <-> 16 bytes. */
bool tdm_naa_valid(const char *hex);
int tdm_naa_to_bytes(const char *hex, uint8_t out[16]);
/* A LUN serial: 1..32 characters of A-Z a-z 0-9 - _ . */
bool tdm_serial_valid(const char *serial);
/* A new LUN's identity: a random NAA type 6 designator and serial (never guessable). */
struct tdm_lun_cfg;
void tdm_lun_identity_generate(struct tdm_lun_cfg *lun);

/*
 * An instance name (tandemd --instance, the admin endpoint "tandem-NAME"; also the alphabet of
 * CPG group names): 1..63 characters of A-Z a-z 0-9 - _ ., not starting with a dot.
 */
#define TDM_INSTANCE_MAX 64 /* with the NUL */
bool tdm_instance_name_valid(const char *name);

#endif
