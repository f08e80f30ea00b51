//! What either of Vela's forms holds for a pack before its driver payload is opened, and the first
//! look at that payload: `tflite.rs` and `npz.rs` produce the one, call the other.
use std::borrow::Cow;

use super::warning::Warning;
use crate::format::cop1;
use crate::io_bindings::IoBinding;
use crate::{Error, VelaError};

/// What either form holds for a pack, before the COP1 payload is opened.
#[derive(Debug)]
pub(super) struct Extracted<'b> {
    pub(super) payload: Cow<'b, [u8]>,
    pub(super) weights: Cow<'b, [u8]>,
    pub(super) scratch: u64,
    pub(super) scratch_fast: u64,
    pub(super) io: Vec<IoBinding>,
    pub(super) warnings: Vec<Warning>,
}

/// The driver payload, checked as soon as a reader holds it and before any IO metadata: its format
/// (COP1, not COP2) and its target (an Ethos-U55). A COP2 or Ethos-U85 compilation lays its tensors
/// out differently, and a refusal about its IO would hide the one flag to change.
pub(super) fn screen(payload: &[u8]) -> Result<cop1::Cop1<'_>, Error> {
    let checked = cop1::parse(payload)?;
    if !checked.accel.is_u55() {
        return Err(Error::Vela(VelaError::NotU55 {
            config: checked.info.config,
        }));
    }
    Ok(checked)
}
