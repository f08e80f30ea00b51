//! Prints a pack's command stream, one command per line: `offset  NAME value (param)`.
//!
//! `cargo run -p npu-model --example dump -- PACK.npub`
use npub_core::Blob;
use npub_core::cmdstream::{Command, commands};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: dump PACK.npub");
        std::process::exit(2);
    };
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let blob = Blob::parse(&bytes).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    for c in commands(blob.command_stream()) {
        match c {
            Ok((at, Command::Set { reg, value, param })) => {
                println!("{at:6}  {reg} {value} ({value:#x}) param {param}")
            }
            Ok((at, Command::Op { code, param })) => println!("{at:6}  ** {code:?} {param}"),
            Err(e) => {
                println!("error: {e}");
                break;
            }
        }
    }
}
