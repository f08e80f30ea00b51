//! Re-validating a slot as it sits in flash — the only way a slot becomes bootable.
//!
//! One pass over the slot's memory-mapped bytes, in [`PASS_CHUNK`] pieces that SHA-256 and FNV-1a
//! both read while they are in the data cache; then the NPU1 structure, the command-stream check
//! and the binding, all on those same mapped bytes (whose bus addresses the NPU will be given).
//!
//! | entry point    | reference                                 | checks                                                    |
//! |----------------|-------------------------------------------|-----------------------------------------------------------|
//! | [`for_install`] | the [`VerifiedManifest`]                 | the manifest's IO digest = the application's; SHA-256 = the manifest's; NPU1 parse (structure, length, FNV-1a) and header checksum = the manifest's; command stream, binding |
//! | [`for_boot`]   | the journal's [`PackId`] (from that manifest) | SHA-256; NPU1 parse (structure, length, FNV-1a), command stream, binding |
//!
//! Both return a [`VerifiedSlot`], whose fields are private and which nothing else constructs: the
//! journal transitions that make a slot bootable (`State::pending`, `State::confirm`) take one, and
//! its NPU registers come out of the very parse that was checked.
use npub_core::Blob;
use npub_core::fnv::Fnv1a;
use npub_core::format::HEADER_BYTES;
use npub_core::manifest::{Sha256Prefix, VerifiedManifest};
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::flash::Mapped;
use crate::layout::{Layout, Slot};
use crate::npu::{self, Arena, NpuRegisters};
use crate::state::PackId;

/// Bytes per step of the single pass: small enough to stay in a Cortex-M85's 32 KiB data cache
/// while both hashes read it, large enough that the per-step overhead vanishes.
pub const PASS_CHUNK: usize = 1024;

/// A slot whose bytes were verified in flash and bound: the proof a journal transition to
/// "pending" or "confirmed" demands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifiedSlot {
    slot: Slot,
    pack: PackId,
    registers: NpuRegisters,
}

impl VerifiedSlot {
    /// The slot.
    pub const fn slot(&self) -> Slot {
        self.slot
    }

    /// The pack it holds.
    pub const fn pack(&self) -> PackId {
        self.pack
    }

    /// The Ethos-U55 registers for it: QBASE and the baked BASEPn point into the slot's XIP
    /// window, the runtime BASEPn into the arena it was verified with.
    pub const fn registers(&self) -> &NpuRegisters {
        &self.registers
    }
}

impl PackId {
    /// The pack a verified manifest describes.
    pub fn of(manifest: &VerifiedManifest) -> PackId {
        PackId {
            sequence: manifest.sequence(),
            len: manifest.pack_len(),
            sha256: manifest.pack_sha256(),
        }
    }
}

/// Verifies `slot` against the manifest it was installed from, and binds it.
///
/// The signed SHA-256 is checked first: once the slot's bytes are the signed ones, the NPU1 parse
/// (checks 1–9, with the pass's FNV-1a) checks their structure and length against the slot, and
/// the header's checksum word must be the manifest's. That is everything npub-core's `PackCheck`
/// checks, without running its stream validator over bytes the parse reads anyway.
pub fn for_install<F: Mapped>(
    flash: &F,
    layout: &Layout,
    slot: Slot,
    manifest: &VerifiedManifest,
    io: Option<&[u8]>,
    arena: &mut Arena<'_>,
) -> Result<VerifiedSlot, Error> {
    check_io_digest(manifest, io)?;
    let pack = PackId::of(manifest);
    let bytes = slot_bytes(flash, layout, slot, pack.len);
    let (sha256, payload_fnv) = hash(bytes);
    if sha256 != pack.sha256 {
        return Err(Error::Rejected(npub_core::Error::PackHashMismatch {
            manifest: Sha256Prefix::of(&pack.sha256),
            computed: Sha256Prefix::of(&sha256),
        }));
    }
    let checksum = manifest.pack_checksum();
    complete(
        layout,
        slot,
        pack,
        bytes,
        payload_fnv,
        Some(checksum),
        io,
        arena,
    )
}

