//! The record of the AWS calls a process makes, for the IAM check (`scripts/check-iam.sh`,
//! `tools/iam-check`): with `RARA_AWS_CALL_LOG=<dir>` set, every SQS and Secrets Manager
//! client built by the `aws` module (and by `rara-testkit`) carries a [`CallLog`] interceptor,
//! every S3 client an [`S3CallLog`] (`call_log/s3.rs`), that appends one JSON line per operation
//! (per object for `DeleteObjects`) to `<dir>/calls-<pid>.jsonl`:
//!
//! ```json
//! {"role":"ExecutorRole","action":"sqs:SendMessage","resource":"GetAtt:StepQueue.Arn",
//!  "site":"shared/runtime/src/executor/batch/comeback.rs:88","operation":"SendMessageBatch"}
//! ```
//!
//! Unset (deployed, and in every run that does not ask for it), no interceptor is installed.
//!
//! | field | from |
//! |---|---|
//! | `action` | the request's `X-Amz-Target` (JSON protocols), a batch operation as the action IAM authorises it as; S3 (REST) by the operation's input (`call_log/s3.rs`) |
//! | `resource` | the body's `QueueUrl` / `SecretId`, as the template resource it stands for ([`stands_for`], else [`queue_resource`]); S3's object or bucket, under `ArtifactsBucket` for a declared store ([`artifacts_store`]) |
//! | `context` | S3's `ListBucket` only: its `s3:prefix` |
//! | `role`, `site` | the innermost rara frame of the call's backtrace that is not plumbing ([`attribute`]) |
//!
//! A call whose frames name no function is recorded with the role `unattributed` (the check
//! fails on it); calls of the tests' own harness are recorded as `harness` and not evaluated.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use aws_sdk_sqs::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_sqs::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_sqs::error::BoxError;

/// The variable that turns the record on: the directory the call lines go to.
pub const ENV: &str = "RARA_AWS_CALL_LOG";
mod s3;
pub use s3::S3CallLog;

/// How `rara-testkit` names a test's queue (`<prefix><id>`) and its DLQ (`<prefix><id>-dlq`):
/// such a queue stands for the template's `StepQueue` / `DeadLetterQueue`.
pub const TEST_QUEUE_PREFIX: &str = "rara-test-";

/// Where a call came from, by source path (repo-relative prefix), innermost frame first: the
/// first rara frame that [`ROLES`] names decides; plumbing (the adapters every role shares) is
/// skipped; any other rara frame leaves the call unattributed.
/// The artifact store, the pass that deletes pruned runs' objects and the write of a run's large
/// inputs serve several roles.
pub const PLUMBING: &[&str] = &[
    "shared/queue/src/",
    "shared/platform/src/",
    "shared/runtime/src/interrupt.rs",
    "shared/artifacts/src/",
    "shared/runtime/src/pruned_objects.rs",
    // A run's large inputs, written for the API, the CLI and the scheduler alike.
    "shared/operator/src/inputs.rs",
];
pub const ROLES: &[(&str, &str)] = &[
    // The local poller stands for Lambda's event source mapping, which polls with the function's role.
    ("shared/platform/src/runner.rs", "ExecutorRole"),
    ("shared/runtime/src/executor/", "ExecutorRole"),
    ("functions/executor/src/", "ExecutorRole"),
    ("cli/src/cmd/executor.rs", "ExecutorRole"),
    ("shared/runtime/src/scheduler/", "SchedulerRole"),
    ("functions/scheduler/src/", "SchedulerRole"),
    ("cli/src/cmd/scheduler.rs", "SchedulerRole"),
    ("functions/api/src/", "ApiRole"),
    // The console's `/dlq` page reads the DLQ only where it is given RARA_DLQ_URL: `rara ui` on an
    // operator's machine, with the operator's credentials (the API function is not given it).
    ("shared/api/src/console/dlq.rs", "OperatorPolicy"),
    ("shared/api/src/", "ApiRole"),
    // `rara dev` and `rara queue create` make queues for local use (LocalStack), never in AWS.
    ("cli/src/cmd/dev.rs", "local"),
    ("cli/src/cmd/queue.rs", "local"),
    ("cli/src/", "OperatorPolicy"),
    ("shared/operator/src/", "OperatorPolicy"),
    ("shared/testkit/src/", "harness"),
    ("/tests/", "harness"),
];

static SINK: OnceLock<Option<Sink>> = OnceLock::new();

/// The process's call log, when `RARA_AWS_CALL_LOG` is set (or [`record_to`] was called first).
fn sink() -> Option<&'static Sink> {
    SINK.get_or_init(|| Sink::open(&PathBuf::from(std::env::var_os(ENV)?))).as_ref()
}

