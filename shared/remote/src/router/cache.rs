//! What discovery learnt of each endpoint, as a pure value: every question about time takes
//! the instant it is asked at (`now`, `since`), so the router reads the clock and its tests
//! choose the instants.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::RemoteExecutor;
use crate::version;

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

/// One capability of one endpoint and the executor that runs it.
#[derive(Debug)]
pub(super) struct Offer {
    pub(super) capability: RemoteCapability,
    pub(super) executor: Arc<RemoteExecutor>,
}

/// One endpoint's answer to discovery: its offers, and whether it drains.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) offers: Vec<Offer>,
    pub(super) draining: bool,
}

/// The capabilities of every endpoint, in the order of the router's endpoints.
#[derive(Debug, Default)]
pub(super) struct Cache {
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

impl Cache {
    /// A cache of `endpoints` endpoints, none of which has answered.
    pub(super) fn new(endpoints: usize) -> Cache {
        Cache { known: (0..endpoints).map(|_| Known::default()).collect(), refreshed_at: None }
    }

    /// Whether a refresh of every endpoint ended less than `max_age` before `now`.
    pub(super) fn is_fresh(&self, max_age: Duration, now: Instant) -> bool {
        self.refreshed_at.is_some_and(|at| now.saturating_duration_since(at) < max_age)
    }

    /// A refresh of every endpoint ended at `now`.
    pub(super) fn refreshed(&mut self, now: Instant) {
        self.refreshed_at = Some(now);
    }

    /// The endpoints (indexes) that have never answered and were not asked after `since`.
    pub(super) fn unasked_since(&self, since: Instant) -> Vec<usize> {
        let unasked = |k: &Known| k.offers.is_none() && k.asked_at.is_none_or(|at| at < since);
        self.known.iter().enumerate().filter(|(_, k)| unasked(k)).map(|(i, _)| i).collect()
    }

    /// Records what endpoint `i` answered at `asked_at`; one that did not answer (`None`)
    /// keeps what it offered before.
    pub(super) fn record(&mut self, i: usize, answer: Option<Answer>, asked_at: Instant) {
        let known = &mut self.known[i];
        known.asked_at = Some(asked_at);
        if let Some(Answer { offers, draining }) = answer {
            known.offers = Some(offers);
            known.draining = draining;
        }
    }

    /// Every capability offered, endpoint by endpoint.
    pub(super) fn capabilities(&self) -> Vec<RemoteCapability> {
        let mut all = Vec::new();
        for known in &self.known {
            for offer in known.offers.iter().flatten() {
                all.push(RemoteCapability { serving: !known.draining, ..offer.capability.clone() });
            }
        }
        all
    }

    /// The executor for `operation` (at `version` when pinned) on an endpoint that does not
    /// drain: the highest version, ties to the endpoint listed first.
    pub(super) fn lookup(&self, operation: &str, version: Option<&str>) -> Option<Arc<RemoteExecutor>> {
        self.known
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
    pub(super) fn versions_of(&self, operation: &str) -> Vec<String> {
        let mut versions: Vec<String> = Vec::new();
        for offer in self.known.iter().filter_map(|k| k.offers.as_ref()).flatten() {
            if offer.capability.name == operation && !versions.contains(&offer.capability.version) {
                versions.push(offer.capability.version.clone());
            }
        }
        versions
    }

    /// The endpoints (indexes) that have never answered discovery, or are draining.
    pub(super) fn unknown(&self) -> Vec<usize> {
        self.known.iter().enumerate().filter(|(_, k)| k.offers.is_none() || k.draining).map(|(i, _)| i).collect()
    }
}

#[cfg(test)]
mod tests {
    use rara_domain::executor::Executor;

    use super::*;

    const ENDPOINT: &str = "http://127.0.0.1:1";

    fn offer(name: &str, version: &str) -> Offer {
        let channel = tonic::transport::Endpoint::from_static(ENDPOINT).connect_lazy();
        Offer {
            capability: RemoteCapability {
                endpoint: ENDPOINT.into(),
                name: name.into(),
                version: version.into(),
                description: String::new(),
                detachable: false,
                input_schema: None,
                serving: true,
            },
            executor: Arc::new(RemoteExecutor::new(channel, ENDPOINT, name, version)),
        }
    }

    fn answer(offers: Vec<Offer>, draining: bool) -> Option<Answer> {
        Some(Answer { offers, draining })
    }

    #[test]
    fn a_refresh_is_fresh_until_its_max_age_has_passed() {
        let (mut cache, t0) = (Cache::new(1), Instant::now());
        assert!(!cache.is_fresh(Duration::from_secs(60), t0), "never refreshed");
        cache.refreshed(t0);
        assert!(cache.is_fresh(Duration::from_secs(60), t0 + Duration::from_millis(59_999)));
        assert!(!cache.is_fresh(Duration::from_secs(60), t0 + Duration::from_secs(60)));
        assert!(!cache.is_fresh(Duration::ZERO, t0), "a max age of zero always refreshes");
    }

    #[tokio::test]
    async fn an_endpoint_asked_after_a_miss_is_not_asked_again_for_it() {
        let (mut cache, t0) = (Cache::new(2), Instant::now());
        assert_eq!(cache.unasked_since(t0), [0, 1], "never asked");
        cache.record(0, None, t0 + Duration::from_millis(10));
        cache.record(1, answer(vec![offer("a", "1.0.0")], false), t0 + Duration::from_millis(10));
        assert!(cache.unasked_since(t0 + Duration::from_millis(10)).is_empty(), "both asked at the miss");
        assert_eq!(cache.unasked_since(t0 + Duration::from_millis(11)), [0], "only the unknown one, and only later");
    }

    #[tokio::test]
    async fn an_endpoint_that_does_not_answer_keeps_what_it_offered_before() {
        let (mut cache, t0) = (Cache::new(1), Instant::now());
        cache.record(0, answer(vec![offer("a", "1.0.0")], false), t0);
        cache.record(0, None, t0 + Duration::from_secs(1));
        assert!(cache.lookup("a", None).is_some());
        assert!(cache.unknown().is_empty());
    }

    #[tokio::test]
    async fn lookup_picks_the_pinned_or_the_highest_version_and_skips_draining_endpoints() {
        let (mut cache, t0) = (Cache::new(2), Instant::now());
        cache.record(0, answer(vec![offer("a", "1.2.0"), offer("a", "1.10.0")], false), t0);
        cache.record(1, answer(vec![offer("a", "9.0.0"), offer("b", "1.0.0")], true), t0);
        assert_eq!(cache.lookup("a", None).unwrap().version(), "1.10.0", "9.0.0 drains");
        assert_eq!(cache.lookup("a", Some("1.2.0")).unwrap().version(), "1.2.0");
        assert!(cache.lookup("b", None).is_none());
        assert_eq!(cache.versions_of("a"), ["1.2.0", "1.10.0", "9.0.0"]);
        assert_eq!(cache.unknown(), [1], "draining");
        let serving: Vec<bool> = cache.capabilities().iter().map(|c| c.serving).collect();
        assert_eq!(serving, [true, true, false, false]);
    }
}
