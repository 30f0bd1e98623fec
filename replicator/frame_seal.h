/*
 * Sealed replication frames (issue 23): after the handshake every frame of the link carries an
 * AEAD tag, and with link_protection = "encrypt" its message and payload are ciphertext.
 *
 *   header (16 bytes, clear, authenticated) | message | payload | tag (16 bytes)
 *
 * Keys are per connection and per direction: HKDF-SHA256 over the shared secret, salted with
 * both HELLO nonces, its info naming the direction (sender and receiver node ids), the channel,
 * the LUN, both HELLOs' feature words and the protection mode. The nonce is implicit: the
 * direction's 12-byte IV XORed with a 64-bit frame counter that both ends keep, starting at 0
 * after the handshake. So a frame that was replayed, reordered, dropped (the next one is
 * opened with the wrong counter), altered, injected or cut short fails to open.
 *
 * "authenticate": the header, message and payload are all additional data of the AEAD (no
 * ciphertext: GMAC / Poly1305 only), so integrity is always on and nothing is copied.
 * "encrypt": the header is additional data, message and payload are encrypted.
 *
 * Pure: no sockets, no threads (one struct frame_seal per direction, used by one thread at a
 * time). Uses OpenSSL EVP, one cipher context per direction kept for the connection's life.
 */
#ifndef TANDEM_REPL_FRAME_SEAL_H
#define TANDEM_REPL_FRAME_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define FRAME_KEY_LEN    32
#define FRAME_IV_LEN     12
#define FRAME_TAG_LEN    16
#define FRAME_NONCE_LEN  32 /* a HELLO nonce (REPL_NONCE_LEN) */
#define FRAME_KDF_DOMAIN "tandem-repl-frame-v1"

enum frame_protect {
        FRAME_PROTECT_AUTHENTICATE = 0, /* tag over header, message and payload */
        FRAME_PROTECT_ENCRYPT = 1,      /* tag over header; message and payload encrypted */
};

enum frame_cipher {
        FRAME_CIPHER_CHACHA20_POLY1305 = 1, /* the link's (see replicator/README.md) */
        FRAME_CIPHER_AES_256_GCM = 2,
};
#define FRAME_CIPHER_DEFAULT FRAME_CIPHER_CHACHA20_POLY1305

/* "authenticate" / "encrypt"; NULL for another value. */
const char *frame_protect_name(int mode);
/* 0 and *mode set, or -EINVAL. */
int frame_protect_parse(const char *name, int *mode);

/* The key and IV of one direction. */
struct frame_key {
        uint8_t key[FRAME_KEY_LEN];
        uint8_t iv[FRAME_IV_LEN];
};

/* What both ends of a handshake know: the same values seen from either side. */
struct frame_kdf_in {
        const uint8_t *secret;
        size_t secret_len;
        const uint8_t *nonce_self, *nonce_peer; /* FRAME_NONCE_LEN bytes each */
        uint32_t self_id, peer_id;              /* must differ */
        int channel;
        const char *lun_naa;                   /* enters lowercased */
        uint64_t features_self, features_peer; /* as each HELLO carried them */
        int mode;                              /* enum frame_protect */
        int cipher;                            /* enum frame_cipher */
};

/*
 * tx: from self to peer; rx: from peer to self (the peer's tx). 0, -EINVAL (same ids, bad
 * mode or cipher) or -EIO (the crypto library failed; both keys are then wiped).
 */
int frame_keys_derive(const struct frame_kdf_in *in, struct frame_key *tx, struct frame_key *rx);

/* One direction's state: sealing (sender) or opening (receiver). */
struct frame_seal {
        void *ctx; /* EVP_CIPHER_CTX, keyed once */
        uint8_t iv[FRAME_IV_LEN];
        uint64_t seq; /* frames sealed or opened so far: the next nonce */
        int mode;
        bool opener;
        bool broken; /* a frame failed to open, or the library failed: refuses from now on */
};

/* 0, -EINVAL or -ENOMEM/-EIO. The key material is not kept outside the cipher context. */
int frame_seal_init(struct frame_seal *s, const struct frame_key *k, int mode, int cipher,
                    bool opener);
void frame_seal_fini(struct frame_seal *s);
bool frame_seal_active(const struct frame_seal *s);

/*
 * Seals one frame: hdr (clear) and the body in[0..n) (message, payload). "encrypt" writes the
 * ciphertext of in[i] to out[i] (same length; out[i] may be in[i]: in place); "authenticate"
 * writes nothing (out may be NULL). The tag goes to tag. 0, or -EIO/-EOVERFLOW (counter
 * exhausted) and the state refuses from then on.
 */
int frame_seal(struct frame_seal *s, const uint8_t *hdr, size_t hdr_len, const struct iovec *in,
               const struct iovec *out, int n, uint8_t tag[FRAME_TAG_LEN]);

/*
 * Opens one frame in place: checks tag over hdr and io[0..n), and with "encrypt" decrypts
 * io in place. 0, or -EBADMSG (the frame is not the next one the peer sealed: altered,
 * injected, replayed, reordered, truncated, or a frame before it was dropped; io then holds
 * garbage that must not be used), and the state refuses every later frame.
 */
int frame_open(struct frame_seal *s, const uint8_t *hdr, size_t hdr_len, const struct iovec *io,
               int n, const uint8_t tag[FRAME_TAG_LEN]);

#endif