/// Records this process's calls under `dir` (unless `RARA_AWS_CALL_LOG` already chose a
/// directory) and returns the file they go to; `None` when a client was built before with
/// the log off. For a test that checks the calls it caused: call it before any client.
pub fn record_to(dir: &std::path::Path) -> Option<PathBuf> {
    SINK.get_or_init(|| Sink::open(dir)).as_ref().map(|sink| sink.path.clone())
}

impl Sink {
    fn open(dir: &std::path::Path) -> Option<Sink> {
        std::fs::create_dir_all(dir).ok()?;
        let path = dir.join(format!("calls-{}.jsonl", std::process::id()));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path).ok()?;
        Some(Sink { path, file: Mutex::new(file), names: Mutex::new(BTreeMap::new()) })
    }
}

struct Sink {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    /// Secret ids (or prefixes, ending in `/`), artifact stores (`s3://bucket`) and the
    /// template resource each stands for.
    names: Mutex<BTreeMap<String, Named>>,
}

#[derive(Clone)]
enum Named {
    Exact(String),
    /// A prefix standing for the template's `SecretsPrefix`.
    SecretsPrefix,
    /// A bucket whose objects under this prefix stand for the template's `ArtifactsBucket`.
    ArtifactsRoot(String),
}

/// The interceptor that records each operation of a client (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct CallLog {
    _private: (),
}

impl CallLog {
    /// The interceptor, when `RARA_AWS_CALL_LOG` is set.
    pub fn from_env() -> Option<CallLog> {
        sink().map(|_| CallLog::default())
    }
}

/// Declares that the secret `id` (an ARN or a name) or the queue URL `id` stands for
/// `resource` of the template (`Ref:DatabaseSecretArn`, `Ref:ConsoleKeySecret`,
/// `GetAtt:StepQueue.Arn`, ...). A no-op unless the log is on.
pub fn stands_for(id: &str, resource: &str) {
    if let Some(sink) = sink() {
        lock(&sink.names).insert(id.to_owned(), Named::Exact(resource.to_owned()));
    }
}

/// Declares that secrets under `prefix` are workflow secrets: `prefix + name` stands for the
/// template's `${SecretsPrefix}name`. A no-op unless the log is on.
pub fn workflow_secrets_prefix(prefix: &str) {
    if let Some(sink) = sink() {
        lock(&sink.names).insert(prefix.to_owned(), Named::SecretsPrefix);
    }
}

