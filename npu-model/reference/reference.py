#!/usr/bin/env python3
"""Run a (pre-Vela) .tflite with TFLite's reference kernels (OpResolverType.BUILTIN_REF).

    reference.py MODEL.tflite DIR

For every DIR/set-K/ holding input-0.bin, input-1.bin, ... (raw tensor bytes in the model's input
order: NHWC, the input's dtype, no header) it writes DIR/set-K/output-0.bin, output-1.bin, ... in
the model's output order, with one interpreter for all sets. Prints one JSON line describing the
model's inputs and outputs. Needs tflite-runtime 2.14 and numpy < 2 (`npub prove --help` says how
to make the venv).
"""
import json
import os
import sys

import numpy as np
from tflite_runtime.interpreter import Interpreter, OpResolverType


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model, root = sys.argv[1], sys.argv[2]
    it = Interpreter(model_path=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    sets = sorted((d for d in os.listdir(root) if d.startswith("set-")), key=lambda d: int(d[4:]))
    for s in sets:
        for i, d in enumerate(ins):
            path = os.path.join(root, s, f"input-{i}.bin")
            data = np.fromfile(path, dtype=d["dtype"])
            want = int(np.prod(d["shape"]))
            if data.size != want:
                sys.exit(f"{path}: {data.size} elements, model input {i} ({d['name']}) has {want}")
            it.set_tensor(d["index"], data.reshape(d["shape"]))
        it.invoke()
        for j, d in enumerate(outs):
            it.get_tensor(d["index"]).tofile(os.path.join(root, s, f"output-{j}.bin"))
    describe = lambda ds: [
        {"name": d["name"], "dtype": str(np.dtype(d["dtype"])), "shape": [int(x) for x in d["shape"]]} for d in ds
    ]
    print(json.dumps({"inputs": describe(ins), "outputs": describe(outs)}))


if __name__ == "__main__":
    main()
