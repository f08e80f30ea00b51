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

use crate::ids::{Register, Slot};

/// Why a transport call failed. Small and `Copy`: a device keeps no error strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportError {
    /// No connection, a timeout, or a connection dropped mid-transfer.
    Unreachable,
    /// The server answered with this unexpected HTTP status.
    Status(u16),
    /// The server's answer broke the protocol (the text says how).
    Protocol(&'static str),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Unreachable => f.write_str("server unreachable or connection dropped"),
            TransportError::Status(s) => write!(f, "server answered HTTP {s}"),
            TransportError::Protocol(what) => write!(f, "protocol: {what}"),
        }
    }
}

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
    /// The arena cannot hold the pack's runtime regions and its program's copy (the COP1
    /// driver payload or the command stream, which the NPU runs from SRAM: see `verify.rs`).
    ArenaTooSmall {
        /// Bytes the runtime regions need, with alignment (npub-core's `arena_bytes_required`).
        runtime: u64,
        /// Bytes of the program's copy (plus up to 15 for its alignment).
        program: u32,
        /// The arena's length.
        arena: usize,
    },
    /// The slot read one way for the verifying pass and another way after it: the program's
    /// place (NPU1 or COP1 header) or its copy's bytes differ from what the pass hashed (a weak
    /// or disturbed flash cell, a stale cache line). Nothing was bound from those reads.
    ProgramReadDifferently {
        /// The slot.
        slot: Slot,
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
    /// The golden input of the pack's self-test record ran, and its outputs do not hash to the
    /// digest the record (signed through the manifest) states: the pack does not compute what
    /// the functional model computed for it (a weight changed in flash, a wrong compiler).
    SelfTestDigest {
        /// First bytes of the record's `output_sha256`.
        expected: npub_core::manifest::Sha256Prefix,
        /// First bytes of the SHA-256 of the outputs the NPU produced.
        got: npub_core::manifest::Sha256Prefix,
    },
    /// The self-test record the descriptor names does not read back from flash as a record
    /// (or the server's answer ended inside its header): the self-test cannot be judged.
    SelfTestMissing,
    /// The self-test record in flash does not hash to the manifest's `selftest_digest` (the
    /// server sent another record, or flash does not hold what was written).
    SelfTestRecordMismatch {
        /// First bytes of the manifest's `selftest_digest`.
        manifest: npub_core::manifest::Sha256Prefix,
        /// First bytes of the SHA-256 of the record as read from flash.
        computed: npub_core::manifest::Sha256Prefix,
    },
    /// A version-2 manifest signs a self-test record, and the server has none for the pack
    /// (404) or the transport cannot fetch one (the C ABI's request callbacks): the pack is
    /// not installed without its golden run.
    SelfTestRecordMissing {
        /// First bytes of the manifest's `selftest_digest`.
        manifest: npub_core::manifest::Sha256Prefix,
    },
    /// The self-test record does not fit after the pack in the slot.
    SelfTestTooLarge {
        /// The record's length (its header says).
        len: u64,
        /// Bytes left in the slot after the pack (from the next erase sector).
        room: u32,
    },
    /// The server's self-test record ended before the length its own header states (48 bytes
    /// and `input_bytes`): a cut answer, told apart from a record whose bytes differ.
    SelfTestRecordShort {
        /// Record bytes received.
        got: u32,
        /// The length its header states.
        stated: u64,
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
    /// The journal's record sequence would wrap (after 2³² record slots).
    JournalExhausted,
    /// A journal record did not read back as it was programmed, in every unit a commit tried.
    JournalReadBack,
    /// A slot descriptor did not read back as it was programmed.
    DescriptorReadBack {
        /// The slot.
        slot: Slot,
    },
    /// Boot check ([`crate::Layout::boot_check`]): the slot keeps no stored manifest that
    /// checks (installed by a firmware that kept none, on a smaller sector, or torn or rewritten
    /// since: its check word fails), so its signature cannot be verified again.
    StoredManifestMissing {
        /// The slot.
        slot: Slot,
    },
    /// Boot check: the slot's stored manifest no longer verifies against the keyring as it
    /// stands (its key unknown or revoked since, a bad signature, another device's).
    StoredManifestRefused {
        /// The slot.
        slot: Slot,
        /// npub-core's reason.
        error: npub_core::Error,
    },
    /// Boot check: the slot's stored manifest verifies but names another pack (length, sequence
    /// or SHA-256) than the journal says the slot holds.
    StoredManifestMismatch {
        /// The slot.
        slot: Slot,
    },
    /// The monotonic counter that holds the replay floor failed.
    Counter(CounterError),
    /// The manifest's sequence is further above the replay floor than one manifest may move it
    /// (see `docs/manifest.md`): a leaked key must not be able to lock the device out for good.
    SequenceTooFar {
        /// The manifest's sequence.
        sequence: u64,
        /// The device's replay floor.
        floor: u64,
        /// [`crate::MAX_SEQUENCE_STEP`].
        max_step: u64,
    },
    /// [`crate::Agent::finish_install`] on an install whose pack is not pending yet: nothing
    /// was verified or programmed, so there is no self-test outcome to apply.
    NotPending,
    /// A keyring update from the server was refused (root key, signature, sequence, or the
    /// change itself); the ones before it are applied and kept, no manifest was verified.
    KeyringUpdate {
        /// The refused record's position in the server's answer's sequence order: its sequence
        /// as it claims it (0 when it does not even decode).
        sequence: u64,
        /// npub-core's reason.
        error: npub_core::Error,
    },
    /// The server announced keyring updates up to `announced` but sent none above `have`.
    KeyringUpdatesMissing {
        /// `Npub-Keyring-Sequence`.
        announced: u64,
        /// The keyring's update sequence.
        have: u64,
    },
    /// The keyring record did not read back as it was programmed, in every attempt.
    KeyringReadBack,
    /// The keyring record generation would wrap (after 2³² commits).
    KeyringExhausted,
    /// The release trust is active but the layout's keyring banks cannot hold its record beside
    /// the keyring's (keystore.rs): a release key change would not survive a power cycle.
    ReleaseTrustNoRoom {
        /// `keyring_bank_bytes` of the layout.
        bank_bytes: u32,
        /// Bytes a bank needs for both records, two copies each.
        needed: u32,
    },
    /// More keys than the agent carries.
    TooManyKeys {
        /// "factory signing keys" or "root keys".
        what: &'static str,
        /// How many were given.
        count: usize,
        /// The most the agent takes.
        max: usize,
    },
}

/// Why the monotonic counter failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CounterError {
    /// Its flash failed (in the emulation: also a power cut).
    Flash(NorFlashErrorKind),
    /// A new value did not read back as it was programmed, in every place a raise tried.
    ReadBack,
    /// At power-on the counter read further above the journal's replay floor than one manifest
    /// may move it ([`crate::MAX_SEQUENCE_STEP`]). The counter is only ever raised to a sequence
    /// the journal consumed first, so this is a broken counter (or a callback that reads
    /// garbage), never a state to adopt: taken as the floor, `u64::MAX` would lock the device
    /// out of every manifest for good.
    AheadOfJournal {
        /// What the counter read.
        read: u64,
        /// The replay floor the journal holds (0 when it holds no record).
        journal: u64,
        /// [`crate::MAX_SEQUENCE_STEP`].
        max_step: u64,
    },
}

