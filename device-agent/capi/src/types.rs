//! Everything `npub_agent.h` declares besides the functions: constants, result codes and the
//! `#[repr(C)]` structs. cbindgen reads this file; the doc comments become the header's.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};

use device_agent::npu::MAX_IO;
use device_agent::{CHUNK_BYTES, MAX_ROOTS, state::MAX_TRIAL_BOOTS};
use npub_core::format::{self as npu1, MAX_BASE_POINTERS};

// The header's numbers are literals (cbindgen copies them as written); they are the crates' own.
const _: () = {
    assert!(NPUB_NPU1_MAGIC == npu1::MAGIC && NPUB_NPU1_VERSION == npu1::VERSION);
    assert!(NPUB_NPU1_HEADER_BYTES == npu1::HEADER_BYTES);
    assert!(NPUB_NPU1_REGION_DESC_BYTES == npu1::REGION_DESC_BYTES);
    assert!(NPUB_NPU1_FLAG_BAKED == npu1::FLAG_BAKED && NPUB_NPU1_ARENA_ALIGN == npu1::ARENA_ALIGN);
    assert!(NPUB_MAX_REGIONS == MAX_BASE_POINTERS && NPUB_MAX_IO == MAX_IO);
    assert!(NPUB_COP1_MAGIC == npu1::cop1::COP1_MAGIC);
    assert!(CHUNK_BYTES % NPUB_FLASH_WRITE_BYTES as usize == 0 && MAX_TRIAL_BOOTS > 0);
    assert!(NPUB_MAX_ROOT_KEYS == MAX_ROOTS);
    assert!(NPUB_MAX_RELEASE_KEYS == device_agent::keystore::MAX_FACTORY_RELEASE_KEYS);
    assert!(NPUB_MAX_RELEASE_BUNDLE_BYTES == npub_core::release::MAX_BUNDLE_BYTES);
    assert!(NPUB_KEYRING_UPDATE_BYTES == npub_core::manifest::ROTATION_BYTES);
    assert!(NPUB_MAX_EVENT_CHARS == device_agent::MAX_EVENT_CHARS);
    assert!(NPUB_MAX_EVENT_LINES == device_agent::MAX_EVENT_LINES);
    assert!(NPUB_EVENT_LOG_BYTES == device_agent::EVENT_LOG_BYTES);
};

// ---- NPU1 (the container's constants, so that a C loader and the agent agree by construction) ----

/// NPU1 magic: the little-endian bytes "NPU1".
pub const NPUB_NPU1_MAGIC: u32 = 0x3155_504E;
/// NPU1 version word.
pub const NPUB_NPU1_VERSION: u32 = 1;
/// Bytes of the NPU1 header (eight little-endian words).
pub const NPUB_NPU1_HEADER_BYTES: u32 = 32;
/// Bytes of one NPU1 region descriptor (four words: role, flags, size, data_offset).
pub const NPUB_NPU1_REGION_DESC_BYTES: u32 = 16;
/// Region flag: the region's bytes are in the pack (at data_offset) and used in place.
pub const NPUB_NPU1_FLAG_BAKED: u32 = 1;
/// Alignment of every runtime region in the arena, of the command stream and of every base
/// address (the Ethos-U55's).
pub const NPUB_NPU1_ARENA_ALIGN: u32 = 16;
/// Base-pointer registers of the Ethos-U55 (BASEP0..7): the most regions a pack can bind.
pub const NPUB_MAX_REGIONS: usize = 8;
/// Inputs and outputs a job carries at most.
pub const NPUB_MAX_IO: usize = 8;
/// "COP1" as a little-endian word: the first word of Arm's driver payload.
pub const NPUB_COP1_MAGIC: u32 = 0x3150_4F43;

// ---- the agent ----

