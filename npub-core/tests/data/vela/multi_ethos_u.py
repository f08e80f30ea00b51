#!/usr/bin/env python3
"""Turn a compiled model with CPU operators between NPU parts into one with several `ethos-u` operators and no
CPU operator, by pointing every operator's opcode_index at the `ethos-u` operator code (in place, same length).

    python3 multi_ethos_u.py IN_vela.tflite OUT.tflite

Vela itself never writes such a file (adjacent NPU parts are merged), so this is the only way to test that the
importer refuses more than one `ethos-u` operator for its own reason.
"""
import sys

from ethosu.vela.tflite.Model import Model

data = bytearray(open(sys.argv[1], "rb").read())
m = Model.GetRootAs(data, 0)
codes = [m.OperatorCodes(i).CustomCode() for i in range(m.OperatorCodesLength())]
npu = codes.index(b"ethos-u")
sg = m.Subgraphs(0)
patched = 0
for i in range(sg.OperatorsLength()):
    op = sg.Operators(i)
    if op.OpcodeIndex() == npu:
        continue
    field = op._tab.Offset(4)  # Operator.opcode_index (field id 0)
    assert field != 0, "opcode_index stored as default: cannot patch in place"
    data[op._tab.Pos + field : op._tab.Pos + field + 4] = npu.to_bytes(4, "little")
    patched += 1
assert patched > 0
open(sys.argv[2], "wb").write(bytes(data))
print(f"wrote {sys.argv[2]}: {patched} operators now point at ethos-u (opcode {npu})")
