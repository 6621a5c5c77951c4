//! Durable waits (docs/src/guide/waits.md): a step that waits for a timer, a signal or an event
//! instead of running an operation.
//!
//! ```yaml
//! - name: cool_down
//!   wait: { seconds: 3600 }                  # or { until: "2026-12-24T08:00:00Z" } or { until: { $input: /release_at } }
//! - name: approve
//!   wait:
//!     signal: approve                        # a named signal to this run
//!     timeout_seconds: 172800                # optional; default: no timeout
//!     on_timeout: fail                       # fail (WAIT_TIMED_OUT) | continue (output {"timed_out": true})
//!     schema: { type: object, required: [approved_by] }
//!     accept_early: true                     # optional: a signal sent before the step waits is kept for it
//! - name: dataset
//!   wait: { event: dataset.uploaded, key: { $input: /dataset_id }, timeout_seconds: 604800 }
//! ```
//!
//! [`WaitSpec`] is the wait as written; [`WaitSpec::plan`] checks it (each problem at its field
//! path), resolves its `$input` references against the run's inputs and gives the [`Wait`]
//! submit stores (`steps.wait`), which the scheduler and the completions read.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::workflow::inputs::RunInputs;
use crate::workflow::references::{self, Reference};

/// The longest a wait may last, a timer's delay or a timeout: a year.
pub const MAX_WAIT_SECONDS: u64 = 365 * 24 * 3600;
/// The largest schema a signal's payload is checked against.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// The longest event key.
pub const MAX_KEY_LEN: usize = 256;
/// The longest signal or event name.
pub const MAX_WAIT_NAME_LEN: usize = 128;
/// The longest signal or event id.
pub const MAX_ID_LEN: usize = 128;
/// The longest reason a signal is rejected with.
pub const MAX_REASON_LEN: usize = 2000;
/// The largest payload (serialised) a signal, an event or a completion token carries: it becomes
/// a step's output, held to the default bound on an executor's (`RARA_MAX_OUTPUT_BYTES`).
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

/// The wait as written in a step (`wait:`), parsed strictly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitSpec {
    /// A timer: this many seconds from when the step begins to wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
    /// A timer: until this instant (RFC 3339, or `{ $input: /pointer }`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Value>,
    /// A named signal to the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// An event, matched by name and [`key`](Self::key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// The event's key (a string, or `{ $input: /pointer }`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<OnTimeout>,
    /// A JSON Schema a signal's payload must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// A signal sent before the step begins to wait is kept for it (default: refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_early: Option<bool>,
}

/// What a timeout does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// The step fails with `WAIT_TIMED_OUT` (its dependents are skipped).
    #[default]
    Fail,
    /// The step succeeds with the output `{"timed_out": true}`.
    Continue,
}

/// A wait as planned: what submit stores in `steps.wait` (`kind` tags it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Wait {
    Timer {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<DateTime<Utc>>,
    },
    Signal {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_seconds: Option<u64>,
        on_timeout: OnTimeout,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
        accept_early: bool,
    },
    Event {
        name: String,
        key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_seconds: Option<u64>,
        on_timeout: OnTimeout,
    },
}

impl Wait {
    /// The operation name a waiting step carries (shown where steps are listed).
    pub fn operation(&self) -> &'static str {
        match self {
            Wait::Timer { .. } => "wait.timer",
            Wait::Signal { .. } => "wait.signal",
            Wait::Event { .. } => "wait.event",
        }
    }

    /// The planned form as stored (`steps.wait`), as `serde` writes it (`kind` tags it).
    pub fn to_json(&self) -> Value {
        let mut object = serde_json::Map::new();
        object.insert("kind".into(), Value::from(&self.operation()["wait.".len()..]));
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                object.insert(key.into(), value);
            }
        };
        let on = |o: &OnTimeout| Value::from(if *o == OnTimeout::Fail { "fail" } else { "continue" });
        match self {
            Wait::Timer { seconds, until } => {
                put("seconds", seconds.map(Value::from));
                put("until", until.map(|u| Value::from(u.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))));
            }
            Wait::Signal { name, timeout_seconds, on_timeout, schema, accept_early } => {
                put("name", Some(Value::from(name.as_str())));
                put("timeout_seconds", timeout_seconds.map(Value::from));
                put("on_timeout", Some(on(on_timeout)));
                put("schema", schema.clone());
                put("accept_early", Some(Value::from(*accept_early)));
            }
            Wait::Event { name, key, timeout_seconds, on_timeout } => {
                put("name", Some(Value::from(name.as_str())));
                put("key", Some(Value::from(key.as_str())));
                put("timeout_seconds", timeout_seconds.map(Value::from));
                put("on_timeout", Some(on(on_timeout)));
            }
        }
        Value::Object(object)
    }
}

