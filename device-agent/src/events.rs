//! The device's event log: its last events as short lines of printable ASCII, in a bounded ring
//! in RAM, sent as the `events` of a failure report (`failed`, `rolled_back`) so that the server's
//! device page shows what led up to the failure.
//!
//! The agent writes its own lines (a download started, resumed or retried, a hash mismatch, a
//! refusal, an install pending, confirmed or reverted, a boot that fell back); the firmware adds
//! its own through [`crate::Agent::record_event`] (C: `npub_agent_record_event`). The limits are
//! the server's (`MAX_AGENT_EVENTS`, `MAX_AGENT_EVENT_CHARS` in `server/src/device/routes.rs`):
//! a line the server would refuse is refused here, when it is recorded, not when the report that
//! carries it is sent. The log is not kept across a reboot: the journal holds what must survive.
//!
//! Ring layout ([`EVENT_LOG_BYTES`] bytes): each line is stored whole (never split at the ring's
//! end, so that it reads as one `&str`) as
//!
//! | bytes | what                                            |
//! |-------|-------------------------------------------------|
//! | 1     | `n`: the line's length, 0..=[`MAX_EVENT_CHARS`] |
//! | `n`   | the line, printable ASCII (0x20..=0x7E)         |
//!
//! oldest first from `head`, up to `tail`; a line that does not fit before the ring's end starts
//! again at offset 0 (`wrap` then marks where the older lines end). A new line pushes out the
//! oldest ones it needs the room of, and the oldest when it would be the 17th. Nothing is ever
//! moved: no `memmove` in the firmware for it (the agent core's flash budget, `tests/size.rs`).
use crate::error::{Error, EventError};

/// Bytes of the ring: about five lines of the longest kind, or a dozen of the agent's own.
pub const EVENT_LOG_BYTES: usize = 320;
/// Most lines kept and sent (the server takes at most 16).
pub const MAX_EVENT_LINES: usize = 16;
/// Longest line, in characters (the server takes at most 64).
pub const MAX_EVENT_CHARS: usize = 64;

/// The agent's last events (see the module's table).
#[derive(Clone, PartialEq, Eq)]
pub struct EventLog {
    bytes: [u8; EVENT_LOG_BYTES],
    /// Where the oldest line starts.
    head: u16,
    /// Where the next line goes.
    tail: u16,
    /// While the newer lines have started again at offset 0: where the older ones end.
    wrap: Option<u16>,
    lines: u8,
}

impl core::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.lines()).finish()
    }
}

impl Default for EventLog {
    fn default() -> Self {
        Self::new()
    }
}

impl EventLog {
    /// An empty log.
    pub const fn new() -> Self {
        Self {
            bytes: [0; EVENT_LOG_BYTES],
            head: 0,
            tail: 0,
            wrap: None,
            lines: 0,
        }
    }

    /// Adds `line` (a `&str`, or bytes from C) as the newest event: at most [`MAX_EVENT_CHARS`]
    /// characters, each printable ASCII (space to `~`). A refused line changes nothing.
    pub fn record(&mut self, line: impl AsRef<[u8]>) -> Result<(), EventError> {
        let bytes = line.as_ref();
        if let Some(at) = bytes.iter().position(|b| !(b' '..=b'~').contains(b)) {
            return Err(EventError::NotPrintable { at });
        }
        if bytes.len() > MAX_EVENT_CHARS {
            return Err(EventError::TooLong {
                len: bytes.len(),
                max: MAX_EVENT_CHARS,
            });
        }
        self.push(&[bytes]);
        Ok(())
    }

    /// The agent's own line: `what` (printable, short: the agent's constants) and, unless
    /// `sequence` is 0 (no manifest has it), ` seq N`.
    #[inline(never)]
    pub(crate) fn note(&mut self, what: &'static str, sequence: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = sequence;
        while n > 0 {
            let (q, r) = div10(n);
            at -= 1;
            digits[at] = b'0' + r;
            n = q;
        }
        let seq: &[u8] = if sequence > 0 { b" seq " } else { b"" };
        self.push(&[what.as_bytes(), seq, &digits[at..]]);
    }