/// Bytes of caller storage an agent needs, on every target (the library checks at compile time
/// that its state fits, for the host and for thumbv8m alike).
pub const NPUB_AGENT_STORAGE_BYTES: usize = 12288;
/// Trusted signing keys an agent holds at most.
pub const NPUB_MAX_KEYS: usize = 4;
/// Root keys an agent holds at most.
pub const NPUB_MAX_ROOT_KEYS: usize = 2;
/// Factory release keys (`npub_config.release_keys`) at most.
pub const NPUB_MAX_RELEASE_KEYS: usize = 4;
/// The largest release bundle (`fetch_release`'s buffer): 16 + 4 × 288 bytes.
pub const NPUB_MAX_RELEASE_BUNDLE_BYTES: usize = 1168;
/// Bytes of one keyring update record (NPK1) as `fetch_keyring_updates` writes them.
pub const NPUB_KEYRING_UPDATE_BYTES: usize = 144;
/// Longest line of the event log (`npub_agent_record_event`), in characters.
pub const NPUB_MAX_EVENT_CHARS: usize = 64;
/// Most lines the event log keeps (and a report carries).
pub const NPUB_MAX_EVENT_LINES: usize = 16;
/// Bytes of the event log's ring; `npub_report.events` is at most this long before its NUL.
pub const NPUB_EVENT_LOG_BYTES: usize = 320;
/// The program unit the agent writes in: every program call is this aligned and a multiple of it
/// (at most 512 bytes). The driver's own unit must divide it.
pub const NPUB_FLASH_WRITE_BYTES: u32 = 16;
/// The erase unit the agent erases in: every erase call is this aligned and a multiple of it.
/// The driver's own sector must divide it; every layout area is whole units.
pub const NPUB_FLASH_ERASE_BYTES: u32 = 4096;
/// `npub_flash.busy`: the erase or program just ended; the chip may be read again.
pub const NPUB_FLASH_IDLE: u32 = 0;
/// `npub_flash.busy`: one `erase_unit` is about to be erased.
pub const NPUB_FLASH_ERASING: u32 = 1;
/// `npub_flash.busy`: at most 512 bytes are about to be programmed.
pub const NPUB_FLASH_PROGRAMMING: u32 = 2;
/// `config.budget_ms` when the config says 0: half a second, for a watchdog of 1 s or more.
pub const NPUB_DEFAULT_BUDGET_MS: u32 = 500;
/// Download bytes one `npub_agent_poll` fetches when the config says 0.
pub const NPUB_DEFAULT_STEP_BYTES: u32 = 16384;

/// The agent's storage: `NPUB_AGENT_STORAGE_BYTES`, 8-byte aligned. Declare one (static or in a
/// long-lived struct); its contents are the library's.
#[repr(C)]
pub union npub_agent {
    /// The library's state.
    pub opaque: [u8; NPUB_AGENT_STORAGE_BYTES],
    /// Alignment only.
    pub align: u64,
}

// ---- result codes ----

/// Success.
pub const NPUB_OK: i32 = 0;
/// `npub_agent_poll`: the server has nothing newer.
pub const NPUB_UP_TO_DATE: i32 = 1;
/// `npub_agent_poll`: one step of a download done; call again.
pub const NPUB_IN_PROGRESS: i32 = 2;
/// `npub_agent_boot` / `npub_agent_poll`: a new pack is bound on trial. Run the application's
/// self-test on the job, then call `npub_agent_confirm` with its result.
pub const NPUB_PENDING: i32 = 3;

