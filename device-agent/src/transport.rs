//! How the agent talks to the fleet server: three calls, two for keyring updates and one for
//! release signatures, blocking, no allocation. None has a default: a transport that forgot the keyring calls would compile and
//! silently never rotate a key, so each says what it does about them (a test double that carries
//! no keyring updates answers `None` / `Ok(0)`).
//!
//! The device API (`GET /api/v1/device/manifest?seq=N`, `GET /api/v1/device/packs/{sha256}` with
//! `Range`, `GET /api/v1/device/packs/{sha256}/release`, `POST /api/v1/device/status`) maps onto
//! them one to one; the implementation is
//! `crate::http_io`, over any byte stream (smoltcp on the firmware, a `TcpStream` on the host). Nothing the transport returns is
//! trusted: the manifest is verified by npub-core, the pack by its length, NPU1 structure and, in
//! flash, its SHA-256.

use crate::error::{Error, TransportError};
use crate::events::EventLog;

/// The install states the device API knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportState {
    /// Pack bytes are arriving (`progress` = durable bytes).
    Downloading,
    /// The slot verified in flash (SHA-256, NPU1, command stream).
    Verified,
    /// The pack is confirmed: it passed its self-test and is the active pack.
    Installed,
    /// The pack was bound to the NPU (a boot, or the end of an install).
    Bound,
    /// The install was refused or failed (`reason` says why); the previous pack is still active.
    Failed,
    /// A pack on trial was given up and the previous one restored.
    RolledBack,
}

impl ReportState {
    /// The wire name (`"downloading"`, …).
    pub const fn name(self) -> &'static str {
        match self {
            ReportState::Downloading => "downloading",
            ReportState::Verified => "verified",
            ReportState::Installed => "installed",
            ReportState::Bound => "bound",
            ReportState::Failed => "failed",
            ReportState::RolledBack => "rolled_back",
        }
    }
}

/// The reason an `installed` report carries when [`Report::selftest_skipped`]: the pack was
/// confirmed without its golden run, and the server keeps this line with the report.
pub const SELFTEST_SKIPPED: &str = "self-test skipped: no NPU on this board ran the golden input; confirmed on the firmware's own checks";

/// One status report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report<'a> {
    /// The manifest sequence the report is about.
    pub sequence: u64,
    /// What happened.
    pub state: ReportState,
    /// Durable bytes, while downloading.
    pub progress: Option<u32>,
    /// Why, for `Failed` and `RolledBack` (and for a `Downloading` that follows a failed
    /// attempt).
    pub reason: Option<Error>,
    /// For a report that ends a download attempt (a retry's `Downloading` with its reason, or
    /// the final `Failed`): how many attempts at this install were made, from 1 (at most
    /// [`crate::state::MAX_LOCAL_RETRIES`] + 1). `None` otherwise.
    pub attempts: Option<u8>,
    /// The device's last events (its [`EventLog`]), sent with a failure report (`Failed`,
    /// `RolledBack`) as the report's `events`, oldest first; `None` on every other report.
    pub events: Option<&'a EventLog>,
    /// For `Installed`: the pack has a self-test record but no golden inference ran (the
    /// firmware's self-test answered no digest: a board without an NPU, or a C firmware's
    /// `npub_agent_confirm`), so it was confirmed on the firmware's own checks. Sent as the
    /// report's reason, [`SELFTEST_SKIPPED`]: never a silent pass.
    pub selftest_skipped: bool,
}

/// The fleet server, as the agent sees it.
pub trait Transport {
    /// Fetches the newest manifest assigned to this device if its sequence is greater than
    /// `after`, into `buf`. `Ok(None)`: nothing newer. `Ok(Some(n))`: the manifest is `n` bytes;
    /// if `n > buf.len()` only `buf.len()` were written and the agent refuses it.
    fn fetch_manifest(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError>;

    /// Fetches pack bytes starting at `offset`, at most `buf.len()` of them; returns how many it
    /// wrote. `Ok(0)` means the server has no more bytes.
    fn fetch_pack(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError>;

    /// Sends a status report.
    fn report(&mut self, report: &Report) -> Result<(), TransportError>;

    /// The `Npub-Keyring-Sequence` of the last [`Transport::fetch_manifest`] answer: the newest
    /// keyring update the server has. `None`: the answer had none (or this transport does not
    /// read it), and the agent keeps its keyring as it is.
    fn keyring_sequence(&self) -> Option<u64>;

    /// Fetches the release bundle served beside the pack `sha256` (`GET
    /// /api/v1/device/packs/{sha256}/release`) into `buf` (the agent's is
    /// `npub_core::release::MAX_BUNDLE_BYTES`). `Ok(None)`: the server has none (404).
    /// `Ok(Some(n))`: the bundle is `n` bytes; if `n > buf.len()` only `buf.len()` were written
    /// and the agent refuses it. The agent asks only while its release trust is active; a test
    /// double for a device without one answers `Ok(None)`.
    fn fetch_release(
        &mut self,
        sha256: &[u8; 32],
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError>;

    /// Fetches the self-test record served beside the pack `sha256` (`GET
    /// /api/v1/device/packs/{sha256}/selftest`, "NPS1") from byte `offset`, at most `buf.len()`
    /// bytes: `Ok(Some(n))` bytes written (0: the record ends before `offset`), `Ok(None)`: the
    /// server has none (404), or this transport cannot fetch one. The agent asks only for a
    /// version-2 manifest, whose signature names the record's SHA-256; without the record it
    /// does not install the pack. A test double for packs without a self-test answers
    /// `Ok(None)`.
    fn fetch_selftest(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError>;

    /// Fetches the keyring updates with a sequence above `after` (`GET
    /// /api/v1/device/keys?after=N`) into `buf`: whole 144-byte records, in sequence order, as
    /// many as fit; returns the bytes written (0: none). The agent asks again after the last one
    /// it applied until its keyring reaches [`Transport::keyring_sequence`].
    fn fetch_keyring_updates(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<usize, TransportError>;
}
