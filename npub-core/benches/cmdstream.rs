//! The command-stream verifier next to FNV-1a over the same pack, on Vela's real `small_net`
//! (U55-256): checking every command must be negligible beside hashing the weights.
//!
//! - `verify`: the stream alone, throughput in commands (criterion's "elements").
//! - `verify_blob`: the same through a parsed pack's region table.
//! - `fnv1a`: the pack's payload that the NPU1 checksum covers (stream + weights), in bytes.
//!
//! Both time one pack, so the ratio of their times is the cost of the check relative to the hash.
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use npub_core::cmdstream::{shram_bytes, verify, verify_blob};
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{Accel, Blob, Role, fnv};
use std::hint::black_box;
use std::path::Path;

const CASE: &str = "small_net_u55_256";
/// small_net's region sizes: weights (baked), scratch, scratch_fast.
const SCRATCH: u32 = 19_424;

fn benches(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/vela/cases")
        .join(CASE);
    let cmd = std::fs::read(dir.join("cmd.bin")).expect("fixture cmd.bin");
    let weights = std::fs::read(dir.join("weights.bin")).expect("fixture weights.bin");
    let sizes = [weights.len() as u32, SCRATCH, 0];
    let shram = shram_bytes(Accel::EthosU55_256);
    let commands = u64::from(
        verify(&cmd, &sizes, shram)
            .expect("fixture verifies")
            .commands,
    );

    let pack = build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: SCRATCH,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 0,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap();
    let blob = Blob::parse(&pack).unwrap();
    let payload = &pack[32..];

    let mut g = c.benchmark_group("cmdstream");
    g.throughput(Throughput::Elements(commands));
    g.bench_function("verify", |b| {
        b.iter(|| verify(black_box(&cmd), black_box(&sizes), shram).unwrap())
    });
    g.bench_function("verify_blob", |b| {
        b.iter(|| verify_blob(black_box(&blob)).unwrap())
    });
    g.throughput(Throughput::Bytes(payload.len() as u64));
    g.bench_function("fnv1a", |b| b.iter(|| fnv::fnv1a32(black_box(payload))));
    g.finish();
}

criterion_group!(benches_group, benches);
criterion_main!(benches_group);
