//! The bytes on the wire: the server URL, request formatting into a fixed buffer, and the
//! response head as httparse parses it, reduced to the few headers the device API uses.
//!
//! | header                | used for                                                     | refused when                          |
//! |-----------------------|--------------------------------------------------------------|---------------------------------------|
//! | `Content-Length`      | every body the transport reads, and keep-alive              | not a number; two that disagree       |
//! | `Transfer-Encoding`   | — (the device API never chunks)                               | a body the transport must read has one |
//! | `Content-Range`       | a 206: the bytes really sent, and the pack's total length    | not `bytes FIRST-LAST/TOTAL`          |
//! | `ETag`                | the manifest's, sent back as `If-None-Match`                 | — (longer than [`ETAG_MAX`]: not kept) |
//! | `Npub-Poll-Interval`  | seconds until the next poll                                  | — (garbage is ignored)                |
//! | `Connection: close`   | not reusing the connection                                   | —                                     |
use core::fmt;

use super::error::HttpError;
use crate::events::{EVENT_LOG_BYTES, EventLog, MAX_EVENT_LINES};

/// Headers httparse is given room for; the server sends fewer than ten.
pub const MAX_HEADERS: usize = 24;
/// The longest `ETag` kept (the server's are `"m<sequence>-<hw class>"`).
pub const ETAG_MAX: usize = 80;

/// The server, from `http://HOST[:PORT][/PATH]` or `https://…`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server<'a> {
    host: &'a str,
    port: u16,
    path: &'a str,
    tls: bool,
}

impl<'a> Server<'a> {
    /// Parses `http://HOST[:PORT][/PATH]` or `https://HOST[:PORT][/PATH]` (TLS is the link's:
    /// [`super::Link::connect_tls`]).
    pub fn parse(url: &'a str) -> Result<Self, HttpError> {
        let (rest, tls) = match url.strip_prefix("https://") {
            Some(rest) => (rest, true),
            None => (
                url.strip_prefix("http://").ok_or(HttpError::BadUrl(
                    "the URL must start with http:// or https://",
                ))?,
                false,
            ),
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .ok()
                    .filter(|&p| p != 0)
                    .ok_or(HttpError::BadUrl("the port is not a number in 1..=65535"))?,
            ),
            None => (authority, if tls { 443 } else { 80 }),
        };
        let printable = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        if host.is_empty() || !printable(host) || host.contains('@') {
            return Err(HttpError::BadUrl("the host is empty or not printable"));
        }
        if !printable(path) || path.contains(['?', '#']) {
            return Err(HttpError::BadUrl(
                "the path is not printable or has a query",
            ));
        }
        Ok(Self {
            host,
            port,
            path: path.trim_end_matches('/'),
            tls,
        })
    }

    /// `https://`: the connection is TLS.
    pub const fn is_tls(&self) -> bool {
        self.tls
    }

    /// Host name or address, as given.
    pub const fn host(&self) -> &'a str {
        self.host
    }

    /// TCP port (80, or 443 for `https://`, when not given).
    pub const fn port(&self) -> u16 {
        self.port
    }

    /// Path prefix before `/api/v1/…`, without a trailing slash (often empty).
    pub const fn path(&self) -> &'a str {
        self.path
    }
}

/// Where a redirect points, as positions in its `Location` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redirect {
    /// `HOST[:PORT]` as written, for the `Host` header (a presigned URL signs it verbatim);
    /// `None` for a path on the server itself.
    pub authority: Option<(usize, usize)>,
    /// The host alone.
    pub host: Option<(usize, usize)>,
    /// The TCP port (80, or 443 for `https`, when not given).
    pub port: u16,
    /// `https://`: the hop is made over TLS.
    pub tls: bool,
    /// The request target: path and query.
    pub target: (usize, usize),
}

