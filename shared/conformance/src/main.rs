//! `rara-conformance ENDPOINT`: runs the `rara.v1` conformance suite against the executor at
//! `ENDPOINT` (`http://host:port`; or `RARA_CONFORMANCE_ENDPOINT`), prints the report and
//! exits 1 when a rule is violated (2 on a bad endpoint). The executor must register the
//! conformance capabilities (see the crate's docs).

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let endpoint = std::env::args().nth(1).or_else(|| std::env::var("RARA_CONFORMANCE_ENDPOINT").ok());
    let Some(endpoint) = endpoint.filter(|e| !e.starts_with('-')) else {
        eprintln!("usage: rara-conformance http://HOST:PORT (or RARA_CONFORMANCE_ENDPOINT=http://HOST:PORT)");
        return ExitCode::from(2);
    };
    match rara_conformance::run(&endpoint).await {
        Ok(report) => {
            println!("{report}");
            if report.conforms() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(err) => {
            eprintln!("rara-conformance: {err}");
            ExitCode::from(2)
        }
    }
}