    /// Appends the concatenation of `parts` (checked by the caller; cut at [`MAX_EVENT_CHARS`]
    /// bytes) as one line, pushing out the oldest lines it needs the room of.
    fn push(&mut self, parts: &[&[u8]]) {
        let len = parts
            .iter()
            .map(|p| p.len())
            .sum::<usize>()
            .min(MAX_EVENT_CHARS);
        let need = len + 1;
        let at = loop {
            let tail = usize::from(self.tail);
            if usize::from(self.lines) >= MAX_EVENT_LINES {
                self.drop_oldest();
            } else if self.wrap.is_none() && tail + need <= EVENT_LOG_BYTES {
                break tail;
            } else if self.wrap.is_none() {
                // No room before the ring's end: start again at its beginning.
                self.wrap = Some(self.tail);
                self.tail = 0;
            } else if tail + need <= usize::from(self.head) {
                break tail;
            } else {
                self.drop_oldest();
            }
        };
        self.bytes[at] = len as u8;
        let mut to = at + 1;
        let end = to + len;
        for p in parts {
            let n = p.len().min(end - to);
            self.bytes[to..to + n].copy_from_slice(&p[..n]);
            to += n;
        }
        self.tail = end as u16;
        self.lines += 1;
    }

    /// Forgets the oldest line.
    fn drop_oldest(&mut self) {
        self.head += 1 + u16::from(self.bytes[usize::from(self.head)]);
        self.lines -= 1;
        if self.wrap == Some(self.head) {
            // The older lines are all gone: the newer ones, from 0, are all there is.
            self.head = 0;
            self.wrap = None;
        }
        if self.lines == 0 {
            self.clear();
        }
    }

    /// The lines, oldest first.
    pub fn lines(&self) -> Lines<'_> {
        let (head, tail) = (usize::from(self.head), usize::from(self.tail));
        let (older, newer) = match self.wrap {
            Some(wrap) => (&self.bytes[head..usize::from(wrap)], &self.bytes[..tail]),
            None => (&self.bytes[head..tail], &self.bytes[..0]),
        };
        Lines { older, newer }
    }

    /// How many lines it holds.
    pub fn len(&self) -> usize {
        usize::from(self.lines)
    }

    /// Whether it holds no line.
    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    /// Forgets every line.
    pub fn clear(&mut self) {
        self.head = 0;
        self.tail = 0;
        self.wrap = None;
        self.lines = 0;
    }
}

/// `n / 10` and `n % 10` by long division in 16-bit limbs: 32-bit divisions only, which the
/// Cortex-M does in hardware (a `u64` division would link the 900-byte software one).
fn div10(n: u64) -> (u64, u8) {
    let (mut q, mut r) = (0u64, 0u32);
    for limb in (0..4).rev() {
        let cur = (r << 16) | ((n >> (16 * limb)) as u32 & 0xFFFF);
        q |= u64::from(cur / 10) << (16 * limb);
        r = cur % 10;
    }
    (q, r as u8)
}

/// The lines of an [`EventLog`], oldest first.
#[derive(Debug, Clone)]
pub struct Lines<'a> {
    older: &'a [u8],
    newer: &'a [u8],
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.older.is_empty() {
            core::mem::swap(&mut self.older, &mut self.newer);
        }
        let (&len, tail) = self.older.split_first()?;
        let (line, rest) = tail.split_at(usize::from(len).min(tail.len()));
        self.older = rest;
        // Only printable ASCII goes in: always UTF-8.
        Some(core::str::from_utf8(line).unwrap_or(""))
    }
}

