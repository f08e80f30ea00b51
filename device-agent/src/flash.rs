//! The flash the agent needs: OSPI NOR that it programs through `embedded_storage`, and that the
//! CPU and the NPU also read in place through the XIP window.
//!
//! Verification reads the slot through [`Mapped`], not through `ReadNorFlash::read` into a
//! buffer, on purpose: the bytes that are hashed and validated are then at the very bus addresses
//! that go into QBASE and BASEPn, so no copy can differ between "what was checked" and "what the
//! NPU runs".
//!
//! What this does not cover: the NPU fetches over its own bus master, not through the CPU's
//! cache, so it senses the cells again. A cell that reads differently twice (a weak bit) could
//! pass verification and then read otherwise for the NPU. The agent never programs over a torn
//! program or erase (the journal erases first, and `NorEmu` counts any word programmed twice), so
//! such a cell in a freshly written slot means a part losing charge; the check against that is
//! re-verification, which every boot runs and which a running product can repeat on a schedule
//! (`Agent::boot` re-verifies and rebinds the active pack of a running agent; a 1 MB slot is far
//! larger than the CPU's cache, so that pass senses the cells again), not a second hash at
//! install.

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
