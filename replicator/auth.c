/* The authenticated replication handshake (see auth.h). */
#include "auth.h"
#include "wire.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#define NAA_HEX_LEN 32
/* Upper bound for telling the peer why we refuse once our own deadline is gone. */
#define REFUSAL_SEND_MS 1000

/* ---- HMAC ---- */

static int mac_update_be32(EVP_MAC_CTX *ctx, uint32_t v)
{
        uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
        return EVP_MAC_update(ctx, b, sizeof(b));
}

/* The naa enters the MAC lowercased, so both ends agree however the admin spelled it. */
static int mac_update_lower(EVP_MAC_CTX *ctx, const char *s)
{
        uint8_t chunk[64];
        size_t n = 0;
        for (; *s; s++) {
                chunk[n++] = (uint8_t)tolower((unsigned char)*s);
                if (n == sizeof(chunk)) {
                        if (!EVP_MAC_update(ctx, chunk, n))
                                return 0;
                        n = 0;
                }
        }
        return n ? EVP_MAC_update(ctx, chunk, n) : 1;
}

int repl_auth_mac_checked(const char *secret, const uint8_t challenge[32],
                          const uint8_t own_nonce[32], uint32_t sender, uint32_t receiver,
                          int channel, const char *lun_naa, uint8_t out[32])
{
        EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
        EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
            OSSL_PARAM_construct_end(),
        };
        uint8_t chan = (uint8_t)channel;
        size_t outl = 0;
        int ok = ctx && EVP_MAC_init(ctx, (const unsigned char *)secret, strlen(secret), params) &&
                 EVP_MAC_update(ctx, (const unsigned char *)REPL_AUTH_MAC_DOMAIN,
                                strlen(REPL_AUTH_MAC_DOMAIN)) &&
                 EVP_MAC_update(ctx, challenge, REPL_NONCE_LEN) &&
                 EVP_MAC_update(ctx, own_nonce, REPL_NONCE_LEN) && mac_update_be32(ctx, sender) &&
                 mac_update_be32(ctx, receiver) && EVP_MAC_update(ctx, &chan, 1) &&
                 mac_update_lower(ctx, lun_naa) && EVP_MAC_final(ctx, out, &outl, REPL_MAC_LEN) &&
                 outl == REPL_MAC_LEN;
        EVP_MAC_CTX_free(ctx);
        EVP_MAC_free(mac);
        if (ok)
                return 0;
        /* Never leave a value an attacker could predict (zeroes) where a MAC is expected. */
        if (RAND_bytes(out, REPL_MAC_LEN) != 1)
                memset(out, 0xa5, REPL_MAC_LEN);
        return -EIO;
}

void repl_auth_mac(const char *secret, const uint8_t challenge[32], const uint8_t own_nonce[32],
                   uint32_t sender, uint32_t receiver, int channel, const char *lun_naa,
                   uint8_t out[32])
{
        repl_auth_mac_checked(secret, challenge, own_nonce, sender, receiver, channel, lun_naa,
                              out);
}

/* ---- handshake ---- */

