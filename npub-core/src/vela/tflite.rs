//! Vela's optimised `.tflite`: the one `ethos-u` custom operator, its inputs, and the offsets of the
//! model's inputs and outputs in the scratch arena.
//!
//! | operator input | what                                              | taken as                        |
//! |----------------|---------------------------------------------------|---------------------------------|
//! | 0              | driver payload: COP1 header + command stream       | constant bytes                  |
//! | 1              | `read_only`: encoded weights, scales, LUTs         | constant bytes (region 0)       |
//! | 2              | `scratch`: the tensor arena                        | its tensor's size (region 1)    |
//! | 3              | `scratch_fast`                                     | its tensor's size (region 2), or 0 when it is input 2's tensor again |
//! | 4..            | the model's inputs, in order                       | IO bindings                     |
//! | outputs        | the model's outputs, in order                      | IO bindings                     |
//!
//! In the default `Shared_Sram` memory mode Vela passes the scratch tensor twice (inputs 2 and 3):
//! there is no separate fast memory, the stream never addresses BASEP2, and its size is 0 — what the
//! raw `.npz` of the same compilation says, so both imports give the same pack.
//!
//! `OfflineMemoryAllocation` metadata is Vela's int32 array `[version 0, subgraph count, tensor count,
//! offset of each tensor in the arena, -1 = not in it]`; it is where the stream expects each input
//! and output inside region 1.
use super::builtin_ops;
use super::extracted::{Extracted, screen};
use super::fb::{Fb, id};
use crate::io_bindings::{Dtype, IoBinding, IoKind, Name, Shape};
use crate::{Error, VelaError};

/// The custom code Vela gives its operator.
pub const ETHOS_U_CUSTOM_CODE: &str = "ethos-u";
/// The metadata entry holding arena offsets.
pub const OFFLINE_ALLOCATION: &str = "OfflineMemoryAllocation";
/// `OfflineMemoryAllocation` words before the offsets: version, subgraph count, tensor count.
const OFFLINE_HEADER_WORDS: usize = 3;
/// The fixed operator inputs before the model's own: payload, weights, scratch, scratch_fast.
const FIXED_INPUTS: usize = 4;
/// The region a COP1 stream addresses the model's inputs and outputs in.
const SCRATCH_REGION: u8 = 1;

/// What an operator code says an operator is.
#[derive(Clone, Copy)]
enum OpKind<'b> {
    EthosU,
    Builtin(i32),
    Custom(&'b str),
}