/// The pack's IO (as its signed manifest digests it) must be the application's.
pub fn check_io_digest(manifest: &VerifiedManifest, io: Option<&[u8]>) -> Result<(), Error> {
    match io {
        Some(io) if npub_core::io_bindings::digest(io) != manifest.io_digest() => {
            Err(Error::IoBindingsMismatch)
        }
        _ => Ok(()),
    }
}

/// Verifies `slot` against the pack identity the journal recorded at install, and binds it.
pub fn for_boot<F: Mapped>(
    flash: &F,
    layout: &Layout,
    slot: Slot,
    pack: &PackId,
    io: Option<&[u8]>,
    arena: &mut Arena<'_>,
) -> Result<VerifiedSlot, Error> {
    let bytes = slot_bytes(flash, layout, slot, pack.len);
    let (sha256, payload_fnv) = hash(bytes);
    if sha256 != pack.sha256 {
        return Err(Error::DigestMismatch { slot });
    }
    complete(layout, slot, *pack, bytes, payload_fnv, None, io, arena)
}

/// Whether `slot` holds, as mapped now, the bytes whose SHA-256 `pack` names: after a failed
/// verification, tells a pack that is bad as signed from a slot that does not hold it.
pub fn digest_matches<F: Mapped>(flash: &F, layout: &Layout, slot: Slot, pack: &PackId) -> bool {
    hash(slot_bytes(flash, layout, slot, pack.len)).0 == pack.sha256
}

/// The single pass: SHA-256 of `bytes` and FNV-1a of their payload (bytes 32..), both over each
/// [`PASS_CHUNK`] while it is in the data cache. (One copy of this loop for every caller: the
/// firmware's flash budget.)
#[inline(never)]
fn hash(bytes: &[u8]) -> ([u8; 32], u32) {
    let mut sha = Sha256::new();
    let mut fnv = Fnv1a::new();
    let mut at = 0usize;
    for chunk in bytes.chunks(PASS_CHUNK) {
        sha.update(chunk);
        let skip = (HEADER_BYTES as usize).saturating_sub(at).min(chunk.len());
        fnv.update(&chunk[skip..]);
        at += chunk.len();
    }
    (sha.finalize().into(), fnv.finish())
}

/// The slot's first `len` bytes as mapped. `len` comes from a verified manifest or the journal,
/// both bounded by the slot size, so a longer one is a bug.
fn slot_bytes<'f, F: Mapped>(flash: &'f F, layout: &Layout, slot: Slot, len: u32) -> &'f [u8] {
    assert!(
        len <= layout.slot_bytes,
        "pack length {len} exceeds the slot"
    );
    let start = layout.slot(slot) as usize;
    &flash.mapped()[start..start + len as usize]
}

/// After the hashes: NPU1 structure (and the header's checksum word = `signed_checksum`, the
/// manifest's, when there is one), command stream, binding.
#[allow(clippy::too_many_arguments)]
fn complete(
    layout: &Layout,
    slot: Slot,
    pack: PackId,
    bytes: &[u8],
    payload_fnv: u32,
    signed_checksum: Option<u32>,
    io: Option<&[u8]>,
    arena: &mut Arena<'_>,
) -> Result<VerifiedSlot, Error> {
    let blob = parse_hashed(bytes, payload_fnv)?;
    if let Some(manifest) = signed_checksum {
        let pack = blob.header().checksum;
        if pack != manifest {
            return Err(Error::Rejected(npub_core::Error::PackChecksumMismatch {
                manifest,
                pack,
            }));
        }
    }
    check_command_stream(&blob)?;
    let registers = npu::registers(&blob, layout.slot_xip(slot), arena, io)?;
    Ok(VerifiedSlot {
        slot,
        pack,
        registers,
    })
}

/// The NPU1 blob in `bytes`, whose payload FNV-1a the single pass computed as `payload_fnv`: the
/// loader's checks in order, without hashing the slot a second time.
fn parse_hashed(bytes: &[u8], payload_fnv: u32) -> Result<Blob<'_>, Error> {
    Blob::parse_prehashed(bytes, payload_fnv).map_err(Error::Rejected)
}

/// The static Ethos-U55 command-stream check: every operation's ranges inside its regions.
fn check_command_stream(blob: &Blob<'_>) -> Result<(), Error> {
    npub_core::cmdstream::verify_blob(blob)
        .map(|_| ())
        .map_err(Error::Rejected)
}
