#!/usr/bin/env python3
"""Small quantised TFLite models for the functional model's tests, built without TensorFlow.

    python gen.py OUT_DIR

Needs numpy and flatbuffers, and the TFLite schema classes that the `ethos-u-vela` wheel carries
(`ethosu.vela.tflite`): run it with a Vela venv's interpreter. Seeded, so every run writes the
same bytes. Each model exercises NPU operations the fixtures in ../shared/fixtures/vela do not:

  pool      AVERAGE_POOL_2D 3x3/2 SAME (padded), MAX_POOL_2D 2x2/1 VALID, AVERAGE_POOL_2D 3x3/1 VALID
  eltwise   SUB with a broadcast input, MUL, ADD with fused RELU6, MAXIMUM, MINIMUM
  act       CONV_2D -> TANH and CONV_2D -> LOGISTIC (8-bit lookup tables in SHRAM)
  kernels   DEPTHWISE 5x5 SAME, CONV_2D 3x3 dilation 2, CONV_2D 9x9 (sub-kernels), RELU_N1_TO_1 clamp
  fc        FULLY_CONNECTED with 2 batches and RELU, then a 1x1 CONV on 40 channels (part-kernel order)
  concat3   three inputs into CONCATENATION on channels, then ADD to a fourth input
  conv16    an int16 x int8 CONV_2D (16-bit activations, 64-bit bias)
  cat3      three inputs a, b, c straight into CONCATENATION: Vela's operator takes them as c, b, a
  mnet      a small MobileNet-like chain: strided conv + RELU6, strided depthwise, pointwise, a
            residual ADD, global average pooling, RESHAPE, FULLY_CONNECTED, LOGISTIC
"""
import os
import sys

import flatbuffers
import numpy as np
from ethosu.vela.tflite import (
    ActivationFunctionType,
    Buffer,
    BuiltinOperator,
    BuiltinOptions,
    Model,
    Operator,
    OperatorCode,
    Padding,
    QuantizationParameters,
    SubGraph,
    Tensor,
    TensorType,
)
from ethosu.vela.tflite import (
    AddOptions,
    ConcatenationOptions,
    Conv2DOptions,
    DepthwiseConv2DOptions,
    FullyConnectedOptions,
    MulOptions,
    Pool2DOptions,
    SubOptions,
)

BO = BuiltinOperator.BuiltinOperator
OPT = BuiltinOptions.BuiltinOptions
ACT = ActivationFunctionType.ActivationFunctionType
SAME, VALID = Padding.Padding.SAME, Padding.Padding.VALID
I8, I16, I32, I64 = TensorType.TensorType.INT8, TensorType.TensorType.INT16, TensorType.TensorType.INT32, TensorType.TensorType.INT64


def table(module, name, fields):
    """A builtin-options table from (field, value) pairs, by the schema module's own functions."""

    def build(b):
        getattr(module, name + "Start")(b)
        for field, value in fields:
            getattr(module, name + "Add" + field)(b, value)
        return getattr(module, name + "End")(b)

    return build


