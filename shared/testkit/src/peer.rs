//! A TCP peer in front of a real service that can go *silent*: while silent it accepts
//! connections and never answers (a black hole: no reset, no bytes), and it delivers nothing
//! on connections already open; when it speaks again, new connections are forwarded to the
//! upstream service byte for byte, and open ones get what was sent during the silence, late
//! and in order, as TCP delivers it once a partition heals (bytes are delayed, never lost).
//! The fault the deadline tests need: a refused connection fails fast, a silent peer only a
//! deadline can end.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
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

/// Copies both ways until either side closes.
async fn forward(client: TcpStream, upstream: SocketAddr, silent: Arc<AtomicBool>) {
    let Ok(server) = TcpStream::connect(upstream).await else { return };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(pipe(client_read, server_write, silent.clone()), pipe(server_read, client_write, silent));
}

/// One direction: everything read is delivered while the peer speaks; while it is silent,
/// what is read is held (the sender is never blocked, the receiver gets nothing) and
/// delivered, in order, once it speaks again.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, silent: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut held: Vec<u8> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => held.extend_from_slice(&buf[..n]),
            },
            _ = tick.tick() => {}
        }
        if !held.is_empty() && !silent.load(Ordering::SeqCst) {
            if to.write_all(&held).await.is_err() {
                return;
            }
            held.clear();
        }
    }
}