impl Redirect {
    /// Parses a `Location`: an absolute `http[s]://HOST[:PORT]/PATH[?QUERY]`, or a `/PATH[?QUERY]`
    /// on the origin that redirected. Printable ASCII only, so nothing can end a header line.
    pub fn parse(location: &[u8]) -> Result<Self, HttpError> {
        let unusable = HttpError::RedirectWithoutLocation { status: 0 };
        if location.is_empty() || !location.iter().all(|b| b.is_ascii_graphic()) {
            return Err(unusable);
        }
        if location.starts_with(b"/") && !location.starts_with(b"//") {
            return Ok(Self {
                authority: None,
                host: None,
                port: 0,
                tls: false,
                target: (0, location.len()),
            });
        }
        let scheme_is = |s: &[u8]| {
            location
                .get(..s.len())
                .is_some_and(|l| l.eq_ignore_ascii_case(s))
        };
        let tls = scheme_is(b"https://");
        if !tls && !scheme_is(b"http://") {
            let scheme = location.iter().position(|&b| b == b':');
            return Err(match scheme {
                Some(i) if i > 0 && location[..i].iter().all(u8::is_ascii_alphabetic) => {
                    HttpError::RedirectNotHttp
                }
                _ => unusable,
            });
        }
        let start = if tls { 8 } else { 7 };
        let end = location[start..]
            .iter()
            .position(|&b| b == b'/')
            .map_or(location.len(), |i| start + i);
        let authority = &location[start..end];
        let (host_len, port) = match authority.iter().rposition(|&b| b == b':') {
            Some(i) => (
                i,
                core::str::from_utf8(&authority[i + 1..])
                    .ok()
                    .and_then(|p| p.parse::<u16>().ok())
                    .filter(|&p| p != 0)
                    .ok_or(unusable)?,
            ),
            None => (authority.len(), if tls { 443 } else { 80 }),
        };
        if host_len == 0 || authority.contains(&b'@') {
            return Err(unusable);
        }
        Ok(Self {
            authority: Some((start, end)),
            host: Some((start, start + host_len)),
            port,
            tls,
            // An empty path is the root.
            target: if end == location.len() {
                (0, 0)
            } else {
                (end, location.len())
            },
        })
    }
}

/// A `fmt::Write` over a fixed buffer that fails instead of growing.
pub struct Cursor<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> Cursor<'b> {
    /// An empty cursor over `buf`.
    pub fn new(buf: &'b mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    /// Bytes written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends `bytes`, or fails if they do not fit.
    pub fn put(&mut self, bytes: &[u8]) -> fmt::Result {
        let end = self.len.checked_add(bytes.len()).ok_or(fmt::Error)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }

    /// Appends `bytes` as lowercase hex.
    pub fn hex(&mut self, bytes: &[u8]) -> fmt::Result {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for &b in bytes {
            self.put(&[DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])?;
        }
        Ok(())
    }
}

impl fmt::Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.put(s.as_bytes())
    }
}

/// Writes a string into a JSON string literal's inside: `"` and `\` escaped, control characters
/// (which the server refuses in a reason) as spaces, and cut at a character boundary once
/// `room` bytes are used (the reason is best effort, the report must still go).
pub struct JsonText<'c, 'b> {
    /// Where the text goes.
    pub out: &'c mut Cursor<'b>,
    /// Bytes it may still use.
    pub room: usize,
}

impl fmt::Write for JsonText<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            let mut tmp = [0u8; 4];
            let bytes: &[u8] = match c {
                '"' => b"\\\"",
                '\\' => b"\\\\",
                c if c.is_control() => b" ",
                c => c.encode_utf8(&mut tmp).as_bytes(),
            };
            if bytes.len() > self.room {
                self.room = 0;
                return Ok(());
            }
            self.room -= bytes.len();
            self.out.put(bytes)?;
        }
        Ok(())
    }
}

/// Room for a report's `events` in the transmit buffer: the whole ring as JSON
/// (`,"events":[…]`, each line quoted, commas between) unless its lines are full of `"` and `\\`,
/// which JSON escapes; then the oldest lines are left out until the rest fits.
pub const EVENTS_BYTES: usize = EVENT_LOG_BYTES + 3 * MAX_EVENT_LINES + EVENTS_FRAME;
/// `,"events":[` and `]`.
const EVENTS_FRAME: usize = 12;

/// One event line as a JSON string, quotes included (lines are printable ASCII: only `"` and `\\`
/// are escaped).
fn event_json_len(line: &str) -> usize {
    2 + line.len() + line.bytes().filter(|b| matches!(b, b'"' | b'\\')).count()
}

