/*
 * CPG messages from peers under fuzzing: cluster_msg_decode(), which on_deliver() in
 * daemon/cluster/cluster.c calls on every message corosync delivers, before it looks at
 * anything else. Any member of the CPG group can send such a message, so its bytes are
 * hostile input; the corosync side (on_deliver itself) needs a live cpg handle and is not
 * driven here.
 *
 * Input: 4 bytes, big-endian: the corosync node id that delivered the message (the decoder
 * checks from_node against it); the rest: the message (proto/cluster.proto ClusterMessage).
 *
 * Checks: the result is one of the documented ones; an accepted Outdate has a valid naa, a
 * peer in 1..255 and the sender as from_node; encoded again (when from_node is one the
 * encoder takes) and decoded, it gives the same fields back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_internal.h"
#include "fuzz_util.h"
#include "tandem/config.h"

static void print_outdate(const char *what, const struct cluster_outdate_msg *m)
{
        fprintf(stderr, "%s: from %u incarnation %llx seq %llu naa %s peer %u gen %llx\n", what,
                m->from_node, (unsigned long long)m->incarnation, (unsigned long long)m->seq,
                m->naa, m->peer, (unsigned long long)m->gen);
}

static void check_accepted(const struct cluster_outdate_msg *m, uint32_t sender)
{
        FUZZ_ASSERT(m->from_node == sender, "from_node %u accepted from node %u", m->from_node,
                    sender);
        FUZZ_ASSERT(memchr(m->naa, '\0', sizeof(m->naa)) != NULL, "naa not terminated");
        FUZZ_ASSERT(tdm_naa_valid(m->naa), "invalid naa \"%s\" accepted", m->naa);
        FUZZ_ASSERT(m->peer >= 1 && m->peer <= 255, "peer %u accepted", m->peer);

        /* The encoder takes node ids 1..255 only (tandem's node_id range); corosync ids of other
         * members may be larger and are still delivered, so the round trip covers the rest. */
        if (m->from_node < 1 || m->from_node > 255)
                return;
        uint8_t *buf = NULL;
        size_t len = 0;
        int rc = cluster_msg_encode_outdate(m, &buf, &len);
        FUZZ_ASSERT(rc == 0 && buf != NULL, "re-encoding an accepted Outdate = %d", rc);
        struct cluster_outdate_msg again;
        memset(&again, 0xa5, sizeof(again));
        rc = cluster_msg_decode(buf, len, sender, &again);
        free(buf);
        FUZZ_ASSERT(rc == 0, "decoding our own encoding = %d", rc);
        FUZZ_ASSERT(again.from_node == m->from_node && again.incarnation == m->incarnation &&
                        again.seq == m->seq && strcmp(again.naa, m->naa) == 0 &&
                        again.peer == m->peer && again.gen == m->gen,
                    "round trip changed the message");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 4)
                return 0;
        uint32_t sender =
            (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 | (uint32_t)data[2] << 8 | data[3];
        /* A copy of exactly the message bytes, so ASan sees any read past them. */
        size_t len = size - 4;
        uint8_t *msg = malloc(len ? len : 1);
        FUZZ_ASSERT(msg != NULL, "out of memory");
        memcpy(msg, data + 4, len);

        struct cluster_outdate_msg out;
        memset(&out, 0xa5, sizeof(out));
        int rc = cluster_msg_decode(msg, len, sender, &out);
        if (fuzz_verbose())
                fprintf(stderr, "decode of %zu bytes from node %u = %d\n", len, sender, rc);
        FUZZ_ASSERT(rc == 0 || rc == -EPROTO || rc == -EPROTONOSUPPORT || rc == -ENOMSG ||
                        rc == -EINVAL,
                    "cluster_msg_decode = %d", rc);
        if (rc == 0) {
                if (fuzz_verbose())
                        print_outdate("accepted", &out);
                check_accepted(&out, sender);
        }
        free(msg);
        return 0;
}
