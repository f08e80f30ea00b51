//! Presigned downloads on target: the npub server keeps its packs in a bucket (s3s-fs on
//! loopback, `--pack-store s3://…`) and answers every pack request of the firmware on QEMU with a
//! 307 to a presigned URL of it (`--presign-downloads`). The firmware's transport follows it (the
//! same `Range`, no token, the URL's own `Host`) and checks the answer like the server's; the
//! 1 MB-class pack is installed byte for byte and the server itself sends no pack byte.
//!
//! Fails, never skips, without `qemu-system-arm` or `s3s-fs` (`.ci/run` installs both).
#[path = "../../server/tests/s3/bucket.rs"]
mod bucket;
mod net;

use std::time::Duration;

use net::qemu::{Run, active_bytes, args};
use net::{Body, LiveServer};

const RUN: Duration = Duration::from_secs(180);

/// `npub_pack_bytes_served_total` from the server's metrics.
fn bytes_served(fleet: &LiveServer) -> u64 {
    let (status, body) = fleet.call(net::ADMIN, "GET", "/metrics", Body::None);
    assert_eq!(status, 200);
    String::from_utf8(body)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("npub_pack_bytes_served_total "))
        .expect("the counter is exported")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_firmware_downloads_through_a_presigned_redirect_to_the_bucket() {
    net::qemu::firmware();
    let dir = tempfile::tempdir().unwrap();
    let s3 = bucket::S3Server::start(&dir.path().join("s3"))
        .expect("s3s-fs is installed (.ci/run installs it)");
    let settings = s3.settings();
    let fleet = LiveServer::start_with(
        &dir.path().join("server"),
        Some(Box::new(move |c| {
            c.pack_store = Some(format!("s3://{}/packs", bucket::BUCKET));
            c.presign_downloads = true;
            c.aws_overrides = settings.clone();
        })),
    );
    let big = fleet.upload("kws", "2.0.0", net::big_pack(1 << 20));
    let token = fleet.provision("dev-1", "lab");
    let trust = fleet.trust_file(dir.path());
    let flash = dir.path().join("dev-1.nor");
    let served = bytes_served(&fleet);
    let s = fleet.deploy("kws", "2.0.0", "lab");
    let argv = args(
        &fleet.url,
        &token,
        trust.to_str().unwrap(),
        flash.to_str().unwrap(),
    );
    let (status, log) = Run::start(&argv).finish(RUN);
    let log = log.join("\n");
    assert!(status.success(), "{log}");
    assert!(log.contains(&format!("installed: sequence {s}")), "{log}");
    assert!(active_bytes(&flash, big.len()) == big);
    assert_eq!(
        bytes_served(&fleet),
        served,
        "every pack byte came from the bucket"
    );
    let line = log
        .lines()
        .find(|l| l.starts_with("download: 1049424 bytes in "))
        .expect("the download line");
    println!("presigned: {line}");
    let dev = fleet.device("dev-1");
    assert_eq!(dev["current_sequence"], s, "{dev}");
}
