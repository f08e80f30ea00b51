//! (std) The host simulator's NPU: the functional model (`npu-model`) runs the pack as the
//! slot's bytes hold it, read from the file that backs the simulator's flash, so that a byte
//! that changed in flash after the signature check changes the self-test's outputs as it would
//! on an Ethos-U55.
//!
//! | call        | what it does                                                                 |
//! |-------------|------------------------------------------------------------------------------|
//! | `program`   | remembers the registers (the pack's XIP address among them)                  |
//! | `self_test` | no golden input, or no IO bindings to split it by: `Ok(None)` (skipped); else reads the pack at `regs.pack − xip_base` from the flash file (its length from its NPU1 header), runs the golden input (split per model input by the IO bindings) and answers the SHA-256 of the outputs, concatenated in the model's order |
//!
//! Failure codes: [`CODE_READ`] (the flash file cannot be read), [`CODE_PACK`] (the bytes are
//! not a pack the model loads), [`CODE_INPUT`] (the golden input does not fit the model's
//! inputs), [`CODE_RUN`] (the model refuses an operation).
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use npub_core::io_bindings::{IoBinding, IoBindings};

use crate::npu::{Npu, NpuRegisters, SelfTestResult};

/// The flash file could not be read.
pub const CODE_READ: u32 = 0x5e1f_0001;
/// The slot does not hold a pack the functional model loads.
pub const CODE_PACK: u32 = 0x5e1f_0002;
/// The golden input is not the model's inputs' size.
pub const CODE_INPUT: u32 = 0x5e1f_0003;
/// The functional model could not run the pack.
pub const CODE_RUN: u32 = 0x5e1f_0004;

/// The functional model as an NPU.
#[derive(Debug, Clone)]
pub struct ModelNpu {
    flash_file: PathBuf,
    xip_base: u32,
    io: Vec<IoBinding>,
    programmed: Option<NpuRegisters>,
    /// Golden inferences run.
    pub runs: u32,
}

impl ModelNpu {
    /// An NPU reading packs from `flash_file` (flash offset 0 = bus address `xip_base`), whose
    /// application binds `io` (empty: the golden input cannot be split per model input, and
    /// the self-test answers `Ok(None)`: skipped).
    pub fn new(flash_file: PathBuf, xip_base: u32, io: Vec<IoBinding>) -> Self {
        Self {
            flash_file,
            xip_base,
            io,
            programmed: None,
            runs: 0,
        }
    }

    /// [`ModelNpu::new`] with the application's IO bindings in their canonical encoding (the
    /// simulator's `--io`); bindings that do not parse bind nothing.
    pub fn with_canonical_io(flash_file: PathBuf, xip_base: u32, io: Option<&[u8]>) -> Self {
        let io = io
            .and_then(|b| IoBindings::parse(b).ok())
            .map(|b| b.iter().collect())
            .unwrap_or_default();
        Self::new(flash_file, xip_base, io)
    }

    fn pack(&self, regs: &NpuRegisters) -> Result<Vec<u8>, u32> {
        let at = regs.pack.checked_sub(self.xip_base).ok_or(CODE_READ)?;
        let mut f = std::fs::File::open(&self.flash_file).map_err(|_| CODE_READ)?;
        f.seek(SeekFrom::Start(u64::from(at)))
            .map_err(|_| CODE_READ)?;
        let mut header = [0u8; npub_core::format::HEADER_BYTES as usize];
        f.read_exact(&mut header).map_err(|_| CODE_READ)?;
        let total = npub_core::format::Header::read(&header)
            .ok_or(CODE_PACK)?
            .total_bytes;
        let mut pack = header.to_vec();
        pack.resize(total as usize, 0);
        f.read_exact(&mut pack[header.len()..])
            .map_err(|_| CODE_READ)?;
        Ok(pack)
    }
}

impl Npu for ModelNpu {
    fn program(&mut self, regs: &NpuRegisters) {
        self.programmed = Some(*regs);
    }

    fn unbind(&mut self) {
        self.programmed = None;
    }

    fn self_test(&mut self, regs: &NpuRegisters, golden: Option<&[u8]>) -> SelfTestResult {
        if self.programmed.as_ref() != Some(regs) {
            return Err(u32::MAX);
        }
        let Some(golden) = golden else {
            return Ok(None);
        };
        if self.io.is_empty() {
            // Without the application's bindings the input cannot be split: skipped, and the
            // simulator says so.
            return Ok(None);
        }
        let pack = self.pack(regs)?;
        let inputs = npu_model::golden::split_input(&self.io, golden).ok_or(CODE_INPUT)?;
        let model = npu_model::Model::load_as_bound(&pack, &self.io).map_err(|_| CODE_PACK)?;
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let outputs = model.run(&refs).map_err(|_| CODE_RUN)?;
        self.runs += 1;
        Ok(Some(npu_model::golden::output_digest(&outputs)))
    }
}
