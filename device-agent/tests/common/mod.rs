//! What every device-agent test needs: real packs from the Vela fixtures, signed manifests, an
//! in-memory server, and a small emulated flash.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use device_agent::nor_emu::NorEmu;
use device_agent::{
    Agent, Arena, Booted, Device, Error, Layout, MonotonicCounter, NorCounter, RecordingNpu,
    Report, Transport, TransportError, Trust, Unbooted,
};
use npub_core::format::build::{RegionSpec, build_pack_for_driver};
use npub_core::keypair::KeyPair;
use npub_core::manifest::{
    Keyring, KeyringChange, KeyringUpdate, MANIFEST_BYTES, ManifestFields, PackFacts, Policy,
    ROTATION_BYTES, VerifiedManifest, sign_keyring_update, sign_manifest,
};
use npub_core::{Accel, Role};

/// Program unit and sector of the test flash: small, so that an install touches many sectors and
/// the journal swaps banks often (both are where power cuts hurt).
pub const WRITE: usize = 16;
pub const ERASE: usize = 512;
pub type Flash = NorEmu<WRITE, ERASE>;

/// The hardware class the test devices claim.
pub const HW_CLASS: u32 = 0x8A81;
/// Where flash offset 0 appears on the bus (the RA8P1's OSPI0 XIP window).
pub const XIP_BASE: u32 = 0x8000_0000;
/// Where the test arena appears on the bus.
pub const ARENA_BUS: u32 = 0x2200_0000;

pub fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/vela"
    ))
}

/// A fixture case compiled into an NPU1 pack the way `npub pack` does: region 0 the baked
/// weights, region 1 the runtime scratch arena (size from meta.json), region 2 scratch_fast
/// (runtime, size 0).
pub struct Case {
    pub name: &'static str,
    pub cmd: Vec<u8>,
    pub weights: Vec<u8>,
    pub scratch: u32,
    pub pack: Vec<u8>,
}

pub fn case(name: &'static str) -> Case {
    case_with_scratch(name, 0)
}

/// [`case`] with `extra` more bytes of scratch: another pack (another SHA-256) of
/// the same model.
pub fn case_with_scratch(name: &'static str, extra: u32) -> Case {
    build_case(name, extra, false)
}

/// [`case`] as `npub pack` writes it from Vela's `.tflite`: the COP1 driver payload's header
/// (Vela's `payload.bin` up to the stream) in the padding right before the command stream.
pub fn case_for_driver(name: &'static str) -> Case {
    build_case(name, 0, true)
}

