//! The flash the agent needs: OSPI NOR that it programs through `embedded_storage`, and that the
//! CPU and the NPU also read in place through the XIP window.
//!
//! Verification reads the slot through [`Mapped`], not through `ReadNorFlash::read` into a
//! buffer: the weights that are hashed and validated are then at the very bus addresses that go
//! into the baked BASEPn, zero copy.
//!
//! The NPU fetches over its own bus master, not through the CPU's cache, so it senses the cells
//! again; a cell that reads differently twice (a weak bit, a disturbed read) could pass
//! verification and then read otherwise for the NPU. For the program (the command stream and its
//! COP1 header) that would mean commands nobody checked, so the program is not run from flash:
//! binding copies it into the arena and proves the copy (its SHA-256 is the one the verifying
//! pass computed from the same reads that matched the signed digest, and its stream passes the
//! command-stream check again; `verify::pin`). For the weights it would mean a wrong number in one
//! inference, never an address: every access the stream makes was bounded by the verifier. The
//! check against a part losing charge is re-verification, which every boot runs and which a
//! running product can repeat on a schedule (`Agent::boot` re-verifies and rebinds the active pack
//! of a running agent; a 1 MB slot is far larger than the CPU's cache, so that pass senses the
//! cells again).
//!
//! What is still read from flash after the pass: the NPU1 header and region table (the parse
//! reads them again). A program's place that reads differently is refused
//! (`Error::ProgramReadDifferently`); a region size that read differently during the parse than
//! during the pass would size its base pointer's extent (a runtime region's carving in the arena,
//! a baked region's bound) from the second read. Copying the 32-byte header and the region table
//! with the program would close that too.

/// Flash contents visible as memory (XIP).
pub trait Mapped {
    /// All of the flash, from offset 0, as the CPU reads it through the XIP window.
    fn mapped(&self) -> &[u8];

    /// Drops whatever the XIP path caches (the RA8P1 caches OSPI reads), so that the next reads
    /// through [`Mapped::mapped`] fetch what the flash holds now. The agent calls it after
    /// programming a slot and before it reads that slot back, and before it re-reads a slot that
    /// failed its verification (a misread must not cost the device its pack). The default does
    /// nothing: right for memory that is not cached.
    fn invalidate(&mut self) {}
}
