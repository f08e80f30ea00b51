//! The fleet server, in memory: it offers one signed manifest and serves its pack in whatever
//! pieces the agent asks for, and prints the agent's status reports.
use cortex_m_semihosting::hprintln;
use device_agent::{Report, Transport, TransportError};

pub struct Server {
    pub manifest: &'static [u8],
    pub pack: &'static [u8],
    pub sequence: u64,
    /// Pack bytes served.
    pub served: usize,
}

impl Transport for Server {
    fn fetch_manifest(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        if self.sequence <= after {
            return Ok(None);
        }
        let n = self.manifest.len().min(buf.len());
        buf[..n].copy_from_slice(&self.manifest[..n]);
        Ok(Some(self.manifest.len()))
    }

    fn fetch_pack(
        &mut self,
        _sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        let start = (offset as usize).min(self.pack.len());
        let n = buf.len().min(self.pack.len() - start);
        buf[..n].copy_from_slice(&self.pack[start..start + n]);
        self.served += n;
        Ok(n)
    }

    fn report(&mut self, report: &Report) -> Result<(), TransportError> {
        match (report.progress, report.reason) {
            (_, Some(_reason)) => {
                #[cfg(feature = "verbose")]
                hprintln!("report: {} ({})", report.state.name(), _reason);
                #[cfg(not(feature = "verbose"))]
                hprintln!(
                    "report: {} (build with --features verbose for the reason)",
                    report.state.name()
                );
            }
            (Some(p), None) if p % (32 * 1024) == 0 => {
                hprintln!("report: {} {}", report.state.name(), p)
            }
            (Some(_), None) => {}
            (None, None) => hprintln!(
                "report: {} sequence {}",
                report.state.name(),
                report.sequence
            ),
        }
        Ok(())
    }
}