/// Reads a verified Vela `.tflite`.
pub fn extract(bytes: &[u8]) -> Result<Extracted<'_>, Error> {
    let fb = Fb::new(bytes)?;
    let model = fb.root()?;
    let subgraphs = fb.tables(model, id::MODEL_SUBGRAPHS)?;
    let [sg] = subgraphs[..] else {
        return Err(Error::Vela(VelaError::TfliteSubgraphCount {
            count: subgraphs.len() as u32,
        }));
    };
    let op = the_ethos_u_operator(&fb, model, sg)?;
    let tensors = fb.tables(sg, id::SUBGRAPH_TENSORS)?;
    let buffers = fb.tables(model, id::MODEL_BUFFERS)?;
    let tensor = |t: i32| index(&tensors, i64::from(t), "tensor");

    let inputs = int_vector(&fb, op, id::OPERATOR_INPUTS)?;
    let outputs = int_vector(&fb, op, id::OPERATOR_OUTPUTS)?;
    if inputs.len() < FIXED_INPUTS {
        return Err(Error::Vela(VelaError::EthosUInputs {
            count: inputs.len() as u32,
        }));
    }
    let payload = constant(&fb, &buffers, tensor(inputs[0])?, 0)?;
    screen(payload)?;
    let weights = constant(&fb, &buffers, tensor(inputs[1])?, 1)?;
    let scratch = tensor_bytes(&fb, tensor(inputs[2])?)?;
    let scratch_fast = if inputs[3] == inputs[2] {
        0
    } else {
        tensor_bytes(&fb, tensor(inputs[3])?)?
    };

    // The model's order, not the operator's: Vela may list the operator's inputs and outputs in
    // another order (three inputs of a CONCATENATION come out as c, b, a), and a binding's index
    // is what TFLite Micro's `input(i)` / `output(i)` hand the application.
    let model_inputs = int_vector(&fb, sg, id::SUBGRAPH_INPUTS)?;
    let model_outputs = int_vector(&fb, sg, id::SUBGRAPH_OUTPUTS)?;
    same_io(IoKind::Input, &inputs[FIXED_INPUTS..], &model_inputs)?;
    same_io(IoKind::Output, &outputs, &model_outputs)?;

    let offsets = offline_allocation(&fb, model, &buffers, tensors.len())?;
    let mut io = Vec::new();
    for (kind, list) in [
        (IoKind::Input, &model_inputs[..]),
        (IoKind::Output, &model_outputs[..]),
    ] {
        for (index, &t) in list.iter().enumerate() {
            let position = tensor(t)?;
            // `tensor` checked `t` against the tensor count, which equals the offsets' count.
            let offset = offsets.get(t as usize).copied().unwrap_or(-1);
            let binding = binding(&fb, position, kind, index as u32, offset)?;
            if binding.end() > scratch {
                return Err(Error::Vela(VelaError::IoOutsideRegion {
                    kind,
                    index: index as u32,
                    region: SCRATCH_REGION,
                    offset: u64::from(binding.offset),
                    bytes: u64::from(binding.bytes),
                    region_size: scratch,
                }));
            }
            io.push(binding);
        }
    }
    Ok(Extracted {
        payload: payload.into(),
        weights: weights.into(),
        scratch,
        scratch_fast,
        io,
        warnings: Vec::new(),
    })
}

/// Finds the single `ethos-u` operator, refusing a model that is not entirely on the NPU.
///
/// The order of the checks picks the most useful message: an uncompiled model (no `ethos-u`) says
/// "compile it"; a model with a CPU operator names that operator (it is also why Vela would have cut
/// the network into several `ethos-u` parts); only then is a second `ethos-u` reported on its own.
fn the_ethos_u_operator(fb: &Fb<'_>, model: usize, sg: usize) -> Result<usize, Error> {
    let codes = fb
        .tables(model, id::MODEL_OPERATOR_CODES)?
        .into_iter()
        .map(|c| op_kind(fb, c))
        .collect::<Result<Vec<_>, _>>()?;
    let operators = fb.tables(sg, id::SUBGRAPH_OPERATORS)?;
    let mut npu = Vec::new();
    let mut first_cpu = None;
    for &op in &operators {
        let code = fb.u32(op, id::OPERATOR_OPCODE_INDEX, 0)?;
        match index(&codes, i64::from(code), "operator code")? {
            OpKind::EthosU => npu.push(op),
            other => {
                first_cpu.get_or_insert(other);
            }
        }
    }
    if npu.is_empty() {
        return Err(Error::Vela(VelaError::NoEthosUOperator {
            operators: operators.len() as u32,
        }));
    }
    match first_cpu {
        Some(OpKind::Builtin(code)) => Err(Error::Vela(VelaError::CpuOperator {
            op: builtin_ops::name(code).unwrap_or(""),
            code,
        })),
        Some(OpKind::Custom(name)) => Err(Error::Vela(VelaError::CpuCustomOperator {
            name: Name::truncated(name),
        })),
        _ if npu.len() > 1 => Err(Error::Vela(VelaError::MultipleEthosU {
            count: npu.len() as u32,
        })),
        _ => Ok(npu[0]),
    }
}

fn op_kind<'b>(fb: &Fb<'b>, code: usize) -> Result<OpKind<'b>, Error> {
    if let Some(custom) = fb.string(code, id::OPCODE_CUSTOM_CODE)? {
        return Ok(if custom == ETHOS_U_CUSTOM_CODE {
            OpKind::EthosU
        } else {
            OpKind::Custom(custom)
        });
    }
    // schema.fbs: codes below 127 are in the deprecated byte field, newer ones only in
    // `builtin_code`; the larger of the two is the operator.
    let deprecated = fb.i8(code, id::OPCODE_DEPRECATED_BUILTIN, 0)?;
    let builtin = fb.i32(code, id::OPCODE_BUILTIN, 0)?;
    Ok(OpKind::Builtin(builtin.max(i32::from(deprecated))))
}

