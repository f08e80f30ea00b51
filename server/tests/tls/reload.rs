//! `SIGHUP` reloads the certificate: a connection open before it goes on, the next one gets the
//! new certificate. The real binary in a child process, for a real signal.
use std::sync::Arc;

use crate::binary;
use crate::certs::{Ca, Validity};
use crate::client;

#[tokio::test]
async fn reloads_the_certificate_on_sighup_and_keeps_open_connections() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("npub test CA");
    let old = ca.server(&["localhost"], Validity::Now);
    let (cert, key) = old.write(dir.path(), "server");
    let (cert_s, key_s) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let mut running = binary::spawn(
        &dir.path().join("data"),
        &["--tls-cert", cert_s, "--tls-key", key_s],
        None,
    )
    .await;
    let addr = running
        .url
        .strip_prefix("https://")
        .unwrap_or_else(|| panic!("{}", running.url))
        .parse()
        .unwrap();
    let peer = |tls: &tokio_rustls::client::TlsStream<tokio::net::TcpStream>| {
        tls.get_ref().1.peer_certificates().unwrap()[0].clone()
    };
    let mut open = client::connect(&client::config(&ca.pem, None), addr)
        .await
        .unwrap();
    assert_eq!(peer(&open), old.der);
    assert_eq!(
        client::get(&mut open, "/livez", "-", "")
            .await
            .unwrap()
            .status,
        200
    );

    // A renewed certificate in the same files, then the signal.
    let new = ca.server(&["localhost"], Validity::Now);
    new.write(dir.path(), "server");
    let pid = running.child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    loop {
        let line = running
            .log
            .recv()
            .await
            .expect("the server logs the reload");
        assert!(!line.contains("reload failed"), "{line}");
        if line.contains("reloaded") {
            break;
        }
    }
    // A fresh client (no session to resume) sees the new certificate ...
    let fresh: Arc<_> = client::config(&ca.pem, None);
    let next = client::connect(&fresh, addr).await.unwrap();
    assert_eq!(peer(&next), new.der);
    // ... and the connection open before the signal is still served.
    assert_eq!(
        client::get(&mut open, "/livez", "-", "")
            .await
            .unwrap()
            .status,
        200
    );
    running.child.kill().await.unwrap();
}
