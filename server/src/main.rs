//! `npub-server`: parse the configuration, start, serve until SIGTERM or SIGINT.
//!
//! Everything else lives in the library (`npub_server::Server`, `npub_server::app`), which is what
//! the tests drive.
use std::process::ExitCode;

use clap::Parser;
use npub_server::{Config, Server};

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::parse();
    if let Err(e) = npub_server::ops::logging::init(&config.log) {
        eprintln!("npub-server: --log {:?}: {e}", config.log);
        return ExitCode::from(2);
    }
    let server = match Server::start(config).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("npub-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", server.banner());
    match server.run(npub_server::shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("npub-server: {e}");
            ExitCode::FAILURE
        }
    }
}