/// A required pointer argument is NULL.
pub const NPUB_E_NULL: i32 = -1;
/// The storage is smaller than `NPUB_AGENT_STORAGE_BYTES`.
pub const NPUB_E_STORAGE: i32 = -2;
/// The storage is not 8-byte aligned.
pub const NPUB_E_ALIGN: i32 = -3;
/// The configuration is invalid (the message names the field).
pub const NPUB_E_CONFIG: i32 = -4;
/// The storage holds no open agent (never opened, closed, or overwritten).
pub const NPUB_E_NOT_OPEN: i32 = -5;
/// A call out of order: poll before boot, poll or boot while a pack awaits its confirm, confirm
/// with nothing pending.
pub const NPUB_E_ORDER: i32 = -6;
/// Called from inside one of the agent's own callbacks.
pub const NPUB_E_BUSY: i32 = -7;
/// The library panicked (a bug in it): the agent is unusable until opened again.
pub const NPUB_E_PANIC: i32 = -8;
/// The flash failed (the previous pack is kept; the next poll resumes).
pub const NPUB_E_FLASH: i32 = -9;
/// The transport failed (the next poll resumes from the last durable byte).
pub const NPUB_E_TRANSPORT: i32 = -10;
/// A manifest or pack was refused: signature, replay, device, structure, command stream.
pub const NPUB_E_REJECTED: i32 = -11;
/// The flash does not hold what was signed or programmed (digest, read-back), or read
/// differently after verification than during it (the NPU program's copy).
pub const NPUB_E_INTEGRITY: i32 = -12;
/// The pack cannot be bound on this NPU and arena (alignment, bus, IO bindings, an arena too
/// small for the runtime regions and the program's copy).
pub const NPUB_E_BIND: i32 = -13;
/// The self-test failed: the pack was given up and the previous one bound again.
pub const NPUB_E_SELF_TEST: i32 = -14;
/// Nothing in flash can be bound (a blank device: poll installs the first pack).
pub const NPUB_E_NO_PACK: i32 = -15;
/// The journal could not record the state.
pub const NPUB_E_JOURNAL: i32 = -16;
/// A callback returned something impossible (a length past its buffer, an unknown code, a counter
/// read far above the journal's replay floor).
pub const NPUB_E_CALLBACK: i32 = -17;
/// `npub_agent_job`: nothing is bound.
pub const NPUB_E_NOT_BOUND: i32 = -18;
/// `npub_agent_check_abi`: the caller's struct sizes differ from the library's.
pub const NPUB_E_ABI: i32 = -19;
/// `npub_agent_record_event`: the line is longer than `NPUB_MAX_EVENT_CHARS` or holds a byte
/// that is not printable ASCII (the server would refuse the report carrying it).
pub const NPUB_E_EVENT: i32 = -20;
/// `npub_agent_golden_input`: the pending pack has no self-test record (a version-1 manifest):
/// there is no golden input, and `npub_agent_confirm` settles it on the application's check.
pub const NPUB_E_NO_SELFTEST: i32 = -21;
/// `npub_agent_golden_input`: the buffer is smaller than the golden input (`*len` says how
/// many bytes it needs; nothing was written).
pub const NPUB_E_BUFFER: i32 = -22;

// ---- callback returns ----

/// A transport callback: nothing arrived within the link's own short wait (read), or the
/// operation timed out (connect).
pub const NPUB_IO_TIMEOUT: i32 = -1;
/// A transport callback: the connection failed or broke.
pub const NPUB_IO_ERROR: i32 = -2;
/// `stream.connect` with `NPUB_TRANSPORT_TLS_STREAM`: the server's certificate was refused (not
/// issued by the CA the firmware trusts, another host name, expired …; your TLS stack's log says
/// which).
pub const NPUB_IO_TLS_CERTIFICATE: i32 = -3;
/// `stream.connect` with `NPUB_TRANSPORT_TLS_STREAM`: the TLS handshake failed otherwise (an
/// alert, no common version or cipher, a bad record).
pub const NPUB_IO_TLS_HANDSHAKE: i32 = -4;
/// `fetch_manifest`: a manifest was written (its length in `*len`).
pub const NPUB_MANIFEST: i32 = 1;
/// `fetch_manifest`: the server has nothing newer.
pub const NPUB_NO_MANIFEST: i32 = 0;

/// Which transport `npub_config.transport` selects.
pub const NPUB_TRANSPORT_STREAM: u32 = 1;
/// Whole-request callbacks (`npub_config.requests`).
pub const NPUB_TRANSPORT_REQUESTS: u32 = 2;
/// The byte stream (`npub_config.stream`) to an `https://` server, TLS done by the firmware's own
/// stack (mbedTLS on FSP): `stream.connect` returns 0 only once the handshake completed and the
/// server's certificate was verified (mbedTLS: `MBEDTLS_SSL_VERIFY_REQUIRED`, the URL's host
/// given to `mbedtls_ssl_set_hostname`), and `read`/`write` carry the plaintext. The agent writes
/// nothing, its token least of all, before that `connect` returned 0.
pub const NPUB_TRANSPORT_TLS_STREAM: u32 = 3;

/// NPU1 `accel` words (`npub_config.accel`).
pub const NPUB_ACCEL_U55_128: u32 = 3;
/// The RA8P1's Ethos-U55-256.
pub const NPUB_ACCEL_U55_256: u32 = 4;

