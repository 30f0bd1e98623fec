/*
 * The configuration's edit paths under fuzzing: the edits tandemctl asks for (target, LUN,
 * ACL and CHAP add/del/set, LUN resize; daemon/config/edit.c, which the admin handlers call
 * before they touch the registry) applied in sequence to one of a few base configurations.
 *
 * Input: one byte picks the base configuration (BASES below); then edits, each an op byte
 * (low 3 bits: enum op) and its arguments. A string argument is a length byte and that many
 * bytes, or, when the length byte is 0xf0 or more, a name from the pool (the configuration's
 * own target IQNs first, then fixed names), so that edits meet existing objects. A number is
 * 8 bytes, little-endian; a flag one byte. The input ends where an argument runs out.
 *
 * Checks: an edit that succeeds leaves a configuration that validates; one that fails says
 * why and leaves the configuration exactly as it was (field by field); at the end the
 * configuration saves, reloads to the same values and saves to the same file again
 * (config_roundtrip.h), as the admin plane needs for a restart to come back the same.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_roundtrip.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        conf_dir_init("fuzz-config-edit");
        return 0;
}

static const char *const BASES[] = {
    "listen = [ \"127.0.0.1:3260\" ];",
    "targets = ( { iqn = \"iqn.2024-01.org.example:t1\"; acl = [ \"ALL\" ];\n"
    "  chap = { user = \"client\"; secret = \"client-secret-1\"; };\n"
    "  luns = ( { lun = 0; path = \"/srv/a.img\"; size = \"1G\"; thin = true;\n"
    "    naa = \"67a6e640c3f1a2b4d5e6f708192a3b4c\"; serial = \"s0\"; } ); },\n"
    "  { iqn = \"eui.0123456789ABCDEF\"; luns = ( { lun = 3; path = \"/srv/b.img\";\n"
    "    size = 1048576; block_size = 4096; naa = \"67a6e640c3f1a2b4d5e6f708192a3b4d\";\n"
    "    serial = \"s3\"; } ); } );",
    "node_id = 1;\n"
    "targets = ( { iqn = \"iqn.2024-01.org.example:r1\";\n"
    "  luns = ( { lun = 0; path = \"/srv/r.img\"; size = \"1M\";\n"
    "    naa = \"67a6e640c3f1a2b4d5e6f708192a3b4e\"; serial = \"r0\";\n"
    "    replication = { secret = \"shared-secret-1\";\n"
    "      nodes = ( { id = 1; address = \"10.0.0.1\"; }, { id = 2; address = \"10.0.0.2\"; } );\n"
    "    }; } ); } );",
};

static const char *const FIXED_NAMES[] = {
    "iqn.2024-01.org.example:new",
    "iqn.1993-08.org.debian:01:client1",
    "ALL",
    "",
};

enum op {
        OP_ADD_TARGET,
        OP_DEL_TARGET,
        OP_ADD_LUN,
        OP_DEL_LUN,
        OP_SET_SIZE,
        OP_ADD_ACL,
        OP_DEL_ACL,
        OP_SET_CHAP,
};

static const char *const OP_NAMES[] = {"target add", "target del", "lun add", "lun del",
                                       "lun resize", "acl add",    "acl del", "chap set"};

static bool take_bytes(struct fuzz_in *in, void *out, size_t n)
{
        if (in->left < n)
                return false;
        memcpy(out, in->p, n);
        in->p += n;
        in->left -= n;
        return true;
}

static bool take_u64(struct fuzz_in *in, uint64_t *v)
{
        uint8_t b[8];
        if (!take_bytes(in, b, sizeof(b)))
                return false;
        *v = 0;
        for (int i = 7; i >= 0; i--)
                *v = (*v << 8) | b[i];
        return true;
}

static bool take_flag(struct fuzz_in *in, bool *v)
{
        uint8_t b;
        if (!fuzz_take_u8(in, &b))
                return false;
        *v = b & 1;
        return true;
}

/* A string into buf (NUL-terminated, cut to cap - 1): literal or from the pool. */
static bool take_str(struct fuzz_in *in, const struct tdm_config *cfg, char *buf, size_t cap)
{
        uint8_t n;
        if (!fuzz_take_u8(in, &n))
                return false;
        if (n >= 0xf0) {
                size_t pick = n - 0xf0u;
                const char *name =
                    pick < cfg->n_targets
                        ? cfg->targets[pick].iqn
                        : FIXED_NAMES[(pick - cfg->n_targets) %
                                      (sizeof(FIXED_NAMES) / sizeof(FIXED_NAMES[0]))];
                snprintf(buf, cap, "%s", name);
                return true;
        }
        if (in->left < n)
                return false;
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(buf, in->p, k);
        buf[k] = '\0';
        in->p += n;
        in->left -= n;
        return true;
}

static bool take_lun(struct fuzz_in *in, const struct tdm_config *cfg, struct tdm_lun_cfg *l)
{
        memset(l, 0, sizeof(*l));
        uint64_t bs = 0, pbs = 0;
        return take_u64(in, &l->lun) && take_str(in, cfg, l->path, sizeof(l->path)) &&
               take_u64(in, &l->size) && take_flag(in, &l->thin) && take_flag(in, &l->direct) &&
               take_u64(in, &bs) && take_u64(in, &pbs) && take_flag(in, &l->wce) &&
               take_flag(in, &l->readonly) &&
               ((l->block_size = (uint32_t)bs), (l->physical_block_size = (uint32_t)pbs), true);
}

