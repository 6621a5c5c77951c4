//! [`RemoteExecutors`]: routes operations to the remote executors listed in
//! `RARA_REMOTE_EXECUTORS` (DESIGN.md "Executors").
//!
//! - One channel per endpoint, created once and connected lazily (TLS with the webpki roots
//!   for `https://`), shared by every execution the container runs.
//! - Capabilities come from `GetCapabilities` and are cached: refreshed when older than the
//!   refresh interval ([`DEFAULT_REFRESH_INTERVAL`] unless set) and at once when an operation
//!   is not found, at most once per miss interval ([`DEFAULT_MISS_REFRESH_INTERVAL`] unless
//!   set) so a flood of unknown operations cannot hammer the servers. Refreshes run one at a
//!   time; the endpoints are asked concurrently.
//! - An endpoint that cannot be reached during discovery is logged and keeps what it offered
//!   before; the other endpoints still route. One that has never answered is *unknown*.
//! - Routing: the operation name and, when the step pins one, the exact version; otherwise
//!   the highest SemVer version ([`crate::version::compare`]; an invalid version ranks below
//!   every valid one). Ties go to the endpoint listed first.
//! - Not found: when every endpoint is known, nothing offers it (`Ok(None)`, the registry's
//!   permanent `UNKNOWN_OPERATION`). While an endpoint is unknown it might offer it: it is
//!   asked again (at once, concurrent misses share one ask; the step's retry policy paces the
//!   asks), and if it still does not answer the step gets a retryable `EXECUTOR_UNAVAILABLE`.
//!
//! # Layout
//!
//! - this file: the router, its settings, when it refreshes, and routing (`find`);
//! - `cache`: what discovery learnt, a pure value that takes the instants it is asked at;
//! - `discovery`: asking one endpoint for its capabilities and its health.

mod cache;
mod discovery;

use std::sync::Arc;
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::Executor;
use rara_domain::registry::RemoteRouter;
use rara_domain::step_error::codes;
use tokio::sync::{Mutex, RwLock};
use tokio::time::Instant;

use self::cache::Cache;
pub use self::cache::RemoteCapability;
use self::discovery::{Remote, discover};
use crate::bounds::Limits;
use crate::client::RemoteExecutor;
use crate::security::Security;
pub use crate::transport::{CONNECT_TIMEOUT, Error, lazy_channel, lazy_channel_with};
use crate::transport::{Transport, connect_lazy, origin};

