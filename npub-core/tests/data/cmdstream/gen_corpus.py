#!/usr/bin/env python3
"""Writes the `cmdstream` fuzz corpus (npub-core/fuzz/corpus/cmdstream/) from the Vela fixtures.

Run from npub-core/: `python3 tests/data/cmdstream/gen_corpus.py`. Deterministic; stdlib only.

Each file is a fuzz input (format in fuzz/fuzz_targets/cmdstream_input.rs):
byte 0 region count, byte 1 accel word, 4 bytes per region size, then the stream.
`accept_*` files must verify; `reject_<Variant>_*` files must fail with that variant
(tests/cmdstream.rs checks both). The mutations mirror the rejects_* tests.
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = os.path.normpath(os.path.join(CRATE, "..", "..", "shared", "fixtures", "vela", "cases"))
OUT = os.path.join(CRATE, "fuzz", "corpus", "cmdstream")

ACCEL = {"ethos-u55-32": 1, "ethos-u55-64": 2, "ethos-u55-128": 3, "ethos-u55-256": 4}

# Opcodes (bits 9:0) and the cmd1 flag (payload size 1 = 0x4000).
CMD1 = 0x4000
IFM_BASE0 = CMD1 | 0x000
IFM_STRIDE_Y = CMD1 | 0x005
OFM_BASE0 = CMD1 | 0x010
WEIGHT_LENGTH = CMD1 | 0x021
DMA0_SRC = CMD1 | 0x030
DMA0_DST = CMD1 | 0x031
DMA0_LEN = CMD1 | 0x032
DMA0_SRC_REGION = 0x130
DMA0_DST_REGION = 0x131
BLOCKDEP = 0x12F
DMA_START = 0x010
STOP = 0x000


def words(b):
    return list(struct.unpack("<%dI" % (len(b) // 4), b))


def pack(ws):
    return struct.pack("<%dI" % len(ws), *ws)


def walk(ws):
    """(word index, code = bits 15:0 without must-be-zero bits, length in words) per command."""
    i, out = 0, []
    while i < len(ws):
        code = ws[i] & 0xC3FF
        n = 2 if code & CMD1 else 1
        out.append((i, code, n))
        i += n
    return out


def find(ws, code):
    return [i for i, c, _ in walk(ws) if c == code]


def fuzz_input(sizes, accel, stream):
    return bytes([len(sizes), accel]) + b"".join(struct.pack("<I", s) for s in sizes) + stream


def load(case):
    d = os.path.join(FIXTURES, case)
    meta = json.load(open(os.path.join(d, "meta.json")))
    regions = sorted(meta["regions"], key=lambda r: r["index"])
    sizes = [r["size"] for r in regions]
    return words(open(os.path.join(d, "cmd.bin"), "rb").read()), sizes, ACCEL[meta["accelerator"]]


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    for case in sorted(os.listdir(FIXTURES)):
        ws, sizes, accel = load(case)
        files["accept_" + case] = fuzz_input(sizes, accel, pack(ws))

    ws, sizes, accel = load("small_net_u55_256")
    m = list(ws)
    m[find(m, OFM_BASE0)[-1] + 1] = sizes[1]
    files["reject_OutOfRange_ofm_base_past_region"] = fuzz_input(sizes, accel, pack(m))
    m = list(ws)
    i = find(m, DMA0_DST_REGION)[0]
    m[i] = (m[i] & 0xFFFF) | (3 << 16)
    files["reject_RegionMissing_dma_dst"] = fuzz_input(sizes, accel, pack(m))

    ws, sizes, accel = load("conv1_u55_256")
    m = list(ws)
    m[find(m, WEIGHT_LENGTH)[-1] + 1] += 16
    files["reject_OutOfRange_weight_length"] = fuzz_input(sizes, accel, pack(m))
    i = find(ws, IFM_STRIDE_Y)[0]
    files["reject_UnsetRegister_ifm_stride_y"] = fuzz_input(sizes, accel, pack(ws[:i] + ws[i + 2:]))
    files["reject_NoStop_cut"] = fuzz_input(sizes, accel, pack(ws[:-1]))
    m = list(ws)
    i = find(m, BLOCKDEP)[0]
    m[i] = (m[i] & 0xFFFF0000) | 0x12E
    files["reject_UnknownOpcode"] = fuzz_input(sizes, accel, pack(m))
    m = list(ws)
    m[0] |= 1 << 12
    files["reject_MustBeZero"] = fuzz_input(sizes, accel, pack(m))
    m = list(ws)
    m[find(m, IFM_BASE0)[0]] |= 1 << 16
    files["reject_AddressHigh"] = fuzz_input(sizes, accel, pack(m))
    i = find(ws, IFM_BASE0)[0]
    files["reject_Truncated"] = fuzz_input(sizes, accel, pack(ws[: i + 1]))
    m = list(ws)
    m[0] = (m[0] & ~0xC000) | 0x8000
    files["reject_PayloadSize"] = fuzz_input(sizes, accel, pack(m))
    files["reject_DataAfterStop"] = fuzz_input(sizes, accel, pack(ws + [0xFFFF0000 | STOP]))
    files["reject_NotWordAligned"] = fuzz_input(sizes, accel, pack(ws) + b"\0\0")

    # A LUT load: 2 KiB from region 0 into the top of a U55-256's SHRAM (46 KiB, where Vela puts it).
    def lut(dst_region_param):
        return pack([
            DMA0_SRC_REGION, DMA0_SRC, 0,
            DMA0_DST_REGION | (dst_region_param << 16), DMA0_DST, 46 * 1024,
            DMA0_LEN, 2048,
            DMA_START,
            0xFFFF0000 | STOP,
        ])

    files["accept_lut_dma_into_shram"] = fuzz_input([2048], 4, lut(0x100))
    files["reject_OutOfRange_shram_of_unspecified_accel"] = fuzz_input([2048], 0, lut(0x100))
    files["reject_InvalidRegister_dma_2d"] = fuzz_input([2048], 4, lut(0x100 | (1 << 9)))

    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(files), OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
