//! One file per kind of operation; [`run`] dispatches on the opcode.
use npub_core::cmdstream::OpCode;

use crate::error::RunError;
use crate::machine::{Mem, Site};

mod conv;
mod dma;
mod elementwise;
mod kernel;
mod output;
mod pool;
mod weights;

pub use weights::Order;

/// Executes one operation.
pub fn run(code: OpCode, param: u16, site: &Site<'_>, mem: &mut Mem<'_>) -> Result<(), RunError> {
    match code {
        OpCode::Conv => conv::run(site, mem, false),
        OpCode::Depthwise => conv::run(site, mem, true),
        OpCode::Pool => pool::run(site, mem, param),
        OpCode::Elementwise => elementwise::run(site, mem, param),
        OpCode::DmaStart => dma::run(site, mem),
        // Synchronisation and profiling: the model runs one operation at a time.
        OpCode::DmaWait | OpCode::KernelWait | OpCode::PmuMask | OpCode::Irq | OpCode::Stop => {
            Ok(())
        }
    }
}