impl WaitSpec {
    /// The wait planned: one kind (a timer, a signal or an event) with only its own fields, every
    /// number within [`MAX_WAIT_SECONDS`], `$input` references resolved. Problems go to
    /// `problem(path, message)` with `at` giving the path of a field (`steps[2].wait.seconds`).
    pub fn plan(
        &self,
        inputs: &RunInputs,
        at: &impl Fn(&str) -> String,
        problem: &mut impl FnMut(String, String),
    ) -> Option<Wait> {
        let kinds = [self.seconds.is_some() || self.until.is_some(), self.signal.is_some(), self.event.is_some()];
        if kinds.iter().filter(|k| **k).count() != 1 {
            problem(
                at("wait"),
                "must be one of a timer ({seconds} or {until}), a signal ({signal}) or an event ({event, key})".into(),
            );
            return None;
        }
        let timer = self.seconds.is_some() || self.until.is_some();
        let misplaced = [
            ("schema", self.schema.is_some() && self.signal.is_none(), "only to a signal"),
            ("accept_early", self.accept_early.is_some() && self.signal.is_none(), "only to a signal"),
            ("key", self.key.is_some() && self.event.is_none(), "only to an event"),
            ("timeout_seconds", self.timeout_seconds.is_some() && timer, "not to a timer"),
            ("on_timeout", self.on_timeout.is_some() && timer, "not to a timer"),
        ];
        for (field, _, applies) in misplaced.iter().filter(|(_, wrong, _)| *wrong) {
            problem(at(&format!("wait.{field}")), format!("does not apply here: it applies {applies}"));
        }
        if let Some(name) = self.signal.as_ref().or(self.event.as_ref()) {
            let field = if self.signal.is_some() { "signal" } else { "event" };
            if !valid_wait_name(name) {
                problem(
                    at(&format!("wait.{field}")),
                    format!(
                        "{name:?} must be 1 to {MAX_WAIT_NAME_LEN} characters of ASCII letters, digits and . _ : -"
                    ),
                );
            }
        }
        let timeout_seconds = self.timeout_seconds.inspect(|&t| bounded(t, &at("wait.timeout_seconds"), problem));
        if timer {
            return self.plan_timer(inputs, at, problem);
        }
        if self.timeout_seconds.is_none() && self.on_timeout.is_some() {
            problem(at("wait.on_timeout"), "needs timeout_seconds".into());
        }
        let on_timeout = self.on_timeout.unwrap_or_default();
        if let Some(name) = &self.signal {
            let schema = self.schema.clone();
            if let Some(schema) = &schema {
                check_schema(schema, &at("wait.schema"), problem);
            }
            return Some(Wait::Signal {
                name: name.clone(),
                timeout_seconds,
                on_timeout,
                schema,
                accept_early: self.accept_early.unwrap_or(false),
            });
        }
        let name = self.event.clone().unwrap_or_default();
        let Some(key) = &self.key else {
            problem(at("wait.key"), "an event wait needs a key (a string or { $input: /pointer })".into());
            return None;
        };
        let key =
            resolve(key, inputs, &at("wait.key"), problem).and_then(|v| key_text(&v, &at("wait.key"), problem))?;
        Some(Wait::Event { name, key, timeout_seconds, on_timeout })
    }

    fn plan_timer(
        &self,
        inputs: &RunInputs,
        at: &impl Fn(&str) -> String,
        problem: &mut impl FnMut(String, String),
    ) -> Option<Wait> {
        if self.seconds.is_some() && self.until.is_some() {
            problem(at("wait"), "a timer has either seconds or until, not both".into());
            return None;
        }
        if let Some(seconds) = self.seconds {
            bounded(seconds, &at("wait.seconds"), problem);
            return Some(Wait::Timer { seconds: Some(seconds), until: None });
        }
        let path = at("wait.until");
        let value = resolve(self.until.as_ref()?, inputs, &path, problem)?;
        let Some(text) = value.as_str() else {
            problem(path, format!("must be an RFC 3339 instant (\"2026-12-24T08:00:00Z\"), not {value}"));
            return None;
        };
        match DateTime::parse_from_rfc3339(text) {
            Ok(until) => {
                let until = until.with_timezone(&Utc);
                if until > Utc::now() + chrono::Duration::seconds(MAX_WAIT_SECONDS as i64) {
                    problem(path, format!("{text} is more than a year ahead"));
                }
                Some(Wait::Timer { seconds: None, until: Some(until) })
            }
            Err(e) => {
                problem(path, format!("{text:?} is not an RFC 3339 instant (\"2026-12-24T08:00:00Z\"): {e}"));
                None
            }
        }
    }
}

