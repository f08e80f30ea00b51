//! FNV-1a throughput, and parse + bind of a seed-sized pack, both as bytes/s over the same buffer.
//!
//! `bench/fnv.sh` runs this next to a plain `gcc -O3` C loop over an identical buffer and prints the
//! ratios; the README quotes them.
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use npub_core::format::build::{RegionSpec, build_pack};
use npub_core::{Accel, Blob, Role, bind, fnv};
use std::hint::black_box;

/// The seed's worked example sizes: 800-byte stream, 1,179,648 bytes of weights, 256 KiB scratch.
fn seed_sized_pack() -> Vec<u8> {
    let cmd: Vec<u8> = (0..800u32).map(|i| i as u8).collect();
    let weights: Vec<u8> = (0..1_179_648u32).map(|i| (i % 251) as u8).collect();
    build_pack(
        &cmd,
        &[
            RegionSpec::Baked {
                role: Role::Weights,
                bytes: &weights,
            },
            RegionSpec::Runtime {
                role: Role::Scratch,
                size: 262_144,
            },
        ],
        Accel::EthosU55_256,
    )
    .unwrap()
}

fn benches(c: &mut Criterion) {
    let pack = seed_sized_pack();
    let payload_len = (pack.len() - 32) as u64;
    let mut g = c.benchmark_group("npu1");
    g.throughput(Throughput::Bytes(payload_len));
    g.bench_function(BenchmarkId::new("fnv1a", payload_len), |b| {
        b.iter(|| fnv::fnv1a32(black_box(&pack[32..])))
    });
    let mut arena = vec![0u8; 262_144 + 16];
    g.bench_function(BenchmarkId::new("parse_bind", payload_len), |b| {
        b.iter(|| {
            let blob = Blob::parse(black_box(&pack)).unwrap();
            let job = bind(&blob, &mut arena).unwrap();
            black_box(job.base_addresses());
        })
    });
    g.finish();
}

criterion_group!(benches_group, benches);
criterion_main!(benches_group);
