#!/usr/bin/env python3
"""Median time of one `invoke()` of a .tflite with TFLite's reference kernels (BUILTIN_REF).

    reference_time.py MODEL.tflite SET_DIR [REPEATS]

SET_DIR holds input-0.bin, input-1.bin, ... (raw tensor bytes in the model's input order).
Prints microseconds. Needs tflite-runtime 2.14 and numpy < 2.
"""
import os
import sys
import time

import numpy as np
from tflite_runtime.interpreter import Interpreter, OpResolverType

model, setdir = sys.argv[1], sys.argv[2]
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 200
it = Interpreter(model_path=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
it.allocate_tensors()
for i, d in enumerate(it.get_input_details()):
    data = np.fromfile(os.path.join(setdir, f"input-{i}.bin"), dtype=d["dtype"])
    it.set_tensor(d["index"], data.reshape(d["shape"]))
for _ in range(5):
    it.invoke()
times = []
for _ in range(repeats):
    t = time.perf_counter()
    it.invoke()
    times.append(time.perf_counter() - t)
print(f"{np.median(times) * 1e6:.1f}")