/// The OSPI NOR: its geometry, its driver's three operations and its XIP window.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_flash {
    /// Passed to every callback.
    pub ctx: *mut c_void,
    /// The CPU address of flash offset 0 in the memory-mapped (XIP) window. Required: the agent
    /// verifies the very bytes the NPU then reads in place, through this window.
    pub xip: *const u8,
    /// Flash offset 0 as the NPU sees it on the bus (on the RA8P1 the same value as `xip`).
    pub xip_bus_address: u32,
    /// Bytes of flash, from offset 0; all of it must be readable through `xip`.
    pub capacity: u32,
    /// The driver's program granularity; must divide `NPUB_FLASH_WRITE_BYTES`.
    pub program_unit: u32,
    /// The driver's erase sector; must divide `NPUB_FLASH_ERASE_BYTES`.
    pub erase_unit: u32,
    /// Reads `len` bytes at `offset` (0 = done, negative = failed). Optional: NULL reads through
    /// `xip`.
    pub read: Option<unsafe extern "C" fn(*mut c_void, u32, *mut u8, u32) -> i32>,
    /// Programs `len` bytes at `offset`: whole `NPUB_FLASH_WRITE_BYTES` units, at most 512 bytes,
    /// within one erased range (0 = done, negative = failed). Split at your page boundary.
    pub program: Option<unsafe extern "C" fn(*mut c_void, u32, *const u8, u32) -> i32>,
    /// Erases `len` bytes at `offset`, whole `NPUB_FLASH_ERASE_BYTES` units (0 = done).
    pub erase: Option<unsafe extern "C" fn(*mut c_void, u32, u32) -> i32>,
    /// Drops what the XIP path caches. Optional (NULL: the window is not cached).
    pub invalidate: Option<unsafe extern "C" fn(*mut c_void)>,
    /// Told around every erase and program: `(ctx, NPUB_FLASH_ERASING or
    /// NPUB_FLASH_PROGRAMMING, offset, len)` before it, `(ctx, NPUB_FLASH_IDLE, offset, len)`
    /// after it (whether it succeeded or not). The chip cannot be read while it is busy: return
    /// from the first call once nothing reads the flash (the NPU's job done or held, memory-mapped
    /// mode left), and let reads run again after the second. With it, every erase callback is one
    /// `erase_unit` (the busy windows are as short as the chip allows). Optional (NULL: none).
    pub busy: Option<unsafe extern "C" fn(*mut c_void, u32, u32, u32)>,
}

/// Where the journal and the two slots live, as flash offsets (every area whole
/// `NPUB_FLASH_ERASE_BYTES` units).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_layout {
    /// Journal bank 0; bank 1 follows it.
    pub journal_offset: u32,
    /// One journal bank (at least one erase unit).
    pub journal_bank_bytes: u32,
    /// Slot A and slot B.
    pub slot_offset: [u32; 2],
    /// One slot: the largest pack is this less one erase unit (the slot's descriptor).
    pub slot_bytes: u32,
    /// The download is journalled every this many bytes (a multiple of the erase unit).
    pub progress_bytes: u32,
    /// Keyring bank 0 (the keyring the root keys' updates make); bank 1 follows it.
    pub keyring_offset: u32,
    /// One keyring bank (at least one erase unit), or 0 for no keyring area. Required (non-zero)
    /// when `npub_config.root_key_count` is: a keyring kept in RAM only would forget a revocation
    /// at the next power cycle.
    pub keyring_bank_bytes: u32,
    /// 1: the boot check. Before the NPU is bound, boot verifies the slot's signed manifest
    /// again (kept beside the slot since its install: its signature against the keyring as it
    /// stands, and that it names the slot's pack), then the pack against it (SHA-256, NPU1,
    /// command stream); a slot that fails is skipped as a torn one is, and the other slot bound
    /// (device-agent/README.md, "Boot check"). 0: the pack against its SHA-256 only.
    pub boot_check: u32,
}

