//! Re-validating a slot as it sits in flash — the only way a slot becomes bootable.
//!
//! One pass over the slot's memory-mapped bytes, in [`PASS_CHUNK`] pieces that SHA-256 and FNV-1a
//! both read while they are in the data cache; then the NPU1 structure, the command-stream check
//! and the binding, all on those same mapped bytes (whose bus addresses the NPU will be given).
//!
//! The NPU's *program* (the COP1 driver payload when the pack carries one, else the bare command
//! stream) is not left in flash for the NPU to fetch: a weak cell could read one way for the pass
//! and another way for the NPU, which would then run commands nobody checked. The pass also
//! hashes the program's bytes on their own, from the same reads; binding ([`pin`]) copies them
//! into the arena's tail, where the registers point, and proves the copy is those bytes (its
//! SHA-256) before it checks the copy's stream again and the NPU is programmed. The weights stay
//! in flash (the NPU reads them through base pointers the verifier bounded: a misread there
//! changes numbers, not addresses).
//!
//! | entry point    | reference                                 | checks                                                    |
//! |----------------|-------------------------------------------|-----------------------------------------------------------|
//! | [`for_install`] | the [`VerifiedManifest`]                 | the manifest's IO digest = the application's; SHA-256 = the manifest's; NPU1 parse (structure, length, FNV-1a) and header checksum = the manifest's; command stream, binding |
//! | [`for_boot`]   | the journal's [`PackId`] (from that manifest) | SHA-256; NPU1 parse (structure, length, FNV-1a), command stream, binding |
//!
//! Both return a [`VerifiedSlot`], whose fields are private and which nothing else constructs;
//! [`pin`] consumes it and returns the [`BoundSlot`]. The journal transitions that make a slot
//! bootable take these proofs (`State::pending` a verified slot, `State::confirm` a bound one),
//! and the NPU registers come out of the very parse that was checked.
use npub_core::Blob;
use npub_core::ManifestError;
use npub_core::fnv::Fnv1a;
use npub_core::format::HEADER_BYTES;
use npub_core::manifest::{Sha256Prefix, VerifiedManifest};
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::flash::Mapped;
use crate::ids::{PackId, Slot};
use crate::layout::Layout;
use crate::npu::{self, Arena, NpuRegisters, ProgramSpan};

/// Bytes per step of the single pass: small enough to stay in a Cortex-M85's 32 KiB data cache
/// while both hashes read it, large enough that the per-step overhead vanishes.
pub const PASS_CHUNK: usize = 1024;

/// A slot whose bytes one pass verified in flash: the proof that [`pin`] (through
/// `Agent::bind`) takes to bind the slot, and that the journal's transition to "pending" demands.
///
/// Move-only: one verification binds once. What it binds is a [`BoundSlot`]; binding again
/// (another boot, the previous pack after a failed install) verifies again.
#[derive(Debug, PartialEq, Eq)]
pub struct VerifiedSlot {
    slot: Slot,
    pack: PackId,
    registers: NpuRegisters,
    program: Program,
}

/// A verified slot whose program [`pin`] copied into the arena and proved: the NPU may run it
/// with these registers. Only [`pin`] makes one; the journal's transition to "confirmed" demands
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundSlot {
    slot: Slot,
    pack: PackId,
    registers: NpuRegisters,
}

/// What [`pin`] copies and what the copy must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Program {
    /// Where it lies in the pack.
    span: ProgramSpan,
    /// SHA-256 of its bytes as the pass read them.
    sha256: [u8; 32],
    /// Arena offset of the copy's first byte (the stream's is `at + span.header`, QBASE's).
    at: u32,
    /// The SHRAM the command-stream check sizes for the pack's accelerator.
    shram: u32,
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

    /// The Ethos-U55 registers it is bound with: the baked BASEPn point into the slot's XIP
    /// window; QBASE (the program's copy, at the arena's end: see [`pin`]) and the runtime BASEPn
    /// into the arena it was verified with.
    pub const fn registers(&self) -> &NpuRegisters {
        &self.registers
    }
}

