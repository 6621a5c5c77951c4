//! What a DLQ entry is now: rara's own dead-letter (with its reason), or a message SQS moved
//! there whose step is looked up: still waiting for it, moved on, or unknown.

use std::collections::HashMap;

use rara_operator::dlq::State;
use rara_queue::StepMessage;
use rara_queue::sqs::{DLQ_REASON, DLQ_REASON_CODE};
use rara_store::dlq::DlqStep;
use uuid::Uuid;

/// A DLQ entry's state and the sentence that explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub state: State,
    pub why: String,
    /// Whether rara itself dead-lettered it (it carries a reason): an operator's fix may make
    /// it good, so `redrive` sends it back.
    pub own: bool,
}

/// The steps a message names (one, or several in format 2), when its body is a step message
/// and rara did not dead-letter it itself (only those need a look-up).
pub fn steps_to_look_up(body: &str, attributes: &HashMap<String, String>) -> Vec<Uuid> {
    if attributes.contains_key(DLQ_REASON_CODE) {
        return Vec::new();
    }
    rara_queue::parse_steps(body).map(|steps| steps.iter().map(|s| s.message.step_id).collect()).unwrap_or_default()
}

/// Classifies one entry; `steps` holds what the store knows of the page's steps.
pub fn classify(body: &str, attributes: &HashMap<String, String>, steps: &HashMap<Uuid, DlqStep>) -> Classification {
    let class = |state, why: String| Classification { state, why, own: false };
    if let Some(code) = attributes.get(DLQ_REASON_CODE) {
        let why = match attributes.get(DLQ_REASON) {
            Some(reason) => format!("{code}: {reason}"),
            None => code.clone(),
        };
        return Classification { state: State::Rejected, why, own: true };
    }
    let named = match rara_queue::parse_steps(body) {
        Ok(named) => named,
        Err(e) => return class(State::Rejected, format!("not a step message: {e}")),
    };
    let mut each: Vec<Classification> = named.iter().map(|s| classify_step(&s.message, steps)).collect();
    if each.len() == 1 {
        return each.remove(0);
    }
    // A message of several steps: live when one of them still waits for it.
    let n = each.len();
    let count = |state| each.iter().filter(|c| c.state == state).count();
    let (live, unknown) = (count(State::Live), count(State::Unknown));
    if live > 0 {
        class(State::Live, format!("live: {live} of its {n} steps still wait for this message (redrive it)"))
    } else if unknown == n {
        class(State::Unknown, format!("unknown steps (all {n})"))
    } else {
        class(State::Stale, format!("stale: its {n} steps moved on ({unknown} unknown)"))
    }
}

/// What one step a message names is now.
fn classify_step(message: &StepMessage, steps: &HashMap<Uuid, DlqStep>) -> Classification {
    let class = |state, why: String| Classification { state, why, own: false };
    let Some(step) = steps.get(&message.step_id) else {
        return class(State::Unknown, "unknown step".into());
    };
    if step.status.is_terminal() {
        let at = step
            .finished_at
            .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
            .unwrap_or_else(|| "an unknown time".into());
        return class(State::Stale, format!("stale: step {} at {at}", step.status));
    }
    if !step.status.holds_lease() {
        return class(State::Stale, "stale: step handed back; it will be leased again".into());
    }
    if step.lease_token != Some(message.lease_token) {
        return class(State::Stale, "stale: the step was leased again (new message sent)".into());
    }
    class(State::Live, "live: the step still waits for this message (redrive it)".into())
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use rara_domain::state::StepStatus;

    use super::*;

    fn body(step: Uuid, token: Uuid) -> String {
        format!(r#"{{"v":1,"step_id":"{step}","lease_token":"{token}"}}"#)
    }

    fn steps(step: DlqStep) -> HashMap<Uuid, DlqStep> {
        HashMap::from([(step.id, step)])
    }

    fn step(status: StepStatus, lease_token: Option<Uuid>) -> DlqStep {
        let finished_at = status.is_terminal().then(|| chrono::Utc.with_ymd_and_hms(2026, 12, 3, 15, 4, 5).unwrap());
        DlqStep { id: Uuid::from_u128(1), status, lease_token, finished_at }
    }

    #[test]
    fn each_entry_says_what_its_step_is_now() {
        let (id, token, other) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let none = HashMap::new();
        let of = |s: DlqStep| classify(&body(id, token), &none, &steps(s));
        let finished = of(step(StepStatus::Succeeded, None));
        assert_eq!(
            (finished.state, finished.why.as_str()),
            (State::Stale, "stale: step succeeded at 2026-12-03 15:04:05 UTC")
        );
        assert_eq!(
            of(step(StepStatus::Leased, Some(other))).why,
            "stale: the step was leased again (new message sent)"
        );
        assert_eq!(of(step(StepStatus::Pending, None)).why, "stale: step handed back; it will be leased again");
        assert_eq!(of(step(StepStatus::Running, Some(token))).state, State::Live);
        assert_eq!(classify(&body(id, token), &none, &HashMap::new()).state, State::Unknown);
        let junk = classify("junk", &none, &HashMap::new());
        assert!(junk.state == State::Rejected && junk.why.starts_with("not a step message: ") && !junk.own);
    }

    #[test]
    fn rara_dead_letters_keep_their_reason() {
        let attributes = HashMap::from([
            (DLQ_REASON_CODE.to_owned(), "MALFORMED_MESSAGE".to_owned()),
            (DLQ_REASON.to_owned(), "bad body".to_owned()),
        ]);
        let c = classify("x", &attributes, &HashMap::new());
        assert_eq!((c.state, c.why.as_str(), c.own), (State::Rejected, "MALFORMED_MESSAGE: bad body", true));
        assert_eq!(steps_to_look_up(&body(Uuid::nil(), Uuid::nil()), &attributes), Vec::<Uuid>::new());
    }

    #[test]
    fn a_message_of_several_steps_is_live_while_one_of_them_waits_for_it() {
        let (id, token, other) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let named = |pairs: &[(Uuid, Uuid)]| {
            let steps: Vec<rara_queue::MessageStep> = pairs
                .iter()
                .map(|(s, t)| rara_queue::MessageStep { message: StepMessage::new(*s, *t), traceparent: None })
                .collect();
            rara_queue::encode_steps(&steps)
        };
        let none = HashMap::new();
        let packed = named(&[(id, token), (other, token)]);
        assert_eq!(steps_to_look_up(&packed, &none), vec![id, other]);
        let live = classify(&packed, &none, &steps(step(StepStatus::Running, Some(token))));
        assert_eq!(
            (live.state, live.why.as_str()),
            (State::Live, "live: 1 of its 2 steps still wait for this message (redrive it)")
        );
        let stale = classify(&packed, &none, &steps(step(StepStatus::Succeeded, None)));
        assert_eq!((stale.state, stale.why.as_str()), (State::Stale, "stale: its 2 steps moved on (1 unknown)"));
        assert_eq!(classify(&packed, &none, &HashMap::new()).why, "unknown steps (all 2)");
    }
}