/// The agent's line for an install that ended with `e` (without its sequence: the caller adds
/// it). The report's `reason` carries the whole error; the line says what kind of end it was.
pub(crate) fn failure_line(e: &Error) -> &'static str {
    use npub_core::{Error as Core, ManifestError};
    match e {
        Error::Rejected(Core::Manifest(ManifestError::PackHashMismatch { .. }))
        | Error::DigestMismatch { .. } => "hash mismatch",
        Error::Rejected(Core::Manifest(_)) => "manifest refused",
        Error::Rejected(Core::Release(_)) => "release signatures refused",
        Error::Rejected(_) => "pack refused by validation",
        Error::IoBindingsMismatch => "refused: IO bindings differ",
        Error::KeyringUpdate { .. } | Error::KeyringUpdatesMissing { .. } => {
            "keyring update refused"
        }
        Error::Transport(_) | Error::TransportOverrun { .. } | Error::PackTruncated { .. } => {
            "download interrupted"
        }
        Error::SelfTestFailed { .. } | Error::SelfTestDigest { .. } => "self-test failed, reverted",
        _ => "install failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(log: &EventLog) -> Vec<&str> {
        log.lines().collect()
    }

    #[test]
    fn keeps_lines_oldest_first_with_the_agents_sequence() {
        let mut log = EventLog::new();
        log.note("download started", 12);
        log.record("app: camera up").unwrap();
        log.note("boot: nothing bootable", 0);
        log.note("install pending", u64::from(u32::MAX) + 1);
        log.note("install pending", u64::MAX);
        assert_eq!(
            lines(&log),
            [
                "download started seq 12",
                "app: camera up",
                "boot: nothing bootable",
                "install pending seq 4294967296",
                "install pending seq 18446744073709551615",
            ]
        );
        assert_eq!(log.len(), 5);
    }

    /// Lines of every length through many wraps of the ring: what it holds is always the newest
    /// lines that fit, in order, as a plain list that drops from the front would hold them.
    #[test]
    fn keeps_the_newest_lines_that_fit_through_every_wrap() {
        let mut log = EventLog::new();
        let mut model: std::collections::VecDeque<String> = Default::default();
        for i in 0..2_000usize {
            let len = (i * 37 + i / 7) % (MAX_EVENT_CHARS + 1);
            let line: String = (0..len)
                .map(|j| (b'a' + ((i + j) % 26) as u8) as char)
                .collect();
            log.record(&line).unwrap();
            model.push_back(line);
            while model.len() > MAX_EVENT_LINES {
                model.pop_front();
            }
            let kept: Vec<&str> = log.lines().collect();
            assert!(kept.len() <= model.len());
            let from = model.len() - kept.len();
            assert_eq!(
                kept,
                model
                    .iter()
                    .skip(from)
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                "line {i}"
            );
            // It keeps as many as the ring can hold: at least what fits in half of it.
            let bytes: usize = kept.iter().map(|l| l.len() + 1).sum();
            let next = model.get(from.wrapping_sub(1)).map_or(0, |l| l.len() + 1);
            assert!(
                from == 0 || bytes + next > EVENT_LOG_BYTES / 2,
                "line {i}: {bytes} bytes kept"
            );
        }
    }

    #[test]
    fn pushes_the_oldest_lines_out_by_bytes_and_by_count() {
        let mut log = EventLog::new();
        let long = "x".repeat(MAX_EVENT_CHARS);
        for _ in 0..10 {
            log.record(&long).unwrap();
        }
        // 65 bytes a line: four fit in 320.
        assert_eq!(log.len(), EVENT_LOG_BYTES / (MAX_EVENT_CHARS + 1));
        let mut log = EventLog::new();
        for i in 0..40 {
            log.record(format!("e{i}")).unwrap();
        }
        assert_eq!(log.len(), MAX_EVENT_LINES);
        assert_eq!(lines(&log)[0], "e24");
        assert_eq!(lines(&log)[15], "e39");
        log.record("").unwrap();
        assert_eq!(lines(&log)[15], "");
        log.clear();
        assert!(log.is_empty() && lines(&log).is_empty());
    }

    #[test]
    fn rejects_a_line_longer_than_the_server_takes() {
        let mut log = EventLog::new();
        log.record("kept").unwrap();
        let long = "y".repeat(MAX_EVENT_CHARS + 1);
        assert_eq!(
            log.record(&long),
            Err(EventError::TooLong {
                len: MAX_EVENT_CHARS + 1,
                max: MAX_EVENT_CHARS
            })
        );
        assert_eq!(lines(&log), ["kept"]);
    }

    #[test]
    fn rejects_a_line_with_a_control_or_non_ascii_character() {
        let mut log = EventLog::new();
        assert_eq!(
            log.record("two\nlines"),
            Err(EventError::NotPrintable { at: 3 })
        );
        assert_eq!(
            log.record("caf\u{e9}"),
            Err(EventError::NotPrintable { at: 3 })
        );
        assert_eq!(
            log.record("del\x7f"),
            Err(EventError::NotPrintable { at: 3 })
        );
        assert!(log.is_empty());
    }
}