/// A byte stream (TCP) the agent's own HTTP/1.1 client runs over.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_stream {
    /// Passed to every callback.
    pub ctx: *mut c_void,
    /// `http://HOST[:PORT][/PATH]` (HOST an IPv4 literal or a name your connect resolves), or
    /// `https://…` with `NPUB_TRANSPORT_TLS_STREAM`;
    /// NUL-terminated, kept by the caller while the agent lives.
    pub server_url: *const c_char,
    /// The device token; NUL-terminated, kept by the caller while the agent lives.
    pub token: *const c_char,
    /// Opens a connection to `host` (`host_len` bytes, not NUL-terminated) : `port`, giving up
    /// after `timeout_ms`: 0, `NPUB_IO_TIMEOUT` or `NPUB_IO_ERROR`. With
    /// `NPUB_TRANSPORT_TLS_STREAM`, the TLS handshake too (the server verified for `host`), or
    /// `NPUB_IO_TLS_CERTIFICATE` / `NPUB_IO_TLS_HANDSHAKE`.
    pub connect: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize, u16, u32) -> i32>,
    /// Reads at most `len` bytes: how many (1..len), 0 when the peer closed, `NPUB_IO_TIMEOUT`
    /// when nothing arrived within a short wait (tens of ms), `NPUB_IO_ERROR`.
    pub read: Option<unsafe extern "C" fn(*mut c_void, *mut u8, usize) -> i32>,
    /// Writes at most `len` bytes: how many (1..len), or `NPUB_IO_ERROR`.
    pub write: Option<unsafe extern "C" fn(*mut c_void, *const u8, usize) -> i32>,
    /// Closes the connection (closing a closed one does nothing).
    pub close: Option<unsafe extern "C" fn(*mut c_void)>,
    /// Bytes per range request; 0 = 64 KiB.
    pub window_bytes: u32,
    /// With `NPUB_TRANSPORT_TLS_STREAM`: opens a TLS connection as `connect` does (the server
    /// verified for `host`, same arguments and returns) but **without** the device's client
    /// certificate and without resuming a session made with it: for an `https://` redirect to
    /// another origin (a presigned pack download), which must never see the device's identity.
    /// NULL: such a redirect is refused (`TLS: unsupported`). A firmware whose `connect` sends no
    /// client certificate may pass `connect` itself.
    pub connect_anonymous:
        Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize, u16, u32) -> i32>,
}

/// One status report to the server (whole-request transport).
#[repr(C)]
pub struct npub_report {
    /// The manifest sequence it is about.
    pub sequence: u64,
    /// `"downloading"`, `"verified"`, `"installed"`, `"bound"`, `"failed"`, `"rolled_back"`.
    pub state: *const c_char,
    /// Durable bytes while downloading, else -1.
    pub progress: i64,
    /// Why (NUL-terminated, one line), or NULL.
    pub reason: *const c_char,
    /// For a report that ends a download attempt (a `"downloading"` with a reason after a
    /// corrupted download, which is fetched afresh, or the final `"failed"`): the attempts made,
    /// from 1; send it as the body's `"attempts"`. 0 otherwise (send none).
    pub attempts: u32,
    /// With a failure report (`"failed"`, `"rolled_back"`): the device's last events, oldest
    /// first, each line ended by `'\n'`, NUL-terminated (at most `NPUB_EVENT_LOG_BYTES` bytes
    /// before the NUL); send them as the body's `"events"`, a JSON array of the lines (printable
    /// ASCII: escape `"` and `\`). NULL otherwise (send none).
    pub events: *const c_char,
    /// How many lines `events` holds (0 when it is NULL).
    pub event_count: u32,
}