fn build_case(name: &'static str, extra: u32, driver: bool) -> Case {
    let dir = fixtures().join("cases").join(name);
    let cmd = std::fs::read(dir.join("cmd.bin")).unwrap();
    let weights = std::fs::read(dir.join("weights.bin")).unwrap();
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    let scratch = meta["regions"][1]["size"].as_u64().unwrap() as u32 + extra;
    let payload = if driver {
        std::fs::read(dir.join("payload.bin")).unwrap()
    } else {
        cmd.clone()
    };
    assert!(
        payload.ends_with(&cmd),
        "{name}: the payload ends with the stream"
    );
    let head = &payload[..payload.len() - cmd.len()];
    let pack = build_pack_for_driver(
        head,
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: scratch,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 0,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap();
    Case {
        name,
        cmd,
        weights,
        scratch,
        pack,
    }
}

/// The small pack the exhaustive loops use (conv1: 784 bytes).
pub fn small() -> Case {
    case("conv1_u55_256")
}

pub fn signing_key() -> KeyPair {
    KeyPair::from_seed([7; 32])
}

pub fn keyring() -> Keyring<4> {
    let mut k = Keyring::new();
    k.add(&signing_key().public_key()).unwrap();
    k
}

/// The test root key: signs keyring updates.
pub fn root_key() -> KeyPair {
    KeyPair::from_seed([0x52; 32])
}

/// The factory keyring (the test signing key) and the test root.
pub fn trust() -> Trust {
    Trust::new(&[signing_key().public_key()], &[root_key().public_key()]).unwrap()
}

pub fn device() -> Device {
    let trust = match SEALED.with(std::cell::Cell::get) {
        Some(key) => trust().with_device_key(device_agent::DeviceKey::new(key)),
        None => trust(),
    };
    Device {
        hw_class: HW_CLASS,
        accel: Accel::EthosU55_256,
        io_bindings: None,
        trust,
    }
}

thread_local! {
    /// The device key [`device`] gives the test running on this thread (`None`: CRC records).
    static SEALED: std::cell::Cell<Option<[u8; 32]>> = const { std::cell::Cell::new(None) };
}

/// From now on, on this thread, [`device`] authenticates its records under `key`.
pub fn seal_records_with(key: Option<[u8; 32]>) {
    SEALED.with(|s| s.set(key));
}

/// A second signing key, for rotations.
pub fn signing_key_2() -> KeyPair {
    KeyPair::from_seed([8; 32])
}

/// A manifest for `pack` at `sequence`, signed with `key` (not cached).
pub fn manifest_signed_by(pack: &[u8], sequence: u64, key: &KeyPair) -> [u8; MANIFEST_BYTES] {
    sign_with(pack, sequence, [0; 32], key)
}

/// A manifest for `pack` at `sequence`, signed with the test key. Signing and verifying cost
/// ~0.2 s each in an unoptimised build, so both are done once per (pack, sequence) per test binary.
pub fn manifest(pack: &[u8], sequence: u64) -> [u8; MANIFEST_BYTES] {
    manifest_with_io(pack, sequence, [0; 32])
}

/// A manifest that also digests the pack's IO bindings.
pub fn manifest_with_io(pack: &[u8], sequence: u64, io_digest: [u8; 32]) -> [u8; MANIFEST_BYTES] {
    type Signed = ([u8; 32], u64, [u8; 32], [u8; MANIFEST_BYTES]);
    static CACHE: Mutex<Vec<Signed>> = Mutex::new(Vec::new());
    let key = sha256(pack);
    let mut cache = CACHE.lock().unwrap();
    let hit = cache
        .iter()
        .find(|(k, s, io, _)| *k == key && *s == sequence && *io == io_digest);
    if let Some((_, _, _, m)) = hit {
        return *m;
    }
    let m = sign(pack, sequence, io_digest);
    cache.push((key, sequence, io_digest, m));
    m
}

/// `manifest(pack, sequence)` as the device verifies it (with a slot of `slot_bytes`).
pub fn verified(pack: &[u8], sequence: u64, slot_bytes: u32) -> VerifiedManifest {
    type Verified = ([u8; MANIFEST_BYTES], u32, VerifiedManifest);
    static CACHE: Mutex<Vec<Verified>> = Mutex::new(Vec::new());
    let m = manifest(pack, sequence);
    let mut cache = CACHE.lock().unwrap();
    if let Some((_, _, v)) = cache.iter().find(|(k, s, _)| *k == m && *s == slot_bytes) {
        return v.clone();
    }
    let policy = Policy {
        hw_class: HW_CLASS,
        accel: Accel::EthosU55_256,
        slot_bytes,
        last_sequence: 0,
        now: None,
    };
    let v = npub_core::manifest::verify(&m, &keyring(), &policy).unwrap();
    cache.push((m, slot_bytes, v.clone()));
    v
}

fn sign(pack: &[u8], sequence: u64, io_digest: [u8; 32]) -> [u8; MANIFEST_BYTES] {
    sign_with(pack, sequence, io_digest, &signing_key())
}

fn sign_with(
    pack: &[u8],
    sequence: u64,
    io_digest: [u8; 32],
    key: &KeyPair,
) -> [u8; MANIFEST_BYTES] {
    let fields = manifest_fields(pack, sequence, "conv1", io_digest);
    sign_manifest(&fields, key).unwrap()
}

/// The fields every test manifest signs for `pack`: the test board's accelerator and class,
/// issued 2023-11-14, never expiring.
pub fn manifest_fields<'a>(
    pack: &[u8],
    sequence: u64,
    model_name: &'a str,
    io_digest: [u8; 32],
) -> ManifestFields<'a> {
    let facts = PackFacts::of(pack).unwrap();
    ManifestFields {
        sequence,
        model_name,
        model_version: "1.0.0",
        accel: Accel::EthosU55_256,
        hw_class: HW_CLASS,
        pack_len: facts.len,
        pack_checksum: facts.checksum,
        pack_sha256: facts.sha256,
        io_digest,
        issued_at: 1_700_000_000,
        expires_at: 0,
    }
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// A layout for packs up to `slot_bytes`: journal banks of two sectors (8 records), progress
/// journalled every sector.
pub fn layout(slot_bytes: u32) -> Layout {
    Layout::contiguous(0, 2 * ERASE as u32, slot_bytes, ERASE as u32, XIP_BASE)
}