impl BoundSlot {
    /// The slot.
    pub const fn slot(&self) -> Slot {
        self.slot
    }

    /// The pack it holds.
    pub const fn pack(&self) -> PackId {
        self.pack
    }

    /// The Ethos-U55 registers it is bound with (see [`VerifiedSlot::registers`]).
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
    let pass = hash(bytes, ProgramSpan::locate(bytes));
    if pass.sha256 != pack.sha256 {
        return Err(Error::Rejected(npub_core::Error::Manifest(
            ManifestError::PackHashMismatch {
                manifest: Sha256Prefix::of(&pack.sha256),
                computed: Sha256Prefix::of(&pass.sha256),
            },
        )));
    }
    let checksum = manifest.pack_checksum();
    complete(layout, slot, pack, bytes, &pass, Some(checksum), io, arena)
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
    let pass = hash(bytes, ProgramSpan::locate(bytes));
    if pass.sha256 != pack.sha256 {
        return Err(Error::DigestMismatch { slot });
    }
    complete(layout, slot, *pack, bytes, &pass, None, io, arena)
}

/// Whether `slot` holds, as mapped now, the bytes whose SHA-256 `pack` names: after a failed
/// verification, tells a pack that is bad as signed from a slot that does not hold it.
pub fn digest_matches<F: Mapped>(flash: &F, layout: &Layout, slot: Slot, pack: &PackId) -> bool {
    hash(slot_bytes(flash, layout, slot, pack.len), None).sha256 == pack.sha256
}

/// What the single pass computed.
struct Pass {
    sha256: [u8; 32],
    payload_fnv: u32,
    /// SHA-256 of the program's bytes as the pass read them, when it found one before.
    program: Option<(ProgramSpan, [u8; 32])>,
}