/// A flash layout that breaks one of the rules of `layout.rs` (what [`crate::Layout::validate`]
/// returns; [`crate::Layout::check`] panics with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutError {
    /// An area has no bytes.
    Empty {
        /// "journal", "slot A" or "slot B".
        area: &'static str,
    },
    /// An area does not start and end on an erase boundary.
    Unaligned {
        /// Which area.
        area: &'static str,
        /// Its first offset.
        start: u64,
        /// Its size.
        len: u64,
        /// The erase size.
        erase: u64,
    },
    /// Two areas overlap.
    Overlap {
        /// One area.
        area: &'static str,
        /// The other.
        other: &'static str,
    },
    /// A journal bank holds fewer than two commit units.
    BankTooSmall {
        /// Its size.
        bytes: u32,
        /// The least it must be.
        min: usize,
    },
    /// A slot is not two erase sectors (pack + descriptor), or a sector is below 384 bytes.
    SlotTooSmall {
        /// The slot size.
        bytes: u32,
        /// The erase size.
        erase: u64,
    },
    /// `progress_bytes` is 0 or not a multiple of the erase size.
    Progress {
        /// The value.
        bytes: u32,
        /// The erase size.
        erase: u64,
    },
    /// The layout ends past the flash.
    PastCapacity {
        /// Its end offset.
        end: u64,
        /// The flash's capacity.
        capacity: u64,
    },
    /// A slot runs past the 32-bit bus in the XIP window.
    PastBus {
        /// The slot.
        slot: Slot,
    },
    /// A keyring bank is not whole erase sectors holding two keyring records.
    KeyringBankTooSmall {
        /// Its size.
        bytes: u32,
        /// The least it must be.
        min: usize,
        /// The erase size.
        erase: u64,
    },
    /// `boot_check` is set but the erase sector cannot hold the slot's stored manifest.
    BootCheckSectorTooSmall {
        /// The erase size.
        erase: u64,
        /// The least it must be ([`crate::layout::STORED_MANIFEST_SECTOR_BYTES`]).
        min: usize,
    },
    /// A slot's bus address is not 16-byte aligned (the Ethos-U55 needs it).
    SlotMisaligned {
        /// The slot.
        slot: Slot,
        /// Its bus address.
        address: u32,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LayoutError::Empty { area } => write!(f, "layout: {area} is empty"),
            LayoutError::Unaligned {
                area,
                start,
                len,
                erase,
            } => write!(
                f,
                "layout: {area} [{start:#x}, +{len:#x}) is not aligned to the erase size {erase:#x}"
            ),
            LayoutError::Overlap { area, other } => write!(f, "layout: {area} overlaps {other}"),
            LayoutError::BankTooSmall { bytes, min } => write!(
                f,
                "layout: a journal bank of {bytes} bytes holds fewer than two commit units ({min} bytes)"
            ),
            LayoutError::SlotTooSmall { bytes, erase } => write!(
                f,
                "layout: a slot of {bytes:#x} bytes must be at least two erase sectors of at least \
                 384 bytes (pack + descriptor; erase size {erase:#x})"
            ),
            LayoutError::Progress { bytes, erase } => write!(
                f,
                "layout: progress_bytes {bytes:#x} must be a non-zero multiple of the erase size {erase:#x}"
            ),
            LayoutError::PastCapacity { end, capacity } => write!(
                f,
                "layout: ends at {end:#x}, past the flash capacity {capacity:#x}"
            ),
            LayoutError::PastBus { slot } => {
                write!(f, "layout: slot {} runs past the 32-bit bus", slot.name())
            }
            LayoutError::KeyringBankTooSmall { bytes, min, erase } => write!(
                f,
                "layout: a keyring bank of {bytes} bytes must be whole {erase}-byte erase sectors \
                 and at least {min} bytes (two records), or 0 for none"
            ),
            LayoutError::BootCheckSectorTooSmall { erase, min } => write!(
                f,
                "layout: boot_check needs erase sectors of at least {min} bytes (the slot's signed \
                 manifest is kept at bytes 512..1024 of its descriptor sector), this flash erases \
                 {erase}"
            ),
            LayoutError::SlotMisaligned { slot, address } => write!(
                f,
                "layout: slot {} is at bus address {address:#x}, not 16-byte aligned",
                slot.name()
            ),
        }
    }
}

