//! The machine's Postgres server itself: its address, runners connected through a peer in
//! front of it, and a restart.

use rara_testkit::SilentPeer;

use super::{Shape, Stack};

/// The address of the Postgres server of `DATABASE_URL` (the test's own connections go
/// there directly; the runners', in the silent-Postgres scenarios, through a [`SilentPeer`]).
pub fn postgres_addr() -> std::net::SocketAddr {
    use std::net::ToSocketAddrs;
    use std::str::FromStr;
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let options = sqlx::postgres::PgConnectOptions::from_str(&url).expect("DATABASE_URL is a Postgres URL");
    (options.get_host(), options.get_port())
        .to_socket_addrs()
        .expect("resolve the Postgres host")
        .next()
        .expect("a Postgres address")
}

/// The variables that point a runner's Postgres connections at `peer` and give it a short
/// grace and short client-side Postgres deadlines.
pub fn through_peer(s: &Stack, peer: &SilentPeer, grace: u64) -> Vec<(&'static str, String)> {
    vec![
        ("DATABASE_URL", s.database_url_through(peer)),
        ("RARA_SHUTDOWN_GRACE_SECONDS", grace.to_string()),
        ("RARA_DB_CONNECT_TIMEOUT_MS", "1000".into()),
        ("RARA_DB_STATEMENT_TIMEOUT_MS", "2000".into()),
    ]
}

/// Scenarios 12 and 13: a peer in front of Postgres (speaking), 20 diamond steps, and a
/// scheduler and two executors (`exec-a`, `exec-b`) connected through it with a shutdown
/// grace of `grace` s, once half the steps have succeeded. Returns the peer, the runners'
/// environment and the runners.
pub async fn runners_through_a_postgres_peer(
    s: &mut Stack,
    grace: u64,
) -> (SilentPeer, Vec<(&'static str, String)>, [usize; 3]) {
    let peer = SilentPeer::start(postgres_addr(), false).await;
    let env = through_peer(s, &peer, grace);
    s.submit(20, Shape::Diamond).await;
    let runners = [
        s.spawn_with("scheduler", "scheduler", &env),
        s.spawn_with("executor", "exec-a", &env),
        s.spawn_with("executor", "exec-b", &env),
    ];
    s.until_succeeded(10).await;
    (peer, env, runners)
}

/// Restarts the machine's Postgres cluster (fast shutdown: every connection is cut).
pub fn restart_postgres() {
    let version = std::fs::read_dir("/etc/postgresql")
        .expect("a Debian PostgreSQL cluster (/etc/postgresql)")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .next()
        .expect("a cluster version");
    let status = std::process::Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart", "--", "-m", "fast"])
        .status()
        .expect("run pg_ctlcluster");
    assert!(status.success(), "pg_ctlcluster restart failed");
}