fn index<T: Copy>(list: &[T], i: i64, what: &'static str) -> Result<T, Error> {
    usize::try_from(i)
        .ok()
        .and_then(|i| list.get(i).copied())
        .ok_or(Error::Vela(VelaError::TfliteIndexOutOfRange {
            what,
            index: i,
            len: list.len() as u32,
        }))
}

fn int_vector(fb: &Fb<'_>, table: usize, field: u16) -> Result<Vec<i32>, Error> {
    Ok(fb
        .vector::<i32>(table, field)?
        .map(|v| v.iter().collect())
        .unwrap_or_default())
}

/// The operator's inputs from 4 on (or its outputs) must be the model's, each once, in any order:
/// the bindings follow the model's order (what TFLite Micro's `input(i)` / `output(i)` hand the
/// application), and the stream finds every tensor at its arena offset whatever the operator's
/// order. A tensor of the model's that the operator does not take (or one it takes that is not
/// the model's) means a CPU operator sits between them.
fn same_io(kind: IoKind, operator: &[i32], model: &[i32]) -> Result<(), Error> {
    let mismatch = |position: usize| {
        Error::Vela(VelaError::IoMismatch {
            kind,
            position: position as u32,
            operator_tensor: operator.get(position).map_or(-1, |&t| i64::from(t)),
            model_tensor: model.get(position).map_or(-1, |&t| i64::from(t)),
        })
    };
    if operator.len() != model.len() {
        return Err(mismatch(operator.len().min(model.len())));
    }
    for (i, t) in model.iter().enumerate() {
        if operator.iter().filter(|&o| o == t).count() != 1 {
            return Err(mismatch(i));
        }
    }
    Ok(())
}

/// The constant bytes of operator input `input` (0 payload, 1 weights). Weights may be absent
/// (a network with none); the payload may not.
fn constant<'b>(
    fb: &Fb<'b>,
    buffers: &[usize],
    tensor: usize,
    input: u32,
) -> Result<&'b [u8], Error> {
    let b = index(
        buffers,
        i64::from(fb.u32(tensor, id::TENSOR_BUFFER, 0)?),
        "buffer",
    )?;
    let offset = fb.u64(b, id::BUFFER_OFFSET, 0)?;
    // schema.fbs: `offset > 1` means the data follows the flatbuffer (models over 2 GB).
    if offset > 1 {
        return Err(Error::Vela(VelaError::TfliteExternalBuffer {
            input,
            offset,
        }));
    }
    let data = fb
        .vector::<u8>(b, id::BUFFER_DATA)?
        .map(|v| v.bytes())
        .unwrap_or_default();
    if data.is_empty() && input == 0 {
        return Err(Error::Vela(VelaError::TfliteConstantMissing { input }));
    }
    let tensor_bytes = tensor_bytes(fb, tensor)?;
    if data.len() as u64 != tensor_bytes {
        return Err(Error::Vela(VelaError::TfliteConstantSizeMismatch {
            input,
            data_bytes: data.len() as u64,
            tensor_bytes,
        }));
    }
    Ok(data)
}

/// Bytes of a tensor: elements × element size (negative dimensions count as 0, and are refused
/// for IO tensors by [`binding`]).
fn tensor_bytes(fb: &Fb<'_>, tensor: usize) -> Result<u64, Error> {
    let ttype = fb.i8(tensor, id::TENSOR_TYPE, 0)?;
    let size = tflite_dtype(ttype).map_or(1, |d| u64::from(d.size()));
    let elements = int_vector(fb, tensor, id::TENSOR_SHAPE)?
        .iter()
        .try_fold(1u64, |acc, &d| {
            acc.checked_mul(u64::try_from(d).unwrap_or(0))
        });
    Ok(elements
        .and_then(|e| e.checked_mul(size))
        .unwrap_or(u64::MAX))
}

