//! Checking a pack against its verified manifest while the bytes stream in.
//!
//! The device downloads straight into its slot; it cannot wait for the whole pack to decide
//! whether to keep going. [`PackCheck`] keeps O(1) state — a running SHA-256, the NPU1
//! [`StreamValidator`] and a byte count — and decides at the earliest byte it can:
//!
//! | when                                | check                                                  | `Error` |
//! |-------------------------------------|--------------------------------------------------------|---------|
//! | a chunk would pass `pack_len`       | refused before any of it is hashed or written (endless data) | `ManifestError::PackLongerThanManifest` |
//! | every chunk                         | NPU1 structure (magic, version, tables)                | the NPU1 variants |
//! | byte 12 arrives                     | header `total_bytes` = the manifest's `pack_len` (another pack's manifest) | `ManifestError::PackLengthDiffersFromManifest` |
//! | byte 32 arrives                     | header word 7 = the manifest's `pack_checksum` (mix-and-match, early) | `ManifestError::PackChecksumMismatch` |
//! | [`finish`](PackCheck::finish)       | all `pack_len` bytes arrived                           | `ManifestError::PackShorterThanManifest` |
//! | [`finish`](PackCheck::finish)       | SHA-256 = `pack_sha256` (wrong software, tampering)   | `ManifestError::PackHashMismatch` |
//! | [`finish`](PackCheck::finish)       | FNV-1a of the payload = word 7 (NPU1 check 9)          | `ChecksumMismatch` |
//!
//! A failure is sticky: every later call returns it. The caller writes a chunk to flash only after
//! [`feed`](PackCheck::feed) accepted it, and marks the slot bootable only with the
//! [`VerifiedPack`] that [`finish`](PackCheck::finish) returns.
use sha2::{Digest, Sha256};

use super::{Sha256Prefix, VerifiedManifest};
use crate::format::{HEADER_BYTES, Header, StreamValidator};
use crate::{Error, FormatError, ManifestError};

/// The streaming check of one pack against one [`VerifiedManifest`]. Built only from a
/// `VerifiedManifest`, so there is no way to check (and so install) a pack against an unverified
/// manifest.
#[derive(Debug, Clone)]
pub struct PackCheck {
    manifest: VerifiedManifest,
    received: u64,
    sha: Sha256,
    npu1: StreamValidator,
    failed: Option<Error>,
}

/// A pack that matched its manifest byte for byte: the only thing an install may mark bootable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedPack {
    manifest: VerifiedManifest,
    header: Header,
}

impl VerifiedPack {
    /// The manifest the pack matched (its sequence is what the device records once installed).
    pub fn manifest(&self) -> &VerifiedManifest {
        &self.manifest
    }

    /// The pack's NPU1 header.
    pub fn header(&self) -> Header {
        self.header
    }
}

impl PackCheck {
    /// Starts checking the pack `manifest` describes.
    pub fn new(manifest: VerifiedManifest) -> Self {
        let npu1 = StreamValidator::new(manifest.pack_len());
        Self {
            manifest,
            received: 0,
            sha: Sha256::new(),
            npu1,
            failed: None,
        }
    }

    /// The manifest being checked against.
    pub fn manifest(&self) -> &VerifiedManifest {
        &self.manifest
    }

    /// Bytes accepted so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Takes the next chunk. `Ok` means the chunk may be written; an error means abort the
    /// download (and every later call returns the same error).
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let outcome = self.take(chunk);
        if let Err(e) = outcome {
            self.failed = Some(e);
        }
        outcome
    }

    /// Ends the download: the pack is the manifest's only if all of it arrived, its SHA-256 is
    /// the manifest's and its NPU1 checksum holds.
    pub fn finish(self) -> Result<VerifiedPack, Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let expected = self.manifest.pack_len();
        if self.received < u64::from(expected) {
            return Err(Error::Manifest(ManifestError::PackShorterThanManifest {
                expected,
                received: self.received,
            }));
        }
        let computed: [u8; 32] = self.sha.finalize().into();
        let stated = self.manifest.pack_sha256();
        if computed != stated {
            return Err(Error::Manifest(ManifestError::PackHashMismatch {
                manifest: Sha256Prefix::of(&stated),
                computed: Sha256Prefix::of(&computed),
            }));
        }
        let header = self.npu1.finish()?;
        Ok(VerifiedPack {
            manifest: self.manifest,
            header,
        })
    }

    fn take(&mut self, chunk: &[u8]) -> Result<(), Error> {
        let expected = self.manifest.pack_len();
        let after = self.received + chunk.len() as u64;
        if after > u64::from(expected) {
            // The part inside the manifest's length is still looked at (never hashed or
            // written): when the pack's own header names another length, that is the reason an
            // operator needs, not "too long".
            let inside = usize::try_from(u64::from(expected) - self.received).unwrap_or(usize::MAX);
            if let Some(prefix) = chunk.get(..inside) {
                self.npu1.feed(prefix).map_err(|e| self.name_length(e))?;
            }
            return Err(Error::Manifest(ManifestError::PackLongerThanManifest {
                expected,
                received: after,
            }));
        }
        self.sha.update(chunk);
        self.npu1.feed(chunk).map_err(|e| self.name_length(e))?;
        let header_done = u64::from(HEADER_BYTES);
        let crossed = self.received < header_done && after >= header_done;
        self.received = after;
        if crossed {
            self.cross_check_header()?;
        }
        Ok(())
    }

    /// The validator checks `total_bytes` against the length it was given, the manifest's: say so
    /// in the manifest's terms.
    fn name_length(&self, e: Error) -> Error {
        match e {
            Error::Format(FormatError::TotalBytesMismatch { total_bytes, .. }) => {
                Error::Manifest(ManifestError::PackLengthDiffersFromManifest {
                    pack_total_bytes: total_bytes,
                    manifest_pack_len: self.manifest.pack_len(),
                })
            }
            other => other,
        }
    }

    /// The header just completed: its checksum word must be the one the manifest names.
    fn cross_check_header(&self) -> Result<(), Error> {
        let Some(header) = self.npu1.header() else {
            // The validator accepted 32 bytes, so it has a header; nothing to compare otherwise.
            return Ok(());
        };
        let manifest = self.manifest.pack_checksum();
        if header.checksum != manifest {
            return Err(Error::Manifest(ManifestError::PackChecksumMismatch {
                manifest,
                pack: header.checksum,
            }));
        }
        Ok(())
    }
}