/// How many of `log`'s oldest lines to leave out so that the rest fits in [`EVENTS_BYTES`] as
/// JSON, and that JSON's length: `(0, 0)` for an empty log, which sends no `events`.
#[inline(never)]
pub fn events_json_fitting(log: &EventLog) -> (usize, usize) {
    if log.is_empty() {
        return (0, 0);
    }
    let mut skip = 0;
    loop {
        let kept = log.len() - skip;
        let len = EVENTS_FRAME
            + kept.saturating_sub(1)
            + log.lines().skip(skip).map(event_json_len).sum::<usize>();
        if len <= EVENTS_BYTES || kept == 0 {
            return (skip, len);
        }
        skip += 1;
    }
}

/// Writes `,"events":[…]` with `log`'s lines after the `skip` oldest ([`events_json_fitting`]);
/// nothing for an empty log.
#[inline(never)]
pub fn events_json(out: &mut Cursor<'_>, log: &EventLog, skip: usize) -> fmt::Result {
    if log.is_empty() {
        return Ok(());
    }
    out.put(b",\"events\":[")?;
    for (i, line) in log.lines().skip(skip).enumerate() {
        if i > 0 {
            out.put(b",")?;
        }
        out.put(b"\"")?;
        for &b in line.as_bytes() {
            if matches!(b, b'"' | b'\\') {
                out.put(b"\\")?;
            }
            out.put(&[b])?;
        }
        out.put(b"\"")?;
    }
    out.put(b"]")
}

/// `Content-Range: bytes FIRST-LAST/TOTAL` (RFC 9110 §14.4), as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentRange {
    /// First byte sent.
    pub first: u64,
    /// Last byte sent (inclusive).
    pub last: u64,
    /// The whole representation's length.
    pub total: u64,
}

impl ContentRange {
    /// Parses the header value; `None` unless it is exactly a satisfied byte range with a known
    /// total and `FIRST ≤ LAST < TOTAL`.
    pub fn parse(value: &[u8]) -> Option<Self> {
        let value = core::str::from_utf8(value).ok()?.trim();
        let rest = value.strip_prefix("bytes ")?;
        let (range, total) = rest.split_once('/')?;
        let (first, last) = range.split_once('-')?;
        let num = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
        };
        let (first, last, total) = (num(first)?, num(last)?, num(total)?);
        (first <= last && last < total).then_some(Self { first, last, total })
    }
}

/// The response head, reduced to what the transport uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// `Content-Length`, if present.
    pub content_length: Option<u64>,
    /// A `Transfer-Encoding` header was present.
    pub transfer_coding: bool,
    /// `Content-Range`: absent (`None`), or parsed (`Some(None)` = malformed).
    pub content_range: Option<Option<ContentRange>>,
    /// `ETag`, if present and at most [`ETAG_MAX`] bytes.
    pub etag: Option<([u8; ETAG_MAX], usize)>,
    /// `Npub-Poll-Interval` in seconds, if present and a number.
    pub poll_interval_s: Option<u32>,
    /// `Npub-Keyring-Sequence`, if present and a number.
    pub keyring_sequence: Option<u64>,
    /// The connection must not be reused (`Connection: close`, or HTTP/1.0 without keep-alive).
    pub close: bool,
    /// `Location`: where its value lies in the head's bytes (start, end), trimmed.
    pub location: Option<(u16, u16)>,
}

