//! The response heads the device lane writes itself (`lane.rs`): byte for byte what hyper writes
//! for the router's answer to the same request, save the order of the headers.
//!
//! | Answer                   | Status line             | Headers                                                        |
//! |--------------------------|-------------------------|----------------------------------------------------------------|
//! | poll, nothing newer      | `204 No Content`        | `npub-poll-interval`, `npub-keyring-sequence`                  |
//! | poll, `If-None-Match` hit | `304 Not Modified`     | the two above, `etag`                                          |
//! | poll, a newer manifest   | `200 OK`                | the two above, `etag`, `npub-sequence`, `content-type`, `content-length`; then the 280 bytes |
//! | pack, whole              | `200 OK`                | `etag`, `accept-ranges`, `content-type`, `content-length`      |
//! | pack, one range          | `206 Partial Content`   | the four above, `content-range: bytes A-B/LEN`                 |
//!
//! Every head ends with `date` (cached per second, as hyper does) and, when the request said
//! `Connection: close`, `connection: close`. A head is built in a buffer the connection keeps, so
//! building it allocates nothing once that buffer exists.
use std::cell::Cell;
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the only form a server sends.
const DATE_LEN: usize = 29;

thread_local! {
    /// The `Date` value of the current second on this worker thread.
    static DATE: Cell<(u64, [u8; DATE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LEN])) };
}

/// A response head being written into `out` (which it clears first).
pub(crate) struct Head<'o> {
    out: &'o mut Vec<u8>,
}

impl<'o> Head<'o> {
    /// Starts a head with `status_line` (`b"200 OK"`).
    pub(crate) fn new(out: &'o mut Vec<u8>, status_line: &[u8]) -> Self {
        out.clear();
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(status_line);
        out.extend_from_slice(b"\r\n");
        Self { out }
    }

    /// Starts a head with `start`: a status line and headers written by [`Self::new`] before.
    pub(crate) fn resume(out: &'o mut Vec<u8>, start: &[u8]) -> Self {
        out.clear();
        out.extend_from_slice(start);
        Self { out }
    }

    /// One header; `value` is a header value already (from a `HeaderValue` or a constant).
    pub(crate) fn header(self, name: &[u8], value: &[u8]) -> Self {
        self.out.extend_from_slice(name);
        self.out.extend_from_slice(b": ");
        self.out.extend_from_slice(value);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// One header whose value is a number.
    pub(crate) fn number(self, name: &[u8], value: u64) -> Self {
        self.out.extend_from_slice(name);
        self.out.extend_from_slice(b": ");
        // Formatting into a Vec with room to spare does not allocate.
        let _ = write!(self.out, "{value}\r\n");
        self
    }

    /// `content-range: bytes START-END/LEN`.
    pub(crate) fn content_range(self, start: u64, end: u64, len: u64) -> Self {
        let _ = write!(self.out, "content-range: bytes {start}-{end}/{len}\r\n");
        self
    }

    /// Ends the head with `date` for `now` (and `connection: close` if `close`), then appends
    /// `body`.
    pub(crate) fn finish(self, close: bool, now: SystemTime, body: &[u8]) {
        self.out.extend_from_slice(b"date: ");
        self.out.extend_from_slice(&date(now));
        if close {
            self.out.extend_from_slice(b"\r\nconnection: close");
        }
        self.out.extend_from_slice(b"\r\n\r\n");
        self.out.extend_from_slice(body);
    }
}

/// The `Date` value of `now`, formatted once a second per thread.
fn date(now: SystemTime) -> [u8; DATE_LEN] {
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|cached| {
        let (at, value) = cached.get();
        if at == second {
            return value;
        }
        let mut value = [0u8; DATE_LEN];
        let mut cursor = &mut value[..];
        let _ = write!(cursor, "{}", httpdate::HttpDate::from(now));
        cached.set((second, value));
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_head_hyper_would() {
        let mut out = Vec::with_capacity(512);
        Head::new(&mut out, b"206 Partial Content")
            .header(b"etag", b"\"ab\"")
            .number(b"content-length", 10)
            .content_range(90, 99, 100)
            .finish(true, SystemTime::now(), b"body");
        let text = std::str::from_utf8(&out).unwrap();
        let date = std::str::from_utf8(&date(SystemTime::now()))
            .unwrap()
            .to_owned();
        assert_eq!(
            text,
            format!(
                "HTTP/1.1 206 Partial Content\r\netag: \"ab\"\r\ncontent-length: 10\r\n\
                 content-range: bytes 90-99/100\r\ndate: {date}\r\nconnection: close\r\n\r\nbody"
            )
        );
        // The same form hyper and every HTTP/1.1 server send (IMF-fixdate).
        assert!(httpdate::parse_http_date(&date).is_ok(), "{date}");
        assert!(date.ends_with(" GMT"), "{date}");
    }
}
