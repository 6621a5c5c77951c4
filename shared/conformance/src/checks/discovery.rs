//! [`Rule::Health`] and [`Rule::Capabilities`]: the endpoint answers the health check and
//! offers the conformance capabilities ([`Offer`]).

use std::collections::HashMap;

use rara_remote::pb::{self};

use crate::rules::Rule;
use crate::suite::Suite;
use crate::{CAPABILITIES, STREAM_BOUND};

/// One conformance capability as the endpoint offers it (its newest version).
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    pub(crate) version: String,
    pub(crate) detachable: bool,
}

impl Suite {
    /// [`Rule::Health`].
    pub(crate) async fn health(&mut self) {
        use tonic_health::pb::health_check_response::ServingStatus;
        let mut health = tonic_health::pb::health_client::HealthClient::new(self.channel.clone());
        let service = pb::executor_service_server::SERVICE_NAME.to_owned();
        let answer = tokio::time::timeout(STREAM_BOUND, health.check(tonic_health::pb::HealthCheckRequest { service }));
        let outcome = match answer.await {
            Ok(Ok(answer)) if answer.get_ref().status() == ServingStatus::Serving => Ok(()),
            Ok(Ok(answer)) => Err(format!("grpc.health.v1 Check answered {:?}", answer.get_ref().status())),
            Ok(Err(status)) => Err(format!("grpc.health.v1 Check failed: {:?}: {}", status.code(), status.message())),
            Err(_) => Err(format!("grpc.health.v1 Check did not answer within {STREAM_BOUND:?}")),
        };
        self.findings.record(Rule::Health, outcome);
    }

    /// [`Rule::Capabilities`]; the newest offer of each conformance capability, when all are
    /// offered.
    pub(crate) async fn capabilities(&mut self) -> Option<HashMap<&'static str, Offer>> {
        let mut client = self.client();
        let answer = tokio::time::timeout(STREAM_BOUND, client.get_capabilities(pb::GetCapabilitiesRequest {}));
        let capabilities = match answer.await {
            Ok(Ok(answer)) => answer.into_inner().capabilities,
            Ok(Err(status)) => {
                let what = format!("GetCapabilities failed: {:?}: {}", status.code(), status.message());
                self.findings.violated(Rule::Capabilities, what);
                return None;
            }
            Err(_) => {
                self.findings
                    .violated(Rule::Capabilities, format!("GetCapabilities did not answer within {STREAM_BOUND:?}"));
                return None;
            }
        };
        let mut problems = Vec::new();
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for capability in &capabilities {
            let (name, version) = (capability.name.as_str(), capability.version.as_str());
            if name.is_empty() {
                problems.push(format!("a capability has no name (version {version:?})"));
            }
            if rara_remote::version::parse(version).is_none() {
                problems.push(format!("{name} has version {version:?}, which is not SemVer (MAJOR.MINOR.PATCH)"));
            }
            if seen.contains(&(name, version)) {
                problems.push(format!("{name} {version} is listed twice"));
            }
            seen.push((name, version));
        }
        let mut offers = HashMap::new();
        for name in CAPABILITIES {
            let newest = capabilities
                .iter()
                .filter(|c| c.name == name)
                .max_by(|a, b| rara_remote::version::compare(&a.version, &b.version));
            match newest {
                Some(c) => {
                    offers.insert(name, Offer { version: c.version.clone(), detachable: c.detachable });
                }
                None => problems.push(format!("{name} is not offered (register the conformance capabilities)")),
            }
        }
        let complete = offers.len() == CAPABILITIES.len();
        self.findings.record(Rule::Capabilities, if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) });
        complete.then_some(offers)
    }
}
