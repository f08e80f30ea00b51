//! The transport as the firmware uses it: [`HttpIo`] with a line on the console for what the
//! agent does through it (where a download starts, every report).
use cortex_m_semihosting::hprintln;
use device_agent::http_io::{HttpIo, Link};
use device_agent::{Report, Transport, TransportError};

use crate::clock::SysClock;
use crate::semi::{File, Mode};

pub struct Logged<'a, L> {
    pub io: HttpIo<'a, L, SysClock>,
    /// The pack offset the next fetch continues from.
    next: Option<u32>,
    /// `--starve-once`: the marker file (see `watchdog.rs`).
    pub starve_once: Option<&'static str>,
}

impl<'a, L: Link> Logged<'a, L> {
    pub fn new(io: HttpIo<'a, L, SysClock>) -> Self {
        Self {
            io,
            next: None,
            starve_once: None,
        }
    }
}

impl<L: Link> Transport for Logged<'_, L> {
    fn fetch_selftest(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        let got = self.io.fetch_selftest(sha256, offset, buf)?;
        match got {
            Some(n) => hprintln!(
                "selftest: {} bytes of the self-test record at {}",
                n,
                offset
            ),
            None => hprintln!("selftest: the server has no self-test record for this pack"),
        }
        Ok(got)
    }

    fn fetch_manifest(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        self.next = None;
        self.io.fetch_manifest(after, buf)
    }

    fn fetch_pack(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        if self.next != Some(offset) {
            hprintln!("download: from byte {}", offset);
        }
        let n = self.io.fetch_pack(sha256, offset, buf)?;
        self.next = Some(offset + n as u32);
        if offset >= 256 * 1024
            && let Some(marker) = self.starve_once.take()
            && File::open(marker, Mode::Read).is_none()
            && File::open(marker, Mode::Create).is_some()
        {
            hprintln!(
                "watchdog: no longer fed (--starve-once), at byte {}",
                offset
            );
            crate::watchdog::starve();
        }
        Ok(n)
    }

    fn report(&mut self, r: &Report) -> Result<(), TransportError> {
        match (r.progress, r.reason) {
            (Some(p), _) => hprintln!("report: {} {} bytes", r.state.name(), p),
            (None, Some(reason)) => hprintln!("report: {} ({})", r.state.name(), reason),
            (None, None) => hprintln!("report: {} sequence {}", r.state.name(), r.sequence),
        }
        self.io.report(r)
    }

    fn fetch_release(
        &mut self,
        sha256: &[u8; 32],
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        let got = self.io.fetch_release(sha256, buf)?;
        match got {
            Some(n) => hprintln!("release: {} bytes of release signatures", n),
            None => hprintln!("release: the server has no release signatures for this pack"),
        }
        Ok(got)
    }

    // Forwarded by hand: the trait's defaults (no sequence, no records) would silently keep the
    // firmware's keyring as it is.
    fn keyring_sequence(&self) -> Option<u64> {
        self.io.keyring_sequence()
    }

    fn fetch_keyring_updates(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        let n = self.io.fetch_keyring_updates(after, buf)?;
        hprintln!("keyring: {} bytes of updates after sequence {}", n, after);
        Ok(n)
    }
}