/// The device API as three whole requests (for a firmware with its own HTTP client).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_requests {
    /// Passed to every callback.
    pub ctx: *mut c_void,
    /// `GET /api/v1/device/manifest?seq=after`: `NPUB_MANIFEST` with the body in `buf` and its
    /// length in `*len` (the whole length, even past `cap`), `NPUB_NO_MANIFEST` for nothing newer,
    /// `NPUB_IO_ERROR`, or minus an unexpected HTTP status (-404).
    ///
    /// The last argument, `*keyring_sequence`, is 0 on entry; store there the answer's
    /// `Npub-Keyring-Sequence` header (on a 200 and a 204 alike) when it has one. When it is above
    /// the keyring's own sequence the agent calls `fetch_keyring_updates` before it verifies the
    /// manifest. Leave it 0 when the answer has none (the keyring stays as it is).
    pub fetch_manifest:
        Option<unsafe extern "C" fn(*mut c_void, u64, *mut u8, usize, *mut usize, *mut u64) -> i32>,
    /// `GET /api/v1/device/packs/{sha256}` from `offset`: up to `len` bytes into `buf`, how many
    /// (0 = the pack ended), `NPUB_IO_ERROR` or minus an HTTP status.
    pub fetch_pack:
        Option<unsafe extern "C" fn(*mut c_void, *const u8, u32, *mut u8, usize) -> i32>,
    /// `POST /api/v1/device/status`: 0, or negative (reports are best effort).
    pub report: Option<unsafe extern "C" fn(*mut c_void, *const npub_report) -> i32>,
    /// `GET /api/v1/device/keys?after=N`: the body's whole `NPUB_KEYRING_UPDATE_BYTES` records,
    /// as many as fit in `cap` bytes of `buf`, in order; returns the bytes written (0 = none),
    /// `NPUB_IO_ERROR` or minus an HTTP status. The agent asks again after the last record it
    /// applied until it reaches the announced sequence. Optional: NULL leaves the keyring as it
    /// is (then a manifest signed by a rotated-in key is refused).
    pub fetch_keyring_updates:
        Option<unsafe extern "C" fn(*mut c_void, u64, *mut u8, usize) -> i32>,
    /// `GET /api/v1/device/packs/{sha256}/release` (`sha256` 32 bytes): the release bundle into
    /// `buf` (`cap` is `NPUB_MAX_RELEASE_BUNDLE_BYTES`), returning its whole length (past `cap`:
    /// refused), 0 for a 404 (the server has none), `NPUB_IO_ERROR` or minus an HTTP status.
    /// Called only while the agent's release trust is active (`release_keys`, or a release key
    /// added by a release root's record). Optional: NULL answers "none", so that with a release
    /// trust every pack is refused as unreleased.
    pub fetch_release: Option<unsafe extern "C" fn(*mut c_void, *const u8, *mut u8, usize) -> i32>,
    /// `GET /api/v1/device/packs/{sha256}/selftest` (`sha256` 32 bytes) from `offset`: up to
    /// `len` bytes of the self-test record into `buf`, how many (0 = the record ended), -404
    /// when the server has none, `NPUB_IO_ERROR` or minus another HTTP status. Called only for
    /// a version-2 manifest, which signs the record's SHA-256. Optional: NULL answers "none",
    /// and a version-2 manifest's pack is then refused ("self-test record missing").
    pub fetch_selftest:
        Option<unsafe extern "C" fn(*mut c_void, *const u8, u32, *mut u8, usize) -> i32>,
}

/// A monotonic clock.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_clock {
    /// Passed to every callback.
    pub ctx: *mut c_void,
    /// Milliseconds from any origin, never going back (a value below the last is taken as the
    /// last).
    pub now_ms: Option<unsafe extern "C" fn(*mut c_void) -> u64>,
    /// Waits `ms` (a retry's backoff). Optional: NULL does not wait.
    pub sleep_ms: Option<unsafe extern "C" fn(*mut c_void, u32)>,
    /// Seconds since 1970, for manifest expiry. Optional: NULL (or 0) leaves expiry unchecked.
    pub unix_time_s: Option<unsafe extern "C" fn(*mut c_void) -> u64>,
    /// Feeds the watchdog: called at least once per `config.budget_ms` while the stream
    /// transport waits (between two `stream.read` calls, which must each return within the
    /// budget; between pieces of a backoff, which `sleep_ms` gets in pieces of at most the
    /// budget; between connect attempts, each given at most the budget), and before every
    /// erase (one `flash.erase_unit` at a time) and program. Optional: NULL feeds nothing.
    pub feed: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// The replay floor's second home: a counter that never goes down (on the RA8P1 an OTP or
/// monotonic counter, or a write-once area outside the journal's flash), so that a journal that is
/// lost, erased or unreadable cannot reopen a consumed manifest sequence. The agent raises it to a
/// manifest's sequence before it erases anything for that manifest, and reads it at open. Optional:
/// both NULL keeps the floor in the journal alone.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_counter {
    /// Passed to every callback.
    pub ctx: *mut c_void,
    /// Stores the counter's value in `*value` (0 for a counter never raised); returns 0, or a
    /// negative error. The agent only ever raises it to a sequence its journal consumed first, so
    /// a value more than 2^32 (`MAX_SEQUENCE_STEP`, one manifest's largest step) above the
    /// journal's replay floor is refused at open with `NPUB_E_CALLBACK`, before anything is
    /// written: taken as the floor, a garbage `UINT64_MAX` would refuse every manifest for good.
    pub read: Option<unsafe extern "C" fn(*mut c_void, *mut u64) -> i32>,
    /// Raises the counter to `value` if it is below (never lowers it); returns 0 once the value is
    /// durable, or a negative error (the counter then holds its old value or `value`).
    pub raise: Option<unsafe extern "C" fn(*mut c_void, u64) -> i32>,
}

