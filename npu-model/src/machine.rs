//! The machine state — regions (BASEP0..7), SHRAM, the register file — and the walk over a
//! verified command stream.
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use npub_core::cmdstream::{self, Command, OpCode, Reg, RegisterFile};

/// Registers in the file (one param slot each).
const REGISTER_COUNT: usize = Reg::ALL.len();

use crate::error::RunError;
use crate::ops;
use crate::ops::Order;

/// The memories an operation can touch, sized exactly as the pack declares them. A baked region
/// is read in place from the pack until something writes to it.
pub struct Mem<'p> {
    regions: Vec<Cow<'p, [u8]>>,
    /// The NPU's internal buffer; LUTs live at its top.
    pub shram: Vec<u8>,
    /// Per region, per byte: 1 + the command offset of the last operation that wrote it (0 =
    /// none), when the caller asked for writers; empty otherwise.
    writers: Vec<Vec<u32>>,
    /// Multiply-accumulates (and element visits) the rest of the run may still spend.
    work_left: u64,
}

/// Work budget of a run, per byte of the pack's memory (regions and SHRAM): a real network
/// spends a few hundred multiply-accumulates per byte it holds; a corrupt or hostile stream
/// (a 65 536-wide kernel swept over padding, thousands of repeated operations) stops here
/// instead of running for hours.
pub const WORK_PER_BYTE: u64 = 4096;
/// The budget of a run on a tiny pack.
pub const WORK_MIN: u64 = 1 << 26;

impl<'p> Mem<'p> {
    /// Regions with these contents, SHRAM of `shram` bytes; `track` records writers.
    pub fn new(regions: Vec<Cow<'p, [u8]>>, shram: usize, track: bool) -> Self {
        let writers = if track {
            regions.iter().map(|r| vec![0; r.len()]).collect()
        } else {
            Vec::new()
        };
        let bytes: u64 = regions.iter().map(|r| r.len() as u64).sum::<u64>() + shram as u64;
        Mem {
            regions,
            shram: vec![0; shram],
            writers,
            work_left: bytes.saturating_mul(WORK_PER_BYTE).max(WORK_MIN),
        }
    }

    /// Region `r`'s bytes (empty for one the pack does not have; the verifier refuses any access
    /// to those).
    pub fn region(&self, r: u8) -> &[u8] {
        self.regions.get(usize::from(r)).map_or(&[], |v| v)
    }

    /// Region `r`, mutable.
    pub fn region_mut(&mut self, r: u8) -> Option<&mut [u8]> {
        self.regions
            .get_mut(usize::from(r))
            .map(|c| c.to_mut().as_mut_slice())
    }

    /// The command offset of the operation that last wrote byte `a` of region `r`.
    pub fn writer(&self, r: u8, a: usize) -> Option<u32> {
        let w = *self.writers.get(usize::from(r))?.get(a)?;
        w.checked_sub(1)
    }

    /// Stores `bytes` at `a` in region `r`.
    pub fn store(&mut self, r: u8, a: i64, bytes: &[u8], site: &Site<'_>) -> Result<(), RunError> {
        let out = || RunError::OutOfRange {
            offset: site.offset,
            op: site.name,
            region: r,
            address: a,
        };
        let start = usize::try_from(a).map_err(|_| out())?;
        let end = start.checked_add(bytes.len()).ok_or_else(out)?;
        let region = self.region_mut(r).ok_or_else(out)?;
        region
            .get_mut(start..end)
            .ok_or_else(out)?
            .copy_from_slice(bytes);
        if let Some(w) = self.writers.get_mut(usize::from(r)) {
            w[start..end].fill(site.offset + 1);
        }
        Ok(())
    }

    /// Records `site` as the writer of `[start, end)` of region `r` (a DMA).
    pub fn mark(&mut self, r: u8, start: usize, end: usize, offset: u32) {
        if let Some(w) = self.writers.get_mut(usize::from(r)) {
            if let Some(s) = w.get_mut(start..end) {
                s.fill(offset + 1);
            }
        }
    }

    /// Takes `work` (multiply-accumulates, or elements visited) from the run's budget, refusing
    /// the operation if it would overdraw it.
    pub fn spend(&mut self, site: &Site<'_>, work: u128) -> Result<(), RunError> {
        match u64::try_from(work).ok().filter(|&w| w <= self.work_left) {
            Some(w) => {
                self.work_left -= w;
                Ok(())
            }
            None => Err(site.unsupported(
                "more work than the run's budget (4096 multiply-accumulates per byte of the pack's memory)",
            )),
        }
    }

    /// The most weights one operation may decode: 16 per byte of the pack's regions (at least
    /// 1 Mi). A real operation's weights are far fewer than the bytes it reads and writes; this
    /// only bounds what a corrupt stream can make the model allocate.
    pub fn weight_limit(&self) -> usize {
        let bytes: usize = self.regions.iter().map(|r| r.len()).sum::<usize>() + self.shram.len();
        bytes.saturating_mul(16).max(1 << 20)
    }
}

/// Decoded weights kept between runs of one [`crate::Model`]: per operation (command offset),
/// the compressed bytes and traversal they came from, and the dense result.
#[derive(Default)]
pub struct WeightCache {
    entries: Mutex<HashMap<u32, CachedWeights>>,
}

