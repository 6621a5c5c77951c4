use super::*;

fn options(delivery: Option<u64>) -> Options {
    Options {
        steps: 200,
        sleep_seconds: 1.0,
        executors: 2,
        batch: 10,
        lease_seconds: 3,
        delivery_timeout_seconds: delivery,
        queue: QueueKind::Memory,
        timeout: Duration::from_secs(60),
    }
}

#[test]
fn per_step_figures_divide_by_the_steps_and_survive_none() {
    assert_eq!(per_step(540, 200), 2.7);
    assert_eq!(per_step(200, 200), 1.0);
    assert_eq!(per_step(5, 0), 0.0);
}

#[test]
fn capacity_is_every_executors_batch() {
    assert_eq!(options(None).capacity(), 20);
    assert_eq!(per_step(200, options(None).capacity()), 10.0, "backlog factor of 200 queued");
}

#[test]
fn the_lease_sets_visibility_and_function_timeout_and_the_delivery_timeout_defaults_to_rara_s() {
    let base = throughput::settings("t", "memory://q", None, &options(None).overrides()).unwrap();
    assert_eq!(base.core.lease_duration, Duration::from_secs(3));
    assert_eq!(base.core.visibility_timeout, Duration::from_secs(3));
    assert_eq!(base.core.function_timeout, Duration::from_secs(3));
    assert_eq!(base.core.heartbeat_interval, Duration::from_secs(1));
    assert_eq!(base.reap_interval, Duration::from_millis(REAP_INTERVAL_MS));
    let old = throughput::settings("t", "memory://q", None, &options(Some(3)).overrides()).unwrap();
    assert_eq!(old.delivery_timeout, Duration::from_secs(3), "the approximation of the old behaviour is valid");
}
