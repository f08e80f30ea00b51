//! The flash the agent needs: OSPI NOR that it programs through `embedded_storage`, and that the
//! CPU and the NPU also read in place through the XIP window.
//!
//! Verification reads the slot through [`Mapped`], not through `ReadNorFlash::read` into a
//! buffer, on purpose: the bytes that are hashed and validated are then the very bytes whose bus
//! addresses go into QBASE and BASEPn, so nothing can differ between "what was checked" and "what
//! the NPU runs".

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
