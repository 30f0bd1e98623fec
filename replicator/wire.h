/*
 * Replication wire framing: every message between two tandemd nodes travels as a 16-byte
 * big-endian header, the protobuf-c message named by the header's type, then a raw payload
 * (block data, bitmap bytes, digests) that is never copied into a message.
 *
 *   magic u32 "TDR1" | version u8 | type u8 | reserved u16 (0) | msg_len u32 | payload_len u32
 *
 * The receive side checks the header before it reads or allocates anything, so a hostile or
 * confused peer costs at most REPL_MSG_MAX bytes of message buffer (and REPL_PAYLOAD_MAX of
 * payload only through repl_recv, which callers use after authentication).
 */
#ifndef TANDEM_REPL_WIRE_H
#define TANDEM_REPL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <protobuf-c/protobuf-c.h>

#include "frame_seal.h"
#include "replication.pb-c.h"

#define REPL_WIRE_MAGIC            0x54445231u
#define REPL_WIRE_VERSION          1
#define REPL_PROTO_MIN             1
#define REPL_PROTO_MAX             1
#define REPL_FRAME_HDR_LEN         16
#define REPL_MSG_MAX               (64u * 1024)        /* largest protobuf message accepted */
#define REPL_PAYLOAD_MAX           (16u * 1024 * 1024) /* largest raw payload accepted */
#define REPL_FEATURE_VERIFY_SHA256 0x1ull              /* feature bits we offer */
#define REPL_FEATURE_FORWARD       0x2ull /* runs a Secondary's forwarded PR OUT (Forward) */
#define REPL_FEATURE_RESIZE        0x4ull /* grows with the Primary (Resize) */
/* Frames after the handshake are sealed (frame_seal.h): required of every peer. */
#define REPL_FEATURE_SEALED      0x8ull
#define REPL_FEATURE_ENCRYPT     0x10ull /* link_protection = "encrypt": must match the peer's */
#define REPL_FEATURE_WRITE_STATE 0x20ull /* a Write may carry a state record (one change) */
#define REPL_FEATURE_FORWARD_TMF 0x40ull /* runs a forwarded LOGICAL UNIT RESET (Forward.tmf) */

struct repl_frame {
        uint8_t type;
        uint32_t msg_len, payload_len;
};

/*
 * Checks and decodes a frame header. Returns 0 or -EPROTO with *why set to the reason
 * ("bad magic", "unsupported frame version 7", "reserved bits set", "unknown message type 42",
 * "message too large", "payload too large"). Reasons that carry a number live in a
 * thread-local buffer that stays valid until the next call from the same thread.
 */
int repl_frame_decode(const uint8_t hdr[REPL_FRAME_HDR_LEN], struct repl_frame *f,
                      const char **why);
void repl_frame_encode(uint8_t hdr[REPL_FRAME_HDR_LEN], uint8_t type, uint32_t msg_len,
                       uint32_t payload_len);

/*
 * Blocking I/O on a socket with a deadline (poll; MSG_NOSIGNAL; handles EINTR and partial
 * I/O). timeout_ms < 0 = no deadline; the deadline covers the whole call. Return 0,
 * -ETIMEDOUT, -ECONNRESET (peer closed or reset), -EPROTO (bad frame, *why set), or another
 * -errno.
 */

/*
 * Sends header + packed msg (may be NULL: msg_len 0) + payload iovecs in one sendmsg loop.
 * -EINVAL if type is unknown or msg is not the message that type names; -EMSGSIZE if the
 * message or payload exceeds REPL_MSG_MAX / REPL_PAYLOAD_MAX. Thread-safety is the caller's
 * (one sender per socket).
 */
int repl_send(int fd, uint8_t type, const ProtobufCMessage *msg, const struct iovec *payload,
              int niov, int timeout_ms);
/*
 * The same, sealed with tx (frame_seal.h; NULL: clear, as in the handshake): the tag follows
 * the payload. With "encrypt" the payload is encrypted into a buffer of ours (the caller's
 * stays as it was). -EIO if sealing failed (the link must then be dropped).
 */
int repl_send_on(int fd, struct frame_seal *tx, uint8_t type, const ProtobufCMessage *msg,
                 const struct iovec *payload, int niov, int timeout_ms);