/// The single pass: SHA-256 of `bytes`, FNV-1a of their payload (bytes 32..), and SHA-256 of
/// `program`'s bytes, all over each [`PASS_CHUNK`] while it is in the data cache. (One copy of
/// this loop for every caller: the firmware's flash budget.)
#[inline(never)]
fn hash(bytes: &[u8], program: Option<ProgramSpan>) -> Pass {
    let mut sha = Sha256::new();
    let mut fnv = Fnv1a::new();
    let mut code = Sha256::new();
    let mut at = 0usize;
    for chunk in bytes.chunks(PASS_CHUNK) {
        sha.update(chunk);
        let skip = (HEADER_BYTES as usize).saturating_sub(at).min(chunk.len());
        fnv.update(&chunk[skip..]);
        if let Some(p) = program {
            // The part of `chunk` inside the program: both bounds clamp to the chunk.
            let from = (p.offset as usize).clamp(at, at + chunk.len());
            let to = (p.end() as usize).clamp(at, at + chunk.len());
            if from < to {
                code.update(&chunk[from - at..to - at]);
            }
        }
        at += chunk.len();
    }
    Pass {
        sha256: sha.finalize().into(),
        payload_fnv: fnv.finish(),
        program: program.map(|p| (p, code.finalize().into())),
    }
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
/// manifest's, when there is one), command stream, the program where the pass found it, binding.
#[allow(clippy::too_many_arguments)]
fn complete(
    layout: &Layout,
    slot: Slot,
    pack: PackId,
    bytes: &[u8],
    pass: &Pass,
    signed_checksum: Option<u32>,
    io: Option<&[u8]>,
    arena: &mut Arena<'_>,
) -> Result<VerifiedSlot, Error> {
    let blob = parse_hashed(bytes, pass.payload_fnv)?;
    if let Some(manifest) = signed_checksum {
        let pack = blob.header().checksum;
        if pack != manifest {
            return Err(Error::Rejected(npub_core::Error::Manifest(
                ManifestError::PackChecksumMismatch { manifest, pack },
            )));
        }
    }
    check_command_stream(&blob)?;
    let span = ProgramSpan::of(&blob);
    let sha256 = match pass.program {
        Some((hashed, sha256)) if hashed == span => sha256,
        // The header or the COP1 header read one way before the pass and another way now.
        _ => return Err(Error::ProgramReadDifferently { slot }),
    };
    let (registers, at) = npu::registers(&blob, layout.slot_xip(slot), arena, io, &span)?;
    Ok(VerifiedSlot {
        slot,
        pack,
        registers,
        program: Program {
            span,
            sha256,
            at,
            shram: npub_core::cmdstream::shram_bytes(blob.accel()),
        },
    })
}

/// Binds `verified`: copies its program from its slot into `arena` (the one it was verified
/// with), where its registers point, and proves the copy before the NPU may run it: its SHA-256
/// must be the pass's (so it holds the bytes whose digest matched the signed one), and its stream
/// must pass the command-stream check again, against the regions as bound. A copy that does not
/// hash as the pass did is made once more after invalidating the XIP cache before it is believed.
pub fn pin<F: Mapped>(
    flash: &mut F,
    layout: &Layout,
    verified: VerifiedSlot,
    arena: &mut Arena<'_>,
) -> Result<BoundSlot, Error> {
    pin_owned(flash, layout, &verified, arena)
}

/// [`pin`] on a verified slot its caller owns and gives up (`Agent::bind`, which takes it by
/// value): by reference, so that the 336 bytes are not copied again on the stack.
#[inline(never)]
pub(crate) fn pin_owned<F: Mapped>(
    flash: &mut F,
    layout: &Layout,
    verified: &VerifiedSlot,
    arena: &mut Arena<'_>,
) -> Result<BoundSlot, Error> {
    match copy_program(flash, layout, verified, arena) {
        Err(Error::ProgramReadDifferently { .. }) => {
            flash.invalidate();
            copy_program(flash, layout, verified, arena)?;
        }
        copied => copied?,
    }
    let p = &verified.program;
    let regs = &verified.registers;
    let copy = &arena.bytes[p.at as usize + p.span.header as usize..][..regs.qsize as usize];
    npub_core::cmdstream::verify(
        copy,
        &regs.region_bytes[..usize::from(regs.regions)],
        p.shram,
    )
    .map_err(Error::Rejected)?;
    Ok(BoundSlot {
        slot: verified.slot,
        pack: verified.pack,
        registers: verified.registers,
    })
}

/// One copy of `verified`'s program into `arena`, and whether it hashes as the pass did.
#[inline(never)]
fn copy_program<F: Mapped>(
    flash: &F,
    layout: &Layout,
    verified: &VerifiedSlot,
    arena: &mut Arena<'_>,
) -> Result<(), Error> {
    let p = &verified.program;
    let from = layout.slot(verified.slot) as usize + p.span.offset as usize;
    let source = &flash.mapped()[from..from + p.span.bytes as usize];
    let at = p.at as usize;
    let arena_len = arena.bytes.len();
    let Some(copy) = arena.bytes.get_mut(at..at + p.span.bytes as usize) else {
        // Not the arena it was verified with: the copy has no place.
        return Err(Error::ArenaTooSmall {
            runtime: 0,
            program: p.span.bytes,
            arena: arena_len,
        });
    };
    copy.copy_from_slice(source);
    if !copied_as_hashed(copy, &p.sha256) {
        return Err(Error::ProgramReadDifferently {
            slot: verified.slot,
        });
    }
    Ok(())
}

/// Whether `copy` hashes to `sha256`. (Its own frame: the SHA-256 state is not on the stack of
/// the command-stream check that follows.)
#[inline(never)]
fn copied_as_hashed(copy: &[u8], sha256: &[u8; 32]) -> bool {
    Sha256::digest(copy).as_slice() == sha256
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
