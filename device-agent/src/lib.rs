//! # device-agent
//!
//! The half of npub that runs on the RA8P1 (Cortex-M85 + Ethos-U55, OSPI NOR flash): it fetches a
//! signed manifest, streams the pack into the inactive of two flash slots, re-validates it *as it
//! sits in flash*, binds it to the NPU, and survives a power cut at any instant.
//!
//! | file          | one idea                                                                    |
//! |---------------|-----------------------------------------------------------------------------|
//! | `layout.rs`   | where the journal and the two slots live (a table)                          |
//! | `journal.rs`  | the power-cut-safe state record, two banks, CRC, sequence numbers           |
//! | `state.rs`    | what is remembered and the only transitions allowed                          |
//! | `verify.rs`   | the one pass over a slot in flash; [`VerifiedSlot`] is the only proof of it |
//! | `install.rs`  | manifest → download → verify → pending → bind → self-test → confirmed       |
//! | `boot.rs`     | choose, re-validate, bind; trial boots and revert                           |
//! | `npu.rs`      | the Ethos-U55 register model: QBASE/QSIZE, BASEP0..7                         |
//! | `transport.rs`| the fleet server as three calls                                             |
//! | `nor_emu.rs`  | (std) NOR emulation with power cuts, torn writes and bit flips              |
//! | `http.rs`     | (std) the device API over HTTP                                              |
//!
//! The core is `no_std` and never allocates; the host pieces are behind the `std` feature.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod agent;
mod boot;
mod crc;
pub mod error;
pub mod flash;
mod install;
pub mod journal;
pub mod layout;
pub mod npu;
pub mod state;
pub mod transport;
pub mod verify;

#[cfg(feature = "std")]
pub mod http;
#[cfg(feature = "std")]
pub mod nor_emu;

pub use agent::{Agent, Device};
pub use boot::{Booted, Reverted};
pub use error::Error;
pub use flash::Mapped;
pub use install::{CHUNK_BYTES, Poll};
pub use layout::{Layout, Slot};
pub use npu::{Arena, Npu, NpuRegisters, RecordingNpu};
pub use state::{PackId, State, Status};
pub use transport::{Report, ReportState, Transport, TransportError};
pub use verify::VerifiedSlot;