/// TFLite `TensorType` → binding dtype.
fn tflite_dtype(code: i8) -> Option<Dtype> {
    Some(match code {
        0 => Dtype::Float32,
        1 => Dtype::Float16,
        2 => Dtype::Int32,
        3 => Dtype::Uint8,
        4 => Dtype::Int64,
        6 => Dtype::Bool,
        7 => Dtype::Int16,
        9 => Dtype::Int8,
        15 => Dtype::Uint32,
        16 => Dtype::Uint16,
        _ => return None,
    })
}

/// The offsets of subgraph 0's tensors in the arena, checked against Vela's layout.
fn offline_allocation(
    fb: &Fb<'_>,
    model: usize,
    buffers: &[usize],
    tensor_count: usize,
) -> Result<Vec<i32>, Error> {
    let mut data = None;
    for m in fb.tables(model, id::MODEL_METADATA)? {
        if fb.string(m, id::METADATA_NAME)? == Some(OFFLINE_ALLOCATION) {
            let b = index(
                buffers,
                i64::from(fb.u32(m, id::METADATA_BUFFER, 0)?),
                "buffer",
            )?;
            data = fb.vector::<u8>(b, id::BUFFER_DATA)?.map(|v| v.bytes());
        }
    }
    let data = data.ok_or(Error::Vela(VelaError::TfliteNoOfflineAllocation))?;
    let bad =
        |problem, value: i64| Error::Vela(VelaError::TfliteBadOfflineAllocation { problem, value });
    if data.len() % 4 != 0 {
        return Err(bad("its length is not a multiple of 4", data.len() as i64));
    }
    let words: Vec<i32> = data
        .chunks_exact(4)
        .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let [version, subgraphs, count, ..] = words[..] else {
        return Err(bad("fewer than 3 words", words.len() as i64));
    };
    if version != 0 {
        return Err(bad("version is not 0", version.into()));
    }
    if subgraphs != 1 {
        return Err(bad("subgraph count is not 1", subgraphs.into()));
    }
    if i64::from(count) != tensor_count as i64 {
        return Err(bad(
            "tensor count differs from the subgraph's",
            count.into(),
        ));
    }
    if words.len() != OFFLINE_HEADER_WORDS + tensor_count {
        return Err(bad(
            "word count is not 3 + tensor count",
            words.len() as i64,
        ));
    }
    Ok(words[OFFLINE_HEADER_WORDS..].to_vec())
}