/// Declares that the artifact store `s3://bucket/prefix` stands for the template's
/// `ArtifactsBucket` (whose store is the bucket's root). A no-op unless the log is on.
pub fn artifacts_store(bucket: &str, prefix: &str) {
    if let Some(sink) = sink() {
        lock(&sink.names).insert(format!("s3://{bucket}"), Named::ArtifactsRoot(prefix.to_owned()));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Intercept for CallLog {
    fn name(&self) -> &'static str {
        "rara-call-log"
    }

    /// Once per operation (before the retry loop), with the serialised request.
    fn read_after_serialization(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(sink) = sink() else { return Ok(()) };
        let request = context.request();
        let target = request.headers().get("x-amz-target").unwrap_or_default();
        let body: serde_json::Value =
            request.body().bytes().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or_default();
        let (role, site) = attribute(&std::backtrace::Backtrace::force_capture().to_string(), &working_dir());
        let (action, operation) = action(target);
        let resource = resource(sink, &action, &body);
        let line = serde_json::json!({
            "role": role, "action": action, "resource": resource, "site": site, "operation": operation,
        });
        sink.write(&[line])
    }
}

impl Sink {
    fn write(&self, lines: &[serde_json::Value]) -> Result<(), BoxError> {
        let mut file = lock(&self.file);
        for line in lines {
            // One write per line on an append-mode file: lines of concurrent processes do not mix.
            file.write_all(format!("{line}\n").as_bytes())?;
        }
        Ok(())
    }
}

/// The IAM action of an `X-Amz-Target` (`AmazonSQS.SendMessageBatch`,
/// `secretsmanager.GetSecretValue`) and the operation's name. SQS authorises a batch as its
/// single-message action.
fn action(target: &str) -> (String, String) {
    let (service, operation) = target.split_once('.').unwrap_or(("unknown", target));
    let service = match service {
        "AmazonSQS" => "sqs",
        other => other,
    };
    let authorised_as = match operation {
        "SendMessageBatch" => "SendMessage",
        "DeleteMessageBatch" => "DeleteMessage",
        "ChangeMessageVisibilityBatch" => "ChangeMessageVisibility",
        other => other,
    };
    (format!("{service}:{authorised_as}"), operation.to_owned())
}

fn resource(sink: &Sink, action: &str, body: &serde_json::Value) -> String {
    let field = |k: &str| body.get(k).and_then(serde_json::Value::as_str);
    if let Some(url) = field("QueueUrl") {
        if let Some(Named::Exact(resource)) = lock(&sink.names).get(url) {
            return resource.clone();
        }
        return queue_resource(url);
    }
    if let Some(name) = field("QueueName") {
        return format!("arn:aws:sqs:us-east-1:123456789012:{name}");
    }
    if let Some(id) = field("SecretId").or_else(|| field("Name")) {
        return secret_resource(&lock(&sink.names), id);
    }
    if action.starts_with("sqs:") || action.starts_with("secretsmanager:") { "*".into() } else { "unknown".into() }
}

/// The template resource a queue URL stands for: a `rara-testkit` queue (by its name) is the
/// function's `StepQueue`, its `-dlq` the `DeadLetterQueue`; any other queue its literal ARN.
pub fn queue_resource(url: &str) -> String {
    let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or(url);
    match name.strip_prefix(TEST_QUEUE_PREFIX) {
        Some(rest) if rest.ends_with("-dlq") => "GetAtt:DeadLetterQueue.Arn".into(),
        Some(_) => "GetAtt:StepQueue.Arn".into(),
        None => format!("arn:aws:sqs:us-east-1:123456789012:{name}"),
    }
}

fn secret_resource(names: &BTreeMap<String, Named>, id: &str) -> String {
    if let Some(Named::Exact(resource)) = names.get(id) {
        return resource.clone();
    }
    let under = names.iter().find_map(|(prefix, named)| match named {
        Named::SecretsPrefix => id.strip_prefix(prefix.as_str()),
        Named::Exact(_) | Named::ArtifactsRoot(_) => None,
    });
    // A name resolves to the secret's ARN, which ends in a random suffix of six characters.
    match under {
        Some(name) => format!(
            "Sub:arn:${{AWS::Partition}}:secretsmanager:${{AWS::Region}}:${{AWS::AccountId}}:secret:${{SecretsPrefix}}{name}-AbCdEf"
        ),
        None if id.starts_with("arn:") => id.to_owned(),
        None => format!("arn:aws:secretsmanager:us-east-1:123456789012:secret:{id}-AbCdEf"),
    }
}

/// The process's working directory, with a `/`: `std` prints a frame's path relative to it.
fn working_dir() -> String {
    let dir = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
    if dir.ends_with('/') { dir } else { format!("{dir}/") }
}

/// The role and call site of a backtrace (`std::backtrace::Backtrace`'s text, its relative
/// paths relative to `cwd`): the innermost frame in rara's sources that [`ROLES`] names
/// decides, skipping [`PLUMBING`]; none, or a frame neither names, is `unattributed` with
/// that frame (or the innermost plumbing frame) as the site.
pub fn attribute(backtrace: &str, cwd: &str) -> (&'static str, String) {
    let root = repo_root();
    let mut innermost = None;
    for line in backtrace.lines() {
        let Some(location) = line.trim_start().strip_prefix("at ") else { continue };
        let absolute;
        let location = if location.starts_with('/') {
            location
        } else {
            absolute = format!("{cwd}{}", location.trim_start_matches("./"));
            absolute.as_str()
        };
        let Some(location) = location.strip_prefix(root.as_str()).filter(|l| !l.starts_with("target/")) else {
            continue;
        };
        let site = location.rsplit_once(':').map_or(location, |(at, _column)| at).to_owned();
        // The longer prefix decides: `runner.rs` is a role inside plumbing, `inputs.rs` plumbing
        // inside a role's folder.
        let plumbing = PLUMBING.iter().filter(|p| location.starts_with(*p)).map(|p| p.len()).max();
        let role = ROLES.iter().find(|(prefix, _)| location.starts_with(prefix) || location.contains(prefix));
        match (role, plumbing) {
            (Some((prefix, role)), plumbing) if plumbing.is_none_or(|p| prefix.len() > p) => return (role, site),
            (_, Some(_)) => {
                innermost.get_or_insert(site);
                continue;
            }
            _ => {}
        }
        return ("unattributed", site);
    }
    ("unattributed", innermost.unwrap_or_else(|| "no rara frame".into()))
}

/// The checkout's root as this crate was built (`<root>/shared/platform`), with a `/`.
fn repo_root() -> String {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let root = manifest.strip_suffix("shared/platform").unwrap_or(manifest);
    if root.ends_with('/') { root.to_owned() } else { format!("{root}/") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_operations_are_authorised_as_their_single_message_action() {
        assert_eq!(action("AmazonSQS.SendMessageBatch"), ("sqs:SendMessage".into(), "SendMessageBatch".into()));
        assert_eq!(action("secretsmanager.GetSecretValue").0, "secretsmanager:GetSecretValue");
    }

    #[test]
    fn testkit_queues_stand_for_the_template_queues() {
        let base = "http://localhost:4566/000000000000/";
        assert_eq!(queue_resource(&format!("{base}rara-test-ab12")), "GetAtt:StepQueue.Arn");
        assert_eq!(queue_resource(&format!("{base}rara-test-ab12-dlq")), "GetAtt:DeadLetterQueue.Arn");
        assert_eq!(queue_resource(&format!("{base}other")), "arn:aws:sqs:us-east-1:123456789012:other");
    }

    #[test]
    fn the_innermost_function_frame_decides_and_plumbing_is_skipped() {
        let root = repo_root();
        let trace = format!(
            "  0: std::backtrace\n      at /rustc/abc/library/std/src/backtrace.rs:1:1\n  \
             1: rara_queue::sqs\n      at {root}shared/queue/src/sqs.rs:120:9\n  \
             2: rara_runtime::executor\n      at {root}shared/runtime/src/executor/batch/comeback.rs:88:5\n  \
             3: handler::test\n      at {root}functions/executor/tests/handler.rs:10:1\n"
        );
        assert_eq!(attribute(&trace, "/"), ("ExecutorRole", "shared/runtime/src/executor/batch/comeback.rs:88".into()));
        let harness = format!(
            "  1: x\n      at {root}shared/queue/src/sqs.rs:1:1\n  2: y\n      at {root}shared/testkit/src/lib.rs:5:5\n"
        );
        assert_eq!(attribute(&harness, "/").0, "harness");
        // std prints paths under the working directory relative to it (a test runs in its crate).
        let relative = "  1: x\n      at tests/handler.rs:5:5\n  2: y\n      at src/lib.rs:9:9\n";
        assert_eq!(attribute(relative, &format!("{root}functions/executor/")).0, "harness");
        let function = "  1: x\n      at src/lib.rs:9:9\n  2: y\n      at tests/handler.rs:5:5\n";
        assert_eq!(
            attribute(function, &format!("{root}functions/executor/")),
            ("ExecutorRole", "functions/executor/src/lib.rs:9".into())
        );
        let orphan = format!(
            "  1: x\n      at {root}shared/queue/src/sqs.rs:7:1\n  2: tokio\n      at /cargo/tokio/src/rt.rs:1:1\n"
        );
        assert_eq!(attribute(&orphan, "/"), ("unattributed", "shared/queue/src/sqs.rs:7".into()));
        let unknown = format!("  1: x\n      at {root}shared/runtime/src/burst.rs:3:1\n");
        assert_eq!(attribute(&unknown, "/").0, "unattributed");
        // The console's DLQ page is `rara ui`'s, with the operator's credentials; the rest of the
        // API is the API function's.
        let dlq = format!(
            "  1: x\n      at {root}shared/platform/src/dlq/mod.rs:40:1\n  2: y\n      at {root}shared/api/src/console/dlq.rs:62:9\n"
        );
        assert_eq!(attribute(&dlq, "/"), ("OperatorPolicy", "shared/api/src/console/dlq.rs:62".into()));
        let artifacts = format!("  1: x\n      at {root}shared/api/src/artifacts.rs:130:9\n");
        assert_eq!(attribute(&artifacts, "/").0, "ApiRole");
        // A run's large inputs are written for whoever submits; the poller is a role in plumbing.
        let inputs = |caller: &str| {
            format!("  1: x\n      at {root}shared/operator/src/inputs.rs:87:9\n  2: y\n      at {root}{caller}:1:1\n")
        };
        assert_eq!(attribute(&inputs("shared/runtime/src/scheduler/schedules.rs"), "/").0, "SchedulerRole");
        assert_eq!(attribute(&inputs("shared/api/src/submit.rs"), "/").0, "ApiRole");
        assert_eq!(attribute(&inputs("cli/src/cmd/submit.rs"), "/").0, "OperatorPolicy");
        let poller = format!("  1: x\n      at {root}shared/platform/src/runner.rs:5:5\n");
        assert_eq!(attribute(&poller, "/").0, "ExecutorRole");
    }

    #[test]
    fn workflow_secrets_map_under_the_template_prefix() {
        let mut names = BTreeMap::new();
        names.insert("test-abc/".to_owned(), Named::SecretsPrefix);
        names.insert(
            "arn:aws:secretsmanager:us-east-1:000000000000:secret:db".to_owned(),
            Named::Exact("Ref:DatabaseSecretArn".into()),
        );
        assert!(secret_resource(&names, "test-abc/api-key").ends_with("${SecretsPrefix}api-key-AbCdEf"));
        assert_eq!(
            secret_resource(&names, "arn:aws:secretsmanager:us-east-1:000000000000:secret:db"),
            "Ref:DatabaseSecretArn"
        );
        assert_eq!(
            secret_resource(&names, "elsewhere"),
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:elsewhere-AbCdEf"
        );
    }
}
