//! Asking one endpoint what it offers (`GetCapabilities`) and whether it drains (the standard
//! health service), bounded by the discovery timeout.

use std::sync::Arc;
use std::time::Duration;

use tonic::transport::Channel;

use super::cache::{Answer, Offer, RemoteCapability};
use crate::bounds::Limits;
use crate::client::RemoteExecutor;
use crate::pb;
use crate::security::Security;
use crate::version;

/// One configured endpoint and its channel.
#[derive(Debug)]
pub(super) struct Remote {
    pub(super) url: Arc<str>,
    pub(super) channel: Channel,
    /// The heartbeat interval asked on its streams ([`crate::Transport::heartbeat_interval`]).
    pub(super) heartbeat_interval: Duration,
    /// What its executors may return ([`crate::bounds`]).
    pub(super) limits: Limits,
    /// The token its calls carry and the key of its attempts' secrets.
    pub(super) security: Arc<Security>,
}

/// The longest capability name or version kept: they become metric dimensions and log fields.
pub const MAX_CAPABILITY_NAME_BYTES: usize = 128;
pub const MAX_CAPABILITY_VERSION_BYTES: usize = 64;

/// Whether a capability's name (or version) is one rara keeps: 1 to `bound` bytes of ASCII
/// letters, digits and `.`, `_`, `-`, `/`, `:`, `+`.
fn acceptable(text: &str, bound: usize) -> bool {
    !text.is_empty()
        && text.len() <= bound
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b':' | b'+'))
}

/// One endpoint's offers and whether it drains, or `None` (logged) when it could not be
/// asked within `timeout`.
pub(super) async fn discover(remote: &Remote, timeout: Duration) -> Option<Answer> {
    let mut client = remote.security.client(remote.channel.clone());
    let mut request = tonic::Request::new(pb::GetCapabilitiesRequest {});
    request.set_timeout(timeout);
    let response = match tokio::time::timeout(timeout, client.get_capabilities(request)).await {
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) => {
            tracing::warn!(
                endpoint = %remote.url, code = ?status.code(), status = status.message(),
                "capability discovery failed; the endpoint keeps what it offered before"
            );
            return None;
        }
        Err(_) => {
            tracing::warn!(
                endpoint = %remote.url, ?timeout,
                "capability discovery timed out; the endpoint keeps what it offered before"
            );
            return None;
        }
    };
    let offers = offers(remote, response.capabilities);
    let draining = draining(remote, timeout).await;
    tracing::info!(endpoint = %remote.url, capabilities = offers.len(), draining, "capabilities discovered");
    Some(Answer { offers, draining })
}

/// The capabilities an endpoint sent, as offers: blank or repeated ones skipped (logged).
fn offers(remote: &Remote, capabilities: Vec<pb::Capability>) -> Vec<Offer> {
    let mut offers: Vec<Offer> = Vec::with_capacity(capabilities.len());
    for capability in capabilities {
        let duplicate =
            offers.iter().any(|o| o.capability.name == capability.name && o.capability.version == capability.version);
        let version_ok = capability.version.is_empty() || acceptable(&capability.version, MAX_CAPABILITY_VERSION_BYTES);
        if !acceptable(&capability.name, MAX_CAPABILITY_NAME_BYTES) || !version_ok {
            // Neither is repeated: they are what is wrong.
            tracing::warn!(
                endpoint = %remote.url, name_bytes = capability.name.len(), version_bytes = capability.version.len(),
                "skipping a capability whose name or version is blank, longer than {MAX_CAPABILITY_NAME_BYTES}/{MAX_CAPABILITY_VERSION_BYTES} bytes or not of [A-Za-z0-9._-/:+]"
            );
            continue;
        }
        if duplicate {
            tracing::warn!(endpoint = %remote.url, name = %capability.name, "skipping a repeated capability");
            continue;
        }
        if version::parse(&capability.version).is_none() {
            tracing::warn!(
                endpoint = %remote.url, name = %capability.name, version = %capability.version,
                "capability version is not a semantic version: it ranks below every valid one"
            );
        }
        let executor =
            RemoteExecutor::new(remote.channel.clone(), remote.url.clone(), &capability.name, &capability.version)
                .with_detachable(capability.detachable)
                .with_heartbeat_interval(remote.heartbeat_interval)
                .with_limits(remote.limits)
                .with_security(remote.security.clone());
        offers.push(Offer {
            capability: RemoteCapability {
                endpoint: remote.url.to_string(),
                name: capability.name,
                version: capability.version,
                description: capability.description,
                detachable: capability.detachable,
                input_schema: capability.input_schema,
                serving: true,
            },
            executor: Arc::new(executor),
        });
    }
    offers
}

/// Whether the endpoint's standard health service (`grpc.health.v1`, for the `rara.v1`
/// service) says NOT_SERVING. An executor without a health service, or one whose health
/// does not answer in time, counts as serving: it has just answered discovery.
async fn draining(remote: &Remote, timeout: Duration) -> bool {
    use tonic_health::pb::health_check_response::ServingStatus;
    let mut client = tonic_health::pb::health_client::HealthClient::new(remote.channel.clone());
    let service = pb::executor_service_server::SERVICE_NAME.to_owned();
    let check = client.check(tonic_health::pb::HealthCheckRequest { service });
    match tokio::time::timeout(timeout, check).await {
        Ok(Ok(answer)) => answer.into_inner().status() == ServingStatus::NotServing,
        _ => false,
    }
}
