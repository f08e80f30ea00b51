#!/usr/bin/env python3
"""An independent NPU1 writer, from the spec's text alone (not from npub-core's code).

Writes small packs into this directory:
  accept_*.npub          valid, or accepted by design (unknown role, overlapping baked regions,
                         re-checksummed payload) - `npub verify` must exit 0;
  reject_<Variant>_*.npub one per rejected row of the malformed-input table - `npub verify` must exit
                         1, and npub_core::Error must be exactly <Variant>;
  arena_<bytes>_*.npub   valid packs whose runtime regions need more than <bytes> of arena.
Run: python3 gen.py   (deterministic; the outputs are committed).
"""
import os
import struct

MAGIC = 0x3155504E
HERE = os.path.dirname(os.path.abspath(__file__))


def fnv1a(data):
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def pack(cmd, regions, accel=4, cmd_gap=0, data_gap=0, total_extra=0):
    """regions: list of (role, baked_bytes_or_None, runtime_size). Payload laid out with gaps."""
    header_and_table = 32 + 16 * len(regions)
    cmd_offset = header_and_table + cmd_gap
    pos = cmd_offset + len(cmd)
    descs, blobs = [], []
    for role, data, size in regions:
        if data is not None:
            pos += data_gap
            descs.append((role, 1, len(data), pos))
            blobs.append((pos, data))
            pos += len(data)
        else:
            descs.append((role, 0, size, 0))
    total = pos + total_extra
    body = bytearray(total)
    body[cmd_offset:cmd_offset + len(cmd)] = cmd
    for off, data in blobs:
        body[off:off + len(data)] = data
    for i, d in enumerate(descs):
        struct.pack_into("<4I", body, 32 + 16 * i, *d)
    struct.pack_into("<7I", body, 0, MAGIC, 1, total, len(regions), cmd_offset, len(cmd), accel)
    reseal(body)
    return body


def reseal(body):
    struct.pack_into("<I", body, 28, fnv1a(body[32:]))


def word(body, at, value, reseal_after=True):
    struct.pack_into("<I", body, at, value & 0xFFFFFFFF)
    if reseal_after:
        reseal(body)


def base():
    cmd = bytes(range(48))
    weights = bytes((i * 13) & 0xFF for i in range(200))
    return pack(cmd, [(0, weights, 0), (1, None, 4096), (1, None, 0)], cmd_gap=16, data_gap=8)


def write(name, body):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(bytes(body))


def main():
    for f in os.listdir(HERE):
        if f.endswith(".npub"):
            os.remove(os.path.join(HERE, f))
    b = base()
    write("accept_base.npub", b)
    write("accept_unaligned_layout.npub", pack(b"\x01\x02\x03", [(0, b"abcde", 0), (3, None, 7)], cmd_gap=1, data_gap=3))
    write("accept_padded_end.npub", pack(bytes(16), [(0, bytes(32), 0)], total_extra=100))
    write("accept_no_regions.npub", pack(b"\xff" * 4, []))
    write("accept_nine_regions.npub", pack(bytes(8), [(4, None, 16)] * 9))
    write("accept_accel_unknown.npub", pack(bytes(8), [(1, None, 16)], accel=0xBEEF))
    x = base(); word(x, 32 + 16 * 1, 99); write("accept_unknown_role.npub", x)
    x = base(); word(x, 32 + 16 * 2 + 12, 0xFFFFFFFF); write("accept_runtime_data_offset_ignored.npub", x)
    o = pack(bytes(16), [(0, bytes(64), 0), (0, bytes(64), 0)])
    first = struct.unpack_from("<I", o, 32 + 12)[0]
    word(o, 32 + 16 + 12, first + 8); write("accept_overlapping_baked.npub", o)
    x = base(); cmd_at = struct.unpack_from("<I", x, 16)[0]; x[cmd_at] ^= 0xFF; reseal(x)
    write("accept_modified_payload_rechecksummed.npub", x)

    write("reject_TooShort_empty.npub", b"")
    write("reject_TooShort_31.npub", b[:31])
    x = base(); word(x, 0, 0x3255504E, False); write("reject_BadMagic_npu2.npub", x)
    x = base(); word(x, 0, 0x4E505531, False); write("reject_BadMagic_big_endian.npub", x)
    x = base(); word(x, 4, 2, False); write("reject_UnsupportedVersion_2.npub", x)
    x = base(); word(x, 4, 0, False); write("reject_UnsupportedVersion_0.npub", x)
    write("reject_TotalBytesMismatch_truncated.npub", b[:-1])
    write("reject_TotalBytesMismatch_padded.npub", bytes(b) + b"\0")
    x = base(); word(x, 12, 0x00100000); write("reject_RegionTableOutOfBounds_huge.npub", x)
    x = base(); word(x, 12, 0x10000000); write("reject_RegionTableOutOfBounds_wraps.npub", x)
    x = base(); word(x, 20, 0); write("reject_EmptyCommandStream.npub", x)
    x = base(); word(x, 20, len(x)); write("reject_CommandStreamOutOfBounds_long.npub", x)
    x = base(); word(x, 16, 0xFFFFFFF0); word(x, 20, 0x20); write("reject_CommandStreamOutOfBounds_wraps.npub", x)
    x = base(); word(x, 32 + 8, 100000); write("reject_BakedRegionOutOfBounds_size.npub", x)
    x = base(); word(x, 32 + 12, 0xFFFFFF00); word(x, 32 + 8, 0x200); write("reject_BakedRegionOutOfBounds_wraps.npub", x)
    x = base(); word(x, 32 + 4, 3); write("reject_UnknownRegionFlags.npub", x)
    x = base(); x[-1] ^= 1; write("reject_ChecksumMismatch_bitrot.npub", x)
    x = base(); x[40] ^= 0x80; write("reject_ChecksumMismatch_table_size_bit.npub", x)
    # Runtime size larger than the arena: valid packs, rejected only by bind with a small arena.
    write("arena_4095_base.npub", b)


if __name__ == "__main__":
    main()