struct hs {
        int fd;
        const struct repl_hs_local *local;
        int64_t deadline_ms; /* CLOCK_MONOTONIC; < 0: none */
        uint8_t nonce[REPL_NONCE_LEN];
        char reason[256];
};

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The timeout for the next wire call: what is left of the handshake's deadline. */
static int left_ms(const struct hs *hs)
{
        if (hs->deadline_ms < 0)
                return -1;
        int64_t left = hs->deadline_ms - now_ms();
        if (left <= 0)
                return 0;
        return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

__attribute__((format(printf, 3, 4))) static int fail(struct hs *hs, int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(hs->reason, sizeof(hs->reason), fmt, ap);
        va_end(ap);
        return err;
}

static const char *channel_name(int channel)
{
        switch (channel) {
        case TANDEM__REPL__CHANNEL__CHANNEL_DATA:
                return "data";
        case TANDEM__REPL__CHANNEL__CHANNEL_CONTROL:
                return "control";
        case TANDEM__REPL__CHANNEL__CHANNEL_NONE:
                return "none";
        default:
                return "unknown";
        }
}

/* Our refusal reasons start with these words; the peer maps them back to the same errno. */
static int refusal_errno(const char *reason)
{
        if (!strncmp(reason, "wrong secret", 12) || !strncmp(reason, "reflected", 9))
                return -EACCES;
        if (!strncmp(reason, "unknown node", 12))
                return -ENOENT;
        if (!strncmp(reason, "different LUN", 13))
                return -ESRCH;
        if (!strncmp(reason, "link protection mismatch", 24))
                return -EPROTO;
        return -EPROTO;
}

/* Tells the peer why we give up (best effort), then returns err. */
static int refuse(struct hs *hs, int err)
{
        Tandem__Repl__AuthResult ar = TANDEM__REPL__AUTH_RESULT__INIT;
        ar.ok = false;
        ar.reason = hs->reason;
        int t = left_ms(hs);
        if (t < 0 || t > REFUSAL_SEND_MS)
                t = REFUSAL_SEND_MS;
        repl_send(hs->fd, TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT, &ar.base, NULL, 0, t);
        return err;
}

static int send_msg(struct hs *hs, uint8_t type, const ProtobufCMessage *msg)
{
        int r = repl_send(hs->fd, type, msg, NULL, 0, left_ms(hs));
        if (r == -ETIMEDOUT)
                return fail(hs, r, "timed out sending %s", repl_msg_name(type));
        if (r == -ECONNRESET)
                return fail(hs, r, "peer closed the connection before our %s", repl_msg_name(type));
        if (r)
                return fail(hs, r, "sending %s: %s", repl_msg_name(type), strerror(-r));
        return 0;
}

/*
 * Receives the next handshake message, which must be of type `want`. A refusal or
 * DISCONNECT from the peer ends the handshake with its reason. Handshake frames carry no
 * payload: one that announces any is refused before a byte of it is read.
 */
static int recv_expect(struct hs *hs, uint8_t want, struct repl_rx *rx)
{
        const char *why = NULL;
        int r = repl_recv_head(hs->fd, rx, left_ms(hs), &why);
        if (r == -EPROTO)
                return refuse(hs, fail(hs, r, "bad frame from peer instead of %s: %s",
                                       repl_msg_name(want), why));
        if (r == -ETIMEDOUT)
                return fail(hs, r, "timed out waiting for %s from peer", repl_msg_name(want));
        if (r == -ECONNRESET)
                return fail(hs, r, "peer closed the connection while we waited for %s",
                            repl_msg_name(want));
        if (r)
                return fail(hs, r, "receiving %s: %s", repl_msg_name(want), strerror(-r));

        uint8_t type = rx->f.type;
        char text[160];
        if (type == TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT) {
                const Tandem__Repl__AuthResult *ar = (const void *)rx->msg;
                if (!ar->ok) {
                        repl_peer_text(text, sizeof(text), ar->reason);
                        r = fail(hs, refusal_errno(text), "peer refused: %s", text);
                        goto out;
                }
        } else if (type == TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT) {
                const Tandem__Repl__Disconnect *dc = (const void *)rx->msg;
                repl_peer_text(text, sizeof(text), dc->reason);
                r = fail(hs, -ECONNRESET, "peer disconnected: %s", text);
                goto out;
        }
        if (type != want) {
                r = refuse(hs, fail(hs, -EPROTO, "unexpected %s message (expected %s)",
                                    repl_msg_name(type), repl_msg_name(want)));
        }
out:
        if (r)
                repl_rx_free(rx);
        return r;
}

static bool naa_valid(const char *naa)
{
        size_t i = 0;
        for (; naa[i]; i++)
                if (!isxdigit((unsigned char)naa[i]))
                        return false;
        return i == NAA_HEX_LEN;
}

static int check_local(struct hs *hs)
{
        const struct repl_hs_local *l = hs->local;
        if (!l->secret || strlen(l->secret) < REPL_SECRET_MIN_LEN)
                return fail(hs, -EINVAL, "shared secret too short (need at least %d chars)",
                            REPL_SECRET_MIN_LEN);
        if (!l->lun_naa || !naa_valid(l->lun_naa))
                return fail(hs, -EINVAL, "local LUN naa is not %d hex digits", NAA_HEX_LEN);
        if (l->channel != TANDEM__REPL__CHANNEL__CHANNEL_DATA &&
            l->channel != TANDEM__REPL__CHANNEL__CHANNEL_CONTROL)
                return fail(hs, -EINVAL, "bad local channel %d", l->channel);
        if (l->node_id == l->peer_node_id)
                return fail(hs, -EINVAL, "node id %u is also the peer's node id", l->node_id);
        if (!frame_protect_name(l->protection))
                return fail(hs, -EINVAL, "bad local link protection %d", l->protection);
        return 0;
}

/* Everything in the peer's HELLO that must agree with us, cheapest and most telling first. */
static uint64_t hello_features(const struct repl_hs_local *l)
{
        return l->features | REPL_FEATURE_SEALED |
               (l->protection == FRAME_PROTECT_ENCRYPT ? REPL_FEATURE_ENCRYPT : 0);
}

static const char *protection_of(uint64_t features)
{
        return frame_protect_name(features & REPL_FEATURE_ENCRYPT ? FRAME_PROTECT_ENCRYPT
                                                                  : FRAME_PROTECT_AUTHENTICATE);
}

static int check_hello(struct hs *hs, const Tandem__Repl__Hello *h)
{
        const struct repl_hs_local *l = hs->local;
        if (h->proto_min > h->proto_max || h->proto_max < REPL_PROTO_MIN ||
            h->proto_min > REPL_PROTO_MAX)
                return fail(hs, -EPROTO,
                            "incompatible protocol: peer speaks %u..%u, we speak %u..%u",
                            h->proto_min, h->proto_max, REPL_PROTO_MIN, REPL_PROTO_MAX);
        if (h->nonce.len != REPL_NONCE_LEN)
                return fail(hs, -EPROTO, "bad HELLO from node %u: nonce is %zu bytes, want %d",
                            h->node_id, h->nonce.len, REPL_NONCE_LEN);
        if (!CRYPTO_memcmp(h->nonce.data, hs->nonce, REPL_NONCE_LEN))
                return fail(hs, -EACCES, "reflected HELLO: the peer sent our own nonce back");
        if (h->node_id != l->peer_node_id)
                return fail(hs, -ENOENT, "unknown node %u (expected %u)", h->node_id,
                            l->peer_node_id);
        if (h->peer_node_id != l->node_id)
                return fail(hs, -ENOENT, "unknown node: node %u expects node %u, we are node %u",
                            h->node_id, h->peer_node_id, l->node_id);
        if (strcasecmp(h->lun_naa, l->lun_naa)) {
                char naa[NAA_HEX_LEN + 8];
                repl_peer_text(naa, sizeof(naa), h->lun_naa);
                return fail(hs, -ESRCH, "different LUN: node %u has naa %s, we have naa %s",
                            h->node_id, naa, l->lun_naa);
        }
        if ((int)h->channel != l->channel)
                return fail(hs, -EPROTO, "channel mismatch: node %u says %s, we want %s",
                            h->node_id, channel_name((int)h->channel), channel_name(l->channel));
        if (!(h->features & REPL_FEATURE_SEALED))
                return fail(hs, -EPROTO,
                            "link protection mismatch: node %u does not seal its frames (a "
                            "tandemd without link_protection); upgrade it",
                            h->node_id);
        if ((h->features ^ hello_features(l)) & REPL_FEATURE_ENCRYPT)
                return fail(hs, -EPROTO,
                            "link protection mismatch: node %u has link_protection = \"%s\", "
                            "node %u has \"%s\"; set the same on both",
                            h->node_id, protection_of(h->features), l->node_id,
                            protection_of(hello_features(l)));
        return 0;
}

static int send_hello(struct hs *hs)
{
        const struct repl_hs_local *l = hs->local;
        Tandem__Repl__Hello h = TANDEM__REPL__HELLO__INIT;
        h.proto_min = REPL_PROTO_MIN;
        h.proto_max = REPL_PROTO_MAX;
        h.features = hello_features(l);
        h.node_id = l->node_id;
        h.peer_node_id = l->peer_node_id;
        h.channel = (Tandem__Repl__Channel)l->channel;
        h.nonce.data = hs->nonce;
        h.nonce.len = REPL_NONCE_LEN;
        h.lun_naa = (char *)l->lun_naa;
        return send_msg(hs, TANDEM__REPL__MSG_TYPE__MSG_HELLO, &h.base);
}

static int send_auth(struct hs *hs, const Tandem__Repl__Hello *peer)
{
        const struct repl_hs_local *l = hs->local;
        uint8_t mac[REPL_MAC_LEN];
        if (repl_auth_mac_checked(l->secret, peer->nonce.data, hs->nonce, l->node_id,
                                  l->peer_node_id, l->channel, l->lun_naa, mac))
                return fail(hs, -EIO, "HMAC-SHA256 computation failed");
        Tandem__Repl__Auth a = TANDEM__REPL__AUTH__INIT;
        a.hmac.data = mac;
        a.hmac.len = sizeof(mac);
        int r = send_msg(hs, TANDEM__REPL__MSG_TYPE__MSG_AUTH, &a.base);
        OPENSSL_cleanse(mac, sizeof(mac));
        return r;
}

/* The peer's answer must be the MAC of OUR nonce, sent by IT, to US: a reflected one is not. */
static int verify_auth(struct hs *hs, const Tandem__Repl__Hello *peer, const Tandem__Repl__Auth *a)
{
        const struct repl_hs_local *l = hs->local;
        uint8_t want[REPL_MAC_LEN];
        if (repl_auth_mac_checked(l->secret, hs->nonce, peer->nonce.data, l->peer_node_id,
                                  l->node_id, l->channel, l->lun_naa, want))
                return fail(hs, -EIO, "HMAC-SHA256 computation failed");
        bool match =
            a->hmac.len == REPL_MAC_LEN && !CRYPTO_memcmp(a->hmac.data, want, REPL_MAC_LEN);
        OPENSSL_cleanse(want, sizeof(want));
        if (!match)
                return fail(hs, -EACCES, "wrong secret: HMAC mismatch from node %u",
                            l->peer_node_id);
        return 0;
}

/* The keys of the frames that follow, from what both ends sent and the secret. */
static int derive_keys(struct hs *hs, const Tandem__Repl__Hello *peer, struct repl_hs_result *res)
{
        const struct repl_hs_local *l = hs->local;
        struct frame_kdf_in in = {.secret = (const uint8_t *)l->secret,
                                  .secret_len = strlen(l->secret),
                                  .nonce_self = hs->nonce,
                                  .nonce_peer = peer->nonce.data,
                                  .self_id = l->node_id,
                                  .peer_id = l->peer_node_id,
                                  .channel = l->channel,
                                  .lun_naa = l->lun_naa,
                                  .features_self = hello_features(l),
                                  .features_peer = peer->features,
                                  .mode = l->protection,
                                  .cipher = FRAME_CIPHER_DEFAULT};
        res->protection = l->protection;
        res->cipher = FRAME_CIPHER_DEFAULT;
        if (frame_keys_derive(&in, &res->tx, &res->rx))
                return fail(hs, -EIO, "HKDF-SHA256 key derivation failed");
        return 0;
}

static int run_handshake(struct hs *hs, struct repl_hs_result *res)
{
        struct repl_rx hello_rx = {0}, rx = {0};
        int r = check_local(hs);
        if (r)
                return r;
        if (RAND_bytes(hs->nonce, sizeof(hs->nonce)) != 1)
                return fail(hs, -EIO, "RAND_bytes failed");

        r = send_hello(hs);
        if (!r)
                r = recv_expect(hs, TANDEM__REPL__MSG_TYPE__MSG_HELLO, &hello_rx);
        if (r)
                return r;
        const Tandem__Repl__Hello *peer = (const void *)hello_rx.msg;
        r = check_hello(hs, peer);
        if (r) {
                r = refuse(hs, r);
                goto out;
        }

        r = send_auth(hs, peer);
        if (!r)
                r = recv_expect(hs, TANDEM__REPL__MSG_TYPE__MSG_AUTH, &rx);
        if (r)
                goto out;
        r = verify_auth(hs, peer, (const void *)rx.msg);
        repl_rx_free(&rx);
        if (r) {
                r = refuse(hs, r);
                goto out;
        }

        Tandem__Repl__AuthResult ok = TANDEM__REPL__AUTH_RESULT__INIT;
        ok.ok = true;
        r = send_msg(hs, TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT, &ok.base);
        if (!r)
                r = recv_expect(hs, TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT, &rx);
        if (r)
                goto out;
        repl_rx_free(&rx);

        if (!res)
                goto out;
        res->proto = peer->proto_max < REPL_PROTO_MAX ? peer->proto_max : REPL_PROTO_MAX;
        res->features = peer->features & hs->local->features;
        res->channel = (int)peer->channel;
        r = derive_keys(hs, peer, res);
out:
        repl_rx_free(&hello_rx);
        return r;
}

int repl_handshake(int fd, const struct repl_hs_local *local, struct repl_hs_result *res,
                   int timeout_ms, char *why, size_t whylen)
{
        struct hs hs = {.fd = fd, .local = local, .deadline_ms = -1};
        if (timeout_ms >= 0)
                hs.deadline_ms = now_ms() + timeout_ms;
        int r = run_handshake(&hs, res);
        OPENSSL_cleanse(hs.nonce, sizeof(hs.nonce));
        if (why && whylen)
                snprintf(why, whylen, "%s", r ? hs.reason : "");
        return r;
}
