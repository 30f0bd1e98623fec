#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

The login texts are the ones libiscsi 1.19 sent (iscsi-inq, iscsi-ls, and with CHAP),
captured through a relay in front of tandemd; qemu-io's session gave the order of the SCSI
commands. The replication frames, CPG messages and configuration files are written here from
proto/*.proto and deploy/examples/tandem.conf. Every seed is small and, but for a few refusals
kept on purpose, valid, so the fuzzer starts from inputs that get deep.
Run it again after changing an input format (see the comment at the top of each fuzz_*.c).
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = b"iqn.2026-11.io.tandem:t1"
INQ = b"iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-inq"
LS = b"iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-ls"
ISID = bytes.fromhex("805cc32f0000")
TTT_NONE = 0xFFFFFFFF
TTT_FOLLOW = 0xFFFFFFFE  # fuzz_text: replaced by the TTT of the open exchange

# libiscsi's operational keys, in its order.
LIBISCSI_OPERATIONAL = [
    b"HeaderDigest=None,CRC32C", b"DataDigest=None", b"InitialR2T=No", b"ImmediateData=Yes",
    b"MaxBurstLength=262144", b"FirstBurstLength=262144", b"DefaultTime2Wait=2",
    b"DefaultTime2Retain=0", b"MaxOutstandingR2T=1", b"ErrorRecoveryLevel=0", b"IFMarker=No",
    b"OFMarker=No", b"MaxConnections=1", b"MaxRecvDataSegmentLength=262144",
    b"DataPDUInOrder=Yes", b"DataSequenceInOrder=Yes",
]


def text(*pairs):
    return b"".join(p + b"\0" for p in pairs)


def pad4(b):
    return b + b"\0" * ((4 - len(b) % 4) % 4)


def bhs(opcode, flags, data_len, itt, rest=b"", b2=0, b3=0, lun=b"\0" * 8):
    """48-byte BHS: opcode, flags, two bytes, AHS 0, DSL, LUN/ISID, ITT, then bytes 20..47."""
    h = bytes([opcode, flags, b2, b3, 0]) + data_len.to_bytes(3, "big") + lun
    h += struct.pack(">I", itt) + rest
    return h + b"\0" * (48 - len(h))


def login(flags, data, itt=0x2708B9D9, cmdsn=1, expstatsn=0x686ED305, tsih=0, cid=0):
    lun = ISID + struct.pack(">H", tsih)
    rest = struct.pack(">HHII", cid, 0, cmdsn, expstatsn)
    return bhs(0x43, flags, len(data), itt, rest, lun=lun) + pad4(data)


def text_req(flags, data, itt, ttt=TTT_NONE, cmdsn=2, expstatsn=1):
    rest = struct.pack(">III", ttt, cmdsn, expstatsn)
    return bhs(0x44, flags, len(data), itt, rest) + pad4(data)


T, C = 0x80, 0x40


def csg(x):
    return x << 2


def login_seeds():
    normal = text(b"InitiatorName=" + INQ, b"TargetName=" + TARGET, b"SessionType=Normal",
                  *LIBISCSI_OPERATIONAL)
    discovery = text(b"InitiatorName=" + LS, b"SessionType=Discovery", b"HeaderDigest=None",
                     *LIBISCSI_OPERATIONAL[1:])
    identity = text(b"InitiatorName=" + INQ, b"TargetName=" + TARGET, b"SessionType=Normal")
    operational = text(*LIBISCSI_OPERATIONAL)
    seeds = {
        # iscsi-inq: one request from the operational stage to full feature phase.
        "libiscsi-normal": b"\x00" + login(T | csg(1) | 3, normal),
        # iscsi-ls: a discovery session.
        "libiscsi-discovery": b"\x00" + login(T | csg(1) | 3, discovery),
        # libiscsi with CHAP (fuzzer config bit 0: the target requires it).
        "libiscsi-chap": b"\x01"
        + login(T | csg(0) | 1, identity + text(b"AuthMethod=CHAP,None"), cmdsn=1)
        + login(csg(0) | 1, text(b"CHAP_A=5"), cmdsn=1)
        + login(T | csg(0) | 1, text(b"CHAP_N=fuzzuser", b"CHAP_R=AUTO"), cmdsn=1)
        + login(T | csg(1) | 3, operational, cmdsn=1),
        # Mutual CHAP with SHA-256, CHAP_A in the first request (config bits 0 and 1).
        "mutual-chap-sha256": b"\x03"
        + login(csg(0) | 1, identity + text(b"AuthMethod=CHAP", b"CHAP_A=7,5"))
        + login(T | csg(0) | 1, text(b"CHAP_N=fuzzuser", b"CHAP_R=AUTO", b"CHAP_I=77",
                                     b"CHAP_C=0x" + b"5a" * 32))
        + login(T | csg(1) | 3, operational),
        # open-iscsi's shape: security stage with AuthMethod=None, then operational keys.
        "auth-none-two-stages": b"\x00"
        + login(T | csg(0) | 1, identity + text(b"AuthMethod=None"))
        + login(T | csg(1) | 3, operational),
        # The request text continued over two PDUs (C bit).
        "text-continued": b"\x00"
        + login(C | csg(1) | 3, normal[:200])
        + login(T | csg(1) | 3, normal[200:]),
        # Limits below the RFC defaults: the target offers keys and waits for the answers.
        "target-offers": b"\x08"
        + login(T | csg(1) | 3, identity)
        + login(T | csg(1) | 3, text(b"MaxBurstLength=4096", b"FirstBurstLength=1024",
                                     b"ImmediateData=No")),
        # Regression cases of /work/notes/fuzz-findings (limits variant 1: ImmediateData=No,
        # MaxBurstLength 4096, FirstBurstLength 1024 on the target):
        # security stage straight to full feature phase: the target's offers must still apply,
        "limits-security-to-ffp": b"\x08" + login(T | csg(0) | 3, identity),
        # a rejected (malformed) MaxBurstLength must not leave the default of 262144,
        "limits-rejected-key": b"\x08"
        + login(T | csg(1) | 3, identity + text(b"MaxBurstLength=26x144")),
        # and "Irrelevant" is no answer to the target's offers in a normal session.
        "limits-irrelevant-answers": b"\x08" + login(T | csg(1) | 3, identity)
        + login(T | csg(1) | 3, text(b"MaxBurstLength=Irrelevant", b"FirstBurstLength=Irrelevant",
                                     b"ImmediateData=Irrelevant")),
        # Discovery that requires CHAP (config bit 2), base64 response form left to AUTO.
        "discovery-chap": b"\x04"
        + login(csg(0) | 1, text(b"InitiatorName=" + LS, b"SessionType=Discovery",
                                 b"AuthMethod=CHAP", b"CHAP_A=5"))
        + login(T | csg(0) | 1, text(b"CHAP_N=fuzzuser", b"CHAP_R=AUTO"))
        + login(T | csg(1) | 3, text(b"HeaderDigest=None", b"DataDigest=None")),
    }
    return seeds


def text_seeds():
    normal = text(b"InitiatorName=" + INQ, b"TargetName=" + TARGET, b"SessionType=Normal",
                  *LIBISCSI_OPERATIONAL)
    st_all = text(b"SendTargets=All")
    seeds = {
        "codec-libiscsi-login": b"\x00" + normal,
        "codec-discovery-padded": b"\x02" + text(b"InitiatorName=" + LS, b"SessionType=Discovery",
                                                 b"MaxBurstLength=0x40000") + b"\0\0\0",
        "codec-chap-values": b"\x00" + text(b"CHAP_A=7,5,6,8", b"CHAP_I=255",
                                            b"CHAP_C=0x" + b"0123456789abcdef" * 4,
                                            b"CHAP_R=0bASNFZ4mrze8BI0VniavN7w==",
                                            b"X-com.example.Private=Yes"),
        # iscsi-ls: SendTargets=All in a discovery session listing three targets.
        "sendtargets-discovery": b"\x03\x03" + text_req(T, st_all, 0x3BF1882D),
        # 40 targets, 512-byte PDUs: a long answer the initiator pulls piece by piece.
        "sendtargets-continued": b"\x07\x28" + text_req(T, st_all, 0x10)
        + b"".join(text_req(T, b"", 0x11 + i, ttt=TTT_FOLLOW) for i in range(9)),
        # A request with F and C both set arrives mid-answer: rejected, the answer goes on.
        "sendtargets-rejected-mid-answer": b"\x07\x28" + text_req(T, st_all, 0x40)
        + b"".join(text_req(T, b"", 0x41 + i, ttt=TTT_FOLLOW) for i in range(3))
        + text_req(T | C, b"", 0x44)
        + b"".join(text_req(T, b"", 0x45 + i, ttt=TTT_FOLLOW) for i in range(6)),
        # Normal session: the session's target only, a named one, and keys it must refuse.
        "sendtargets-normal": b"\x01\x05" + text_req(T, text(b"SendTargets="), 0x20)
        + text_req(T, text(b"SendTargets=iqn.2026-11.io.tandem:fuzz-target-with-a-long-name-0002"),
                   0x21)
        + text_req(T, text(b"MaxBurstLength=4096", b"X-vendor.key=1"), 0x22),
        # The initiator's own text continued (C=1), then the rest.
        "request-continued": b"\x03\x02" + text_req(C, b"SendTar", 0x30)
        + text_req(T, b"gets=All\0", 0x31, ttt=TTT_FOLLOW),
    }
    return seeds


def cdb(*b):
    b = bytes(b)
    return b + b"\0" * (16 - len(b))


# fuzz_cdb control byte
RD, WR = 0x01, 0x02
EDTL_OUT = 0x04  # EDTL = data-out length
LUN1, ABSENT = 0x10, 0x30
NX2, CHAIN = 0x40, 0x80


def cmd(c, ctl, data=b""):
    """A single (last) command: data-out is the rest of the input."""
    return c + bytes([ctl]) + data


def chained(c, ctl, data=b""):
    return c + bytes([ctl | CHAIN]) + struct.pack(">H", len(data)) + data


def be(n, width):
    return n.to_bytes(width, "big")


def cdb_seeds():
    block = bytes(range(256)) * 2
    caching_off = bytes([0, 0, 0, 0]) + bytes([0x08, 0x12, 0x00]) + b"\0" * 17
    # Control page as MODE SENSE reports it, with D_SENSE (byte 2) and SWP (byte 4) set.
    control_dsense_swp = bytes([0, 0, 0, 0]) + bytes([0x0A, 0x0A, 0x06, 0x10, 0x08, 0, 0, 0,
                                                      0xFF, 0xFF, 0, 0])
    unmap_list = be(22, 2) + be(16, 2) + b"\0" * 4 + be(16, 8) + be(32, 4) + b"\0" * 4
    seeds = {
        "inquiry": cmd(cdb(0x12, 0, 0, 0, 0x60), RD),
        "inquiry-vpd83": cmd(cdb(0x12, 1, 0x83, 0, 0xFF), RD),
        "inquiry-vpdb0": cmd(cdb(0x12, 1, 0xB0, 0, 0x40), RD),
        "inquiry-vpd00-absent-lun": cmd(cdb(0x12, 1, 0x00, 0, 0xFF), RD | ABSENT),
        "report-luns": cmd(cdb(0xA0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0), RD),
        "read-capacity10": cmd(cdb(0x25), RD),
        "read-capacity16": cmd(cdb(0x9E, 0x10, *be(0, 8), *be(32, 4)), RD),
        "mode-sense6-all": cmd(cdb(0x1A, 0x08, 0x3F, 0, 0xFF), RD),
        "mode-sense10-caching": cmd(cdb(0x5A, 0x08, 0x08, 0, 0, 0, 0, 0, 0xFF), RD | LUN1),
        "read10": cmd(cdb(0x28, 0, *be(0, 4), 0, *be(8, 2)), RD),
        "write10": cmd(cdb(0x2A, 0, *be(8, 4), 0, *be(1, 2)), WR, block),
        "write16-fua": cmd(cdb(0x8A, 0x08, *be(2, 8), *be(1, 4)), WR, block),
        "read16-lun1": cmd(cdb(0x88, 0, *be(0, 8), *be(4, 4)), RD | LUN1),
        "write-same16-unmap": cmd(cdb(0x93, 0x08, *be(0, 8), *be(8192, 4)), WR, b"\0" * 512),
        "write-same10": cmd(cdb(0x41, 0, *be(100, 4), 0, *be(16, 2)), WR, block),
        "unmap": cmd(cdb(0x42, 0, 0, 0, 0, 0, 0, *be(len(unmap_list), 2)), WR, unmap_list),
        "get-lba-status": cmd(cdb(0x9E, 0x12, *be(0, 8), *be(64, 4)), RD),
        "sync-cache10": cmd(cdb(0x35), 0),
        "verify16-bytchk": cmd(cdb(0x8F, 0x02, *be(0, 8), *be(1, 4)), WR, b"\0" * 512),
        # Found by this target's hour: VERIFY with BYTCHK 11b and no block sent kept its range
        # lock, and the WRITE after it waited for ever.
        "found-verify-bytchk3-no-data": chained(cdb(0x2F, 0x06, *be(0, 4), 0, *be(25, 2)), 0)
        + cmd(cdb(0x2A, 0, *be(0, 4), 0, *be(1, 2)), WR, block),
        "write-atomic16-lun1": cmd(cdb(0x9C, 0, *be(4, 8), 0, 0, *be(2, 2)), WR | LUN1,
                                   block * 16),
        "report-supported-opcodes": cmd(cdb(0xA3, 0x0C, 0, 0, 0, 0, *be(4096, 4)), RD),
        "request-sense": cmd(cdb(0x03, 0, 0, 0, 0xFC), RD),
        "report-supported-opcodes-one-rctd": cmd(cdb(0xA3, 0x0C, 0x81, 0x28, 0, 0, *be(512, 4)),
                                                 RD),
        "prevent-start-stop-prefetch": chained(cdb(0x1E, 0, 0, 0, 1), 0)
        + chained(cdb(0x1B, 0, 0, 0, 0x02), 0) + cmd(cdb(0x90, 0, *be(0, 8), *be(64, 4)), 0),
        "orwrite16-write-verify10": chained(cdb(0x8B, 0, *be(3, 8), *be(1, 4)), WR, block)
        + cmd(cdb(0x2E, 0x02, *be(5, 4), 0, *be(1, 2)), WR, block),
        # qemu's start: TEST UNIT READY, INQUIRY, MODE SENSE, READ CAPACITY(16), VPD pages.
        "qemu-open-sequence": chained(cdb(0x00), 0) + chained(cdb(0x12, 0, 0, 0, 0x40), RD)
        + chained(cdb(0x1A, 0x08, 0x3F, 0, 0xFF), RD)
        + chained(cdb(0x9E, 0x10, *be(0, 8), *be(32, 4)), RD)
        + chained(cdb(0x12, 1, 0xB0, 0, 0x40), RD) + cmd(cdb(0x12, 1, 0xB2, 0, 0x40), RD),
        # RESERVE by one initiator, a write by the other (conflict), RELEASE.
        "reserve-conflict": chained(cdb(0x16), 0)
        + chained(cdb(0x2A, 0, *be(0, 4), 0, *be(1, 2)), WR | NX2, block)
        + cmd(cdb(0x17), 0),
        # MODE SELECT: write cache off, descriptor sense and write protect on, then a write
        # (refused), a bad read, and the other initiator's command (MODE PARAMETERS CHANGED).
        "mode-select-then-error": chained(cdb(0x15, 0x10, 0, 0, len(caching_off)), WR | EDTL_OUT,
                                          caching_off)
        + chained(cdb(0x15, 0x10, 0, 0, len(control_dsense_swp)), WR | EDTL_OUT,
                  control_dsense_swp)
        + chained(cdb(0x2A, 0, *be(0, 4), 0, *be(1, 2)), WR, block)
        + chained(cdb(0x28, 0, *be(0xFFFFFF00, 4), 0, *be(8, 2)), RD)
        + cmd(cdb(0x00), NX2),
    }
    return seeds


def pdu_rx_seeds():
    """fuzz_pdu_rx: a byte of flags then a raw stream (bit 2 clear) or framed PDUs (set)."""
    normal = text(b"InitiatorName=" + INQ, b"TargetName=" + TARGET, b"SessionType=Normal",
                  *LIBISCSI_OPERATIONAL)
    digests = text(b"InitiatorName=" + INQ, b"TargetName=" + TARGET, b"SessionType=Normal",
                   b"HeaderDigest=CRC32C", b"DataDigest=CRC32C", *LIBISCSI_OPERATIONAL[2:])
    discovery = text(b"InitiatorName=" + LS, b"SessionType=Discovery", b"HeaderDigest=None",
                     *LIBISCSI_OPERATIONAL[1:])

    def scsi(flags, itt, cmdsn, c, edtl, data=b"", lun=b"\0" * 8):
        rest = struct.pack(">III", edtl, cmdsn, 1) + c
        return bhs(0x01, flags, len(data), itt, rest, lun=lun) + pad4(data)

    def data_out(itt, ttt, datasn, offset, data, final=True):
        rest = struct.pack(">IIIIII", ttt, 0, 1, 0, datasn, offset)
        return bhs(0x05, 0x80 if final else 0, len(data), itt, rest) + pad4(data)

    def nop(itt, cmdsn, data=b""):
        rest = struct.pack(">III", TTT_NONE, cmdsn, 1)
        return bhs(0x40, 0x80, len(data), itt, rest) + pad4(data)

    def logout(itt, cmdsn):
        rest = struct.pack(">HHII", 0, 0, cmdsn, 1)
        return bhs(0x46, 0x80, 0, itt, rest)

    def tmf(itt, cmdsn, func, ref=TTT_NONE):
        rest = struct.pack(">IIII", ref, cmdsn, 1, 0)
        return bhs(0x02, 0x80 | func, 0, itt, rest)

    block = bytes(range(256)) * 2
    w10 = cdb(0x2A, 0, *be(0, 4), 0, *be(4, 2))
    session = (
        login(T | csg(1) | 3, normal, itt=1, cmdsn=1)
        + scsi(0x81, 2, 1, cdb(0x00), 0)
        + scsi(0xC1, 3, 2, cdb(0x12, 0, 0, 0, 0x60), 0x60)
        + scsi(0xC1, 4, 3, cdb(0x9E, 0x10, *be(0, 8), *be(32, 4)), 32)
        + scsi(0xA1, 5, 4, cdb(0x2A, 0, *be(0, 4), 0, *be(1, 2)), 512, block)
        # Immediate data for one block, the rest by Data-Out after the R2T (qemu's 70k write).
        + scsi(0xA1, 6, 5, w10, 2048, block)
        + data_out(6, 1, 0, 512, block * 3)
        + scsi(0xC1, 7, 6, cdb(0x28, 0, *be(0, 4), 0, *be(4, 2)), 2048)
        + nop(8, 7, b"ping")
        + text_req(T, text(b"SendTargets=All"), 9, cmdsn=8)
        + tmf(10, 9, 1, ref=6)
        + logout(11, 10)
    )
    seeds = {
        # Raw streams: as libiscsi and qemu sent them.
        "raw-normal-session": b"\x00" + session,
        "raw-discovery": b"\x00" + login(T | csg(1) | 3, discovery, itt=1)
        + text_req(T, text(b"SendTargets=All"), 2, cmdsn=1) + logout(3, 2),
        # Framed: the harness adds digests once the login negotiated them.
        "framed-digests": b"\x04" + login(T | csg(1) | 3, digests, itt=1)
        + scsi(0x81, 2, 1, cdb(0x00), 0)
        + scsi(0xC1, 3, 2, cdb(0x12, 0, 0, 0, 0x60), 0x60)
        + scsi(0xA1, 4, 3, cdb(0x2A, 0, *be(0, 4), 0, *be(1, 2)), 512, block)
        + nop(5, 4, b"digest") + logout(6, 5),
        # Written a few bytes at a time: every partial-PDU state of the receive path.
        "chunked-session": b"\x18" + session,
        # A canned login first (flag bit 0), then commands only.
        "canned-login": b"\x01" + scsi(0xC1, 2, 1, cdb(0xA0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0), 0x1000)
        + scsi(0x21, 3, 2, w10, 2048) + data_out(3, TTT_NONE, 0, 0, block * 2, final=False),
        # What the target found (fixed since): a LUN RESET and a TARGET WARM RESET store their
        # records on the pool; with no loop to come back to, the answer ran on the pool's
        # thread after the harness had closed the connection (a use after free).
        "found-reset-without-loop": b"\x01" + tmf(2, 1, 5) + tmf(3, 2, 6),
    }
    return seeds


# ---- protobuf (proto3) encoding, enough for the replication and cluster messages ----

def varint(n):
    n &= (1 << 64) - 1  # negative int32/int64 values travel as 64-bit two's complement
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_int(field, n):
    return varint(field << 3) + varint(n) if n else b""


def pb_bytes(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b if b else b""


def pb_packed(field, values):
    return pb_bytes(field, b"".join(varint(v) for v in values))


# ---- replication frames (replicator/wire.h) ----

MSG = {name: i for i, name in enumerate(
    ["NONE", "HELLO", "AUTH", "AUTH_RESULT", "STATE", "BITMAP", "WRITE", "FLUSH", "ACK",
     "RS_DATA", "RS_ACK", "SYNC_DONE", "VERIFY_REQ", "VERIFY_REPLY", "PING", "PING_ACK",
     "SCSI_STATE", "DISCONNECT"])}
CHANNEL_DATA, CHANNEL_CONTROL = 1, 2
REPL_NAA = b"67a6e640c3f1a2b4d5e6f708192a3b4c"  # fuzz_repl_wire's LUN_NAA


def frame(kind, msg=b"", payload=b""):
    return struct.pack(">IBBHII", 0x54445231, 1, MSG[kind], 0, len(msg), len(payload)) + msg \
        + payload


def hello(node=2, peer=1, channel=CHANNEL_DATA, naa=REPL_NAA, nonce=bytes(range(32)),
          proto_max=1):
    # features: verify, forward, resize, sealed frames, write with state (replicator/wire.h)
    return (pb_int(1, 1) + pb_int(2, proto_max) + pb_int(3, 0x2f) + pb_int(4, node)
            + pb_int(5, peer) + pb_int(6, channel) + pb_bytes(7, nonce) + pb_bytes(8, naa))


def generations(current, bitmap=0, history=()):
    return pb_int(1, current) + pb_int(2, bitmap) + (pb_packed(3, history) if history else b"")


def state(gen, role=0, disk=3, dirty=0, epoch=1, name=b"node2"):
    return (pb_int(1, 1 << 30) + pb_int(2, 512) + pb_bytes(3, REPL_NAA) + pb_bytes(4, b"fz0")
            + pb_bytes(5, gen) + pb_int(6, role) + pb_int(7, disk) + pb_int(9, dirty)
            + pb_int(10, epoch) + pb_bytes(11, name) + pb_int(12, 12))


def repl_wire_seeds():
    block = bytes(range(256)) * 2
    g_self = 0x1111111111111111  # fuzz_repl_wire's fixed local side: current, then bitmap
    g_bitmap = 0x2222222222222222
    data_channel = (
        frame("SCSI_STATE", pb_int(1, 1) + pb_bytes(2, REPL_NAA) + pb_bytes(3, b"fz0")
              + pb_int(4, 1))
        + frame("WRITE", pb_int(1, 2) + pb_int(2, 4096) + pb_int(3, 512) + pb_int(4, 1), block)
        + frame("WRITE", pb_int(1, 3) + pb_int(2, 8192) + pb_int(3, 65536) + pb_int(4, 2))
        + frame("FLUSH", pb_int(1, 4))
        + frame("RS_DATA", pb_int(1, 5) + pb_int(3, 4096) + pb_int(4, 1))
        + frame("RS_DATA", pb_int(1, 6) + pb_int(2, 4096) + pb_int(3, 512), block)
        + frame("VERIFY_REQ", pb_int(1, 7) + pb_int(3, 8192) + pb_int(4, 4096), bytes(64))
    )
    control_channel = (
        frame("PING", pb_int(1, 7)) + frame("ACK", pb_int(1, 3))
        + frame("ACK", pb_int(1, 4) + pb_int(2, -5))
        + frame("VERIFY_REPLY", pb_int(1, 7) + pb_int(3, 8192) + pb_packed(4, [0, 4096]))
        + frame("SYNC_DONE", pb_bytes(1, generations(0x3333, 0, [g_self])))
        + frame("PING_ACK", pb_int(1, 7)) + frame("DISCONNECT", pb_bytes(1, b"shutting down"))
    )
    manager = (
        # In sync with the fixed local side; a Primary that moved on (bitmap resync); one
        # sharing only an old id (split brain); a new disk.
        frame("STATE", state(generations(g_self)))
        + frame("STATE", state(generations(0x4444, g_self, [g_bitmap]), role=1, dirty=5,
                               epoch=4))
        + frame("STATE", state(generations(0x5555, 0x6666, [g_bitmap]), dirty=9, epoch=2,
                               name=b"beta"))
        + frame("STATE", state(generations(4), disk=1, name=b"fresh"))
        + frame("BITMAP", pb_int(1, 0), b"\xff\x00\x0f\xf0" * 4)
        + frame("BITMAP", pb_int(1, 16) + pb_int(2, 1), b"\x01")
    )
    auth = frame("AUTH", pb_bytes(1, bytes(32)))
    ok = frame("AUTH_RESULT", pb_int(1, 1))
    truncated_write = frame("WRITE", pb_int(1, 1) + pb_int(3, 512) + pb_int(4, 1), block)
    return {
        # mode 0: the buffered reader of the channel receivers.
        "reader-data-channel": b"\x00" + data_channel,
        "reader-control-channel": b"\x00" + control_channel,
        "reader-truncated-payload": b"\x00" + truncated_write[:-100],
        "reader-bad-magic-after-one": b"\x00" + frame("PING", pb_int(1, 1)) + b"TDR2" + bytes(12),
        # mode 1: repl_recv, with the States the manager takes.
        "recv-states-and-bitmap": b"\x01" + manager,
        "recv-malformed-message": b"\x01" + frame("PING", b"\x08\xff\xff"),
        # modes 2 and 3: the handshake from the peer's side (its AUTH cannot be right).
        "handshake-data": b"\x02" + frame("HELLO", hello()) + auth + ok,
        "handshake-control-naa-upper": b"\x03"
        + frame("HELLO", hello(channel=CHANNEL_CONTROL, naa=REPL_NAA.upper())) + auth + ok,
        "handshake-unknown-node": b"\x02" + frame("HELLO", hello(node=7)),
        "handshake-other-lun": b"\x02" + frame("HELLO", hello(naa=b"6" + b"0" * 31)),
        "handshake-peer-refuses": b"\x02" + frame("HELLO", hello())
        + frame("AUTH_RESULT", pb_bytes(2, b"wrong secret: HMAC mismatch from node 1")),
        "handshake-wide-versions": b"\x03"
        + frame("HELLO", hello(channel=CHANNEL_CONTROL, proto_max=4)) + auth,
    }


# ---- fuzz_repl_apply: frames of an authenticated peer (see the top of fuzz_repl_apply.c) ----

APPLY_OPS = {name: i for i, name in enumerate(
    ["WRITE", "ZERO", "UNMAP", "WRITE_KIND", "FLUSH", "RS_DATA", "VERIFY", "LU_STATE",
     "SCSI_STATE", "RESIZE", "RAW_DATA", "SYNC_DONE", "VERIFY_REPLY", "STATE", "PING",
     "PING_ACK", "ACK", "DISCONNECT", "FORWARD", "FORWARD_REPLY", "RAW_CTL", "SYNC"])}
A_ENCRYPT, A_SYNC_TARGET, A_NO_PROBE, A_DISCONNECT = 1, 2, 4, 8
R_FUA, R_UNALIGNED_OFF, R_STATE, R_FROM_INPUT, R_ZERO = 1, 2, 16, 32, 128
SKEW, MANGLE = 6, 7


def aop(name, fields=b"", how=0):
    return bytes([how << 5 | APPLY_OPS[name]]) + fields


def arange(block, nblocks, flags=0, seed=0):
    return struct.pack("<HBBB", block, nblocks, flags, seed)


def repl_apply_seeds():
    def u64(v):
        return struct.pack("<Q", v)

    write = aop("WRITE", arange(8, 8, seed=0x31))
    flush = aop("FLUSH")
    return {
        "write-flush": bytes([0]) + write + flush,
        "write-encrypted": bytes([A_ENCRYPT]) + write + aop("WRITE", arange(64, 1, R_FUA, 7)),
        # A write carrying state record 5 (64 bytes), then one whose bytes come from the input.
        "write-with-state": bytes([0]) + aop("WRITE", arange(16, 8, R_STATE, 0x44) + b"\x05\x04")
        + aop("WRITE", arange(40, 1, R_FROM_INPUT, 0) + bytes(range(1, 255, 2)) * 4),
        "zero-unmap": bytes([0]) + aop("WRITE", arange(0, 32, seed=0x21))
        + aop("ZERO", arange(2, 4)) + aop("UNMAP", arange(8, 8)) + flush,
        "write-kind-flush": bytes([0]) + aop("WRITE_KIND", b"\x04" + arange(0, 0)),
        # The engine as SyncTarget: resync data, a zero range, then the end of the resync.
        "resync": bytes([A_SYNC_TARGET]) + aop("RS_DATA", arange(0, 16, seed=3))
        + aop("RS_DATA", arange(16, 16, R_ZERO)) + aop("SYNC")
        + aop("SYNC_DONE", b"\x01\x00"),
        "resync-encrypted": bytes([A_SYNC_TARGET | A_ENCRYPT]) + aop("RS_DATA", arange(100, 8)),
        # Verify: digests of what the engine holds, then one block wrong, then the end of a run.
        "verify": bytes([0]) + write + aop("VERIFY", struct.pack("<HHBB", 0, 4, 0, 0))
        + aop("VERIFY", struct.pack("<HHBB", 1, 2, 4, 1)) + aop("VERIFY", bytes(6)),
        "lu-state": bytes([0]) + aop("LU_STATE", b"\x02\x03" + struct.pack("<H", 300) + b"\x09")
        + aop("LU_STATE", b"\x02\x00\x00\x00\x00") + flush,
        "scsi-state": bytes([0]) + aop("SCSI_STATE", b"\x01\x01\x00")
        + aop("SCSI_STATE", b"\x00\x00\x01") + write,
        "resize-refused": bytes([0]) + aop("RESIZE", b"\x01\x07") + aop("RESIZE", b"\x00\x00")
        + write,
        "control-frames": bytes([0]) + aop("PING", u64(77)) + aop("PING_ACK", u64(1))
        + aop("STATE", b"\x01\x03\x00\x00\x00")
        + aop("VERIFY_REPLY", b"\x01\x00\x00\x02\x01\x00\x02\x00\x00")
        + aop("FORWARD", b"\x04peer\x06\x12\x00\x00\x00\x60\x00\x00\x00")
        + aop("FORWARD_REPLY", b"\x09\x02\xff") + write,
        "both-new-sync-done": bytes([A_DISCONNECT]) + write
        + aop("SYNC_DONE", b"\x01\x01" + u64(0x1234567890ABCDEF) + u64(4)),
        "raw-write": bytes([0]) + aop("RAW_DATA", bytes([MSG["WRITE"], 10])
                                      + pb_int(1, 1) + pb_int(2, 4096) + pb_int(3, 512)
                                      + pb_int(4, 1) + struct.pack("<H", 512) + b"\x11"),
        # A few bad ones: a gap in the seqs, an unsealed frame, a forged tag, a frame cut
        # short, a write past the end, an ack of something never sent, a peer that leaves.
        "bad-seq": bytes([0]) + aop("WRITE", b"\x02" + arange(8, 8), how=SKEW),
        "bad-unsealed": bytes([0]) + aop("WRITE", b"\x00" + arange(8, 8), how=MANGLE),
        "bad-tag": bytes([A_ENCRYPT]) + aop("FLUSH", b"\x01", how=MANGLE),
        "bad-cut": bytes([0]) + write + aop("WRITE", b"\x02" + arange(8, 8), how=MANGLE),
        "bad-past-end": bytes([0]) + aop("WRITE", arange(8190, 8, seed=1)),
        "bad-ack": bytes([0]) + write + aop("ACK", b"\x09\x00"),
        "bad-ping-on-data": bytes([0]) + aop("PING", b"\x00" + u64(1), how=SKEW),
        "peer-leaves": bytes([A_NO_PROBE | A_DISCONNECT]) + write + write,
        # What the target found (fixed since): resync data of length 0 (a Secondary left the
        # pair), a Disconnect reason with control bytes (into last_error as it came), the
        # first frame sealed on an "encrypt" link (a null arena offset).
        "found-resync-zero-length": bytes.fromhex("03054300000000000000f908000000"),
        "found-peer-reason": bytes.fromhex("080000080f00000800310408000800310b0101efcdab9078563492040000007573655f646572697661740000000069766c656e"),
        "found-encrypt-first-frame": bytes.fromhex("01e401"),
    }


# ---- CPG messages (proto/cluster.proto); fuzz_cluster_msg adds the sender's node id ----

def outdate_msg(from_node, naa=REPL_NAA, peer=2, gen=0x1234, version=1, seq=1,
                incarnation=0x9E3779B97F4A7C15):
    od = pb_bytes(1, naa) + pb_int(2, peer) + pb_int(3, gen)
    return (pb_int(1, version) + pb_int(2, from_node) + pb_int(3, incarnation) + pb_int(4, seq)
            + pb_bytes(10, od))


def cluster_msg_seeds():
    def sender(n):
        return struct.pack(">I", n)
    return {
        "outdate": sender(1) + outdate_msg(1),
        "outdate-peer-1": sender(2) + outdate_msg(2, peer=1, gen=(1 << 64) - 1, seq=77),
        "outdate-large-nodeid": sender(70000) + outdate_msg(70000),
        "outdate-wrong-sender": sender(3) + outdate_msg(1),
        "newer-version": sender(1) + outdate_msg(1, version=2),
        "no-body": sender(1) + pb_int(1, 1) + pb_int(2, 1) + pb_int(4, 9),
        "bad-naa": sender(1) + outdate_msg(1, naa=b"5" + REPL_NAA[1:]),
    }


# ---- configuration files (libconfig text) ----

CONFIG_DAEMON = b"""instance = "lab-1"; state_dir = "/var/lib/tandem";
listen = [ "0.0.0.0:3260", "[::1]:3261" ]; threads = 4;
log = { file = "/var/log/tandemd.log"; level = "debug"; syslog = false; };
iscsi = { max_recv_dsl = 65536; max_burst = 262144; first_burst = 65536; initial_r2t = true;
  immediate_data = false; max_outstanding_r2t = 4; queue_depth = 64; nop_interval = 0;
  nop_timeout = 30; login_timeout = 60; };
discovery = { chap = { user = "discovery"; secret = "discovery-secret-1";
  mutual_user = "tandem"; mutual_secret = "target-secret-22"; }; };
"""

CONFIG_TARGETS = b"""targets = (
  { iqn = "iqn.2024-01.org.example.storage:disk1"; alias = "disk1"; tpgt = 1;
    acl = [ "iqn.1993-08.org.debian:01:client1", "ALL" ];
    chap = { user = "client"; secret = "client-secret-1"; };
    luns = (
      { lun = 0; path = "/var/lib/tandem/disk1.img"; size = "10G"; block_size = 512;
        physical_block_size = 4096; thin = true; direct = false; wce = true;
        naa = "67a6e640c3f1a2b4d5e6f708192a3b4c"; serial = "9f3c2a1b0d4e5f60"; },
      { lun = 1; path = "/dev/vg0/disk1-data"; readonly = true;
        naa = "67a6e640c3f1a2b4d5e6f708192a3b4d"; serial = "9f3c2a1b0d4e5f61"; }
    );
  },
  { iqn = "eui.0123456789ABCDEF"; tpgt = 7;
    luns = ( { lun = 3; path = "/srv/b.img"; size = 1099511627776L; block_size = 4096;
      naa = "67a6e640c3f1a2b4d5e6f708192a3b4e"; serial = "b3"; } ); }
);
"""

CONFIG_REPLICATED = b"""node_id = 1;
cluster = { enabled = true; group = "ha-1"; fence_peer = "/usr/lib/tandem/fence-peer"; };
targets = ( { iqn = "iqn.2024-01.org.example:t1";
  luns = ( { lun = 0; path = "/a"; naa = "67a6e640c3f1a2b4d5e6f708192a3b4c"; serial = "s1";
    replication = { secret = "shared-secret-1"; port = 7790;
      nodes = ( { id = 1; name = "alpha"; address = "10.0.0.1"; },
                { id = 2; name = "beta"; address = "[fd00::2]:7791"; } );
      metadata = "/var/lib/tandem/a.md"; timeout = 1500; resync_rate = "200M";
      resync_min_rate = 10485760; split_brain = "discard-node-beta"; }; } ); } );
"""

CONFIG_ESCAPES = (b'listen = "host.example:3260"; targets = ({ '
                  b'iqn = "iqn.2024-01.org.example:t3"; alias = "a \\"b\\" \\\\ c"; '
                  b'chap = { user = "u x"; secret = "q\\"uo\\\\te$#{};x"; }; '
                  b'luns = ({ lun = 255; path = "/dir with space/\\x01\\t\\n\\x7f"; '
                  b'naa = "6ABCDEF0123456789abcdef012345678"; serial = "S-1.x_"; }); });')


def config_seeds():
    return {
        "empty": b"",
        "daemon-settings": CONFIG_DAEMON,
        "targets": CONFIG_TARGETS,
        "new-lun-identity": b'targets = ({ iqn = "iqn.2024-01.org.example:t2"; '
                            b'luns = ({ lun = 0; path = "/x"; }); });',
        "replicated-cluster": CONFIG_REPLICATED,
        "strings-with-escapes": CONFIG_ESCAPES,
        "refused-field": b"iscsi = { max_burts = 1; };",
        # Accepted before validation bounded sizes to what the file holds (int64): saved as a
        # negative number that the reload refused (tests/unit/test_config.c).
        "size-above-int64": b'targets = ({ iqn = "iqn.2024-01.org.example:t2"; '
                            b'luns = ({ lun = 0; path = "/x"; size = "16000P"; }); });',
    }

# ---- PERSISTENT RESERVE OUT: fuzz_prout (state record, then caller + CDB + data-out) ----

def pr_record(regs, gen=0, rtype=0, aptpl=False):
    """A SCSI_STATE_PR record: regs is [(name, key, holder)]."""
    b = b"TPR1" + bytes([1, 1 if aptpl else 0, rtype, 0]) + be(gen, 4) + be(len(regs), 2) + b"\0\0"
    for name, key, holder in regs:
        n = name.encode()
        b += be(key, 8) + bytes([1 if holder else 0, len(n)]) + n
    return b


PR_A1 = "iqn.2026-11.io.tandem:host-a,i,0x000000000001"
PR_B1 = "iqn.2026-11.io.tandem:host-b,i,0x400000000001"


def prout(caller, sa, rtype=0, key=0, sark=0, flags=0, scope=0, extra=None):
    if extra is None:
        param = be(key, 8) + be(sark, 8) + b"\0\0\0\0" + bytes([flags, 0, 0, 0])
    else:
        param = extra
    c = bytes([0x5F, sa, scope << 4 | rtype, 0, 0]) + be(len(param), 4) + b"\0"
    return bytes([caller]) + c + be(len(param), 2) + param


def tid(name):
    n = name.encode() + b"\0"
    n += b"\0" * (-len(n) % 4)
    return bytes([0x45, 0]) + be(len(n), 2) + n


def move(caller, key, sark, dest, rtpi=1, unreg=False, aptpl=False):
    t = tid(dest)
    param = be(key, 8) + be(sark, 8) + bytes([0, (2 if unreg else 0) | (1 if aptpl else 0)])
    param += be(rtpi, 2) + be(len(t), 4) + t
    return prout(caller | 4, 7, extra=param)


def prout_seeds():
    empty = be(0, 2)
    held = pr_record([(PR_A1, 0xA, True), (PR_B1, 0xB, False)], gen=5, rtype=1)
    allreg = pr_record([(PR_A1, 0xA, False), (PR_B1, 0xB, False)], gen=9, rtype=7, aptpl=True)
    return {
        "register-reserve-release": empty + prout(0, 0, sark=0x1111) + prout(0, 1, 3, key=0x1111)
        + prout(0, 2, 3, key=0x1111),
        "two-register-preempt-abort": empty + prout(0, 6, sark=0xA) + prout(2, 6, sark=0xB)
        + prout(2, 1, 1, key=0xB) + prout(0, 5, 3, key=0xA, sark=0xB),
        "aptpl-clear": empty + prout(1, 0, sark=0x55, flags=0x01) + prout(1, 3, key=0x55),
        "held-move": be(len(held), 2) + held + move(0, 0xA, 0xDD, "iqn.2026-11.io.tandem:host-c,i,0x800000000001", unreg=True),
        "allreg-preempt-zero": be(len(allreg), 2) + allreg + prout(2, 4, 6, key=0xB, sark=0),
        "allreg-unregister": be(len(allreg), 2) + allreg + prout(0, 0, key=0xA) + prout(2, 6),
        "bad-scope-spec-i-pt": empty + prout(0, 0, sark=1, flags=0x08) + prout(0, 1, 1, key=1, scope=1),
    }


def xcopy_seeds():
    """fuzz_xcopy: EXTENDED COPY parameter lists (header, E4h targets, 02h/0Ah segments)."""
    def target(naa):
        d = bytearray(32)
        d[0], d[4], d[5], d[7] = 0xE4, 1, 3, 16
        d[8:24] = naa
        d[29:32] = be(512, 3)
        return bytes(d)

    def segment(src, dst, blocks, src_lba, dst_lba, kind=0x02):
        d = bytearray(28 if kind == 0x02 else 32)
        d[0] = kind
        d[2:4] = be(len(d) - 4, 2)
        d[4:6], d[6:8] = be(src, 2), be(dst, 2)
        if kind == 0x02:
            d[10:12] = be(blocks, 2)
        else:
            d[8:12] = be(blocks * 512, 4)
        d[12:20], d[20:28] = be(src_lba, 8), be(dst_lba, 8)
        return bytes(d)

    def plist(targets, segments, list_id=1, usage=0):
        t, s = b"".join(targets), b"".join(segments)
        return (bytes([list_id, usage << 3]) + be(len(t), 2) + bytes(4) + be(len(s), 4)
                + bytes(4) + t + s)

    naa, naa2 = bytes([0x60] + [0x11] * 15), bytes([0x60] + [0x22] * 15)
    return {
        "simple": plist([target(naa)], [segment(0, 0, 8, 0, 100)]),
        "two_luns": plist([target(naa), target(naa2)],
                          [segment(0, 1, 16, 0, 0), segment(1, 0, 16, 8, 64)]),
        "bytes_segment": plist([target(naa)], [segment(0, 0, 8, 0, 100, 0x0A)], usage=3),
        "header_only": plist([], []),
    }


# ---- fuzz_admin: tandem.admin.AdminRequest, encoded here from proto/admin.proto ----

def pb_varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_field(num, value):
    """A field: int -> varint, bytes -> length-delimited."""
    if isinstance(value, int):
        return pb_varint(num << 3) + pb_varint(value)
    return pb_varint(num << 3 | 2) + pb_varint(len(value)) + value


def admin_request(op_num, *fields):
    body = b"".join(pb_field(n, v) for n, v in fields)
    return pb_field(1, 1) + pb_field(op_num, body)


def admin_seeds():
    t1 = b"iqn.2024-01.org.example:t1"
    t2 = b"iqn.2024-01.org.example:t2"
    ini = b"iqn.1993-08.org.debian:01:client1"
    return {
        "status": admin_request(17),
        "stats": admin_request(18),
        "target-add": admin_request(10, (1, t2)),
        "target-del": admin_request(11, (1, t1)),
        "lun-add": admin_request(12, (1, t1), (2, 1), (3, b"x.img"), (4, 1 << 20), (5, 1)),
        "lun-add-4k": admin_request(12, (1, t1), (2, 2), (3, b"y.img"), (4, 2 << 20), (5, 1),
                                    (7, 4096), (8, 2)),
        "lun-del": admin_request(13, (1, t1), (2, 0)),
        "lun-resize": admin_request(19, (1, t1), (2, 0), (3, 2 << 20)),
        "acl-add": admin_request(14, (1, t1), (2, ini)),
        "acl-del": admin_request(15, (1, t1), (2, b"ALL")),
        "chap-set": admin_request(16, (1, t1), (3, b"user"), (4, b"a-long-secret-12+")),
        "chap-discovery": admin_request(16, (2, 1), (3, b"disc"), (4, b"another-secret-34")),
        "repl-status": admin_request(30),
        "repl-promote": admin_request(31, (1, t1), (2, 0), (3, 1)),
        "newer-version": pb_field(1, 7) + pb_field(17, b""),
        "not-a-request": b"\xff\xff\xff",
    }


# ---- fuzz_config_edit: a base byte, then edits (see the top of fuzz_config_edit.c) ----

def ce_str(b):
    return bytes([len(b)]) + b


def ce_pool(i):
    return bytes([0xF0 + i])


def ce_u64(v):
    return struct.pack("<Q", v)


def config_edit_seeds():
    lun = (ce_u64(1) + ce_str(b"/srv/c.img") + ce_u64(1 << 30) + b"\x01" + b"\x00" +
           ce_u64(512) + ce_u64(4096) + b"\x01" + b"\x00")
    chap = b"\x01" + ce_str(b"user") + ce_str(b"a-long-secret-12+") + b"\x00" + ce_str(b"") + \
        ce_str(b"")
    return {
        "add-target": b"\x00" + b"\x00" + ce_str(b"iqn.2024-01.org.example:new"),
        "add-lun": b"\x01" + b"\x02" + ce_pool(0) + lun,
        "resize": b"\x01" + b"\x04" + ce_pool(0) + ce_u64(0) + ce_u64(2 << 30),
        "acl": b"\x01" + b"\x05" + ce_pool(1) + ce_str(b"iqn.1993-08.org.debian:01:c") +
               b"\x06" + ce_pool(0) + ce_pool(2),
        "chap": b"\x01" + b"\x07" + b"\x00" + ce_pool(0) + chap + b"\x07" + b"\x01" +
                ce_pool(0) + chap,
        "del-everything": b"\x02" + b"\x03" + ce_pool(0) + ce_u64(0) + b"\x01" + ce_pool(0),
        "refused": b"\x01" + b"\x00" + ce_pool(0) + b"\x03" + ce_pool(3) + ce_u64(9),
        # Found by this target: a resize above INT64_MAX was accepted (the file then refused).
        "resize-above-int64": b"\x01" + b"\x04" + ce_pool(0) + ce_u64(0) +
                              ce_u64(0xF800000000000000),
    }


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        os.unlink(os.path.join(d, name))
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def main():
    write("fuzz_login", login_seeds())
    write("fuzz_text", text_seeds())
    write("fuzz_cdb", cdb_seeds())
    write("fuzz_pdu_rx", pdu_rx_seeds())
    write("fuzz_repl_wire", repl_wire_seeds())
    write("fuzz_repl_apply", repl_apply_seeds())
    write("fuzz_cluster_msg", cluster_msg_seeds())
    write("fuzz_config", config_seeds())
    write("fuzz_xcopy", xcopy_seeds())
    write("fuzz_prout", prout_seeds())
    write("fuzz_config_edit", config_edit_seeds())
    write("fuzz_admin", admin_seeds())
    total = 0
    for root, _, files in os.walk(os.path.join(HERE, "corpus")):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print("corpus: %d bytes" % total, file=sys.stderr)


if __name__ == "__main__":
    main()
