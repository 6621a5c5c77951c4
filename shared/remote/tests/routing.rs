//! `RemoteExecutors` against real `rara.v1` servers on 127.0.0.1:0: discovery, version
//! choice, refresh on a miss (rate-limited), unreachable endpoints (not found vs. retryable
//! unavailability), and the `Registry` wiring.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use rara_domain::executor::Executor;
use rara_domain::registry::Registry;
use rara_domain::step_error::codes;
use rara_remote::{RemoteCapability, RemoteExecutors};

fn closed_port_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    format!("http://127.0.0.1:{port}")
}

async fn version_of(router: &RemoteExecutors, operation: &str, version: Option<&str>) -> Option<String> {
    router.find(operation, version).await.unwrap().map(|e| e.version().to_owned())
}

#[tokio::test]
async fn the_highest_version_is_routed_unless_one_is_pinned() {
    let (url, seen) = start_scripted([]).await;
    // `1.x` and `0.9` are not semantic versions: they rank below every valid one.
    for version in ["1.2.0", "1.x", "1.10.0", "0.9"] {
        seen.offer("op", version);
    }
    let router = RemoteExecutors::from_config_value(&url).unwrap();
    assert_eq!(version_of(&router, "op", None).await.as_deref(), Some("1.10.0"));
    assert_eq!(version_of(&router, "op", Some("1.2.0")).await.as_deref(), Some("1.2.0"));
    assert_eq!(version_of(&router, "op", Some("1.x")).await.as_deref(), Some("1.x"));
    let err = router.find("op", Some("2.0.0")).await.expect_err("2.0.0 is not offered");
    assert_eq!((err.code.as_str(), err.retryable), (codes::VERSION_UNAVAILABLE, true), "op exists: maybe deploying");
    assert!(err.message.contains("\"op\" at version \"2.0.0\""), "{}", err.message);
    assert_eq!(version_of(&router, "other", None).await, None, "an operation offered nowhere is not found");
}

#[tokio::test]
async fn capabilities_are_listed_with_endpoint_name_and_version() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let router = RemoteExecutors::from_config_value(&url).unwrap();
    assert_eq!(
        router.capabilities().await,
        vec![RemoteCapability {
            endpoint: url,
            name: "op".into(),
            version: "1.0.0".into(),
            description: "op 1.0.0".into(),
            detachable: false,
            input_schema: None,
            serving: true,
        }]
    );
}

#[tokio::test]
async fn an_unreachable_endpoint_is_skipped_and_the_others_still_route() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let router = RemoteExecutors::from_config_value(&format!("{},{url}", closed_port_url())).unwrap();
    let executor = router.find("op", None).await.unwrap().expect("the live endpoint routes");
    assert_eq!(executor.endpoint(), url);
    assert_eq!(router.capabilities().await.len(), 1);
}

#[tokio::test]
async fn equal_versions_go_to_the_endpoint_listed_first() {
    let (first, seen_first) = start_scripted([]).await;
    let (second, seen_second) = start_scripted([]).await;
    seen_first.offer("op", "1.0.0");
    seen_second.offer("op", "1.0.0");
    seen_second.offer("op", "0.5.0");
    let router = RemoteExecutors::new([&first, &second]).unwrap();
    assert_eq!(router.find("op", None).await.unwrap().unwrap().endpoint(), first);
    assert_eq!(router.find("op", Some("0.5.0")).await.unwrap().unwrap().endpoint(), second);
}

#[tokio::test]
async fn a_miss_refreshes_at_once_but_a_flood_of_misses_does_not_hammer_the_server() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let router =
        Arc::new(RemoteExecutors::from_config_value(&url).unwrap().with_miss_refresh_interval(Duration::from_secs(1)));
    assert!(router.find("op", None).await.unwrap().is_some());
    assert_eq!(seen.capability_calls(), 1);

    // A new capability appears; the next miss (after the miss interval) finds it at once,
    // well before the 60 s refresh interval.
    seen.offer("new.op", "1.0.0");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(router.find("new.op", None).await.unwrap().is_some());
    assert_eq!(seen.capability_calls(), 2);

    // 50 concurrent misses right after a refresh: no further discovery.
    let misses: Vec<_> = (0..50)
        .map(|i| {
            let router = router.clone();
            tokio::spawn(async move { router.find(&format!("unknown.{i}"), None).await.unwrap().is_none() })
        })
        .collect();
    for miss in misses {
        assert!(miss.await.unwrap());
    }
    assert_eq!(seen.capability_calls(), 2);

    // After the miss interval, a flood still costs one discovery.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let misses: Vec<_> = (0..50)
        .map(|i| {
            let router = router.clone();
            tokio::spawn(async move { router.find(&format!("unknown.{i}"), None).await.unwrap().is_none() })
        })
        .collect();
    for miss in misses {
        assert!(miss.await.unwrap());
    }
    assert_eq!(seen.capability_calls(), 3);
}

