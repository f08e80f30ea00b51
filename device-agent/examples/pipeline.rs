//! The install pipeline, for `bench/callgrind.sh`: instructions per pack byte of
//! [`Agent::install`] (download, program, journal, the one verification pass over the slot in
//! flash, bind) against SHA-256 + FNV-1a alone over the same bytes.
//!
//! `pipeline install` and `pipeline baseline` each run their work once in a function that
//! callgrind is told to count alone (`--toggle-collect`), so setup (building the pack, signing and
//! verifying its manifest) is not counted. The flash is plain RAM here — programming costs the
//! device nothing per byte — so that what is counted is the agent's own work.
use std::hint::black_box;

use device_agent::{
    Agent, Arena, Device, Layout, Mapped, RecordingNpu, Report, Transport, TransportError,
};
use embedded_storage::nor_flash::{ErrorType, NorFlash, ReadNorFlash};
use npub_core::fnv::Fnv1a;
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::keypair::KeyPair;
use npub_core::manifest::{Keyring, ManifestFields, PackFacts, Policy, sign_manifest, verify};
use npub_core::{Accel, Role};
use sha2::{Digest, Sha256};

/// The pack: the small_net fixture's command stream with its weights region grown to 1 MiB, the
/// size of a typical quantised vision model's weights, so per-byte costs dominate.
const WEIGHTS_BYTES: usize = 1 << 20;
const SLOT_BYTES: u32 = 2 << 20;

struct RamFlash(Vec<u8>);

impl ErrorType for RamFlash {
    type Error = core::convert::Infallible;
}

impl ReadNorFlash for RamFlash {
    const READ_SIZE: usize = 1;
    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), Self::Error> {
        bytes.copy_from_slice(&self.0[offset as usize..offset as usize + bytes.len()]);
        Ok(())
    }
    fn capacity(&self) -> usize {
        self.0.len()
    }
}

impl NorFlash for RamFlash {
    const WRITE_SIZE: usize = 16;
    const ERASE_SIZE: usize = 4096;
    fn erase(&mut self, from: u32, to: u32) -> Result<(), Self::Error> {
        self.0[from as usize..to as usize].fill(0xFF);
        Ok(())
    }
    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), Self::Error> {
        self.0[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }
}

impl Mapped for RamFlash {
    fn mapped(&self) -> &[u8] {
        &self.0
    }
}

struct Server<'a>(&'a [u8]);

impl Transport for Server<'_> {
    fn fetch_selftest(
        &mut self,
        _sha256: &[u8; 32],
        _offset: u32,
        _buf: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        Ok(None)
    }

    fn fetch_manifest(&mut self, _: u64, _: &mut [u8]) -> Result<Option<usize>, TransportError> {
        Ok(None)
    }
    fn fetch_pack(
        &mut self,
        _: &[u8; 32],
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize, TransportError> {
        let rest = &self.0[offset as usize..];
        let n = buf.len().min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }
    /// No release trust in the example: never asked.
    fn fetch_release(
        &mut self,
        _: &[u8; 32],
        _: &mut [u8],
    ) -> Result<Option<usize>, TransportError> {
        Ok(None)
    }
    fn report(&mut self, _: &Report) -> Result<(), TransportError> {
        Ok(())
    }
    /// One pack from memory, signed by the factory key: no keyring updates.
    fn keyring_sequence(&self) -> Option<u64> {
        None
    }
    fn fetch_keyring_updates(&mut self, _: u64, _: &mut [u8]) -> Result<usize, TransportError> {
        Ok(0)
    }
}

fn pack() -> Vec<u8> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/vela/cases/small_net_u55_256"
    );
    let cmd = std::fs::read(format!("{dir}/cmd.bin")).expect("fixture cmd.bin");
    let mut weights = std::fs::read(format!("{dir}/weights.bin")).expect("fixture weights.bin");
    weights.resize(WEIGHTS_BYTES, 0x5A);
    build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 19_424,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 0,
            },
        ],
        Accel::EthosU55_256,
    )
    .expect("building the bench pack")
}

#[inline(never)]
fn run_install(
    agent: &mut Agent<RamFlash>,
    m: &npub_core::manifest::VerifiedManifest,
    pack: &[u8],
    arena: &mut [u8],
) {
    let mut arena = Arena {
        bytes: arena,
        bus_address: 0x2200_0000,
    };
    agent
        .install(
            m,
            &mut Server(pack),
            &mut RecordingNpu::default(),
            &mut arena,
        )
        .expect("install");
}

#[inline(never)]
fn run_baseline(pack: &[u8]) -> ([u8; 32], u32) {
    let mut sha = Sha256::new();
    let mut fnv = Fnv1a::new();
    for chunk in pack.chunks(1024) {
        sha.update(chunk);
        fnv.update(chunk);
    }
    (sha.finalize().into(), fnv.finish())
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let pack = pack();
    match mode.as_str() {
        "install" => {
            let key = KeyPair::from_seed([3; 32]);
            let facts = PackFacts::of(&pack).unwrap();
            let bytes = sign_manifest(
                &ManifestFields {
                    sequence: 1,
                    model_name: "bench",
                    model_version: "1",
                    accel: Accel::EthosU55_256,
                    hw_class: 1,
                    pack_len: facts.len,
                    pack_checksum: facts.checksum,
                    pack_sha256: facts.sha256,
                    io_digest: [0; 32],
                    issued_at: 1,
                    expires_at: 0,
                },
                &key,
            )
            .unwrap();
            let mut keyring = Keyring::<1>::new();
            keyring.add(&key.public_key()).unwrap();
            let policy = Policy {
                hw_class: 1,
                accel: Accel::EthosU55_256,
                slot_bytes: SLOT_BYTES,
                last_sequence: 0,
                now: None,
            };
            let m = verify(&bytes, &keyring, &policy).unwrap();
            let layout = Layout::contiguous(0, 8192, SLOT_BYTES, 64 * 1024, 0x8000_0000);
            let flash = RamFlash(vec![0xFF; layout.end() as usize]);
            let mut agent = Agent::open(
                flash,
                layout,
                Device {
                    hw_class: 1,
                    accel: Accel::EthosU55_256,
                    io_bindings: None,
                    trust: device_agent::Trust::new(&[key.public_key()], &[]).unwrap(),
                },
            )
            .unwrap();
            let mut arena = vec![0u8; 64 * 1024];
            let skip = arena.as_ptr().align_offset(16);
            run_install(&mut agent, &m, &pack, &mut arena[skip..]);
        }
        "baseline" => {
            black_box(run_baseline(black_box(&pack)));
        }
        _ => {
            eprintln!("usage: pipeline install|baseline");
            std::process::exit(2);
        }
    }
    println!("pack bytes: {}", pack.len());
}
