//! [`RemoteExecutors`]: routes operations to the remote executors listed in
//! `RARA_REMOTE_EXECUTORS` (DESIGN.md "Executors").
//!
//! - One channel per endpoint, created once and connected lazily (TLS with the webpki roots
//!   for `https://`), shared by every execution the container runs.
//! - Capabilities come from `GetCapabilities` and are cached: refreshed when older than the
//!   refresh interval (default 60 s) and at once when an operation is not found, at most once
//!   per miss interval (default 5 s) so a flood of unknown operations cannot hammer the
//!   servers. Refreshes run one at a time; the endpoints are asked concurrently.
//! - An endpoint that cannot be reached during discovery is logged and keeps what it offered
//!   before; the other endpoints still route. One that has never answered is *unknown*.
//! - Routing: the operation name and, when the step pins one, the exact version; otherwise
//!   the highest SemVer version ([`crate::version::compare`]; an invalid version ranks below
//!   every valid one). Ties go to the endpoint listed first.
//! - Not found: when every endpoint is known, nothing offers it (`Ok(None)`, the registry's
//!   permanent `UNKNOWN_OPERATION`). While an endpoint is unknown it might offer it: it is
//!   asked again (at once, concurrent misses share one ask; the step's retry policy paces the
//!   asks), and if it still does not answer the step gets a retryable `EXECUTOR_UNAVAILABLE`.

use std::sync::Arc;
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::Executor;
use rara_domain::registry::RemoteRouter;
use rara_domain::step_error::codes;
use tokio::sync::{Mutex, RwLock};
use tokio::time::Instant;
use tonic::codegen::http::Uri;
use tonic::codegen::http::uri::InvalidUri;
use tonic::transport::Channel;

use crate::client::RemoteExecutor;
use crate::pb;
use crate::pb::executor_service_client::ExecutorServiceClient;
use crate::transport::{Transport, connect_lazy};
use crate::version;

/// How often the cached capabilities are refreshed while operations are found.
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// The shortest time between two refreshes caused by an operation not being found (a retry
/// of a step whose pinned version was missing comes after at least this long, on average).
pub const DEFAULT_MISS_REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// How long one endpoint's `GetCapabilities` may take.
pub const DEFAULT_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long opening a connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// A bad `RARA_REMOTE_EXECUTORS` value or endpoint.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("RARA_REMOTE_EXECUTORS lists no endpoint; expected comma-separated http://host:port or https://host:port")]
    NoEndpoints,
    #[error("remote executor endpoint {url:?} is not a valid URL")]
    InvalidUrl {
        url: String,
        #[source]
        source: InvalidUri,
    },
    #[error("remote executor endpoint {url:?} must start with http:// or https://")]
    Scheme { url: String },
    #[error("remote executor endpoint {url:?} must be scheme://host[:port], without a path or a query")]
    NotAnOrigin { url: String },
    #[error("remote executor endpoint {url:?} has a port that is not a number from 0 to 65535")]
    Port { url: String },
    /// The URL is not repeated: it holds a secret.
    #[error("remote executor endpoint #{position} holds credentials (user:password@); they are not supported")]
    Credentials { position: usize },
    #[error("remote executor endpoint {url:?} is listed twice")]
    Duplicate { url: String },
    #[error("remote executor endpoint {url:?} cannot be used as a gRPC endpoint")]
    Channel {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
}

/// One capability one endpoint offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteCapability {
    /// The endpoint, as `scheme://host:port`.
    pub endpoint: String,
    pub name: String,
    pub version: String,
    pub description: String,
    /// Its attempts may outlive their `Execute` call (parked and re-attached).
    pub detachable: bool,
    /// JSON Schema of its input, as the executor sent it (JSON text), if it has one.
    pub input_schema: Option<String>,
    /// The endpoint's standard health service said SERVING (or has none) when it was last
    /// asked; `false` (NOT_SERVING, e.g. draining on shutdown): routing skips it.
    pub serving: bool,
}

/// The remote executors of `RARA_REMOTE_EXECUTORS`, as a [`RemoteRouter`].
#[derive(Debug)]
pub struct RemoteExecutors {
    endpoints: Vec<Remote>,
    refresh_interval: Duration,
    miss_refresh_interval: Duration,
    discovery_timeout: Duration,
    cache: RwLock<Cache>,
    /// Held while a refresh runs, so refreshes never overlap.
    refreshing: Mutex<()>,
}

