//! The agent's one error type.
//!
//! It is not generic over the flash driver: any `NorFlashError` converts into [`Error::Flash`]
//! through the blanket `From`, keeping only its portable kind. Like `npub_core::Error` it is `Copy`
//! and allocation-free, so a device can hold it and report it.
//!
//! Misconfiguration (a layout that does not fit the flash, a geometry the journal cannot use) is an
//! `assert!`, not a variant: it is a bug in the firmware, not something that happens to a device.
use core::fmt;

use embedded_storage::nor_flash::{NorFlashError, NorFlashErrorKind};

use crate::layout::Slot;
use crate::npu::Register;
use crate::transport::TransportError;

/// Everything that can stop an install or a boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The flash driver failed (in the emulation: also a power cut).
    Flash(NorFlashErrorKind),
    /// npub-core refused the manifest or the pack: signature, sequence, NPU1 structure,
    /// checksum, command stream. Its `Display` says which structure, which field and the numbers.
    Rejected(npub_core::Error),
    /// The transport failed; the install can resume from the last durable offset.
    Transport(TransportError),
    /// The transport returned more bytes than were asked for.
    TransportOverrun {
        /// Pack offset of the request.
        offset: u32,
        /// Bytes asked for.
        asked: usize,
        /// Bytes it claims to have written.
        got: usize,
    },
    /// The transport ended the pack before the manifest's length.
    PackTruncated {
        /// Bytes received in all.
        received: u32,
        /// The manifest's length.
        expected: u32,
    },
    /// SHA-256 of the slot as it sits in flash differs from the manifest's.
    DigestMismatch {
        /// The slot that was read back.
        slot: Slot,
    },
    /// A register would hold an address the Ethos-U55 cannot use (it needs 16-byte alignment).
    Misaligned {
        /// Which register.
        register: Register,
        /// The address it would hold.
        address: u64,
    },
    /// A region's address or extent does not fit the 32-bit bus.
    AddressOverflow {
        /// Which register.
        register: Register,
    },
    /// The application binds more inputs and outputs than the agent carries.
    TooManyIoBindings {
        /// Bindings in the application's set.
        count: usize,
        /// [`crate::npu::MAX_IO`].
        max: usize,
    },
    /// The manifest's IO digest is not the digest of the IO bindings this firmware's application
    /// is built for: the pack's inputs and outputs are elsewhere, or shaped differently.
    IoBindingsMismatch,
    /// The NPU's self-test refused the freshly bound pack (the code is the self-test's own).
    SelfTestFailed {
        /// The self-test's failure code.
        code: u32,
    },
    /// A pending pack used up its trial boots without confirming (its self-test kept resetting
    /// the device), and was reverted.
    TrialBootsExhausted {
        /// The trials it had.
        boots: u8,
    },
    /// Nothing in flash can be booted: no pack was ever confirmed, or every candidate failed its
    /// re-validation.
    NoBootableSlot,
    /// The journal's record sequence would wrap (after 2³² state changes).
    JournalExhausted,
}

impl<E: NorFlashError> From<E> for Error {
    fn from(e: E) -> Self {
        Error::Flash(e.kind())
    }
}

impl From<TransportError> for Error {
    fn from(e: TransportError) -> Self {
        Error::Transport(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Flash(kind) => write!(f, "flash: {kind:?}"),
            Error::Rejected(e) => write!(f, "{e}"),
            Error::Transport(e) => write!(f, "transport: {e}"),
            Error::TransportOverrun { offset, asked, got } => write!(
                f,
                "transport: asked for {asked} bytes at pack offset {offset}, got {got}"
            ),
            Error::PackTruncated { received, expected } => write!(
                f,
                "transport: the pack ended after {received} of the manifest's {expected} bytes"
            ),
            Error::DigestMismatch { slot } => write!(
                f,
                "slot {}: SHA-256 of the pack as it sits in flash differs from the manifest's",
                slot.name()
            ),
            Error::Misaligned { register, address } => write!(
                f,
                "NPU binding: {register} would be {address:#x}, not 16-byte aligned as the \
                 Ethos-U55 requires"
            ),
            Error::AddressOverflow { register } => {
                write!(f, "NPU binding: {register} would point past the 32-bit bus")
            }
            Error::TooManyIoBindings { count, max } => write!(
                f,
                "IO bindings: the application binds {count} inputs and outputs, the agent at most {max}"
            ),
            Error::IoBindingsMismatch => f.write_str(
                "manifest: io_digest differs from the digest of the IO bindings this firmware's \
                 application expects (the pack's inputs or outputs moved or changed)",
            ),
            Error::SelfTestFailed { code } => {
                write!(f, "self-test: the bound pack failed with code {code}")
            }
            Error::TrialBootsExhausted { boots } => write!(
                f,
                "boot: the pending pack did not confirm within {boots} trial boots"
            ),
            Error::NoBootableSlot => f.write_str(
                "boot: no slot holds a confirmed or pending pack that verifies in flash",
            ),
            Error::JournalExhausted => {
                f.write_str("journal: the record sequence would wrap after 2^32 records")
            }
        }
    }
}

impl core::error::Error for Error {}
