//! Result codes and the human message of the last failure: which call, which step, and what was
//! wrong, formatted on demand into the caller's buffer (the agent keeps only `Copy` values).
use core::fmt;

use device_agent::http_io::HttpError;
use device_agent::{CounterError, Error, EventError, LayoutError};
use npub_core::ManifestError;

use crate::adapt::{Fault, FlashFailure};
use crate::types::*;

/// Why a configuration was refused at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    /// A required pointer or callback is NULL.
    Missing(&'static str),
    /// A field's value is out of its range (the text says which and why).
    Invalid(&'static str, u64, &'static str),
    /// The layout breaks a rule.
    Layout(LayoutError),
    /// A string is not UTF-8.
    NotUtf8(&'static str),
    /// The server URL or the token.
    Http(HttpError),
    /// A trusted key or the IO bindings.
    Rejected(&'static str, npub_core::Error),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::Missing(field) => write!(f, "config.{field} is NULL"),
            ConfigError::Invalid(field, value, why) => {
                write!(f, "config.{field} = {value:#x}: {why}")
            }
            ConfigError::Layout(e) => write!(f, "config.layout: {e}"),
            ConfigError::NotUtf8(field) => write!(f, "config.{field} is not UTF-8"),
            ConfigError::Http(e) => write!(f, "config.stream: {e}"),
            ConfigError::Rejected(field, e) => write!(f, "config.{field}: {e}"),
        }
    }
}

/// What the last failed call said.
#[derive(Debug, Clone, Copy)]
pub enum Detail {
    Config(ConfigError),
    Agent {
        error: Error,
        http: Option<HttpError>,
        flash: Option<FlashFailure>,
        /// What the link adds about a refusal of its own (a redirect hop it may not open).
        hint: Option<&'static str>,
    },
    Fault(Fault),
    Order(&'static str),
    Panic([u8; 96], usize),
    Event(EventError),
}

/// The last failure: its code, the call and step it happened in, the detail.
#[derive(Debug, Clone, Copy)]
pub struct LastError {
    pub code: i32,
    pub call: &'static str,
    pub step: &'static str,
    pub detail: Detail,
}

impl fmt::Display for LastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): ", self.call, self.step)?;
        match &self.detail {
            Detail::Config(e) => write!(f, "{e}"),
            Detail::Agent {
                error,
                http,
                flash,
                hint,
            } => {
                write!(f, "{error}")?;
                if let Some(h) = http {
                    write!(f, "; {h}")?;
                }
                if let Some(h) = hint {
                    write!(f, " ({h})")?;
                }
                if let Some(fl) = flash {
                    write!(
                        f,
                        "; flash.{} at {:#x} (+{:#x}) returned {}",
                        fl.op, fl.offset, fl.len, fl.returned
                    )?;
                }
                Ok(())
            }
            Detail::Fault(fault) => write!(f, "{fault}"),
            Detail::Order(what) => f.write_str(what),
            Detail::Event(e) => write!(f, "{e}"),
            Detail::Panic(msg, len) => write!(
                f,
                "the library panicked (a bug, please report it): {}",
                core::str::from_utf8(&msg[..*len]).unwrap_or("?")
            ),
        }
    }
}

/// The code for an agent error.
pub fn code_of(e: &Error) -> i32 {
    match e {
        // The counter callback read a value no counter of this agent can hold.
        Error::Counter(CounterError::AheadOfJournal { .. }) => NPUB_E_CALLBACK,
        Error::Flash(_) | Error::Counter(_) => NPUB_E_FLASH,
        Error::Transport(_) | Error::PackTruncated { .. } => NPUB_E_TRANSPORT,
        Error::TransportOverrun { .. } => NPUB_E_CALLBACK,
        // The slot's SHA-256 in flash is not the signed one: the bytes changed on the way or in
        // flash (a corrupted download, retried afresh), not a pack the device refuses.
        Error::Rejected(npub_core::Error::Manifest(ManifestError::PackHashMismatch { .. })) => {
            NPUB_E_INTEGRITY
        }
        Error::Rejected(_) | Error::SequenceTooFar { .. } | Error::IoBindingsMismatch => {
            NPUB_E_REJECTED
        }
        Error::DigestMismatch { .. }
        | Error::DescriptorReadBack { .. }
        | Error::ProgramReadDifferently { .. } => NPUB_E_INTEGRITY,
        Error::Misaligned { .. }
        | Error::AddressOverflow { .. }
        | Error::TooManyIoBindings { .. }
        | Error::ArenaTooSmall { .. } => NPUB_E_BIND,
        Error::SelfTestFailed { .. }
        | Error::SelfTestDigest { .. }
        | Error::TrialBootsExhausted { .. } => NPUB_E_SELF_TEST,
        // The record in flash (or as fetched) is not the signed one, or no longer verifies.
        Error::SelfTestRecordMismatch { .. } | Error::SelfTestMissing => NPUB_E_INTEGRITY,
        // The server's record ended before its stated length: the answer was cut.
        Error::SelfTestRecordShort { .. } => NPUB_E_TRANSPORT,
        Error::NoBootableSlot => NPUB_E_NO_PACK,
        Error::JournalExhausted | Error::JournalReadBack => NPUB_E_JOURNAL,
        Error::NotPending => NPUB_E_ORDER,
        _ => NPUB_E_REJECTED,
    }
}

/// The name of a result code, NUL-terminated (it goes out through the C ABI as it is).
pub fn name_of(code: i32) -> &'static str {
    match code {
        NPUB_OK => "NPUB_OK\0",
        NPUB_UP_TO_DATE => "NPUB_UP_TO_DATE\0",
        NPUB_IN_PROGRESS => "NPUB_IN_PROGRESS\0",
        NPUB_PENDING => "NPUB_PENDING\0",
        NPUB_E_NULL => "NPUB_E_NULL\0",
        NPUB_E_STORAGE => "NPUB_E_STORAGE\0",
        NPUB_E_ALIGN => "NPUB_E_ALIGN\0",
        NPUB_E_CONFIG => "NPUB_E_CONFIG\0",
        NPUB_E_NOT_OPEN => "NPUB_E_NOT_OPEN\0",
        NPUB_E_ORDER => "NPUB_E_ORDER\0",
        NPUB_E_BUSY => "NPUB_E_BUSY\0",
        NPUB_E_PANIC => "NPUB_E_PANIC\0",
        NPUB_E_FLASH => "NPUB_E_FLASH\0",
        NPUB_E_TRANSPORT => "NPUB_E_TRANSPORT\0",
        NPUB_E_REJECTED => "NPUB_E_REJECTED\0",
        NPUB_E_INTEGRITY => "NPUB_E_INTEGRITY\0",
        NPUB_E_BIND => "NPUB_E_BIND\0",
        NPUB_E_SELF_TEST => "NPUB_E_SELF_TEST\0",
        NPUB_E_NO_PACK => "NPUB_E_NO_PACK\0",
        NPUB_E_JOURNAL => "NPUB_E_JOURNAL\0",
        NPUB_E_CALLBACK => "NPUB_E_CALLBACK\0",
        NPUB_E_NOT_BOUND => "NPUB_E_NOT_BOUND\0",
        NPUB_E_ABI => "NPUB_E_ABI\0",
        NPUB_E_EVENT => "NPUB_E_EVENT\0",
        NPUB_E_NO_SELFTEST => "NPUB_E_NO_SELFTEST\0",
        NPUB_E_BUFFER => "NPUB_E_BUFFER\0",
        _ => "unknown npub result\0",
    }
}