#[derive(Debug)]
struct Remote {
    url: Arc<str>,
    channel: Channel,
    /// The heartbeat interval asked on its streams ([`Transport::heartbeat_interval`]).
    heartbeat_interval: Duration,
}

#[derive(Debug, Default)]
struct Cache {
    /// What discovery learnt of each endpoint, in the order of `endpoints`.
    known: Vec<Known>,
    refreshed_at: Option<Instant>,
}

#[derive(Debug, Default)]
struct Known {
    /// What the endpoint offered when it last answered; `None` until it first answers.
    offers: Option<Vec<Offer>>,
    /// When the endpoint's last answer (or failure to answer) came.
    asked_at: Option<Instant>,
    /// Its health service said NOT_SERVING at its last answer (it is draining): routing skips
    /// it, and a miss while it drains is retryable. Re-attaching to an attempt it runs does not
    /// route (it goes to the endpoint the attempt row names), so a draining executor still
    /// reports the attempts it finishes.
    draining: bool,
}

#[derive(Debug)]
struct Offer {
    capability: RemoteCapability,
    executor: Arc<RemoteExecutor>,
}

/// A lazily connected channel to one endpoint (`http://host:port` or `https://host:port`),
/// with TLS (webpki roots) for `https`. Must be called inside a Tokio runtime.
pub fn lazy_channel(url: &str) -> Result<Channel, Error> {
    let origin = origin(url, 1)?;
    connect_lazy(&origin, &Transport::default())
}

/// Checks one configured endpoint and returns it as `scheme://authority`.
fn origin(raw: &str, position: usize) -> Result<String, Error> {
    let uri: Uri = raw.parse().map_err(|source| Error::InvalidUrl { url: raw.to_owned(), source })?;
    let scheme = match uri.scheme_str() {
        Some(scheme @ ("http" | "https")) => scheme,
        _ => return Err(Error::Scheme { url: raw.to_owned() }),
    };
    let Some(authority) = uri.authority() else {
        return Err(Error::NotAnOrigin { url: raw.to_owned() });
    };
    if authority.as_str().contains('@') {
        return Err(Error::Credentials { position });
    }
    if authority.host().is_empty() || !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(Error::NotAnOrigin { url: raw.to_owned() });
    }
    let port = authority.as_str().strip_prefix(authority.host()).and_then(|rest| rest.strip_prefix(':'));
    if port.is_some_and(|port| port.parse::<u16>().is_err()) {
        return Err(Error::Port { url: raw.to_owned() });
    }
    Ok(format!("{scheme}://{authority}"))
}

impl RemoteExecutors {
    /// Parses `RARA_REMOTE_EXECUTORS`: comma-separated `http://host:port` or
    /// `https://host:port` (blank entries are skipped). Creates one lazily connected channel
    /// per endpoint, so it must be called inside a Tokio runtime; nothing is dialled yet.
    pub fn from_config_value(value: &str) -> Result<Self, Error> {
        Self::from_config_value_with(value, Transport::default())
    }

    /// [`from_config_value`](Self::from_config_value) with the connections' deadlines.
    pub fn from_config_value_with(value: &str, transport: Transport) -> Result<Self, Error> {
        Self::with_transport(value.split(',').map(str::trim).filter(|entry| !entry.is_empty()), transport)
    }

    /// The router for `endpoints`, in priority order (ties between equal versions go to the
    /// endpoint listed first).
    pub fn new<I, S>(endpoints: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::with_transport(endpoints, Transport::default())
    }

