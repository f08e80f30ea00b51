//! # device-agent
//!
//! The half of npub that runs on the RA8P1 (Cortex-M85 + Ethos-U55, OSPI NOR flash): it fetches a
//! signed manifest, streams the pack into the inactive of two flash slots, re-validates it *as it
//! sits in flash*, binds it to the NPU, and survives a power cut at any instant.
//!
//! | file          | one idea                                                                    |
//! |---------------|-----------------------------------------------------------------------------|
//! | `ids.rs`      | the shared names: [`Slot`], [`PackId`], [`Register`]; imports nothing       |
//! | `layout.rs`   | where the journal and the two slots live (a table)                          |
//! | `journal.rs`  | the power-cut-safe state record: two copies per commit, read back, two banks, sessions |
//! | `record.rs`   | a self-checking record on NOR: framed, programmed and read back, re-read after a misread |
//! | `state.rs`    | what is remembered and the only transitions allowed                          |
//! | `counter.rs`  | the replay floor outside the journal: [`MonotonicCounter`], [`NorCounter`]  |
//! | `descriptor.rs` | what each slot holds, beside it: boot without a journal                   |
//! | `verify.rs`   | the one pass over a slot in flash; [`VerifiedSlot`] is the only proof of it, [`BoundSlot`] of its program pinned |
//! | `install.rs`  | manifest → download → verify → pending → bind → self-test → confirmed       |
//! | `boot.rs`     | choose, re-validate, bind; trial boots and revert                           |
//! | `boot_check.rs` | the optional boot check: the slot's stored manifest verified again, then the pack against it |
//! | `events.rs`   | the device's last events, a bounded ring of short lines sent with a failure report |
//! | `npu.rs`      | the Ethos-U55 register model: QBASE/QSIZE, BASEP0..7                         |
//! | `keystore.rs` | the keyring and the release trust in flash, committed together; the firmware's [`Trust`] |
//! | `transport.rs`| the fleet server as three calls, plus keyring updates and release bundles     |
//! | `busy.rs`     | [`BusyFlash`]: the firmware told around every erase (one sector) and program, so that XIP readers (the NPU) stay off the busy chip |
//! | `model_npu.rs` | (std) the simulator's NPU: the functional model runs the pack from its slot's bytes |
//! | `nor_emu.rs`  | (std) NOR emulation with power cuts, torn writes and bit flips              |
//! | `http_io/`    | (`http-io`) the device API over HTTP/1.1 on any `embedded-io` stream, no_std: the firmware's, the C ABI's and the simulator's (over a `TcpStream`) |
//!
//! The core is `no_std` and never allocates; the host pieces are behind the `std` feature.
//!
//! Flash budget: `#[inline(never)]` marks the functions whose inlining copied code into several
//! callers of the firmware image (`fw/src/bin/size_probe.rs`, measured one attribute at a time;
//! `tests/size.rs`). Moving one is a size change: measure the probe before and after.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod agent;
mod boot;
mod boot_check;
pub mod busy;
pub mod counter;
mod crc;
mod descriptor;
pub mod error;
pub mod events;
pub mod flash;
pub mod ids;
mod install;
pub mod journal;
pub mod keystore;
pub mod layout;
pub mod npu;
mod record;
pub mod seal;
pub mod state;
pub mod transport;
pub mod verify;

#[cfg(feature = "http-io")]
pub mod http_io;
#[cfg(feature = "std")]
pub mod model_npu;
#[cfg(feature = "std")]
pub mod nor_emu;

pub use agent::{Agent, Device};
pub use boot::{BootStart, Booted, Reverted, Skipped, Unbooted};
pub use busy::{BusyFlash, FlashBusy, FlashOp};
pub use counter::{JournalOnly, MAX_SEQUENCE_STEP, MonotonicCounter, NorCounter};
pub use error::{CounterError, Error, EventError, LayoutError, TransportError};
pub use events::{EVENT_LOG_BYTES, EventLog, MAX_EVENT_CHARS, MAX_EVENT_LINES};
pub use flash::Mapped;
pub use ids::{PackId, Register, Slot};
pub use install::{CHUNK_BYTES, Installing, Poll, Progress};
pub use keystore::{DeviceKeyring, KEYRING_CAPACITY, MAX_ROOTS, Trust};
pub use layout::Layout;
pub use npu::{Arena, DriverPayload, Npu, NpuRegisters, RecordingNpu, SelfTestResult};
pub use seal::DeviceKey;
pub use state::{MAX_LOCAL_RETRIES, SlotState, State, Status};
pub use transport::{Report, ReportState, SELFTEST_SKIPPED, Transport};
pub use verify::{BoundSlot, VerifiedSlot};