class Graph:
    """One subgraph: tensors, operators, inputs, outputs."""

    def __init__(self):
        self.buffers = [b""]
        self.tensors = []
        self.ops = []
        self.codes = []
        self.inputs = []
        self.outputs = []

    def tensor(self, name, shape, ttype, scale=None, zp=None, data=None, qdim=0):
        buf = 0
        if data is not None:
            self.buffers.append(np.ascontiguousarray(data).tobytes())
            buf = len(self.buffers) - 1
        self.tensors.append((name, list(shape), ttype, buf, scale, zp, qdim))
        return len(self.tensors) - 1

    def op(self, code, ins, outs, opt_type=0, opt=None):
        if code not in self.codes:
            self.codes.append(code)
        self.ops.append((self.codes.index(code), ins, outs, opt_type, opt))

    def serialise(self, description):
        b = flatbuffers.Builder(1 << 16)

        def ints(start, values):
            start(b, len(values))
            for v in reversed(values):
                b.PrependInt32(v)
            return b.EndVector()

        def offsets(start, values):
            start(b, len(values))
            for v in reversed(values):
                b.PrependUOffsetTRelative(v)
            return b.EndVector()

        bufs = []
        for data in self.buffers:
            vec = None
            if data:
                b.StartVector(1, len(data), 16)
                b.head -= len(data)
                b.Bytes[b.head : b.head + len(data)] = data
                vec = b.EndVector()
            Buffer.BufferStart(b)
            if vec is not None:
                Buffer.BufferAddData(b, vec)
            bufs.append(Buffer.BufferEnd(b))
        tens = []
        for name, shape, ttype, buf, scale, zp, qdim in self.tensors:
            n = b.CreateString(name)
            s = ints(Tensor.TensorStartShapeVector, shape)
            q = None
            if scale is not None:
                sc = b.CreateNumpyVector(np.atleast_1d(np.asarray(scale, np.float32)))
                z = b.CreateNumpyVector(np.atleast_1d(np.asarray(zp, np.int64)))
                QuantizationParameters.QuantizationParametersStart(b)
                QuantizationParameters.QuantizationParametersAddScale(b, sc)
                QuantizationParameters.QuantizationParametersAddZeroPoint(b, z)
                QuantizationParameters.QuantizationParametersAddQuantizedDimension(b, qdim)
                q = QuantizationParameters.QuantizationParametersEnd(b)
            Tensor.TensorStart(b)
            Tensor.TensorAddShape(b, s)
            Tensor.TensorAddType(b, ttype)
            Tensor.TensorAddBuffer(b, buf)
            Tensor.TensorAddName(b, n)
            if q is not None:
                Tensor.TensorAddQuantization(b, q)
            tens.append(Tensor.TensorEnd(b))
        ops = []
        for code, ins, outs, opt_type, opt in self.ops:
            o = opt(b) if opt else None
            i = ints(Operator.OperatorStartInputsVector, ins)
            u = ints(Operator.OperatorStartOutputsVector, outs)
            Operator.OperatorStart(b)
            Operator.OperatorAddOpcodeIndex(b, code)
            Operator.OperatorAddInputs(b, i)
            Operator.OperatorAddOutputs(b, u)
            if o is not None:
                Operator.OperatorAddBuiltinOptionsType(b, opt_type)
                Operator.OperatorAddBuiltinOptions(b, o)
            ops.append(Operator.OperatorEnd(b))
        tv = offsets(SubGraph.SubGraphStartTensorsVector, tens)
        ov = offsets(SubGraph.SubGraphStartOperatorsVector, ops)
        iv = ints(SubGraph.SubGraphStartInputsVector, self.inputs)
        uv = ints(SubGraph.SubGraphStartOutputsVector, self.outputs)
        name = b.CreateString("main")
        SubGraph.SubGraphStart(b)
        SubGraph.SubGraphAddTensors(b, tv)
        SubGraph.SubGraphAddInputs(b, iv)
        SubGraph.SubGraphAddOutputs(b, uv)
        SubGraph.SubGraphAddOperators(b, ov)
        SubGraph.SubGraphAddName(b, name)
        sg = SubGraph.SubGraphEnd(b)
        codes = []
        for c in self.codes:
            OperatorCode.OperatorCodeStart(b)
            OperatorCode.OperatorCodeAddDeprecatedBuiltinCode(b, min(c, 127))
            OperatorCode.OperatorCodeAddBuiltinCode(b, c)
            OperatorCode.OperatorCodeAddVersion(b, 1)
            codes.append(OperatorCode.OperatorCodeEnd(b))
        cv = offsets(Model.ModelStartOperatorCodesVector, codes)
        sv = offsets(Model.ModelStartSubgraphsVector, [sg])
        bv = offsets(Model.ModelStartBuffersVector, bufs)
        d = b.CreateString(description)
        Model.ModelStart(b)
        Model.ModelAddVersion(b, 3)
        Model.ModelAddOperatorCodes(b, cv)
        Model.ModelAddSubgraphs(b, sv)
        Model.ModelAddDescription(b, d)
        Model.ModelAddBuffers(b, bv)
        b.Finish(Model.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def conv(g, rng, name, x, in_scale, cin, cout, k, out_shape, out_scale, out_zp, stride=1, act=ACT.NONE,
         pad=SAME, dw=False, dilation=1, act16=False):
    """CONV_2D or DEPTHWISE_CONV_2D with per-channel int8 weights and a bias."""
    w_shape = [1, k, k, cout] if dw else [cout, k, k, cin]
    wsc = rng.uniform(0.002, 0.01, size=cout).astype(np.float32)
    w = g.tensor(name + "/w", w_shape, I8, wsc, np.zeros(cout, np.int64),
                 rng.integers(-127, 128, size=w_shape, dtype=np.int8), qdim=3 if dw else 0)
    bsc = (np.float32(in_scale) * wsc).astype(np.float32)
    if act16:
        bias = g.tensor(name + "/b", [cout], I64, bsc, np.zeros(cout, np.int64),
                        rng.integers(-20000, 20000, size=cout).astype(np.int64))
    else:
        bias = g.tensor(name + "/b", [cout], I32, bsc, np.zeros(cout, np.int64),
                        rng.integers(-2000, 2000, size=cout).astype(np.int32))
    y = g.tensor(name + "/out", out_shape, I16 if act16 else I8, out_scale, out_zp)
    if dw:
        opts = table(DepthwiseConv2DOptions, "DepthwiseConv2DOptions", [
            ("Padding", pad), ("StrideW", stride), ("StrideH", stride), ("DepthMultiplier", 1),
            ("FusedActivationFunction", act), ("DilationWFactor", dilation), ("DilationHFactor", dilation)])
        g.op(BO.DEPTHWISE_CONV_2D, [x, w, bias], [y], OPT.DepthwiseConv2DOptions, opts)
    else:
        opts = table(Conv2DOptions, "Conv2DOptions", [
            ("Padding", pad), ("StrideW", stride), ("StrideH", stride), ("FusedActivationFunction", act),
            ("DilationWFactor", dilation), ("DilationHFactor", dilation)])
        g.op(BO.CONV_2D, [x, w, bias], [y], OPT.Conv2DOptions, opts)
    return y


def pool(g, code, x, out_shape, scale, zp, k, stride, pad):
    y = g.tensor(f"pool{len(g.ops)}", out_shape, I8, scale, zp)
    opts = table(Pool2DOptions, "Pool2DOptions", [
        ("Padding", pad), ("StrideW", stride), ("StrideH", stride), ("FilterWidth", k), ("FilterHeight", k),
        ("FusedActivationFunction", ACT.NONE)])
    g.op(code, [x], [y], OPT.Pool2DOptions, opts)
    return y


def model_pool(rng):
    g = Graph()
    x = g.tensor("input", [1, 9, 9, 16], I8, 0.05, -7)
    a = pool(g, BO.AVERAGE_POOL_2D, x, [1, 5, 5, 16], 0.05, -7, 3, 2, SAME)
    m = pool(g, BO.MAX_POOL_2D, a, [1, 4, 4, 16], 0.05, -7, 2, 1, VALID)
    v = pool(g, BO.AVERAGE_POOL_2D, x, [1, 7, 7, 16], 0.05, -7, 3, 1, VALID)
    g.inputs, g.outputs = [x], [m, v]
    return g.serialise("pool: padded and unpadded average pooling, max pooling")


def model_eltwise(rng):
    g = Graph()
    a = g.tensor("a", [1, 4, 4, 8], I8, 0.04, 3)
    b = g.tensor("b", [1, 1, 1, 8], I8, 0.03, -5)
    # MAXIMUM and MINIMUM run on the NPU only between tensors of one quantisation.
    c = g.tensor("c", [1, 4, 4, 8], I8, 0.04, 3)
    s = g.tensor("sub", [1, 4, 4, 8], I8, 0.06, 1)
    g.op(BO.SUB, [a, b], [s], OPT.SubOptions, table(SubOptions, "SubOptions", [("FusedActivationFunction", ACT.NONE)]))
    m = g.tensor("mul", [1, 4, 4, 8], I8, 0.01, -2)
    g.op(BO.MUL, [a, c], [m], OPT.MulOptions, table(MulOptions, "MulOptions", [("FusedActivationFunction", ACT.NONE)]))
    r = g.tensor("add_relu6", [1, 4, 4, 8], I8, 6.0 / 255, -128)
    g.op(BO.ADD, [s, m], [r], OPT.AddOptions, table(AddOptions, "AddOptions", [("FusedActivationFunction", ACT.RELU6)]))
    hi = g.tensor("maximum", [1, 4, 4, 8], I8, 0.04, 3)
    g.op(BO.MAXIMUM, [a, c], [hi])
    lo = g.tensor("minimum", [1, 4, 4, 8], I8, 0.04, 3)
    g.op(BO.MINIMUM, [a, c], [lo])
    g.inputs, g.outputs = [a, b, c], [r, hi, lo]
    return g.serialise("eltwise: broadcast SUB, MUL, ADD+RELU6, MAXIMUM, MINIMUM")


def model_act(rng):
    g = Graph()
    x = g.tensor("input", [1, 6, 6, 8], I8, 0.0078125, 0)
    c = conv(g, rng, "conv", x, 0.0078125, 8, 8, 3, [1, 6, 6, 8], 0.04, 0)
    t = g.tensor("tanh", [1, 6, 6, 8], I8, 1.0 / 128, 0)
    g.op(BO.TANH, [c], [t])
    d = conv(g, rng, "conv2", x, 0.0078125, 8, 8, 1, [1, 6, 6, 8], 0.03, 2)
    s = g.tensor("logistic", [1, 6, 6, 8], I8, 1.0 / 256, -128)
    g.op(BO.LOGISTIC, [d], [s])
    g.inputs, g.outputs = [x], [t, s]
    return g.serialise("act: tanh and logistic lookup tables")


def model_kernels(rng):
    g = Graph()
    x = g.tensor("input", [1, 12, 12, 8], I8, 0.02, -1)
    d = conv(g, rng, "dw5", x, 0.02, 8, 8, 5, [1, 12, 12, 8], 0.05, -10, dw=True)
    e = conv(g, rng, "dil2", d, 0.05, 8, 16, 3, [1, 12, 12, 16], 0.08, 4, dilation=2)
    k = conv(g, rng, "k9", e, 0.08, 16, 8, 9, [1, 4, 4, 8], 0.2, 0, pad=VALID, act=ACT.RELU_N1_TO_1)
    g.inputs, g.outputs = [x], [e, k]
    return g.serialise("kernels: depthwise 5x5, dilation 2, a 9x9 kernel, RELU_N1_TO_1")


def model_fc(rng):
    g = Graph()
    x = g.tensor("input", [2, 64], I8, 0.03, 2)
    wsc = np.float32(0.005)
    w = g.tensor("fc/w", [40, 64], I8, wsc, 0, rng.integers(-127, 128, size=[40, 64], dtype=np.int8))
    bias = g.tensor("fc/b", [40], I32, np.float32(0.03 * wsc), 0, rng.integers(-500, 500, size=40).astype(np.int32))
    y = g.tensor("fc/out", [2, 40], I8, 0.04, -128)
    g.op(BO.FULLY_CONNECTED, [x, w, bias], [y], OPT.FullyConnectedOptions,
         table(FullyConnectedOptions, "FullyConnectedOptions", [("FusedActivationFunction", ACT.RELU)]))
    x2 = g.tensor("input2", [1, 5, 5, 40], I8, 0.03, 0)
    z = conv(g, rng, "pw", x2, 0.03, 40, 24, 1, [1, 5, 5, 24], 0.05, 5)
    g.inputs, g.outputs = [x, x2], [y, z]
    return g.serialise("fc: fully connected with batches, a 1x1 conv over 40 channels")


def model_concat3(rng):
    g = Graph()
    a = g.tensor("a", [1, 4, 4, 8], I8, 0.05, 0)
    b = g.tensor("b", [1, 4, 4, 8], I8, 0.05, 0)
    c = g.tensor("c", [1, 4, 4, 8], I8, 0.05, 0)
    d = g.tensor("d", [1, 4, 4, 24], I8, 0.05, 0)
    cat = g.tensor("concat", [1, 4, 4, 24], I8, 0.05, 0)
    g.op(BO.CONCATENATION, [c, b, a], [cat], OPT.ConcatenationOptions,
         table(ConcatenationOptions, "ConcatenationOptions", [("Axis", 3), ("FusedActivationFunction", ACT.NONE)]))
    y = g.tensor("out", [1, 4, 4, 24], I8, 0.1, 0)
    g.op(BO.ADD, [cat, d], [y], OPT.AddOptions, table(AddOptions, "AddOptions", [("FusedActivationFunction", ACT.NONE)]))
    g.inputs, g.outputs = [a, b, c, d], [y]
    return g.serialise("concat3: three inputs concatenated as c, b, a, plus a fourth")


def model_cat3(rng):
    g = Graph()
    a = g.tensor("a", [1, 4, 4, 8], I8, 0.05, 0)
    b = g.tensor("b", [1, 4, 4, 8], I8, 0.05, 0)
    c = g.tensor("c", [1, 4, 4, 8], I8, 0.05, 0)
    cat = g.tensor("concat", [1, 4, 4, 24], I8, 0.05, 0)
    g.op(BO.CONCATENATION, [a, b, c], [cat], OPT.ConcatenationOptions,
         table(ConcatenationOptions, "ConcatenationOptions", [("Axis", 3), ("FusedActivationFunction", ACT.NONE)]))
    g.inputs, g.outputs = [a, b, c], [cat]
    return g.serialise("cat3: three inputs concatenated in order")


def model_conv16(rng):
    g = Graph()
    x = g.tensor("input", [1, 6, 6, 8], I16, 0.0005, 0)
    y = conv(g, rng, "conv16", x, 0.0005, 8, 16, 3, [1, 6, 6, 16], 0.002, 0, act16=True)
    g.inputs, g.outputs = [x], [y]
    return g.serialise("conv16: int16 activations, int8 weights")


def model_mnet(rng):
    g = Graph()
    x = g.tensor("image", [1, 32, 32, 3], I8, 0.0078125, -1)
    c = conv(g, rng, "c0", x, 0.0078125, 3, 16, 3, [1, 16, 16, 16], 0.05, -128, stride=2, act=ACT.RELU6)
    d = conv(g, rng, "dw1", c, 0.05, 16, 16, 3, [1, 8, 8, 16], 0.04, -128, stride=2, dw=True, act=ACT.RELU)
    p = conv(g, rng, "pw1", d, 0.04, 16, 48, 1, [1, 8, 8, 48], 0.06, -5)
    d2 = conv(g, rng, "dw2", p, 0.06, 48, 48, 3, [1, 8, 8, 48], 0.05, 3, dw=True)
    s = g.tensor("res", [1, 8, 8, 48], I8, 0.08, 0)
    g.op(BO.ADD, [p, d2], [s], OPT.AddOptions, table(AddOptions, "AddOptions", [("FusedActivationFunction", ACT.NONE)]))
    a = pool(g, BO.AVERAGE_POOL_2D, s, [1, 1, 1, 48], 0.08, 0, 8, 1, VALID)
    shape = g.tensor("shape", [2], I32, data=np.array([1, 48], np.int32))
    r = g.tensor("flat", [1, 48], I8, 0.08, 0)
    g.op(BO.RESHAPE, [a, shape], [r])
    wsc = np.float32(0.006)
    w = g.tensor("fc/w", [10, 48], I8, wsc, 0, rng.integers(-127, 128, size=[10, 48], dtype=np.int8))
    b = g.tensor("fc/b", [10], I32, np.float32(0.08 * wsc), 0, rng.integers(-300, 300, size=10).astype(np.int32))
    y = g.tensor("logits", [1, 10], I8, 0.1, 10)
    g.op(BO.FULLY_CONNECTED, [r, w, b], [y], OPT.FullyConnectedOptions,
         table(FullyConnectedOptions, "FullyConnectedOptions", [("FusedActivationFunction", ACT.NONE)]))
    t = g.tensor("probs", [1, 10], I8, 1.0 / 256, -128)
    g.op(BO.LOGISTIC, [y], [t])
    g.inputs, g.outputs = [x], [t, s]
    return g.serialise("mnet: a small MobileNet-like network with a residual")


MODELS = {
    "pool": model_pool,
    "eltwise": model_eltwise,
    "act": model_act,
    "kernels": model_kernels,
    "fc": model_fc,
    "concat3": model_concat3,
    "conv16": model_conv16,
    "mnet": model_mnet,
    "cat3": model_cat3,
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    for i, (name, make) in enumerate(MODELS.items()):
        data = make(np.random.default_rng(4000 + i))
        with open(os.path.join(out, name + ".tflite"), "wb") as f:
            f.write(data)
        print(f"{name}.tflite {len(data)} bytes")


if __name__ == "__main__":
    main()