/// Everything `npub_agent_open` needs. Every pointer must stay valid while the agent lives.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_config {
    /// The flash.
    pub flash: npub_flash,
    /// Its map.
    pub layout: npub_layout,
    /// `NPUB_TRANSPORT_STREAM` (`stream`) or `NPUB_TRANSPORT_REQUESTS` (`requests`).
    pub transport: u32,
    /// The byte stream, when `transport` says so.
    pub stream: npub_stream,
    /// The whole-request callbacks, when `transport` says so.
    pub requests: npub_requests,
    /// The clock (required: every wait is bounded by it).
    pub clock: npub_clock,
    /// Trusted ed25519 public keys, 32 bytes each (the server's trust file, decoded).
    pub trusted_keys: *const [u8; 32],
    /// How many (1..`NPUB_MAX_KEYS`).
    pub trusted_key_count: usize,
    /// Root ed25519 public keys, 32 bytes each: they sign keyring updates (rotation,
    /// revocation), never manifests. NULL with a count of 0: no rotation, the trusted keys are
    /// the keyring for good.
    pub root_keys: *const [u8; 32],
    /// How many (0..`NPUB_MAX_ROOT_KEYS`); non-zero needs a keyring area in the layout.
    pub root_key_count: usize,
    /// Factory release keys, 32 bytes each (the `.pub` files of `npub keygen`, decoded). With
    /// one, every pack needs release signatures that meet the release policy for its model
    /// before it is downloaded (docs/release.md). NULL with a count of 0: no release trust until
    /// a release root's record adds a key; packs install as before.
    pub release_keys: *const [u8; 32],
    /// How many (0..`NPUB_MAX_RELEASE_KEYS`).
    pub release_key_count: usize,
    /// Release roots, 32 bytes each: the only keys whose keyring updates may change release keys
    /// and policies (actions 4 to 8). NULL with a count of 0: every such update is refused.
    pub release_root_keys: *const [u8; 32],
    /// How many (0..`NPUB_MAX_ROOT_KEYS`); non-zero needs a keyring area in the layout.
    pub release_root_key_count: usize,
    /// The board's hardware class (the manifest's `hw_class`).
    pub hw_class: u32,
    /// The NPU configuration as an NPU1 accel word (`NPUB_ACCEL_U55_256`).
    pub accel: u32,
    /// The application's IO bindings (npub-core's canonical encoding), or NULL to take any.
    pub io_bindings: *const u8,
    /// Their length.
    pub io_bindings_len: usize,
    /// NPU-visible RAM for the bound pack's runtime regions and, at its end, the copy of its
    /// program (COP1 driver payload or command stream) that the NPU runs: 16-byte aligned, at
    /// least the pack's `arena_bytes` + its program's length + 15.
    pub arena: *mut u8,
    /// Its size.
    pub arena_bytes: usize,
    /// `arena` as the NPU sees it on the bus (on the RA8P1 the same value).
    pub arena_bus_address: u32,
    /// Download bytes per `npub_agent_poll` call; 0 = `NPUB_DEFAULT_STEP_BYTES`.
    pub step_bytes: u32,
    /// The monotonic counter (both callbacks NULL: none).
    pub counter: npub_counter,
    /// The longest the stream transport waits between two `clock.feed` calls, in ms; 0 =
    /// `NPUB_DEFAULT_BUDGET_MS`.
    pub budget_ms: u32,
    /// The device-unique key (32 bytes, read at open) the agent's records in flash (journal,
    /// keyring, slot descriptors) are authenticated under: each carries a MAC under it instead
    /// of a CRC, and one rewritten without it is refused like a torn record. On the RA8P1,
    /// derive it from the hardware unique key; never a constant of the image. NULL: CRC only.
    /// Set it from the first boot: records written without it read as torn under it.
    pub device_key: *const [u8; 32],
}