/// One IO tensor's binding.
fn binding(
    fb: &Fb<'_>,
    tensor: usize,
    kind: IoKind,
    index: u32,
    offset: i32,
) -> Result<IoBinding, Error> {
    let offset =
        u32::try_from(offset).map_err(|_| Error::Vela(VelaError::IoNotInArena { kind, index }))?;
    let dims = int_vector(fb, tensor, id::TENSOR_SHAPE)?;
    let dims = dims
        .iter()
        .map(|&d| {
            u32::try_from(d).map_err(|_| {
                Error::Vela(VelaError::IoNegativeDim {
                    kind,
                    index,
                    dim: d.into(),
                })
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let shape = Shape::new(&dims).ok_or(Error::Vela(VelaError::IoRankTooLarge {
        kind,
        index,
        rank: dims.len() as u64,
    }))?;
    let ttype = fb.i8(tensor, id::TENSOR_TYPE, 0)?;
    let dtype = tflite_dtype(ttype).ok_or(Error::Vela(VelaError::IoUnsupportedDtype {
        kind,
        index,
        tflite_type: ttype,
    }))?;
    let bytes = shape
        .elements()
        .and_then(|e| e.checked_mul(u64::from(dtype.size())))
        .unwrap_or(u64::MAX);
    let bytes = u32::try_from(bytes)
        .map_err(|_| Error::Vela(VelaError::IoTooLarge { kind, index, bytes }))?;
    let (scale, zero_point) = quantisation(fb, tensor, kind, index)?;
    Ok(IoBinding {
        kind,
        index,
        name: Name::truncated(fb.string(tensor, id::TENSOR_NAME)?.unwrap_or("")),
        region: SCRATCH_REGION,
        offset,
        bytes,
        shape,
        dtype,
        scale,
        zero_point,
    })
}

/// Per-tensor quantisation: (scale, zero point), (0.0, 0) when not quantised.
fn quantisation(fb: &Fb<'_>, tensor: usize, kind: IoKind, index: u32) -> Result<(f32, i32), Error> {
    let Some(q) = fb.table(tensor, id::TENSOR_QUANTIZATION)? else {
        return Ok((0.0, 0));
    };
    let scales: Vec<f32> = fb
        .vector::<f32>(q, id::QUANT_SCALE)?
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let zero_points: Vec<i64> = fb
        .vector::<i64>(q, id::QUANT_ZERO_POINT)?
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    per_tensor(kind, index, &scales, &zero_points)
}

/// Reduces quantisation vectors to one (scale, zero point), refusing per-channel parameters.
pub(super) fn per_tensor(
    kind: IoKind,
    index: u32,
    scales: &[f32],
    zero_points: &[i64],
) -> Result<(f32, i32), Error> {
    if scales.len() > 1 {
        return Err(Error::Vela(VelaError::PerChannelIo {
            kind,
            index,
            channels: scales.len() as u64,
        }));
    }
    // TFLite: "zero_point" may be omitted for a symmetric tensor; otherwise one per scale.
    if zero_points.len() > scales.len() {
        return Err(Error::Vela(VelaError::IoQuantisationMismatch {
            kind,
            index,
            scales: scales.len() as u64,
            zero_points: zero_points.len() as u64,
        }));
    }
    let Some(&scale) = scales.first() else {
        return Ok((0.0, 0));
    };
    let zp = zero_points.first().copied().unwrap_or(0);
    let zero_point = i32::try_from(zp).map_err(|_| {
        Error::Vela(VelaError::IoZeroPointRange {
            kind,
            index,
            zero_point: zp,
        })
    })?;
    Ok((scale, zero_point))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_tensor_parameters_are_kept() {
        assert_eq!(per_tensor(IoKind::Input, 0, &[0.5], &[-3]), Ok((0.5, -3)));
        // A symmetric tensor may omit its zero point.
        assert_eq!(per_tensor(IoKind::Input, 0, &[0.5], &[]), Ok((0.5, 0)));
        assert_eq!(per_tensor(IoKind::Input, 0, &[], &[]), Ok((0.0, 0)));
    }

    #[test]
    fn rejects_per_channel_io_quantisation() {
        assert_eq!(
            per_tensor(IoKind::Output, 1, &[0.5, 0.25], &[0, 0]),
            Err(Error::Vela(VelaError::PerChannelIo {
                kind: IoKind::Output,
                index: 1,
                channels: 2
            }))
        );
    }

    #[test]
    fn rejects_inconsistent_io_quantisation() {
        assert_eq!(
            per_tensor(IoKind::Input, 0, &[], &[4]),
            Err(Error::Vela(VelaError::IoQuantisationMismatch {
                kind: IoKind::Input,
                index: 0,
                scales: 0,
                zero_points: 1
            }))
        );
        assert_eq!(
            per_tensor(IoKind::Input, 0, &[1.0], &[1 << 40]),
            Err(Error::Vela(VelaError::IoZeroPointRange {
                kind: IoKind::Input,
                index: 0,
                zero_point: 1 << 40
            }))
        );
    }

    #[test]
    fn rejects_operator_io_that_is_not_the_models() {
        assert_eq!(same_io(IoKind::Input, &[3, 4], &[3, 4]), Ok(()));
        // Another order is the same tensors: the bindings follow the model's.
        assert_eq!(same_io(IoKind::Input, &[5, 4, 3], &[3, 4, 5]), Ok(()));
        assert!(same_io(IoKind::Input, &[3, 3], &[3, 4]).is_err());
        assert_eq!(
            same_io(IoKind::Input, &[3], &[3, 4]),
            Err(Error::Vela(VelaError::IoMismatch {
                kind: IoKind::Input,
                position: 1,
                operator_tensor: -1,
                model_tensor: 4
            }))
        );
    }
}