    /// [`new`](Self::new) with the connections' deadlines.
    pub fn with_transport<I, S>(endpoints: I, transport: Transport) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut remotes: Vec<Remote> = Vec::new();
        for (i, raw) in endpoints.into_iter().enumerate() {
            let url = origin(raw.as_ref(), i + 1)?;
            if remotes.iter().any(|r| *r.url == *url) {
                return Err(Error::Duplicate { url });
            }
            let channel = connect_lazy(&url, &transport)?;
            remotes.push(Remote { url: url.into(), channel, heartbeat_interval: transport.heartbeat_interval });
        }
        if remotes.is_empty() {
            return Err(Error::NoEndpoints);
        }
        let known = remotes.iter().map(|_| Known::default()).collect();
        Ok(Self {
            endpoints: remotes,
            refresh_interval: DEFAULT_REFRESH_INTERVAL,
            miss_refresh_interval: DEFAULT_MISS_REFRESH_INTERVAL,
            discovery_timeout: DEFAULT_DISCOVERY_TIMEOUT,
            cache: RwLock::new(Cache { known, refreshed_at: None }),
            refreshing: Mutex::default(),
        })
    }

    /// How often cached capabilities are refreshed (default [`DEFAULT_REFRESH_INTERVAL`]).
    pub fn with_refresh_interval(mut self, interval: Duration) -> Self {
        self.refresh_interval = interval;
        self
    }

    /// The shortest time between refreshes caused by a miss (default
    /// [`DEFAULT_MISS_REFRESH_INTERVAL`]).
    pub fn with_miss_refresh_interval(mut self, interval: Duration) -> Self {
        self.miss_refresh_interval = interval;
        self
    }

    /// How long one endpoint's `GetCapabilities` may take (default
    /// [`DEFAULT_DISCOVERY_TIMEOUT`]).
    pub fn with_discovery_timeout(mut self, timeout: Duration) -> Self {
        self.discovery_timeout = timeout;
        self
    }

    /// The endpoints, as `scheme://host:port`, in priority order.
    pub fn endpoints(&self) -> impl Iterator<Item = &str> {
        self.endpoints.iter().map(|r| &*r.url)
    }

    /// Asks every endpoint for its capabilities now. Call it during init to pay for the first
    /// connections there.
    pub async fn refresh(&self) {
        self.refresh_if_older_than(Duration::ZERO).await;
    }

    /// Every capability offered, endpoint by endpoint, refreshed first if stale.
    pub async fn capabilities(&self) -> Vec<RemoteCapability> {
        self.refresh_if_older_than(self.refresh_interval).await;
        let cache = self.cache.read().await;
        let mut all = Vec::new();
        for known in &cache.known {
            for offer in known.offers.iter().flatten() {
                all.push(RemoteCapability { serving: !known.draining, ..offer.capability.clone() });
            }
        }
        all
    }

    /// The executor for `operation` (at `version` when pinned), as a concrete type.
    ///
    /// `Ok(None)` when every endpoint has answered discovery (now or before) and none offers
    /// the operation at any version; a retryable `VERSION_UNAVAILABLE` when the operation is
    /// offered but not at the pinned version (a deploy or a rollback under way); a retryable
    /// `EXECUTOR_UNAVAILABLE` when it is not found and an endpoint that might offer it has
    /// never answered, not even when asked again now. A miss asks the endpoints again first
    /// (at most once per miss interval, concurrent misses sharing one ask).
    pub async fn find(&self, operation: &str, version: Option<&str>) -> Result<Option<Arc<RemoteExecutor>>, StepError> {
        self.refresh_if_older_than(self.refresh_interval).await;
        if let Some(found) = self.lookup(operation, version).await {
            return Ok(Some(found));
        }
        let missed_at = Instant::now();
        self.refresh_if_older_than(self.miss_refresh_interval).await;
        self.ask_unknown_since(missed_at).await;
        if let Some(found) = self.lookup(operation, version).await {
            return Ok(Some(found));
        }
        let unknown = self.unknown().await;
        if unknown.is_empty() {
            // The operation is offered, not at this version: a server with it may be deploying
            // (or was rolled back). Retryable, unlike an operation that exists nowhere.
            if let Some(pinned) = version {
                let offered = self.versions_of(operation).await;
                if !offered.is_empty() {
                    tracing::warn!(
                        operation,
                        version = pinned,
                        ?offered,
                        "the pinned version is not offered right now"
                    );
                    return Err(StepError::retryable(
                        codes::VERSION_UNAVAILABLE,
                        format!(
                            "no remote executor offers {operation:?} at version {pinned:?} right now (offered: {}); \
                             the step is retried",
                            offered.join(", ")
                        ),
                    )
                    .with_details(
                        serde_json::json!({ "operation": operation, "version": pinned, "offered": offered }),
                    ));
                }
            }
            tracing::debug!(operation, version, "no remote executor offers the operation");
            return Ok(None);
        }
        tracing::warn!(operation, version, unanswered = ?unknown, "no remote executor that might offer the operation answers");
        let wanted = match version {
            Some(v) => format!("operation {operation:?} at version {v:?}"),
            None => format!("operation {operation:?}"),
        };
        Err(StepError::retryable(
            codes::EXECUTOR_UNAVAILABLE,
            format!(
                "cannot route {wanted}: remote executor(s) {} have not answered capability discovery or are \
                 not serving (draining)",
                unknown.join(", ")
            ),
        )
        .with_details(serde_json::json!({ "operation": operation, "version": version, "unanswered": unknown })))
    }

    async fn lookup(&self, operation: &str, version: Option<&str>) -> Option<Arc<RemoteExecutor>> {
        let cache = self.cache.read().await;
        cache
            .known
            .iter()
            .filter(|k| !k.draining)
            .filter_map(|k| k.offers.as_ref())
            .flatten()
            .filter(|offer| offer.capability.name == operation && version.is_none_or(|v| offer.capability.version == v))
            .reduce(|best, offer| {
                if version::compare(&offer.capability.version, &best.capability.version).is_gt() { offer } else { best }
            })
            .map(|offer| offer.executor.clone())
    }

    /// The versions of `operation` the endpoints offer, each once, in the endpoints' order.
    async fn versions_of(&self, operation: &str) -> Vec<String> {
        let cache = self.cache.read().await;
        let mut versions: Vec<String> = Vec::new();
        for offer in cache.known.iter().filter_map(|k| k.offers.as_ref()).flatten() {
            if offer.capability.name == operation && !versions.contains(&offer.capability.version) {
                versions.push(offer.capability.version.clone());
            }
        }
        versions
    }

    /// The endpoints that have never answered discovery, or are draining.
    async fn unknown(&self) -> Vec<String> {
        let cache = self.cache.read().await;
        self.endpoints
            .iter()
            .zip(&cache.known)
            .filter(|(_, k)| k.offers.is_none() || k.draining)
            .map(|(r, _)| r.url.to_string())
            .collect()
    }

    async fn is_fresh(&self, max_age: Duration) -> bool {
        self.cache.read().await.refreshed_at.is_some_and(|at| at.elapsed() < max_age)
    }

    async fn refresh_if_older_than(&self, max_age: Duration) {
        if self.is_fresh(max_age).await {
            return;
        }
        let _one_at_a_time = self.refreshing.lock().await;
        if self.is_fresh(max_age).await {
            return; // another task refreshed while this one waited
        }
        let all: Vec<usize> = (0..self.endpoints.len()).collect();
        self.ask(&all).await;
        self.cache.write().await.refreshed_at = Some(Instant::now());
    }

    /// Asks the unknown endpoints again, unless an ask that ended after `since` already did
    /// (a burst of misses shares one ask).
    async fn ask_unknown_since(&self, since: Instant) {
        let stale = |cache: &Cache| -> Vec<usize> {
            let unasked = |k: &Known| k.offers.is_none() && k.asked_at.is_none_or(|at| at < since);
            cache.known.iter().enumerate().filter(|(_, k)| unasked(k)).map(|(i, _)| i).collect()
        };
        if stale(&*self.cache.read().await).is_empty() {
            return;
        }
        let _one_at_a_time = self.refreshing.lock().await;
        let which = stale(&*self.cache.read().await); // another task may have asked meanwhile
        if !which.is_empty() {
            self.ask(&which).await;
        }
    }

    /// Asks the endpoints at `which` (indexes into `endpoints`) concurrently; one that does not
    /// answer keeps what it offered before. Callers hold `refreshing`.
    async fn ask(&self, which: &[usize]) {
        let found = futures::future::join_all(which.iter().map(|&i| self.discover(&self.endpoints[i]))).await;
        let asked_at = Instant::now();
        let mut cache = self.cache.write().await;
        for (&i, offers) in which.iter().zip(found) {
            let known = &mut cache.known[i];
            known.asked_at = Some(asked_at);
            if let Some((offers, draining)) = offers {
                known.offers = Some(offers);
                known.draining = draining;
            }
        }
    }

    /// One endpoint's offers and whether it drains, or `None` (logged) when it could not be
    /// asked.
    async fn discover(&self, remote: &Remote) -> Option<(Vec<Offer>, bool)> {
        let mut client = ExecutorServiceClient::new(remote.channel.clone());
        let mut request = tonic::Request::new(pb::GetCapabilitiesRequest {});
        request.set_timeout(self.discovery_timeout);
        let response = match tokio::time::timeout(self.discovery_timeout, client.get_capabilities(request)).await {
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
                    endpoint = %remote.url, timeout = ?self.discovery_timeout,
                    "capability discovery timed out; the endpoint keeps what it offered before"
                );
                return None;
            }
        };
        let mut offers: Vec<Offer> = Vec::with_capacity(response.capabilities.len());
        for capability in response.capabilities {
            let duplicate = offers
                .iter()
                .any(|o| o.capability.name == capability.name && o.capability.version == capability.version);
            if capability.name.is_empty() || duplicate {
                tracing::warn!(endpoint = %remote.url, name = %capability.name, "skipping a blank or repeated capability");
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
                    .with_heartbeat_interval(remote.heartbeat_interval);
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
        let draining = self.draining(remote).await;
        tracing::info!(endpoint = %remote.url, capabilities = offers.len(), draining, "capabilities discovered");
        Some((offers, draining))
    }

    /// Whether the endpoint's standard health service (`grpc.health.v1`, for the `rara.v1`
    /// service) says NOT_SERVING. An executor without a health service, or one whose health
    /// does not answer in time, counts as serving: it has just answered discovery.
    async fn draining(&self, remote: &Remote) -> bool {
        use tonic_health::pb::health_check_response::ServingStatus;
        let mut client = tonic_health::pb::health_client::HealthClient::new(remote.channel.clone());
        let service = pb::executor_service_server::SERVICE_NAME.to_owned();
        let check = client.check(tonic_health::pb::HealthCheckRequest { service });
        match tokio::time::timeout(self.discovery_timeout, check).await {
            Ok(Ok(answer)) => answer.into_inner().status() == ServingStatus::NotServing,
            _ => false,
        }
    }
}

