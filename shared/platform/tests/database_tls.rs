//! Database TLS `verify-full` for real: a throwaway Postgres cluster serving TLS with a
//! certificate of a test CA (openssl CLI), on a free port. Through a secret with
//! `RARA_DATABASE_SSL_MODE=verify-full` and `RARA_DATABASE_SSL_ROOT_CERT`, rara connects with the
//! right CA and is refused with another, in an error that names the host.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use rara_domain::config::Config;
use rara_platform::database::{DatabaseSource, Error, SecretFetcher};
use serde_json::json;

const BIN: &str = "/usr/lib/postgresql/15/bin";

/// A secret that is always this text.
#[derive(Debug)]
struct Fixed(String);

#[async_trait::async_trait]
impl SecretFetcher for Fixed {
    async fn fetch(&self, _arn: &str) -> Result<String, Error> {
        Ok(self.0.clone())
    }
}

/// Runs `program` with `args`, as `postgres` when the test runs as root (initdb refuses root).
fn run(program: &str, args: &[&str]) {
    let root = Command::new("id").arg("-u").output().unwrap().stdout.starts_with(b"0\n");
    let mut command = if root && program.starts_with(BIN) {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", program]);
        c
    } else {
        Command::new(program)
    };
    let out = command.args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A Postgres cluster serving TLS with a certificate for `localhost` signed by `ca.pem`, in a
/// directory of its own; `wrong.pem` is another CA. Stopped and removed when dropped.
struct TlsCluster {
    dir: PathBuf,
    port: u16,
}

impl TlsCluster {
    fn start() -> TlsCluster {
        let dir = std::env::temp_dir().join(format!("rara-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("run")).unwrap();
        let at = |name: &str| dir.join(name).to_str().unwrap().to_owned();
        TlsCluster::certificates(&dir);
        let port = rara_testkit::python::free_port();
        let cluster = TlsCluster { dir: dir.clone(), port };
        chown_postgres(&[&dir, &dir.join("run"), &dir.join("server.key"), &dir.join("server.pem")]);
        run(&format!("{BIN}/initdb"), &["-D", &at("data"), "-A", "trust", "-U", "postgres"]);
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
            at("run"),
            at("server.pem"),
            at("server.key")
        );
        run(&format!("{BIN}/pg_ctl"), &["-D", &at("data"), "-l", &at("run/log"), "-w", "-o", &options, "start"]);
        cluster
    }

    /// The two CAs and the server's key and certificate (for `localhost` and 127.0.0.1).
    fn certificates(dir: &Path) {
        let at = |name: &str| dir.join(name).to_str().unwrap().to_owned();
        for (key, pem, subject) in
            [("ca.key", "ca.pem", "/CN=rara test CA"), ("wrong.key", "wrong.pem", "/CN=another CA")]
        {
            run(
                "openssl",
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-days",
                    "2",
                    "-subj",
                    subject,
                    "-keyout",
                    &at(key),
                    "-out",
                    &at(pem),
                ],
            );
        }
        run(
            "openssl",
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                &at("server.key"),
                "-out",
                &at("server.csr"),
            ],
        );
        std::fs::write(dir.join("ext.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
        run(
            "openssl",
            &[
                "x509",
                "-req",
                "-in",
                &at("server.csr"),
                "-CA",
                &at("ca.pem"),
                "-CAkey",
                &at("ca.key"),
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &at("ext.cnf"),
                "-out",
                &at("server.pem"),
            ],
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("server.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// The source the functions build from the environment: the secret, verify-full, `ca`.
    fn source(&self, ca: &str) -> DatabaseSource {
        let ca = self.dir.join(ca).to_str().unwrap().to_owned();
        let vars = [
            ("RARA_DATABASE_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:123456789012:secret:rara/db-AbCdEf"),
            ("RARA_DATABASE_SSL_MODE", "verify-full"),
            ("RARA_DATABASE_SSL_ROOT_CERT", ca.as_str()),
        ];
        let lookup = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned());
        DatabaseSource::from_lookup(&Config::from_lookup("test", |_| None).unwrap(), lookup).unwrap()
    }

    fn secret(&self) -> Fixed {
        Fixed(
            json!({"username": "postgres", "password": "unused", "host": "localhost", "port": self.port,
                   "dbname": "postgres"})
            .to_string(),
        )
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = std::panic::catch_unwind(|| {
            run(&format!("{BIN}/pg_ctl"), &["-D", data.to_str().unwrap(), "-m", "immediate", "stop"]);
        });
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Hands `paths` to the `postgres` user when the test runs as root.
fn chown_postgres(paths: &[&Path]) {
    if Command::new("id").arg("-u").output().unwrap().stdout.starts_with(b"0\n") {
        for path in paths {
            run("chown", &["postgres", path.to_str().unwrap()]);
        }
    }
}

#[tokio::test]
async fn verify_full_connects_with_the_right_ca_and_names_the_host_with_a_wrong_one() {
    let cluster = TlsCluster::start();

    let options = cluster.source("ca.pem").connect_options(&cluster.secret()).await.unwrap();
    let pool = sqlx::PgPool::connect_with(options.get().clone()).await.map_err(|e| options.connect_error(e)).unwrap();
    let encrypted: bool =
        sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetch_one(&pool).await.unwrap();
    assert!(encrypted, "the connection is TLS");
    pool.close().await;

    let options = cluster.source("wrong.pem").connect_options(&cluster.secret()).await.unwrap();
    let refused = sqlx::PgPool::connect_with(options.get().clone()).await.map_err(|e| options.connect_error(e));
    let error = refused.expect_err("a certificate of another CA is refused");
    let shown = error.to_string();
    let address = format!("localhost:{}", cluster.port);
    assert!(shown.contains(&address) && shown.contains("verify-full"), "{shown}");
    let cause = std::error::Error::source(&error).map(ToString::to_string).unwrap_or_default();
    assert!(cause.to_lowercase().contains("certificate"), "the cause says why: {cause}");
    eprintln!("with another CA: {shown}: {cause}");
}
