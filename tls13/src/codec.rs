//! Bounded readers and writers of TLS's big-endian, length-prefixed encodings. A [`Reader`]
//! never reads outside the slice it was given, and a parse must consume it exactly
//! ([`Reader::finish`]); a [`Writer`] never writes outside its buffer.
use crate::error::{ConfigError, Refusal};

/// Reads fields off a slice; every read that would run past its end is [`Refusal::Truncated`].
pub struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self(bytes)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn rest(&self) -> &'a [u8] {
        self.0
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Refusal> {
        if n > self.0.len() {
            return Err(Refusal::Truncated);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Refusal> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, Refusal> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, Refusal> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn u24(&mut self) -> Result<usize, Refusal> {
        let [a, b, c] = self.array()?;
        Ok(usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c))
    }

    pub fn u32(&mut self) -> Result<u32, Refusal> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// A vector with a one-byte length.
    pub fn vec8(&mut self) -> Result<&'a [u8], Refusal> {
        let n = self.u8()?;
        self.bytes(usize::from(n))
    }

    /// A vector with a two-byte length.
    pub fn vec16(&mut self) -> Result<&'a [u8], Refusal> {
        let n = self.u16()?;
        self.bytes(usize::from(n))
    }

    /// A vector with a three-byte length.
    pub fn vec24(&mut self) -> Result<&'a [u8], Refusal> {
        let n = self.u24()?;
        self.bytes(n)
    }

    /// The parse is over: nothing may be left.
    pub fn finish(&self) -> Result<(), Refusal> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Refusal::TrailingData)
        }
    }
}

/// Writes fields into a buffer; running out of it is [`ConfigError::WriteBufferTooSmall`].
pub struct Writer<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn written(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn bytes(&mut self, b: &[u8]) -> Result<(), ConfigError> {
        let end = self
            .len
            .checked_add(b.len())
            .filter(|&e| e <= self.buf.len())
            .ok_or(ConfigError::WriteBufferTooSmall)?;
        self.buf[self.len..end].copy_from_slice(b);
        self.len = end;
        Ok(())
    }

    pub fn u8(&mut self, v: u8) -> Result<(), ConfigError> {
        self.bytes(&[v])
    }

    pub fn u16(&mut self, v: u16) -> Result<(), ConfigError> {
        self.bytes(&v.to_be_bytes())
    }

    pub fn u32(&mut self, v: u32) -> Result<(), ConfigError> {
        self.bytes(&v.to_be_bytes())
    }

    /// Starts a vector whose length of `width` bytes (1, 2 or 3) is filled by [`Self::end`].
    pub fn begin(&mut self, width: usize) -> Result<Open, ConfigError> {
        let at = self.len;
        self.bytes(&[0u8; 3][..width])?;
        Ok(Open { at, width })
    }

    /// Fills in the length of the vector `open` began.
    pub fn end(&mut self, open: Open) -> Result<(), ConfigError> {
        let body = self.len - open.at - open.width;
        let max = (1usize << (8 * open.width)) - 1;
        if body > max {
            return Err(ConfigError::WriteBufferTooSmall);
        }
        let be = (body as u32).to_be_bytes();
        self.buf[open.at..open.at + open.width].copy_from_slice(&be[4 - open.width..]);
        Ok(())
    }
}

/// A vector whose length is still to be written.
#[must_use]
pub struct Open {
    at: usize,
    width: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_a_vector_longer_than_the_message() {
        let mut r = Reader::new(&[0, 5, 1, 2]);
        assert_eq!(r.vec16(), Err(Refusal::Truncated));
    }

    #[test]
    fn rejects_trailing_bytes() {
        let mut r = Reader::new(&[1, 2]);
        r.u8().unwrap();
        assert_eq!(r.finish(), Err(Refusal::TrailingData));
    }

    #[test]
    fn nested_lengths_are_filled_in() {
        let mut buf = [0u8; 16];
        let mut w = Writer::new(&mut buf);
        let outer = w.begin(3).unwrap();
        let inner = w.begin(2).unwrap();
        w.bytes(b"abc").unwrap();
        w.end(inner).unwrap();
        w.end(outer).unwrap();
        assert_eq!(w.written(), &[0, 0, 5, 0, 3, b'a', b'b', b'c']);
    }

    #[test]
    fn rejects_writing_past_the_buffer() {
        let mut buf = [0u8; 2];
        let mut w = Writer::new(&mut buf);
        assert_eq!(w.bytes(b"abc"), Err(ConfigError::WriteBufferTooSmall));
        assert_eq!(w.len(), 0);
    }
}
