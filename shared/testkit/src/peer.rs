//! A TCP peer in front of a real service that can go *silent*: while silent it accepts
//! connections and never answers (a black hole: no reset, no bytes), and it stops
//! forwarding on connections already open; when it speaks again, new connections are
//! forwarded to the upstream service byte for byte. The fault the deadline tests need: a
//! refused connection fails fast, a silent peer only a deadline can end.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A proxy on 127.0.0.1 that is silent or forwards to `upstream`.
#[derive(Debug)]
pub struct SilentPeer {
    addr: SocketAddr,
    silent: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl SilentPeer {
    /// Starts silent (`silent = true`) or forwarding to `upstream` (e.g. `127.0.0.1:4566`).
    pub async fn start(upstream: SocketAddr, silent: bool) -> SilentPeer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the silent peer");
        let addr = listener.local_addr().expect("the silent peer's address");
        let flag = Arc::new(AtomicBool::new(silent));
        let silent = flag.clone();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((client, _)) = listener.accept().await {
                if flag.load(Ordering::SeqCst) {
                    // Accept, then say nothing until the test ends.
                    held.push(client);
                } else {
                    tokio::spawn(forward(client, upstream, flag.clone()));
                }
            }
        });
        SilentPeer { addr, silent, task }
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn set_silent(&self, silent: bool) {
        self.silent.store(silent, Ordering::SeqCst);
    }
}

impl Drop for SilentPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies both ways until either side closes; once the peer is silent, bytes are read and
/// dropped (the connection stays open and says nothing).
async fn forward(client: TcpStream, upstream: SocketAddr, silent: Arc<AtomicBool>) {
    let Ok(server) = TcpStream::connect(upstream).await else { return };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = {
        let silent = silent.clone();
        async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = match client_read.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                if !silent.load(Ordering::SeqCst) && server_write.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if !silent.load(Ordering::SeqCst) && client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::join!(up, down);
}