#[async_trait::async_trait]
impl RemoteRouter for RemoteExecutors {
    async fn route(&self, operation: &str, version: Option<&str>) -> Result<Option<Arc<dyn Executor>>, StepError> {
        Ok(self.find(operation, version).await?.map(|executor| executor as Arc<dyn Executor>))
    }

    fn attach(&self, endpoint: &str, operation: &str) -> Option<Arc<dyn Executor>> {
        let remote = self.endpoints.iter().find(|r| &*r.url == endpoint)?;
        // Only a detachable attempt is ever parked, so the attempt is detachable; its version
        // was chosen when it started.
        let executor = RemoteExecutor::new(remote.channel.clone(), remote.url.clone(), operation, "")
            .with_detachable(true)
            .with_heartbeat_interval(remote.heartbeat_interval);
        Some(Arc::new(executor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalised_and_checked() {
        assert_eq!(origin("http://127.0.0.1:50051", 1).unwrap(), "http://127.0.0.1:50051");
        assert_eq!(origin("https://exec.example.com/", 1).unwrap(), "https://exec.example.com");
        assert!(matches!(origin("127.0.0.1:50051", 1), Err(Error::Scheme { .. })));
        assert!(matches!(origin("grpc://host:1", 1), Err(Error::Scheme { .. })));
        assert!(matches!(origin("http://host:1/prefix", 1), Err(Error::NotAnOrigin { .. })));
        assert!(matches!(origin("http://host:1/?q=1", 1), Err(Error::NotAnOrigin { .. })));
        assert!(matches!(origin("http://host:port", 1), Err(Error::Port { .. })));
        assert!(matches!(origin("http://host:70000", 1), Err(Error::Port { .. })));
        assert_eq!(origin("http://[::1]:50051", 1).unwrap(), "http://[::1]:50051");
        assert!(matches!(origin("http://a b", 1), Err(Error::InvalidUrl { .. })));
    }

    #[test]
    fn credentials_are_refused_without_repeating_them() {
        let err = origin("https://user:s3cret@host:443", 2).unwrap_err();
        assert!(matches!(err, Error::Credentials { position: 2 }));
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }

    #[tokio::test]
    async fn config_values_list_endpoints_in_order() {
        let router =
            RemoteExecutors::from_config_value(" http://127.0.0.1:1 , https://exec.example.com:8443,").unwrap();
        assert_eq!(router.endpoints().collect::<Vec<_>>(), ["http://127.0.0.1:1", "https://exec.example.com:8443"]);
    }

    #[tokio::test]
    async fn bad_config_values_say_what_is_wrong() {
        let err = RemoteExecutors::from_config_value("  , ").unwrap_err();
        assert!(matches!(err, Error::NoEndpoints));
        let err = RemoteExecutors::from_config_value("http://a:1,localhost:2").unwrap_err();
        assert_eq!(err.to_string(), "remote executor endpoint \"localhost:2\" must start with http:// or https://");
        let err = RemoteExecutors::from_config_value("http://a:1,http://a:1/").unwrap_err();
        assert!(matches!(err, Error::Duplicate { ref url } if url == "http://a:1"), "{err}");
    }

    #[test]
    fn an_error_with_a_source_says_its_own_part_once() {
        let err = origin("http://a b", 1).unwrap_err();
        let source = std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default();
        assert_eq!(err.to_string(), "remote executor endpoint \"http://a b\" is not a valid URL");
        assert!(!source.is_empty() && !err.to_string().contains(&source), "{err} / {source}");
    }
}