/// How often the cached capabilities are refreshed while operations are found.
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// The shortest time between two refreshes caused by an operation not being found (a retry
/// of a step whose pinned version was missing comes after at least this long, on average).
pub const DEFAULT_MISS_REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// How long one endpoint's `GetCapabilities` may take.
pub const DEFAULT_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);

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
        Self::with_security(endpoints, transport, Security::default())
    }

    /// [`from_config_value_with`](Self::from_config_value_with) with the TLS trust and
    /// identity, token and attempt key of `security` (what a function reads at start).
    pub fn from_config_value_secured(value: &str, transport: Transport, security: Security) -> Result<Self, Error> {
        let endpoints = value.split(',').map(str::trim).filter(|entry| !entry.is_empty());
        Self::with_security(endpoints, transport, security)
    }

    /// [`with_transport`](Self::with_transport) with the TLS trust and identity, token and
    /// attempt key of `security`. Warns (once, without values) about what `security` lacks,
    /// and about a token sent in cleartext (`http://`) to an endpoint that is not loopback.
    pub fn with_security<I, S>(endpoints: I, transport: Transport, security: Security) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let security = Arc::new(security);
        let mut remotes: Vec<Remote> = Vec::new();
        for (i, raw) in endpoints.into_iter().enumerate() {
            let url = origin(raw.as_ref(), i + 1)?;
            if remotes.iter().any(|r| *r.url == *url) {
                return Err(Error::Duplicate { url });
            }
            let channel = connect_lazy(&url, &transport, &security)?;
            let heartbeat_interval = transport.heartbeat_interval;
            let security = security.clone();
            remotes.push(Remote { url: url.into(), channel, heartbeat_interval, limits: Limits::default(), security });
        }
        if remotes.is_empty() {
            return Err(Error::NoEndpoints);
        }
        warn_weaknesses(&security, remotes.iter().map(|r| &*r.url));
        let cache = RwLock::new(Cache::new(remotes.len()));
        Ok(Self {
            endpoints: remotes,
            refresh_interval: DEFAULT_REFRESH_INTERVAL,
            miss_refresh_interval: DEFAULT_MISS_REFRESH_INTERVAL,
            discovery_timeout: DEFAULT_DISCOVERY_TIMEOUT,
            cache,
            refreshing: Mutex::default(),
        })
    }

    /// What the executors of every endpoint may return (default [`Limits::default`]); set
    /// before the first refresh.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        for remote in &mut self.endpoints {
            remote.limits = limits;
        }
        self
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
        self.cache.read().await.capabilities()
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
        if let Some(found) = self.cache.read().await.lookup(operation, version) {
            return Ok(Some(found));
        }
        let missed_at = Instant::now();
        self.refresh_if_older_than(self.miss_refresh_interval).await;
        self.ask_unknown_since(missed_at).await;
        let cache = self.cache.read().await;
        if let Some(found) = cache.lookup(operation, version) {
            return Ok(Some(found));
        }
        let unknown: Vec<String> = cache.unknown().into_iter().map(|i| self.endpoints[i].url.to_string()).collect();
        if !unknown.is_empty() {
            tracing::warn!(operation, version, unanswered = ?unknown, "no remote executor that might offer the operation answers");
            return Err(unanswered(operation, version, &unknown));
        }
        // The operation is offered, not at this version: a server with it may be deploying
        // (or was rolled back). Retryable, unlike an operation that exists nowhere.
        if let Some(pinned) = version {
            let offered = cache.versions_of(operation);
            if !offered.is_empty() {
                tracing::warn!(operation, version = pinned, ?offered, "the pinned version is not offered right now");
                return Err(version_unavailable(operation, pinned, &offered));
            }
        }
        tracing::debug!(operation, version, "no remote executor offers the operation");
        Ok(None)
    }

    async fn refresh_if_older_than(&self, max_age: Duration) {
        if self.cache.read().await.is_fresh(max_age, Instant::now()) {
            return;
        }
        let _one_at_a_time = self.refreshing.lock().await;
        if self.cache.read().await.is_fresh(max_age, Instant::now()) {
            return; // another task refreshed while this one waited
        }
        let all: Vec<usize> = (0..self.endpoints.len()).collect();
        self.ask(&all).await;
        self.cache.write().await.refreshed(Instant::now());
    }

    /// Asks the unknown endpoints again, unless an ask that ended after `since` already did
    /// (a burst of misses shares one ask).
    async fn ask_unknown_since(&self, since: Instant) {
        if self.cache.read().await.unasked_since(since).is_empty() {
            return;
        }
        let _one_at_a_time = self.refreshing.lock().await;
        let which = self.cache.read().await.unasked_since(since); // another task may have asked meanwhile
        if !which.is_empty() {
            self.ask(&which).await;
        }
    }

    /// Asks the endpoints at `which` (indexes into `endpoints`) concurrently; one that does not
    /// answer keeps what it offered before. Callers hold `refreshing`.
    async fn ask(&self, which: &[usize]) {
        let asks = which.iter().map(|&i| discover(&self.endpoints[i], self.discovery_timeout));
        let found = futures::future::join_all(asks).await;
        let asked_at = Instant::now();
        let mut cache = self.cache.write().await;
        for (&i, answer) in which.iter().zip(found) {
            cache.record(i, answer, asked_at);
        }
    }
}

/// Logs what `security` lacks and every endpoint a token would reach in cleartext.
fn warn_weaknesses<'a>(security: &Security, urls: impl Iterator<Item = &'a str>) {
    for weakness in security.weaknesses() {
        tracing::warn!(weakness, "remote executors: weak security settings");
    }
    if !security.has_token() {
        return;
    }
    for url in urls {
        let host = url.strip_prefix("http://").map(|rest| rest.rsplit_once(':').map_or(rest, |(host, _)| host));
        if host.is_some_and(|host| !matches!(host, "127.0.0.1" | "localhost" | "[::1]")) {
            tracing::warn!(endpoint = url, "remote executors: the token travels in cleartext (http://); use https://");
        }
    }
}

/// The retryable `EXECUTOR_UNAVAILABLE` of a miss while endpoints that might offer the
/// operation have not answered (or drain).
fn unanswered(operation: &str, version: Option<&str>, unknown: &[String]) -> StepError {
    let wanted = match version {
        Some(v) => format!("operation {operation:?} at version {v:?}"),
        None => format!("operation {operation:?}"),
    };
    StepError::retryable(
        codes::EXECUTOR_UNAVAILABLE,
        format!(
            "cannot route {wanted}: remote executor(s) {} have not answered capability discovery or are \
             not serving (draining)",
            unknown.join(", ")
        ),
    )
    .with_details(serde_json::json!({ "operation": operation, "version": version, "unanswered": unknown }))
}

/// The retryable `VERSION_UNAVAILABLE` of an operation offered, but not at the pinned version.
fn version_unavailable(operation: &str, pinned: &str, offered: &[String]) -> StepError {
    StepError::retryable(
        codes::VERSION_UNAVAILABLE,
        format!(
            "no remote executor offers {operation:?} at version {pinned:?} right now (offered: {}); \
             the step is retried",
            offered.join(", ")
        ),
    )
    .with_details(serde_json::json!({ "operation": operation, "version": pinned, "offered": offered }))
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
            .with_heartbeat_interval(remote.heartbeat_interval)
            .with_limits(remote.limits)
            .with_security(remote.security.clone());
        Some(Arc::new(executor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