pub fn blank_flash(layout: &Layout) -> Flash {
    Flash::new(layout.end() as usize)
}

/// The server, in memory: the manifest it offers and the packs it serves; counts what it sends.
#[derive(Default)]
pub struct Server {
    pub offer: Option<(u64, Vec<u8>)>,
    pub packs: HashMap<[u8; 32], Vec<u8>>,
    /// Every report (without its event log, which is in `report_events`).
    pub reports: Vec<Report<'static>>,
    /// Each report's event log, as lines (empty: none sent).
    pub report_events: Vec<Vec<String>>,
    /// Pack bytes served so far, and each request's offset.
    pub served: usize,
    pub requests: Vec<u32>,
    /// Offer the manifest whatever sequence the device asks after (a replaying server).
    pub offer_stale: bool,
    /// Drop the connection once this many more pack bytes have been served.
    pub drop_after: Option<usize>,
    /// Keyring updates (NPK1 records) in sequence order; announced with every manifest answer.
    pub keyring_updates: Vec<Vec<u8>>,
    /// The `after` of each keyring-update request.
    pub keyring_requests: Vec<u64>,
    /// Self-test records ("NPS1") by the SHA-256 of the pack they go with.
    pub selftests: HashMap<[u8; 32], Vec<u8>>,
}

impl Server {
    /// Offers `pack` at `sequence` (and serves it).
    pub fn offer(&mut self, pack: &[u8], sequence: u64) {
        self.offer_manifest(manifest(pack, sequence).to_vec(), sequence);
        self.serve(pack);
    }

    /// Serves `pack` (without offering a manifest for it).
    pub fn serve(&mut self, pack: &[u8]) {
        self.packs.insert(sha256(pack), pack.to_vec());
    }

    pub fn offer_manifest(&mut self, manifest: Vec<u8>, sequence: u64) {
        self.offer = Some((sequence, manifest));
    }

    /// Adds a keyring update signed by the test root.
    pub fn publish(&mut self, sequence: u64, change: KeyringChange) {
        self.keyring_updates
            .push(keyring_update(sequence, change).to_vec());
    }
}

/// A keyring update signed by the test root.
pub fn keyring_update(sequence: u64, change: KeyringChange) -> [u8; ROTATION_BYTES] {
    let update = KeyringUpdate {
        sequence,
        change,
        issued_at: 1_700_000_000,
    };
    sign_keyring_update(&update, &root_key())
}

/// A keyring update's sequence, signing-key and release actions alike.
fn update_sequence(record: &[u8]) -> u64 {
    npub_core::release::TrustUpdate::decode(record).map_or(0, |(_, u)| u.sequence)
}

impl Transport for Server {
    fn fetch_selftest(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        let Some(record) = self.selftests.get(sha256) else {
            return Ok(None);
        };
        let start = (offset as usize).min(record.len());
        let n = (record.len() - start).min(buf.len());
        buf[..n].copy_from_slice(&record[start..start + n]);
        Ok(Some(n))
    }

    fn fetch_manifest(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        match &self.offer {
            Some((seq, m)) if *seq > after || self.offer_stale => {
                let n = m.len().min(buf.len());
                buf[..n].copy_from_slice(&m[..n]);
                Ok(Some(m.len()))
            }
            _ => Ok(None),
        }
    }

    fn fetch_pack(
        &mut self,
        sha256: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        let pack = self.packs.get(sha256).ok_or(TransportError::Status(404))?;
        let start = (offset as usize).min(pack.len());
        let mut n = buf.len().min(pack.len() - start);
        if let Some(left) = self.drop_after {
            if left == 0 {
                return Err(TransportError::Unreachable);
            }
            n = n.min(left);
            self.drop_after = Some(left - n);
        }
        buf[..n].copy_from_slice(&pack[start..start + n]);
        self.served += n;
        self.requests.push(offset);
        Ok(n)
    }

    /// The test double carries no release bundles: a device with a release trust finds none.
    fn fetch_release(
        &mut self,
        _: &[u8; 32],
        _: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        Ok(None)
    }

    fn report(&mut self, report: &Report) -> Result<(), TransportError> {
        self.reports.push(Report {
            events: None,
            ..*report
        });
        self.report_events.push(
            report
                .events
                .map(|log| log.lines().map(str::to_owned).collect())
                .unwrap_or_default(),
        );
        Ok(())
    }

