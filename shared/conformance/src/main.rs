//! `rara-conformance ENDPOINT`: runs the `rara.v1` conformance suite against the executor at
//! `ENDPOINT` (`http://host:port`; or `RARA_CONFORMANCE_ENDPOINT`), prints the report and
//! exits with an [`Exit`] code. It calls as rara does, with the TLS settings, token and
//! attempt key of `RARA_REMOTE_*` (see `rara_remote::security`). The executor must register the conformance capabilities (see
//! the crate's docs).

use std::process::ExitCode;

/// How `rara-conformance` exits; a script reads the verdict from the code alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Exit {
    /// Every rule checked held (skipped rules do not count against it).
    Conforms = 0,
    /// At least one rule was violated; the report says which and how.
    Violated = 1,
    /// No endpoint given, or one that cannot be dialled (a bad URL).
    BadEndpoint = 2,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let endpoint = std::env::args().nth(1).or_else(|| std::env::var("RARA_CONFORMANCE_ENDPOINT").ok());
    let Some(endpoint) = endpoint.filter(|e| !e.starts_with('-')) else {
        eprintln!("usage: rara-conformance http://HOST:PORT (or RARA_CONFORMANCE_ENDPOINT=http://HOST:PORT)");
        return Exit::BadEndpoint.into();
    };
    // The same variables as rara's functions (RARA_REMOTE_CA_FILE, RARA_REMOTE_TOKEN, ...).
    let security = match rara_remote::Security::from_lookup(|var| std::env::var(var).ok()) {
        Ok(security) => security,
        Err(err) => {
            eprintln!("rara-conformance: {err}");
            return Exit::BadEndpoint.into();
        }
    };
    let exit = match rara_conformance::run_with(&endpoint, security).await {
        Ok(report) => {
            println!("{report}");
            if report.conforms() { Exit::Conforms } else { Exit::Violated }
        }
        Err(err) => {
            eprintln!("rara-conformance: {err}");
            Exit::BadEndpoint
        }
    };
    exit.into()
}
