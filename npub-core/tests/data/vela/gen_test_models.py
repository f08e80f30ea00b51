#!/usr/bin/env python3
"""Uncompiled int8 TFLite models that Vela cannot run entirely on the NPU, for npub's import rejection tests.

Reuses the TfliteBuilder of the shared fixtures' gen_models.py (no TensorFlow). Run inside a venv that has
ethos-u-vela 5.2.0 (it ships the flatbuffers TFLite schema classes):

    python3 gen_test_models.py SHARED_SCRIPTS_DIR OUTDIR

Writes (deterministic, seeded RNG):
  cpu_tail.tflite    CONV_2D (int8) -> DEQUANTIZE (float32 output): Vela leaves DEQUANTIZE on the CPU.
  two_parts.tflite   CONV_2D -> DEQUANTIZE -> QUANTIZE -> CONV_2D: two NPU parts around two CPU operators.
"""
import os
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
import gen_models as g  # noqa: E402

F32 = g.TensorType.TensorType.FLOAT32


def model_cpu_tail(rng):
    tb = g.TfliteBuilder()
    x = tb.add_tensor("input", [1, 8, 8, 3], g.I8, 0.0078125, 0)
    c = g.add_conv(tb, rng, "conv", x, 0.0078125, 3, 8, 3, 1, [1, 8, 8, 8], 0.05, -128)
    y = tb.add_tensor("output_f32", [1, 8, 8, 8], F32)
    tb.add_op(g.BO.DEQUANTIZE, [c], [y])
    tb.inputs, tb.outputs = [x], [y]
    return tb.build("cpu_tail: int8 conv -> dequantize to float32 (CPU)")


def model_two_parts(rng):
    tb = g.TfliteBuilder()
    x = tb.add_tensor("input", [1, 8, 8, 3], g.I8, 0.0078125, 0)
    c1 = g.add_conv(tb, rng, "conv1", x, 0.0078125, 3, 8, 3, 1, [1, 8, 8, 8], 0.05, -128)
    f = tb.add_tensor("mid_f32", [1, 8, 8, 8], F32)
    tb.add_op(g.BO.DEQUANTIZE, [c1], [f])
    q = tb.add_tensor("mid_q", [1, 8, 8, 8], g.I8, 0.05, -128)
    tb.add_op(g.BO.QUANTIZE, [f], [q])
    y = g.add_conv(tb, rng, "conv2", q, 0.05, 8, 8, 1, 1, [1, 8, 8, 8], 0.1, -128)
    tb.inputs, tb.outputs = [x], [y]
    return tb.build("two_parts: conv -> dequantize -> quantize -> conv (two NPU parts)")


def main():
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(4321)
    for name, fn in (("cpu_tail", model_cpu_tail), ("two_parts", model_two_parts)):
        data = fn(rng)
        path = os.path.join(out, name + ".tflite")
        with open(path, "wb") as f:
            f.write(data)
        print(f"wrote {path} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
