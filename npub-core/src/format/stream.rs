//! [`StreamValidator`]: the loader's checks, applied to a pack as its bytes arrive.
use super::{HEADER_BYTES, Header, REGION_DESC_BYTES, RegionDesc, checks};
use crate::fnv::Fnv1a;
use crate::{Error, FormatError};

/// Validates an NPU1 pack fed in chunks of any size (one byte included), with O(1) state: it keeps
/// the 32-byte header, one 16-byte descriptor in progress and the running FNV-1a, never the payload.
///
/// For any buffer `b` cut into any chunks, `StreamValidator::new(b.len())` fed those chunks and then
/// [`finish`](Self::finish)ed returns exactly what [`super::Blob::parse`]`(b)` returns, error and
/// numbers included. It also rejects as early as the bytes allow: a bad magic after 4 bytes, a wrong
/// version after 8, a `total_bytes` different from the expected length after 12, a region table or a
/// command stream that cannot fit after 16 and 24, each bad descriptor as soon as its 16 bytes are in.
/// Only the checksum has to wait for the last byte.
///
/// Once it has failed it stays failed: every later call returns the same error.
#[derive(Debug, Clone)]
pub struct StreamValidator {
    expected: u32,
    received: u64,
    header: [u8; HEADER_BYTES as usize],
    desc: [u8; REGION_DESC_BYTES as usize],
    next_region: u32,
    fnv: Fnv1a,
    /// False for [`StreamValidator::structure_only`]: the caller hashes the payload itself.
    hash_payload: bool,
    failed: Option<Error>,
}

impl StreamValidator {
    /// A validator for a pack that should be `expected_len` bytes long (the length the signed
    /// manifest states, or the length of the buffer being checked).
    pub fn new(expected_len: u32) -> Self {
        let failed = checks::length(u64::from(expected_len)).err();
        Self {
            expected: expected_len,
            received: 0,
            header: [0; HEADER_BYTES as usize],
            desc: [0; REGION_DESC_BYTES as usize],
            next_region: 0,
            fnv: Fnv1a::new(),
            hash_payload: true,
            failed,
        }
    }

    /// A validator that runs checks 1–8 as the bytes arrive, exactly as [`StreamValidator::new`]
    /// does, but does not hash the payload: [`finish`](Self::finish) then skips check 9.
    ///
    /// For a caller that hashes every byte once in a later pass of its own (a device re-reading
    /// flash computes SHA-256 and FNV-1a together, then calls
    /// [`super::Blob::parse_prehashed`]): the download is still abandoned at the first bad header
    /// or table byte, without paying for FNV-1a twice.
    pub fn structure_only(expected_len: u32) -> Self {
        Self {
            hash_payload: false,
            ..Self::new(expected_len)
        }
    }

    /// Bytes accepted so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The header, once its 32 bytes have arrived and passed checks 2–7.
    pub fn header(&self) -> Option<Header> {
        if self.failed.is_some() || self.received < u64::from(HEADER_BYTES) {
            return None;
        }
        Header::read(&self.header)
    }

    /// Feeds the next bytes. Bytes past the expected length are refused with
    /// [`FormatError::StreamOverrun`] after the ones before them have been checked.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let room = u64::from(self.expected) - self.received;
        let (take, extra) = if chunk.len() as u64 > room {
            chunk.split_at(room as usize)
        } else {
            (chunk, &[][..])
        };
        let mut outcome = self.consume(take);
        if outcome.is_ok() && !extra.is_empty() {
            outcome = Err(Error::Format(FormatError::StreamOverrun {
                expected: self.expected,
            }));
        }
        if let Err(e) = outcome {
            self.failed = Some(e);
        }
        outcome
    }

    /// Ends the stream: the verdict for everything fed. A stream that stopped short gets the error
    /// `Blob::parse` would give the bytes received (too short for a header, or a `total_bytes` that
    /// does not match them).
    pub fn finish(self) -> Result<Header, Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.received < u64::from(self.expected) {
            checks::length(self.received)?;
            let h = Header::read(&self.header)
                .ok_or(Error::Format(FormatError::TooShort { len: self.received }))?;
            checks::total_bytes(h.total_bytes, self.received)?;
        }
        let h = Header::read(&self.header)
            .ok_or(Error::Format(FormatError::TooShort { len: self.received }))?;
        if self.hash_payload {
            checks::checksum(h.checksum, self.fnv.finish())?;
        }
        Ok(h)
    }

    fn consume(&mut self, mut bytes: &[u8]) -> Result<(), Error> {
        // The header, a byte at a time: at most 32 bytes, checked at each word boundary.
        while self.received < u64::from(HEADER_BYTES) {
            let Some((&b, rest)) = bytes.split_first() else {
                return Ok(());
            };
            self.header[self.received as usize] = b;
            self.received += 1;
            bytes = rest;
            self.check_header_word()?;
        }
        if bytes.is_empty() {
            return Ok(());
        }
        if self.hash_payload {
            self.fnv.update(bytes);
        }
        self.consume_table(bytes)?;
        self.received += bytes.len() as u64;
        Ok(())
    }

    /// Runs the checks a header word enables, when `received` has just completed that word.
    fn check_header_word(&mut self) -> Result<(), Error> {
        let w = |i: usize| {
            u32::from_le_bytes([
                self.header[i * 4],
                self.header[i * 4 + 1],
                self.header[i * 4 + 2],
                self.header[i * 4 + 3],
            ])
        };
        match self.received {
            4 => checks::magic(w(0)),
            8 => checks::version(w(1)),
            12 => checks::total_bytes(w(2), u64::from(self.expected)),
            16 => checks::region_table(w(3), w(2)),
            24 => checks::command_stream(w(4), w(5), w(2)),
            _ => Ok(()),
        }
    }

    /// Collects descriptor bytes out of a payload chunk starting at `self.received`, checking each
    /// descriptor when its 16 bytes are complete.
    fn consume_table(&mut self, chunk: &[u8]) -> Result<(), Error> {
        let h = Header::read(&self.header)
            .ok_or(Error::Format(FormatError::TooShort { len: self.received }))?;
        let table_end = h.region_table_end();
        let mut pos = self.received;
        let mut chunk = chunk;
        while pos < table_end && !chunk.is_empty() {
            let in_desc = ((pos - u64::from(HEADER_BYTES)) % u64::from(REGION_DESC_BYTES)) as usize;
            let n = (REGION_DESC_BYTES as usize - in_desc).min(chunk.len());
            self.desc[in_desc..in_desc + n].copy_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
            pos += n as u64;
            if in_desc + n == REGION_DESC_BYTES as usize {
                let desc = RegionDesc::read(self.next_region, &self.desc)
                    .ok_or(Error::Format(FormatError::TooShort { len: pos }))?;
                self.next_region += 1;
                checks::region(&desc, h.total_bytes)?;
            }
        }
        Ok(())
    }
}