/*
 * Receives one frame: the header, the message unpacked with the descriptor of its type (a
 * message that does not unpack: -EPROTO "malformed TYPE message"), and the payload into a
 * malloc'd buffer (NULL when 0 bytes). Release with repl_rx_free(), or free the message with
 * protobuf_c_message_free_unpacked(msg, NULL) and the payload with free(). On error rx holds
 * nothing that needs freeing.
 */
struct repl_rx {
        struct repl_frame f;
        ProtobufCMessage *msg;
        uint8_t *payload;
};
int repl_recv(int fd, struct repl_rx *rx, int timeout_ms, const char **why);
/*
 * The same for a sealed frame (rx: the opening side, NULL: clear): message and payload are
 * read with the tag and opened before anything is unpacked; a frame that fails to open is
 * -EPROTO "frame failed authentication ...", and nothing of it is returned.
 */
int repl_recv_on(int fd, struct frame_seal *open, struct repl_rx *rx, int timeout_ms,
                 const char **why);

/*
 * Bulk-data variant: receives header + message only (rx->payload stays NULL); the caller then
 * reads rx->f.payload_len bytes into its own buffer with repl_recv_payload (or refuses the
 * frame and drops the connection).
 */
int repl_recv_head(int fd, struct repl_rx *rx, int timeout_ms, const char **why);
int repl_recv_payload(int fd, void *buf, uint32_t len, int timeout_ms);
void repl_rx_free(struct repl_rx *rx);

const ProtobufCMessageDescriptor *repl_msg_descriptor(uint8_t type); /* NULL for unknown */
const char *repl_msg_name(uint8_t type); /* "HELLO", "PING_ACK", ...; "UNKNOWN" */
bool repl_msg_has_payload(uint8_t type); /* may carry raw bytes after its message */
/* Copies text the peer chose (a reason, a name) into a log-safe form: printable ASCII, '?' for
 * anything else, cut to dstlen - 1 bytes. */
void repl_peer_text(char *dst, size_t dstlen, const char *src);
/* The seq member of a data-channel message (decoded msg of that type); NULL for the others. */
uint64_t *repl_msg_seq(uint8_t type, void *msg);

/* Low-level helpers, exported for the handshake and the engine. */
int repl_read_full(int fd, void *buf, size_t len, int timeout_ms);
int repl_write_full(int fd, const void *buf, size_t len, int timeout_ms);
/* The iovecs in full within the deadline (iov is consumed); same errors as repl_send. */
int repl_writev_full(int fd, struct iovec *iov, size_t iovcnt, int timeout_ms);

/*
 * Buffered receiving for a busy channel: one recv() brings many frames. Payloads up to
 * REPL_READER_CAP come back as pointers into the buffer, valid until the next call; longer
 * ones are copied into the caller's scratch buffer (at least len bytes).
 */
#define REPL_READER_CAP (1024u * 1024 + 128u * 1024)
struct repl_reader {
        int fd;
        uint8_t *buf;
        size_t cap, start, end;
        /* Sealed frames: each is read whole and opened in the buffer before it is returned. */
        struct frame_seal *open;
        const uint8_t *payload; /* of the frame just returned */
        uint32_t payload_len;
};
int repl_reader_init(struct repl_reader *rd, int fd);
/*
 * A reader of sealed frames (open: the opening side, NULL: clear). The buffer grows to hold a
 * frame longer than REPL_READER_CAP (bounded by REPL_MSG_MAX + REPL_PAYLOAD_MAX), and
 * repl_reader_payload then never copies.
 */
int repl_reader_init_on(struct repl_reader *rd, int fd, struct frame_seal *open);
void repl_reader_fini(struct repl_reader *rd);
/* Bytes are waiting in the buffer (a frame may be there without a syscall). */
bool repl_reader_buffered(const struct repl_reader *rd);
/* Header and message of the next frame (rx->payload stays NULL); same errors as repl_recv. */
int repl_reader_next(struct repl_reader *rd, struct repl_rx *rx, int timeout_ms, const char **why);
int repl_reader_payload(struct repl_reader *rd, uint32_t len, void *scratch, const void **out,
                        int timeout_ms);

#endif