/// A signal's or an event's name: 1 to [`MAX_WAIT_NAME_LEN`] ASCII letters, digits and `. _ : -`.
pub fn valid_wait_name(name: &str) -> bool {
    crate::workflow::valid_operation(name) && name.len() <= MAX_WAIT_NAME_LEN
}

/// An event key given as a JSON value: a string or a number, at most [`MAX_KEY_LEN`] characters.
pub fn key_text(value: &Value, path: &str, problem: &mut impl FnMut(String, String)) -> Option<String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            problem(path.to_owned(), format!("must be a string or a number, not {other}"));
            return None;
        }
    };
    if text.is_empty() || text.chars().count() > MAX_KEY_LEN {
        problem(path.to_owned(), format!("must be 1 to {MAX_KEY_LEN} characters"));
        return None;
    }
    Some(text)
}

/// A completion as it arrives (a signal, an event, a token's body), bounded before it is stored:
/// the id (1 to [`MAX_ID_LEN`] printable characters), the reason of a rejection (1 to
/// [`MAX_REASON_LEN`] characters) and the payload (at most [`MAX_PAYLOAD_BYTES`] serialised).
/// The error names the field at fault (`id`, `reject`, `data`) and why.
pub fn check_delivery(id: &str, reject: Option<&str>, payload: &Value) -> Result<(), (&'static str, String)> {
    if id.is_empty() || id.chars().count() > MAX_ID_LEN || id.chars().any(char::is_control) {
        return Err(("id", format!("must be 1 to {MAX_ID_LEN} printable characters")));
    }
    if reject.is_some_and(|r| r.is_empty() || r.chars().count() > MAX_REASON_LEN) {
        return Err(("reject", format!("a reason is 1 to {MAX_REASON_LEN} characters")));
    }
    check_payload(payload).map_err(|why| ("data", why))
}

/// A payload within [`MAX_PAYLOAD_BYTES`] (serialised), or why not.
pub fn check_payload(payload: &Value) -> Result<(), String> {
    let bytes = payload.to_string().len();
    if bytes > MAX_PAYLOAD_BYTES {
        return Err(format!("{bytes} bytes; at most {MAX_PAYLOAD_BYTES} are allowed"));
    }
    Ok(())
}

fn bounded(seconds: u64, path: &str, problem: &mut impl FnMut(String, String)) {
    if seconds == 0 || seconds > MAX_WAIT_SECONDS {
        problem(path.to_owned(), format!("{seconds}; must be between 1 and {MAX_WAIT_SECONDS} (a year)"));
    }
}

/// The value itself, or the run input a `{ $input: /pointer }` reads.
fn resolve(value: &Value, inputs: &RunInputs, path: &str, problem: &mut impl FnMut(String, String)) -> Option<Value> {
    match references::reference(value) {
        None => Some(value.clone()),
        Some(Ok(Reference::Input { pointer })) => match inputs.values.pointer(pointer) {
            Some(found) => Some(found.clone()),
            None => {
                let why = inputs.check_pointer(pointer).unwrap_or_else(|| format!("no run input at {pointer:?}"));
                problem(path.to_owned(), why);
                None
            }
        },
        Some(Ok(other)) => {
            problem(path.to_owned(), format!("only {{ $input: /pointer }} may be used here, not {}", other.key()));
            None
        }
        Some(Err(malformed)) => {
            problem(path.to_owned(), malformed.to_string());
            None
        }
    }
}

fn check_schema(schema: &Value, path: &str, problem: &mut impl FnMut(String, String)) {
    let bytes = schema.to_string().len();
    if bytes > MAX_SCHEMA_BYTES {
        problem(path.to_owned(), format!("{bytes} bytes; at most {MAX_SCHEMA_BYTES} are allowed"));
    } else if let Err(e) = jsonschema::validator_for(schema) {
        problem(path.to_owned(), format!("not a valid JSON Schema: {e}"));
    }
}

/// Every way `payload` fails `schema`, each as (the JSON Pointer of the value at fault, why);
/// empty when it satisfies it. A schema that does not compile (checked at submit) fails every
/// payload.
pub fn payload_problems(schema: &Value, payload: &Value) -> Vec<(String, String)> {
    match jsonschema::validator_for(schema) {
        Ok(validator) => {
            validator.iter_errors(payload).take(20).map(|e| (e.instance_path().to_string(), e.to_string())).collect()
        }
        Err(e) => vec![(String::new(), format!("the wait's schema is not valid: {e}"))],
    }
}

#[cfg(test)]
mod tests;