#[tokio::test]
async fn capabilities_are_cached_for_the_refresh_interval() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let router = RemoteExecutors::from_config_value(&url).unwrap().with_refresh_interval(Duration::from_millis(300));
    for _ in 0..5 {
        assert!(router.find("op", None).await.unwrap().is_some());
    }
    assert_eq!(seen.capability_calls(), 1);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(router.find("op", None).await.unwrap().is_some());
    assert_eq!(seen.capability_calls(), 2);
}

#[tokio::test]
async fn an_endpoint_that_fails_a_refresh_keeps_what_it_offered_before() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let router = RemoteExecutors::from_config_value(&url).unwrap();
    router.refresh().await;
    seen.refuse_capabilities.store(true, Ordering::SeqCst);
    router.refresh().await;
    assert_eq!(seen.capability_calls(), 2);
    assert!(router.find("op", None).await.unwrap().is_some());
}

#[tokio::test]
async fn the_registry_routes_to_remote_capabilities_and_refuses_unknown_versions() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let mut registry = Registry::new();
    registry.with_remote(Arc::new(RemoteExecutors::from_config_value(&url).unwrap()));
    assert_eq!(registry.resolve("op", None).await.unwrap().version(), "1.0.0");
    assert_eq!(registry.resolve("op", Some("1.0.0")).await.unwrap().version(), "1.0.0");
    let err = registry.resolve("op", Some("2.0.0")).await.err().unwrap();
    assert_eq!((err.code.as_str(), err.retryable), (codes::VERSION_UNAVAILABLE, true));
    let err = registry.resolve("nowhere", None).await.err().unwrap();
    assert_eq!((err.code.as_str(), err.retryable), (codes::UNKNOWN_OPERATION, false));
}

#[tokio::test]
async fn a_version_deployed_after_a_miss_is_routed_at_the_next_attempt() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let router =
        RemoteExecutors::from_config_value(&url).unwrap().with_miss_refresh_interval(Duration::from_millis(200));
    let err = router.find("op", Some("1.1.0")).await.expect_err("not deployed yet");
    assert!(err.retryable, "a pinned step is retried, not failed for good: {err:?}");
    seen.offer("op", "1.1.0");
    // The retry comes after a backoff longer than the miss interval: the miss asks again.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(version_of(&router, "op", Some("1.1.0")).await.as_deref(), Some("1.1.0"));
}

#[tokio::test]
async fn with_no_endpoint_answering_discovery_routing_is_retryable_unavailability() {
    let url = closed_port_url();
    let router = Arc::new(RemoteExecutors::from_config_value(&url).unwrap());
    router.refresh().await;
    let err = router.find("op", Some("1.0.0")).await.expect_err("nothing can be told about op");
    assert_eq!((err.code.as_str(), err.retryable), (codes::EXECUTOR_UNAVAILABLE, true), "{err:?}");
    assert!(err.message.contains("\"op\" at version \"1.0.0\"") && err.message.contains(&url), "{}", err.message);
    assert_eq!(err.details["unanswered"], serde_json::json!([url]));

    // Through the registry: retried, not failed for good with UNKNOWN_OPERATION.
    let mut registry = Registry::new();
    registry.with_remote(router);
    let err = registry.resolve("op", None).await.err().unwrap();
    assert_eq!((err.code.as_str(), err.retryable), (codes::EXECUTOR_UNAVAILABLE, true), "{err:?}");
}

