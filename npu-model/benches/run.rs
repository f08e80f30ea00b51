//! Functional-model inference time on real Vela output, one input set each, the pack loaded
//! (parsed, verified, weights decoded on the first run) once as TFLite loads a model once (the reference
//! kernels' time on the same model and input is measured by `bench/npu_model.sh`); and, per model,
//! `load+golden`: what an upload pays for its golden vector.
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use npub_core::vela;

/// (name, Vela output, reference input set) — the models `bench/npu_model.sh` compares.
pub const MODELS: [(&str, &str, &str); 3] = [
    (
        "small_net",
        "../../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite",
        "tests/models/ref/small_net/set-0",
    ),
    (
        "kernels",
        "tests/models/vela/5.2.0/u55_256/kernels_vela.tflite",
        "tests/models/ref/kernels/set-0",
    ),
    (
        "fc",
        "tests/models/vela/5.2.0/u55_256/fc_vela.tflite",
        "tests/models/ref/fc/set-0",
    ),
];

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut g = c.benchmark_group("npu_model");
    for (name, vela_out, set) in MODELS {
        let imp = vela::import(&std::fs::read(root.join(vela_out)).unwrap()).unwrap();
        let inputs: Vec<Vec<u8>> = (0..)
            .map(|i| root.join(set).join(format!("input-{i}.bin")))
            .take_while(|p| p.is_file())
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        // Like the reference's `invoke()`: the model is loaded (parsed, verified) once.
        let model = npu_model::Model::load(&imp.pack, &imp.io).unwrap();
        g.bench_function(name, |b| b.iter(|| model.run(&refs).unwrap()));
        // What every upload with IO bindings pays for its golden vector (`server/src/catalog/
        // proof.rs`): the pack loaded from scratch, then the golden input run once.
        g.bench_function(format!("{name}/load+golden"), |b| {
            b.iter(|| {
                let model = npu_model::Model::load(&imp.pack, &imp.io).unwrap();
                npu_model::golden::compute(&model, &imp.io).unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