impl fmt::Display for CounterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CounterError::Flash(kind) => write!(f, "monotonic counter: flash: {kind:?}"),
            CounterError::AheadOfJournal {
                read,
                journal,
                max_step,
            } => write!(
                f,
                "monotonic counter: reads {read}, more than {max_step} above the journal's replay \
                 floor {journal}; it only ever holds sequences the journal consumed first, so the \
                 counter is broken (refused rather than adopted as the floor)"
            ),
            CounterError::ReadBack => {
                f.write_str("monotonic counter: a new value did not read back as programmed")
            }
        }
    }
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
            Error::ArenaTooSmall {
                runtime,
                program,
                arena,
            } => write!(
                f,
                "arena too small: {arena} bytes cannot hold the runtime regions ({runtime} bytes \
                 with alignment) and the NPU program's copy ({program} bytes, 16-byte aligned at \
                 the arena's end); give the arena at least {} bytes",
                runtime + u64::from(program) + 15
            ),
            Error::ProgramReadDifferently { slot } => write!(
                f,
                "slot {}: the NPU program read differently after verification than during it \
                 (flash misread); nothing was bound from it",
                slot.name()
            ),
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
            Error::SelfTestDigest { expected, got } => {
                write!(f, "self-test failed: digest {expected} != {got}")
            }
            Error::SelfTestMissing => f.write_str(
                "self-test record: the one the manifest names is not whole (in flash, or as the \
                 server sent it)",
            ),
            Error::SelfTestRecordMismatch { manifest, computed } => write!(
                f,
                "self-test record: in flash it hashes to {computed}…, the manifest signs \
                 {manifest}…"
            ),
            Error::SelfTestRecordMissing { manifest } => write!(
                f,
                "self-test record missing: the manifest names {manifest}…, the server or the \
                 transport gives none"
            ),
            Error::SelfTestTooLarge { len, room } => write!(
                f,
                "self-test record: {len} bytes, the slot has {room} left after the pack"
            ),
            Error::SelfTestRecordShort { got, stated } => write!(
                f,
                "self-test record shorter than stated: got {got} of {stated} bytes"
            ),
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
            Error::JournalReadBack => f.write_str(
                "journal: a record did not read back as programmed in any unit the commit tried",
            ),
            Error::DescriptorReadBack { slot } => write!(
                f,
                "slot {}: the descriptor did not read back as programmed",
                slot.name()
            ),
            Error::StoredManifestMissing { slot } => write!(
                f,
                "boot check: slot {} keeps no stored manifest that checks (none was stored, or it \
                 is torn or was rewritten)",
                slot.name()
            ),
            Error::StoredManifestRefused { slot, error } => write!(
                f,
                "boot check: slot {}'s stored manifest no longer verifies: {error}",
                slot.name()
            ),
            Error::StoredManifestMismatch { slot } => write!(
                f,
                "boot check: slot {}'s stored manifest names another pack than the journal's",
                slot.name()
            ),
            Error::Counter(e) => write!(f, "{e}"),
            Error::SequenceTooFar {
                sequence,
                floor,
                max_step,
            } => write!(
                f,
                "manifest: sequence {sequence} is more than {max_step} above the replay floor \
                 {floor} (one manifest may not move the floor further)"
            ),
            Error::NotPending => f.write_str(
                "install: a self-test outcome was given before the pack was verified and pending",
            ),
            Error::KeyringUpdate { sequence, error } => {
                write!(f, "keyring update {sequence}: {error}")
            }
            Error::KeyringUpdatesMissing { announced, have } => write!(
                f,
                "keyring: the server announced updates up to {announced} but sent none above {have}"
            ),
            Error::KeyringReadBack => f.write_str(
                "keyring: the record did not read back as programmed in any attempt of the commit",
            ),
            Error::KeyringExhausted => {
                f.write_str("keyring: the record generation would wrap after 2^32 commits")
            }
            Error::ReleaseTrustNoRoom { bank_bytes, needed } => write!(
                f,
                "keyring: a bank of {bank_bytes} bytes cannot hold the release trust beside the \
                 keyring, it needs {needed}"
            ),
            Error::TooManyKeys { what, count, max } => {
                write!(f, "trust: {count} {what}, the agent takes at most {max}")
            }
        }
    }
}

impl core::error::Error for Error {}

/// Why a line was refused by the event log ([`crate::EventLog::record`]): the server would
/// refuse the report that carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventError {
    /// The line is longer than [`crate::MAX_EVENT_CHARS`] bytes.
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// [`crate::MAX_EVENT_CHARS`].
        max: usize,
    },
    /// The byte at `at` is not printable ASCII (space to `~`): a control character, a line
    /// break or a byte of a multi-byte character.
    NotPrintable {
        /// Its offset in the line.
        at: usize,
    },
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::TooLong { len, max } => {
                write!(f, "event line: {len} bytes, at most {max}")
            }
            EventError::NotPrintable { at } => write!(
                f,
                "event line: byte {at} is not printable ASCII (space to ~)"
            ),
        }
    }
}

impl core::error::Error for EventError {}
