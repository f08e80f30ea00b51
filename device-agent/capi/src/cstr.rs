//! Text for C: formatting into the caller's buffer as a NUL-terminated string, cut to fit on a
//! character boundary. A leaf: the messages and the transport's report reasons both use it.
use core::ffi::c_char;
use core::fmt::{self, Write};
use core::ptr::NonNull;

/// Writes into a byte buffer, keeping the last byte for a NUL; counts what did not fit.
pub struct Truncating<'a> {
    pub buf: &'a mut [u8],
    pub len: usize,
    pub wanted: usize,
}

impl Write for Truncating<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.wanted += s.len();
        let room = self.buf.len().saturating_sub(1).saturating_sub(self.len);
        // Cut on a character boundary, so the text stays UTF-8.
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

/// The caller's text buffer: `len` bytes at `buf`, or none when `buf` is NULL (the caller
/// asks only for a code).
///
/// # Safety
/// `buf` is NULL or `len` bytes writable, and nothing else reads or writes them, for `'a`.
pub unsafe fn c_buf<'a>(buf: *mut c_char, len: usize) -> &'a mut [u8] {
    match NonNull::new(buf.cast::<u8>()) {
        // SAFETY: `len` writable bytes, as the caller promises.
        Some(p) => unsafe { core::slice::from_raw_parts_mut(p.as_ptr(), len) },
        None => &mut [],
    }
}

/// Formats `args` into `buf` as a NUL-terminated string (truncated to fit); returns the length
/// the whole text needs, without its NUL.
pub fn write_c(buf: &mut [u8], args: fmt::Arguments<'_>) -> usize {
    let mut t = Truncating {
        buf,
        len: 0,
        wanted: 0,
    };
    let _ = t.write_fmt(args);
    let (len, wanted) = (t.len, t.wanted);
    if let Some(b) = buf.get_mut(len) {
        *b = 0;
    }
    wanted
}
