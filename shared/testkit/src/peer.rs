//! A TCP peer in front of a real service that can go *silent*: while silent it accepts
//! connections and never answers (a black hole: no reset, no bytes), and it delivers nothing
//! on connections already open; when it speaks again, new connections are forwarded to the
//! upstream service byte for byte, and open ones get what was sent during the silence, late
//! and in order, as TCP delivers it once a partition heals (bytes are delayed, never lost).
//! The fault the deadline tests need: a refused connection fails fast, a silent peer only a
//! deadline can end.
//!
//! A [`LatePeer`] is the other fault: a service down at start. It owns its port from the
//! start (nothing else can take it) and refuses every connection until told to
//! [`listen`](LatePeer::listen), then forwards to the upstream service; it counts what it
//! refused, so a test can start listening right after a given connection was refused. Its
//! upstream can change ([`forward_to`](LatePeer::forward_to)): a restarted service takes
//! over the endpoint before the old one dies, so nothing races its start.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
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

/// A service down at start on a port of 127.0.0.1 this peer owns: it refuses connections
/// (each one reset at once, as a closed port answers) until [`listen`](Self::listen), then
/// forwards each new one to the upstream of the moment.
#[derive(Debug)]
pub struct LatePeer {
    addr: SocketAddr,
    listening: Arc<AtomicBool>,
    upstream: Arc<Mutex<SocketAddr>>,
    refused: watch::Receiver<usize>,
    task: JoinHandle<()>,
}

impl LatePeer {
    /// Binds a port now (owned until drop) and refuses connections on it.
    pub async fn refusing(upstream: SocketAddr) -> LatePeer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the late peer");
        let addr = listener.local_addr().expect("the late peer's address");
        let listening = Arc::new(AtomicBool::new(false));
        let (count, refused) = watch::channel(0);
        let open = listening.clone();
        let upstream = Arc::new(Mutex::new(upstream));
        let to = upstream.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if open.load(Ordering::SeqCst) {
                    let upstream = *to.lock().expect("the upstream is set whole");
                    tokio::spawn(forward(client, upstream, Arc::new(AtomicBool::new(false))));
                } else {
                    // A reset, not a goodbye: the client sees the connection refused at once.
                    let _ = client.set_zero_linger();
                    drop(client);
                    count.send_modify(|n| *n += 1);
                }
            }
        });
        LatePeer { addr, listening, upstream, refused, task }
    }

    /// From now on connections are forwarded to the upstream service. Returns at once.
    pub fn listen(&self) {
        self.listening.store(true, Ordering::SeqCst);
    }

    /// New connections go to `upstream` from now on; open ones stay where they are.
    pub fn forward_to(&self, upstream: SocketAddr) {
        *self.upstream.lock().expect("the upstream is set whole") = upstream;
    }

    /// How many connections were refused so far.
    pub fn refused(&self) -> usize {
        *self.refused.borrow()
    }

    /// Returns once more than `count` connections have been refused.
    pub async fn refused_more_than(&self, count: usize) {
        let mut refused = self.refused.clone();
        refused.wait_for(|&n| n > count).await.expect("the late peer runs while it is held");
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for LatePeer {
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