#[tokio::test]
async fn an_endpoint_that_never_answered_is_asked_again_on_the_next_miss() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    seen.refuse_capabilities.store(true, Ordering::SeqCst);
    // Long intervals: only the "never answered" rule can cause the asks below.
    let router = RemoteExecutors::from_config_value(&url).unwrap().with_miss_refresh_interval(Duration::from_secs(600));
    router.refresh().await;
    assert_eq!(router.find("op", None).await.err().map(|e| e.code), Some(codes::EXECUTOR_UNAVAILABLE.to_owned()));
    assert_eq!(seen.capability_calls(), 2, "the miss asked the unknown endpoint again");

    seen.refuse_capabilities.store(false, Ordering::SeqCst);
    assert!(router.find("op", None).await.unwrap().is_some(), "found once the endpoint answers");
    assert_eq!(seen.capability_calls(), 3);
    // Now known: a miss is a plain "not offered", without asking again within the miss interval.
    assert!(router.find("other", None).await.unwrap().is_none());
    assert_eq!(seen.capability_calls(), 3);
}

#[tokio::test]
async fn concurrent_misses_on_an_unknown_endpoint_share_one_ask() {
    let (url, seen) = start_scripted([]).await;
    seen.refuse_capabilities.store(true, Ordering::SeqCst);
    let router = Arc::new(
        RemoteExecutors::from_config_value(&url).unwrap().with_miss_refresh_interval(Duration::from_secs(600)),
    );
    router.refresh().await;
    let misses: Vec<_> = (0..20)
        .map(|i| {
            let router = router.clone();
            tokio::spawn(async move { router.find(&format!("op.{i}"), None).await.is_err() })
        })
        .collect();
    for miss in misses {
        assert!(miss.await.unwrap());
    }
    assert_eq!(seen.capability_calls(), 2, "the start, then one ask for 20 concurrent misses");
}

#[tokio::test]
async fn an_endpoint_known_from_an_earlier_discovery_answers_not_found_while_down() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let router = RemoteExecutors::from_config_value(&url).unwrap().with_miss_refresh_interval(Duration::ZERO);
    router.refresh().await;
    seen.refuse_capabilities.store(true, Ordering::SeqCst);
    assert!(router.find("op", None).await.unwrap().is_some(), "its earlier offers still route");
    let err = router.find("op", Some("9.9.9")).await.expect_err("a version it never offered is not routed");
    assert_eq!(err.code, codes::VERSION_UNAVAILABLE);
}

#[tokio::test]
async fn a_miss_while_another_endpoint_never_answered_is_retryable() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let down = closed_port_url();
    let router = RemoteExecutors::new([&url, &down]).unwrap();
    assert!(router.find("op", None).await.unwrap().is_some());
    // `other` may be offered by the endpoint that never answered: not a permanent failure.
    let err = router.find("other", None).await.expect_err("cannot be told yet");
    assert_eq!((err.code.as_str(), err.retryable), (codes::EXECUTOR_UNAVAILABLE, true));
    assert_eq!(err.details["unanswered"], serde_json::json!([down]));
}

#[tokio::test]
async fn an_endpoint_whose_health_says_not_serving_is_skipped_and_a_miss_meanwhile_is_retryable() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("op", "1.0.0");
    let router = RemoteExecutors::from_config_value(&url).unwrap();
    assert!(router.find("op", None).await.unwrap().is_some());

    // The executor drains (its health says NOT_SERVING, as on a graceful shutdown).
    let health = seen.health.get().unwrap();
    health.set_not_serving::<rara_remote::pb::executor_service_server::ExecutorServiceServer<Scripted>>().await;
    router.refresh().await;
    let err = router.find("op", None).await.expect_err("a draining executor gets no new attempt");
    assert_eq!((err.code.as_str(), err.retryable), (codes::EXECUTOR_UNAVAILABLE, true));
    assert!(err.message.contains("not serving"), "{}", err.message);
    assert!(router.capabilities().await.iter().all(|c| !c.serving), "rara capabilities shows it");

    health.set_serving::<rara_remote::pb::executor_service_server::ExecutorServiceServer<Scripted>>().await;
    router.refresh().await;
    assert!(router.find("op", None).await.unwrap().is_some(), "routed again once it serves");
}
