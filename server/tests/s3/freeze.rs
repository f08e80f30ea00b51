//! A TCP proxy in front of the S3 server that can freeze: from then on it accepts connections
//! and reads requests but never answers or forwards a byte, as a bucket behind a black-holed
//! route or a wedged gateway does. What it received while frozen is counted, so a test knows a
//! request is stuck in it.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

pub struct FreezeProxy {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    frozen: Arc<AtomicBool>,
    held: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl FreezeProxy {
    /// Forwards to `127.0.0.1:upstream` until frozen.
    pub async fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let frozen = Arc::new(AtomicBool::new(false));
        let held = Arc::new(AtomicU64::new(0));
        let (f, h) = (Arc::clone(&frozen), Arc::clone(&held));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (f, h) = (Arc::clone(&f), Arc::clone(&h));
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await {
                        relay(client, server, &f, &h).await;
                    }
                });
            }
        });
        Self {
            endpoint,
            frozen,
            held,
            task,
        }
    }

    /// From now on nothing passes either way, on new connections and on open ones.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Lets traffic through again (connections held meanwhile stay dead).
    pub fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
    }

    /// Bytes received from clients while frozen, and never forwarded.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }
}

impl Drop for FreezeProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(client: TcpStream, server: TcpStream, frozen: &AtomicBool, held: &AtomicU64) {
    let (mut client, mut server) = (client, server);
    let (mut cr, mut cw) = client.split();
    let (mut sr, mut sw) = server.split();
    let mut stuck = false;
    let up = async {
        let mut buf = [0u8; 8192];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if stuck || frozen.load(Ordering::SeqCst) {
                // Swallowed: the request never reaches the bucket, and no answer will come.
                stuck = true;
                held.fetch_add(n as u64, Ordering::SeqCst);
                continue;
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        // The client hung up: keep the connection's other half open as a wedged peer would.
        std::future::pending::<()>().await;
    };
    let down = async {
        let mut buf = [0u8; 8192];
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if frozen.load(Ordering::SeqCst) {
                // An answer that arrives while frozen is dropped, and the connection goes dead.
                std::future::pending::<()>().await;
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}