    fn keyring_sequence(&self) -> Option<u64> {
        self.keyring_updates.last().map(|r| update_sequence(r))
    }

    fn fetch_keyring_updates(
        &mut self,
        after: u64,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        self.keyring_requests.push(after);
        let mut n = 0;
        for record in &self.keyring_updates {
            if update_sequence(record) <= after {
                continue;
            }
            if n + record.len() > buf.len() {
                break;
            }
            buf[n..n + record.len()].copy_from_slice(record);
            n += record.len();
        }
        Ok(n)
    }
}

/// 16-byte aligned working memory for the arena.
#[repr(C, align(16))]
pub struct ArenaMem(pub [u8; 32 * 1024]);

impl ArenaMem {
    pub fn new() -> Box<Self> {
        Box::new(ArenaMem([0; 32 * 1024]))
    }

    pub fn arena(&mut self) -> Arena<'_> {
        Arena {
            bytes: &mut self.0,
            bus_address: ARENA_BUS,
        }
    }
}

/// Opens an agent on `flash` (a power-on: the journal is mounted afresh), without a counter,
/// through the entry point that boots lazily.
pub fn power_on(mut flash: Flash, layout: Layout) -> Agent<Flash> {
    flash.power_on();
    Agent::open(flash, layout, device()).unwrap()
}

/// The part that holds the monotonic counter: two sectors of its own NOR.
pub type CounterFlash = NorEmu<WRITE, ERASE>;
pub type Counter = NorCounter<CounterFlash>;
/// An agent with a monotonic counter, after boot.
pub type Counted = Agent<Flash, Counter>;

pub fn blank_counter() -> CounterFlash {
    CounterFlash::new(2 * ERASE)
}

/// A power-on with a counter: both parts get their power back; the agent is not booted yet.
pub fn power_on_counted(
    mut flash: Flash,
    mut counter: CounterFlash,
    layout: Layout,
) -> Unbooted<Flash, Counter> {
    flash.power_on();
    counter.power_on();
    Agent::power_on(flash, NorCounter::new(counter, 0), layout, device()).unwrap()
}

/// Powers on and boots with a fresh NPU.
pub fn boot_counted(
    flash: Flash,
    counter: CounterFlash,
    layout: Layout,
    npu: &mut RecordingNpu,
) -> (Counted, Result<Booted, Error>) {
    let mut mem = ArenaMem::new();
    power_on_counted(flash, counter, layout).boot(npu, &mut mem.arena())
}

/// Takes a counted agent apart: its flash and its counter's flash.
pub fn parts(agent: Counted) -> (Flash, CounterFlash) {
    let (flash, counter) = agent.into_parts();
    (flash, counter.into_flash())
}

/// Boots an agent with a fresh NPU; the booted pack's sequence, or the error.
pub fn boot<C: MonotonicCounter>(
    agent: &mut Agent<Flash, C>,
    npu: &mut RecordingNpu,
) -> Result<Booted, Error> {
    let mut mem = ArenaMem::new();
    agent.boot(npu, &mut mem.arena())
}

/// Polls once with the test keyring.
pub fn poll<C: MonotonicCounter>(
    agent: &mut Agent<Flash, C>,
    server: &mut Server,
    npu: &mut RecordingNpu,
) -> Result<device_agent::Poll, Error> {
    let mut mem = ArenaMem::new();
    agent.poll(server, npu, &mut mem.arena(), None)
}

/// Installs an already verified manifest (skips the slow signature check of `poll`).
pub fn install<C: MonotonicCounter>(
    agent: &mut Agent<Flash, C>,
    manifest: &VerifiedManifest,
    server: &mut Server,
    npu: &mut RecordingNpu,
) -> Result<device_agent::BoundSlot, Error> {
    let mut mem = ArenaMem::new();
    agent.install(manifest, server, npu, &mut mem.arena())
}

/// The offsets of the journal bytes that `after` programmed and `before` did not hold: where the
/// records of the commits in between lie (found from the flash, whatever the record format).
pub fn new_journal_bytes(layout: &Layout, before: &[u8], after: &[u8]) -> Vec<u32> {
    let end = (layout.journal + 2 * layout.journal_bank_bytes) as usize;
    (layout.journal as usize..end)
        .filter(|&i| after[i] != 0xFF && after[i] != before[i])
        .map(|i| i as u32)
        .collect()
}
