//! A TCP proxy in front of the S3 server that, while armed, breaks every connection once it has
//! carried so many bytes towards the bucket: a `PutObject` whose body stops half-way, as when the
//! link to the bucket drops. Small requests (HEAD, LIST) pass.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

pub struct CutProxy {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    armed: Arc<AtomicBool>,
    cuts: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl CutProxy {
    /// Forwards to `upstream` (`127.0.0.1:PORT`); cuts after `limit` bytes upstream while armed.
    pub async fn start(upstream: u16, limit: u64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let armed = Arc::new(AtomicBool::new(true));
        let cuts = Arc::new(AtomicU64::new(0));
        let (a, c) = (Arc::clone(&armed), Arc::clone(&cuts));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (a, c) = (Arc::clone(&a), Arc::clone(&c));
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await {
                        relay(client, server, limit, &a, &c).await;
                    }
                });
            }
        });
        Self {
            endpoint,
            armed,
            cuts,
            task,
        }
    }

    /// Lets everything through from now on.
    pub fn disarm(&self) {
        self.armed.store(false, Ordering::SeqCst);
    }

    /// Connections cut so far.
    pub fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    limit: u64,
    armed: &AtomicBool,
    cuts: &AtomicU64,
) {
    let (mut from_client, mut to_server) = (client, server);
    let (mut cr, mut cw) = from_client.split();
    let (mut sr, mut sw) = to_server.split();
    let up = async {
        let mut buf = [0u8; 8192];
        let mut sent = 0u64;
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if armed.load(Ordering::SeqCst) && sent + n as u64 > limit {
                let keep = (limit - sent) as usize;
                let _ = sw.write_all(&buf[..keep]).await;
                cuts.fetch_add(1, Ordering::SeqCst);
                return;
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                return;
            }
            sent += n as u64;
        }
    };
    let down = tokio::io::copy(&mut sr, &mut cw);
    // Whichever side ends first ends the connection: both sockets close when this returns.
    tokio::select! {
        () = up => {}
        _ = down => {}
    }
}
