#!/usr/bin/env python3
"""What a pack of one Vela output must contain, read from Vela's own bytes: not from npub.

    python3 facts.py FILE...        (prints one JSON object per file)

Needs numpy (to read the raw `.npz` the way Vela wrote it, with `np.load`) and the `flatbuffers`
package plus the TFLite schema classes that ship inside `ethos-u-vela` (`ethosu.vela.tflite`) for the
`.tflite`. Nothing here imports or mirrors npub's code: the driver payload, the command stream's
region fields and the arena offsets are decoded from the layouts Vela and Arm's driver document
(`shared/docs/vela-output.md`, `shared/docs/ethos-u55-command-stream.md`).

Facts, per file:
- `payload`: magic (`COP1`/`COP2`), config and ID words, where the command stream starts and how
  long it is, its SHA-256, and every region number its `*_REGION` commands name.
- `weights`: bytes and SHA-256 of region 0 (the `read_only` tensor / `weight_data`).
- `scratch`, `scratch_fast`: the sizes of regions 1 and 2 in a pack: the `ethos-u` operator's
  inputs 2 and 3 (TFLite Micro binds input i at base pointer i-1), scratch_fast 0 when input 3 is
  input 2 again; in the `.npz`, `scratch_size` and `scratch_fast_size` (and, as recorded,
  `scratch_fast_region`: the Python core records 1 when it does not spill to a fast memory).
- `io`: per model input then output: region, offset, bytes, and the quantisation as recorded
  (`quant`: `per_tensor`, `per_channel`, `none` or `missing` when the file has no such array).
"""
import hashlib
import json
import struct
import sys

import numpy as np

# cmd0 opcodes whose parameter bits 2:0 name a region (DMA ones: bit 8 set = SHRAM, no region).
REGION_CMDS = {0x10F: "ifm", 0x11F: "ofm", 0x18F: "ifm2", 0x128: "weight", 0x129: "scale",
               0x130: "dma_src", 0x131: "dma_dst"}
DMA_REGION_CMDS = {0x130, 0x131}
TFLITE_BYTES = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1, 15: 4, 16: 2}


def sha(b):
    return hashlib.sha256(b).hexdigest()


def payload_facts(p):
    words = lambda at: struct.unpack_from("<I", p, at)[0]
    magic = p[:4].decode("latin-1")
    out = {"magic": magic, "bytes": len(p)}
    if magic != "COP1":
        return out
    out["config"] = f"{words(8):#010x}"
    out["id"] = f"{words(12):#010x}"
    pos = 16
    while pos + 4 <= len(p):
        tag = words(pos)
        if tag & 0xFF == 0x05:  # NOP
            pos += 4
            continue
        if tag & 0xFF == 0x02:  # command stream, length in words
            n = ((tag >> 8) & 0xFF) << 16 | (tag >> 16)
            cmd = p[pos + 4: pos + 4 + 4 * n]
            out.update(cmd_offset=pos + 4, cmd_bytes=len(cmd), cmd_sha256=sha(cmd),
                       regions_named=regions_named(cmd))
            return out
        raise ValueError(f"driver action {tag:#x} at {pos}")
    raise ValueError("no command stream")


def regions_named(cmd):
    seen = set()
    i = 0
    while i + 4 <= len(cmd):
        w = struct.unpack_from("<I", cmd, i)[0]
        op, size, param = w & 0x3FF, (w >> 14) & 3, w >> 16
        if size == 0 and op in REGION_CMDS and not (op in DMA_REGION_CMDS and param & 0x100):
            seen.add(param & 7)
        i += 4 * (1 + size)
    return sorted(seen)


def quant_of(scales, zero_points):
    if scales is None:
        return {"quant": "missing"}
    scales = [float(s) for s in scales]
    zps = [int(z) for z in zero_points]
    if not scales:
        return {"quant": "none"}
    kind = "per_tensor" if len(scales) == 1 else "per_channel"
    return {"quant": kind, "scales": scales, "zero_points": zps}