/// One operation's decoded weights and what they were decoded from.
pub struct CachedWeights {
    /// The compressed stream.
    pub stream: Vec<u8>,
    /// The traversal.
    pub order: Order,
    /// The dense weights.
    pub dense: Arc<Vec<i16>>,
}

impl WeightCache {
    /// The dense weights for `stream` decoded in `order` at operation `offset`, from the cache if
    /// the same bytes were decoded there before, else from `decode` (and then kept).
    pub fn get_or_decode(
        &self,
        offset: u32,
        stream: &[u8],
        order: &Order,
        decode: impl FnOnce() -> Result<Vec<i16>, RunError>,
    ) -> Result<Arc<Vec<i16>>, RunError> {
        if let Ok(map) = self.entries.lock() {
            if let Some(c) = map.get(&offset) {
                if c.stream == stream && c.order == *order {
                    return Ok(Arc::clone(&c.dense));
                }
            }
        }
        let dense = Arc::new(decode()?);
        if let Ok(mut map) = self.entries.lock() {
            map.insert(
                offset,
                CachedWeights {
                    stream: stream.to_vec(),
                    order: *order,
                    dense: Arc::clone(&dense),
                },
            );
        }
        Ok(dense)
    }
}

/// One operation being executed: where it is and what the registers hold.
pub struct Site<'a> {
    /// Byte offset of its command.
    pub offset: u32,
    /// Its name for messages.
    pub name: &'static str,
    regs: &'a RegisterFile,
    params: &'a [u16; REGISTER_COUNT],
    /// MACs of the accelerator (decides the weight micro-block depth).
    pub macs: u32,
    /// Decoded weights of earlier runs.
    pub cache: &'a WeightCache,
}

impl Site<'_> {
    /// A register's value; one the stream never set reads as its reset value, 0 (the verifier
    /// already refused unset address-deciding registers).
    #[inline]
    pub fn get(&self, reg: Reg) -> u32 {
        self.regs.read(reg).unwrap_or(0)
    }

    /// The param (bits 31:16) of the cmd1 command that last wrote `reg`: the shift of
    /// `OFM_SCALE`, `OPA_SCALE`, `OPB_SCALE`.
    pub fn param(&self, reg: Reg) -> u32 {
        u32::from(self.params[reg as usize])
    }

    /// Whether the stream has set `reg`.
    pub fn is_set(&self, reg: Reg) -> bool {
        self.regs.read(reg).is_some()
    }

    /// A `*_M1` register plus one.
    pub fn m1(&self, reg: Reg) -> usize {
        self.get(reg) as usize + 1
    }

    /// A "this register value cannot be used" error.
    pub fn bad(&self, reg: Reg, value: u32, problem: &'static str) -> RunError {
        RunError::BadRegister {
            offset: self.offset,
            op: self.name,
            reg: reg.name(),
            value,
            problem,
        }
    }

    /// A "not implemented" error.
    pub fn unsupported(&self, what: &'static str) -> RunError {
        RunError::Unsupported {
            offset: self.offset,
            op: self.name,
            what,
        }
    }
}

/// Executes `cmd` (already accepted by the verifier) on `mem`.
pub fn execute(
    cmd: &[u8],
    mem: &mut Mem<'_>,
    macs: u32,
    cache: &WeightCache,
) -> Result<(), RunError> {
    let mut regs = RegisterFile::new();
    let mut params = [0u16; REGISTER_COUNT];
    for item in cmdstream::commands(cmd) {
        let (offset, command) = item.map_err(RunError::Pack)?;
        match command {
            Command::Set { reg, value, param } => {
                regs.write(reg, value);
                params[reg as usize] = param;
            }
            Command::Op {
                code: OpCode::Stop, ..
            } => return Ok(()),
            Command::Op { code, param } => {
                let site = Site {
                    offset,
                    name: op_name(code, param),
                    regs: &regs,
                    params: &params,
                    macs,
                    cache,
                };
                ops::run(code, param, &site, mem)?;
            }
        }
    }
    Ok(())
}

/// The name an error gives an operation: Vela's, with the mode for POOL and ELEMENTWISE.
pub fn op_name(code: OpCode, param: u16) -> &'static str {
    match code {
        OpCode::Conv => "CONV",
        OpCode::Depthwise => "DEPTHWISE",
        OpCode::Pool => match param {
            0 => "POOL MAX",
            1 => "POOL AVERAGE",
            2 => "POOL REDUCE_SUM",
            _ => "POOL",
        },
        OpCode::Elementwise => match param {
            0 => "ELEMENTWISE MUL",
            1 => "ELEMENTWISE ADD",
            2 => "ELEMENTWISE SUB",
            3 => "ELEMENTWISE MIN",
            4 => "ELEMENTWISE MAX",
            5 => "ELEMENTWISE LRELU",
            6 => "ELEMENTWISE ABS",
            7 => "ELEMENTWISE CLZ",
            8 => "ELEMENTWISE SHR",
            9 => "ELEMENTWISE SHL",
            _ => "ELEMENTWISE",
        },
        OpCode::DmaStart => "DMA_START",
        OpCode::DmaWait => "DMA_WAIT",
        OpCode::KernelWait => "KERNEL_WAIT",
        OpCode::PmuMask => "PMU_MASK",
        OpCode::Irq => "IRQ",
        OpCode::Stop => "STOP",
    }
}