static bool take_chap(struct fuzz_in *in, const struct tdm_config *cfg, struct tdm_chap_cfg *c)
{
        memset(c, 0, sizeof(*c));
        return take_flag(in, &c->enabled) && take_str(in, cfg, c->user, sizeof(c->user)) &&
               take_str(in, cfg, c->secret, sizeof(c->secret)) && take_flag(in, &c->mutual) &&
               take_str(in, cfg, c->mutual_user, sizeof(c->mutual_user)) &&
               take_str(in, cfg, c->mutual_secret, sizeof(c->mutual_secret));
}

/* One edit from the input: 1 done (rc in *rc), 0 when the input ran out. */
static int apply_one(struct fuzz_in *in, struct tdm_config *cfg, int *rc, char *err, size_t errlen,
                     enum op *which)
{
        uint8_t opb;
        char iqn[TDM_IQN_MAX], name[TDM_IQN_MAX];
        uint64_t n, size;
        struct tdm_lun_cfg lun;
        struct tdm_chap_cfg chap;
        bool discovery;
        if (!fuzz_take_u8(in, &opb))
                return 0;
        *which = (enum op)(opb & 7);
        switch (*which) {
        case OP_ADD_TARGET:
                if (!take_str(in, cfg, iqn, sizeof(iqn)))
                        return 0;
                *rc = tdm_config_add_target(cfg, iqn, err, errlen);
                return 1;
        case OP_DEL_TARGET:
                if (!take_str(in, cfg, iqn, sizeof(iqn)))
                        return 0;
                *rc = tdm_config_del_target(cfg, iqn, err, errlen);
                return 1;
        case OP_ADD_LUN:
                if (!take_str(in, cfg, iqn, sizeof(iqn)) || !take_lun(in, cfg, &lun))
                        return 0;
                *rc = tdm_config_add_lun(cfg, iqn, &lun, err, errlen);
                return 1;
        case OP_DEL_LUN:
                if (!take_str(in, cfg, iqn, sizeof(iqn)) || !take_u64(in, &n))
                        return 0;
                *rc = tdm_config_del_lun(cfg, iqn, n, err, errlen);
                return 1;
        case OP_SET_SIZE:
                if (!take_str(in, cfg, iqn, sizeof(iqn)) || !take_u64(in, &n) ||
                    !take_u64(in, &size))
                        return 0;
                *rc = tdm_config_set_lun_size(cfg, iqn, n, size, err, errlen);
                return 1;
        case OP_ADD_ACL:
        case OP_DEL_ACL:
                if (!take_str(in, cfg, iqn, sizeof(iqn)) || !take_str(in, cfg, name, sizeof(name)))
                        return 0;
                *rc = *which == OP_ADD_ACL ? tdm_config_add_acl(cfg, iqn, name, err, errlen)
                                           : tdm_config_del_acl(cfg, iqn, name, err, errlen);
                return 1;
        case OP_SET_CHAP:
                if (!take_flag(in, &discovery) || !take_str(in, cfg, iqn, sizeof(iqn)) ||
                    !take_chap(in, cfg, &chap))
                        return 0;
                *rc = tdm_config_set_chap(cfg, discovery ? NULL : iqn, &chap, err, errlen);
                return 1;
        }
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fuzz_in in = {data, size};
        uint8_t base;
        if (!fuzz_take_u8(&in, &base))
                return 0;
        struct tdm_config cfg;
        char err[512] = "";
        int rc = tdm_config_parse_string(BASES[base % (sizeof(BASES) / sizeof(BASES[0]))], &cfg,
                                         err, sizeof(err));
        FUZZ_ASSERT(rc == 0, "base configuration %u refused: %s", base, err);
        for (;;) {
                struct tdm_config before;
                FUZZ_ASSERT(tdm_config_copy(&before, &cfg) == 0, "copy failed");
                enum op which = OP_ADD_TARGET;
                err[0] = '\0';
                int done = apply_one(&in, &cfg, &rc, err, sizeof(err), &which);
                if (!done) {
                        tdm_config_free(&before);
                        break;
                }
                if (fuzz_verbose())
                        fprintf(stderr, "%s = %d%s%s\n", OP_NAMES[which], rc, rc ? ": " : "", err);
                if (rc == 0) {
                        char verr[512] = "";
                        FUZZ_ASSERT(tdm_config_validate(&cfg, verr, sizeof(verr)) == 0,
                                    "%s accepted, the result fails validation: %s", OP_NAMES[which],
                                    verr);
                } else {
                        FUZZ_ASSERT(rc < 0, "%s = %d", OP_NAMES[which], rc);
                        FUZZ_ASSERT(err[0] != '\0', "%s refused without a message",
                                    OP_NAMES[which]);
                        same_config(&before, &cfg); /* a refused edit changes nothing */
                }
                tdm_config_free(&before);
        }
        round_trip(&cfg);
        tdm_config_free(&cfg);
        return 0;
}