/// Parses the response head at the start of `buf`: `Ok(None)` while it is incomplete,
/// `Ok(Some((head, len)))` with the head's length once it is whole.
pub fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf).map_err(HttpError::MalformedHead)? {
        httparse::Status::Partial => return Ok(None),
        httparse::Status::Complete(len) => len,
    };
    let status = resp
        .code
        .ok_or(HttpError::MalformedHead(httparse::Error::Status))?;
    let mut head = Head {
        status,
        content_length: None,
        transfer_coding: false,
        content_range: None,
        etag: None,
        poll_interval_s: None,
        keyring_sequence: None,
        close: resp.version == Some(0),
        location: None,
    };
    for h in resp.headers.iter() {
        let name = h.name;
        let value = trim(h.value);
        if name.eq_ignore_ascii_case("content-length") {
            let n = decimal(value).ok_or(HttpError::MalformedHeader {
                name: "Content-Length",
            })?;
            if head.content_length.is_some_and(|m| m != n) {
                return Err(HttpError::ConflictingContentLength);
            }
            head.content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            head.transfer_coding = true;
        } else if name.eq_ignore_ascii_case("content-range") {
            head.content_range = Some(ContentRange::parse(value));
        } else if name.eq_ignore_ascii_case("etag") {
            if value.len() <= ETAG_MAX && value.iter().all(|b| b.is_ascii_graphic()) {
                let mut tag = [0u8; ETAG_MAX];
                tag[..value.len()].copy_from_slice(value);
                head.etag = Some((tag, value.len()));
            }
        } else if name.eq_ignore_ascii_case("npub-poll-interval") {
            head.poll_interval_s = decimal(value).and_then(|n| u32::try_from(n).ok());
        } else if name.eq_ignore_ascii_case("npub-keyring-sequence") {
            head.keyring_sequence = Some(decimal(value).ok_or(HttpError::MalformedHeader {
                name: "Npub-Keyring-Sequence",
            })?);
        } else if name.eq_ignore_ascii_case("location") {
            // A slice of `buf`: its place, so the value can be read there after the parse.
            let start = value.as_ptr() as usize - buf.as_ptr() as usize;
            head.location = u16::try_from(start)
                .ok()
                .zip(u16::try_from(start + value.len()).ok());
        } else if name.eq_ignore_ascii_case("connection") {
            let v = value;
            if v.eq_ignore_ascii_case(b"close") {
                head.close = true;
            } else if v.eq_ignore_ascii_case(b"keep-alive") {
                head.close = false;
            }
        }
    }
    Ok(Some((head, len)))
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &v[start..end]
}

