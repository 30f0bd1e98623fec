/*
 * The replication handshake: HELLO both ways (versions, features, node ids, channel, LUN,
 * a 32-byte nonce), then AUTH both ways (HMAC-SHA256 answer to the peer's nonce with the
 * shared secret), then AUTH_RESULT both ways. Both ends run the same code; there is no
 * initiator role. An unauthenticated peer never gets past the handshake, and nothing it sends
 * makes us read or allocate more than REPL_MSG_MAX bytes.
 */
#ifndef TANDEM_REPL_AUTH_H
#define TANDEM_REPL_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "frame_seal.h"

#define REPL_NONCE_LEN       32
#define REPL_MAC_LEN         32
#define REPL_SECRET_MIN_LEN  12
#define REPL_AUTH_MAC_DOMAIN "tandem-repl-auth-v1"

struct repl_hs_local {
        uint32_t node_id, peer_node_id; /* who we are and who we expect */
        const char *secret;             /* shared secret (>= 12 chars) */
        const char *lun_naa;            /* 32 hex digits, must match the peer's */
        int channel;                    /* TANDEM__REPL__CHANNEL__CHANNEL_DATA or _CONTROL */
        uint64_t features;
        int protection; /* enum frame_protect (0: authenticate); both ends must agree */
};

struct repl_hs_result {
        uint32_t proto;    /* agreed version: min(max_a, max_b) */
        uint64_t features; /* common feature bits */
        int channel;       /* the channel the peer says this connection is */
        /* The frames after the handshake: keys of both directions (wipe them once used). */
        int protection, cipher;
        struct frame_key tx, rx;
};

/*
 * Runs the whole handshake on a connected socket within timeout_ms (< 0: no deadline).
 * Returns 0, or
 *   -EACCES      authentication failed (wrong secret, reflected answer)
 *   -EPROTO      incompatible version, channel mismatch, garbage, unexpected message
 *   -ENOENT      unknown node: the peer's node_id != peer_node_id, or it expects someone else
 *   -ESRCH       different LUN naa
 *   -ECONNRESET  the peer closed (or sent DISCONNECT)
 *   -ETIMEDOUT   the deadline passed
 *   -EINVAL      our own configuration is unusable (short secret, bad naa, bad channel)
 *   -EIO         the crypto library failed
 * why gets a reason naming the fields ("wrong secret: HMAC mismatch from node 2", "unknown
 * node 7 (expected 2)", "incompatible protocol: peer speaks 3..4, we speak 1..1"). A refusal
 * we detect is sent to the peer as AuthResult{ok=false, reason} first; a refusal from the peer
 * is reported as "peer refused: <its reason>" with the errno its reason stands for.
 * The LUN naa is compared case-insensitively.
 *
 * Both HELLOs carry REPL_FEATURE_SEALED (and REPL_FEATURE_ENCRYPT with protection "encrypt"):
 * a peer without the first, or with another protection, is refused ("link protection
 * mismatch: ..."). On success res holds the keys every later frame is sealed with
 * (frame_seal.h): derived from the secret, both nonces, both node ids, the channel, the LUN
 * and both HELLOs' features, so a HELLO altered in transit gives keys that do not match.
 */
int repl_handshake(int fd, const struct repl_hs_local *local, struct repl_hs_result *res,
                   int timeout_ms, char *why, size_t whylen);

/*
 * HMAC-SHA256 keyed with secret over: "tandem-repl-auth-v1" || challenge(32, the nonce the
 * peer sent) || own nonce(32) || sender node id (u32 BE) || receiver node id (u32 BE) ||
 * channel (u8) || lun_naa (hex digits lowercased). On a crypto library failure out is filled
 * with fresh random bytes (never a predictable value); repl_auth_mac_checked reports it.
 */
void repl_auth_mac(const char *secret, const uint8_t challenge[32], const uint8_t own_nonce[32],
                   uint32_t sender, uint32_t receiver, int channel, const char *lun_naa,
                   uint8_t out[32]);
int repl_auth_mac_checked(const char *secret, const uint8_t challenge[32],
                          const uint8_t own_nonce[32], uint32_t sender, uint32_t receiver,
                          int channel, const char *lun_naa, uint8_t out[32]);

#endif
