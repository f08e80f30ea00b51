//! IO bindings: where a pack's inputs and outputs live, and how to read them.
//!
//! A default (COP1) Vela command stream addresses the model's inputs and outputs *inside* the scratch
//! region (BASEP1) at offsets Vela chose, so no NPU1 region descriptor can say where an input is. The
//! bindings travel beside the blob: as a JSON file for people and tools (`OUT.io.json`, see
//! `docs/io-bindings.md`), and in the canonical binary encoding below, which the signed manifest
//! digests ([`digest`]) and which a device reads in place ([`IoBindings::parse`]) to know where to
//! write its inputs before the NPU runs and where to read its outputs after.
//!
//! ## Canonical encoding (version 1)
//!
//! All fields little-endian. A header, then `count` fixed-size records; nothing else.
//!
//! | Offset | Size | Field          | Meaning                                                       |
//! |--------|------|----------------|---------------------------------------------------------------|
//! | 0      | 4    | `magic`        | [`MAGIC`] = `0x4F49504E`, bytes `4e 50 49 4f` ("NPIO")        |
//! | 4      | 4    | `version`      | [`VERSION`] = 1                                               |
//! | 8      | 4    | `count`        | records that follow, at most [`MAX_BINDINGS`]                 |
//! | 12     | 4    | `record_bytes` | [`RECORD_BYTES`] = 96; any other value is rejected            |
//! | 16     | 96 × count | records | inputs first, then outputs, each in index order 0, 1, 2 …    |
//!
//! A record ([`RECORD_BYTES`] = 96 bytes):
//!
//! | Offset | Size | Field        | Meaning                                                          |
//! |--------|------|--------------|------------------------------------------------------------------|
//! | 0      | 1    | `kind`       | 0 input, 1 output ([`IoKind`])                                   |
//! | 1      | 1    | `dtype`      | element type code ([`Dtype`])                                    |
//! | 2      | 1    | `rank`       | 0..=[`MAX_RANK`]                                                 |
//! | 3      | 1    | `region`     | the region (BASEP slot) holding the tensor, `< 8`                |
//! | 4      | 4    | `index`      | the model's input (or output) number                             |
//! | 8      | 4    | `offset`     | byte offset of the tensor inside the region                      |
//! | 12     | 4    | `bytes`      | tensor size: product of `shape` × element size                   |
//! | 16     | 24   | `shape`      | [`MAX_RANK`] × `u32`, the first `rank` used, the rest 0           |
//! | 40     | 4    | `scale`      | `f32` quantisation scale; 0.0 = not quantised                     |
//! | 44     | 4    | `zero_point` | `i32` quantisation zero point; 0 when not quantised               |
//! | 48     | 48   | `name`       | UTF-8, zero-padded, no NUL inside; at most [`NAME_BYTES`] bytes   |
//!
//! **Canonical** means one byte string per set of bindings, so equal bindings give equal digests:
//! the parser rejects unused shape slots or name bytes that are not zero, a NUL inside a name,
//! records out of order, a `bytes` that disagrees with `shape` × element size, a negative, NaN,
//! infinite or negative-zero scale, and a zero point without a scale.
//!
//! **Quantisation is per tensor.** TFLite quantises activations (and so every input and output of an
//! `ethos-u` operator) per tensor; only constant weights are quantised per channel. An IO tensor with
//! per-channel parameters is refused at import rather than silently reduced to its first channel, which
//! would make the application scale every other channel wrongly.
//!
//! **Names** longer than [`NAME_BYTES`] are cut at import at the last UTF-8 character boundary that
//! fits. The name is informational: a binding is identified by `kind` and `index`, which are the
//! positions TFLite Micro's `input(i)` / `output(i)` use.

mod encoding;
mod fields;
#[cfg(feature = "std")]
mod json;

#[cfg(feature = "alloc")]
pub use encoding::encode;
pub use encoding::{IoBinding, IoBindings, digest};
pub use fields::{
    Dtype, HEADER_BYTES, IoKind, MAGIC, MAX_BINDINGS, MAX_RANK, MAX_REGION, NAME_BYTES, Name,
    RECORD_BYTES, Shape, VERSION,
};
#[cfg(feature = "std")]
pub use json::{IoBindingsJson, JSON_FORMAT, from_json, to_json};