/// One model input or output, bound.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_io {
    /// 0 input, 1 output.
    pub kind: u32,
    /// The model's input (or output) number.
    pub index: u32,
    /// Its bus address.
    pub address: u32,
    /// Its size in bytes.
    pub bytes: u32,
    /// The same bytes as the CPU reads and writes them.
    pub data: *mut u8,
}

/// The bound job: everything the Ethos-U55 needs, laid out for Arm's driver. Hand it over as it
/// is:
///
/// `ethosu_invoke_v3(drv, job.driver_payload, job.driver_payload_bytes, job.base_addr,
/// job.base_addr_size, job.num_base_addr, user_arg)`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_job {
    /// The COP1 driver payload (header + command stream), copied from flash into the arena's end
    /// and proven equal to the verified bytes: the driver's `custom_data_ptr`. NULL when the pack
    /// carries no driver header (not built by `npub pack`).
    pub driver_payload: *const c_void,
    /// Its length in bytes: the driver's `custom_data_size`.
    pub driver_payload_bytes: c_int,
    /// BASEP0..7 as bus addresses: the driver's `base_addr` (it may overwrite entry 2 with its
    /// fast memory, so this array is the caller's copy).
    pub base_addr: [u64; NPUB_MAX_REGIONS],
    /// Bytes each base address covers: the driver's `base_addr_size`.
    pub base_addr_size: [usize; NPUB_MAX_REGIONS],
    /// Base addresses in use: the driver's `num_base_addr`.
    pub num_base_addr: c_int,
    /// Bit n set: BASEPn points into flash (baked weights), else into the arena.
    pub baked_mask: u32,
    /// QBASE: the bus address of the command stream's copy in the arena.
    pub qbase: u32,
    /// QSIZE: its length in bytes.
    pub qsize: u32,
    /// The command stream's copy as the CPU reads it (inside the arena).
    pub command_stream: *const u8,
    /// The bound inputs and outputs (the first `io_count`).
    pub io: [npub_io; NPUB_MAX_IO],
    /// How many.
    pub io_count: u32,
    /// The slot: 0 (A) or 1 (B).
    pub slot: u32,
    /// The pack's manifest sequence.
    pub sequence: u64,
    /// The pack's length in bytes.
    pub pack_bytes: u32,
}

/// What the agent is doing.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_status {
    /// 0 opened, 1 idle (booted), 2 downloading, 3 pending (awaiting confirm), 4 unusable (panic).
    pub phase: u32,
    /// The active (confirmed) slot: 0 A, 1 B, -1 none.
    pub active_slot: i32,
    /// The replay floor: the highest manifest sequence consumed.
    pub last_sequence: u64,
    /// While downloading, and after a download failed and is kept for its resume (a broken
    /// connection, a power cut): the bytes durable in flash, where the next poll resumes.
    pub download_written: u32,
    /// That pack's length (0 when no download is under way or kept).
    pub download_total: u32,
    /// The code of the last call that failed (0 if none).
    pub last_error: i32,
}

/// The struct sizes the caller was compiled with, for `npub_agent_check_abi`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct npub_abi {
    /// sizeof(npub_agent).
    pub agent: usize,
    /// sizeof(npub_config).
    pub config: usize,
    /// sizeof(npub_job).
    pub job: usize,
    /// sizeof(npub_status).
    pub status: usize,
    /// sizeof(npub_report).
    pub report: usize,
    /// offsetof(npub_job, base_addr).
    pub job_base_addr: usize,
    /// offsetof(npub_job, io).
    pub job_io: usize,
    /// offsetof(npub_config, clock).
    pub config_clock: usize,
}

impl npub_abi {
    /// The library's own.
    pub fn of_library() -> Self {
        use core::mem::{offset_of, size_of};
        Self {
            agent: size_of::<npub_agent>(),
            config: size_of::<npub_config>(),
            job: size_of::<npub_job>(),
            status: size_of::<npub_status>(),
            report: size_of::<npub_report>(),
            job_base_addr: offset_of!(npub_job, base_addr),
            job_io: offset_of!(npub_job, io),
            config_clock: offset_of!(npub_config, clock),
        }
    }
}