/// A non-empty run of ASCII digits that fits a `u64`.
fn decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The event log as JSON: valid, escaped, every line as recorded; a log whose escapes would
    /// overflow the transmit buffer's room leaves its oldest lines out, never a broken body.
    #[test]
    fn writes_the_event_log_as_json_within_its_room() {
        let mut log = EventLog::new();
        let mut out = [0u8; EVENTS_BYTES];
        let (skip, len) = events_json_fitting(&log);
        assert_eq!((skip, len), (0, 0), "an empty log sends nothing");
        log.record(r#"app: said "hi" \ bye"#).unwrap();
        log.record("").unwrap();
        let (skip, len) = events_json_fitting(&log);
        let mut c = Cursor::new(&mut out);
        events_json(&mut c, &log, skip).unwrap();
        assert_eq!(c.len(), len);
        let v: serde_json::Value =
            serde_json::from_slice(&[b"{\"x\":0", &out[..len], b"}"].concat()).unwrap();
        assert_eq!(
            v["events"],
            serde_json::json!([r#"app: said "hi" \ bye"#, ""])
        );

        let quotes = "\"".repeat(EVENT_LOG_BYTES / MAX_EVENT_LINES - 1);
        log.clear();
        for _ in 0..MAX_EVENT_LINES {
            log.record(&quotes).unwrap();
        }
        assert_eq!(log.len(), MAX_EVENT_LINES);
        let (skip, len) = events_json_fitting(&log);
        assert!(
            skip > 0 && len <= EVENTS_BYTES,
            "{skip} left out, {len} bytes"
        );
        let mut c = Cursor::new(&mut out);
        events_json(&mut c, &log, skip).unwrap();
        assert_eq!(c.len(), len);
        let v: serde_json::Value =
            serde_json::from_slice(&[b"{\"x\":0", &out[..len], b"}"].concat()).unwrap();
        let sent = v["events"].as_array().unwrap();
        assert_eq!(sent.len(), MAX_EVENT_LINES - skip);
        assert!(sent.iter().all(|l| l == &serde_json::json!(quotes)));
    }

    #[test]
    fn rejects_content_ranges_that_are_not_one_satisfied_byte_range() {
        assert_eq!(
            ContentRange::parse(b"bytes 0-99/100"),
            Some(ContentRange {
                first: 0,
                last: 99,
                total: 100
            })
        );
        for bad in [
            &b"bytes 0-99/*"[..],
            b"bytes */100",
            b"bytes 10-5/100",
            b"bytes 0-100/100",
            b"items 0-9/10",
            b"bytes -1-9/10",
            b"bytes 0-9/10, 20-29/30",
            b"bytes 0-99999999999999999999/1",
        ] {
            assert_eq!(
                ContentRange::parse(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    fn part2(loc: &[u8], (a, b): (usize, usize)) -> &[u8] {
        &loc[a..b]
    }

    #[test]
    fn reads_a_redirect_location_as_authority_host_port_and_target() {
        let loc = b"http://127.0.0.1:9000/bucket/p?X-Amz-Signature=ab";
        let r = Redirect::parse(loc).unwrap();
        let part = |(a, b): (usize, usize)| &loc[a..b];
        assert_eq!(part(r.authority.unwrap()), b"127.0.0.1:9000");
        assert_eq!(part(r.host.unwrap()), b"127.0.0.1");
        assert_eq!(r.port, 9000);
        assert_eq!(part(r.target), b"/bucket/p?X-Amz-Signature=ab");
        let r = Redirect::parse(b"HTTP://bucket.example").unwrap();
        assert_eq!(
            (r.port, r.tls, r.target),
            (80, false, (0, 0)),
            "no path: the root"
        );
        let loc = b"https://bucket.example/p";
        let r = Redirect::parse(loc).unwrap();
        assert_eq!((r.port, r.tls), (443, true));
        assert_eq!(part2(loc, r.host.unwrap()), b"bucket.example");
        let r = Redirect::parse(b"/elsewhere?x=1").unwrap();
        assert_eq!(
            (r.authority, r.target),
            (None, (0, 14)),
            "a path on the server itself"
        );
    }

    #[test]
    fn rejects_redirect_locations_it_cannot_follow() {
        for (bad, want) in [
            (&b""[..], HttpError::RedirectWithoutLocation { status: 0 }),
            (b"file:///etc/passwd", HttpError::RedirectNotHttp),
            (
                b"https://",
                HttpError::RedirectWithoutLocation { status: 0 },
            ),
            (b"ftp://bucket.example/p", HttpError::RedirectNotHttp),
            (
                b"//bucket.example/p",
                HttpError::RedirectWithoutLocation { status: 0 },
            ),
            (
                b"http://u@h/p",
                HttpError::RedirectWithoutLocation { status: 0 },
            ),
            (
                b"http://h:0/p",
                HttpError::RedirectWithoutLocation { status: 0 },
            ),
            (
                b"http://:80/p",
                HttpError::RedirectWithoutLocation { status: 0 },
            ),
            (
                b"http://h/a b",
                HttpError::RedirectWithoutLocation { status: 0 },
            ),
            (
                b"http://h/p\r\nX: y",
                HttpError::RedirectWithoutLocation { status: 0 },
            ),
        ] {
            assert_eq!(
                Redirect::parse(bad),
                Err(want),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn rejects_urls_that_are_not_http_or_https() {
        assert_eq!(
            Server::parse("http://10.0.2.2:8080/"),
            Ok(Server {
                host: "10.0.2.2",
                port: 8080,
                path: "",
                tls: false,
            })
        );
        assert_eq!(
            Server::parse("http://fleet/npub"),
            Ok(Server {
                host: "fleet",
                port: 80,
                path: "/npub",
                tls: false,
            })
        );
        assert_eq!(
            Server::parse("https://fleet"),
            Ok(Server {
                host: "fleet",
                port: 443,
                path: "",
                tls: true,
            })
        );
        for bad in [
            "ftp://h",
            "HTTPS://h",
            "https://",
            "http://",
            "http://h:0",
            "http://h:99999",
            "http://u@h",
            "http://h/p?q",
        ] {
            assert!(
                matches!(Server::parse(bad), Err(HttpError::BadUrl(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn rejects_conflicting_or_garbage_content_lengths() {
        let two = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
        assert_eq!(parse_head(two), Err(HttpError::ConflictingContentLength));
        let garbage = b"HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n";
        assert_eq!(
            parse_head(garbage),
            Err(HttpError::MalformedHeader {
                name: "Content-Length"
            })
        );
        assert!(matches!(
            parse_head(b"SSH-2.0-x\r\n\r\n"),
            Err(HttpError::MalformedHead(_))
        ));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nX: y\r\n"), Ok(None));
    }
}