def tflite_facts(buf):
    from ethosu.vela.tflite.Model import Model

    m = Model.GetRootAs(buf, 0)
    sg = m.Subgraphs(0)
    codes = [m.OperatorCodes(i).CustomCode() for i in range(m.OperatorCodesLength())]
    ops = [sg.Operators(i) for i in range(sg.OperatorsLength())]
    npu = [op for op in ops if codes[op.OpcodeIndex()] == b"ethos-u"]
    if len(npu) != 1 or len(ops) != 1:
        # Vela left operators on the CPU: not a pack (npub runs only the NPU part).
        return {"operators": len(ops), "ethos_u_operators": len(npu)}
    op = npu[0]
    ins = list(op.InputsAsNumpy())
    outs = list(op.OutputsAsNumpy())
    data = lambda t: m.Buffers(sg.Tensors(t).Buffer()).DataAsNumpy().tobytes()

    def nbytes(t):
        tt = sg.Tensors(t)
        n = 1
        for d in (tt.ShapeAsNumpy() if tt.ShapeLength() else []):
            n *= int(d)
        return n * TFLITE_BYTES[tt.Type()]

    offsets = None
    for i in range(m.MetadataLength()):
        md = m.Metadata(i)
        if md.Name() == b"OfflineMemoryAllocation":
            raw = m.Buffers(md.Buffer()).DataAsNumpy().tobytes()
            offsets = list(struct.unpack(f"<{len(raw) // 4}i", raw))[3:]
    payload = data(ins[0])
    facts = {
        "payload": payload_facts(payload),
        "weights": {"bytes": len(data(ins[1])), "sha256": sha(data(ins[1]))},
        "scratch": nbytes(ins[2]),
        "scratch_fast": 0 if ins[3] == ins[2] else nbytes(ins[3]),
        "io": [],
    }
    for kind, tensors in (("input", ins[4:]), ("output", outs)):
        for index, t in enumerate(tensors):
            tt = sg.Tensors(t)
            q = tt.Quantization()
            scales = list(q.ScaleAsNumpy()) if q is not None and q.ScaleLength() else []
            zps = list(q.ZeroPointAsNumpy()) if q is not None and q.ZeroPointLength() else []
            entry = {"kind": kind, "index": index, "region": 1,
                     "offset": offsets[t] if offsets else None, "bytes": nbytes(t)}
            entry.update(quant_of(scales, zps))
            facts["io"].append(entry)
    return facts


def npz_facts(path):
    d = np.load(path, allow_pickle=True)
    get = lambda k: d[k] if k in d.files else None
    scalar = lambda k: int(d[k])
    payload = d["cmd_data"].tobytes()
    facts = {"payload": payload_facts(payload),
             "weights": {"bytes": len(d["weight_data"].tobytes()),
                         "sha256": sha(d["weight_data"].tobytes())}}
    if facts["payload"]["magic"] != "COP1":
        return facts
    scratch = scalar("scratch_size")
    fast = scalar("scratch_fast_size")
    facts.update(scratch=scratch, scratch_fast=fast, scratch_fast_region=scalar("scratch_fast_region"),
                 io=[])
    for kind in ("input", "output"):
        offsets = get(f"{kind}_offset")
        quant = get(f"{kind}_quantization")
        for index in range(len(offsets)):
            shape = [int(x) for x in d[f"{kind}_shape"][index]]
            n = int(d[f"{kind}_elem_size"][index])
            for x in shape:
                n *= x
            entry = {"kind": kind, "index": index, "region": int(d[f"{kind}_region"][index]),
                     "offset": int(offsets[index]), "bytes": n}
            if quant is None:
                entry.update(quant_of(None, None))
            elif quant[index]["quant_type"] == "none":
                entry.update(quant_of([], []))
            else:
                entry.update(quant_of(quant[index]["scale"], quant[index]["zero_point"]))
            facts["io"].append(entry)
    return facts


def expectation(payload):
    """Whether a pack must come of it, or the refusal's message must name a recompile flag."""
    if payload is None:
        return {"refuse": ["CPU"]}
    if payload["magic"] != "COP1":
        return {"refuse": ["--cop-format COP2", "--separate-io-regions", "recompile without"]}
    product = int(payload["config"], 16) >> 28
    if product != 0:
        return {"refuse": ["--accelerator-config ethos-u55-{32,64,128,256}"]}
    return {"pack": True}


def facts(path):
    f = npz_facts(path) if path.endswith(".npz") else tflite_facts(open(path, "rb").read())
    f["expect"] = expectation(f.get("payload"))
    return f


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(json.dumps({"file": p, **facts(p)}))
