//! S3's calls. S3 is a REST protocol (no `X-Amz-Target`): the operation is known by its input's
//! type before serialisation, and each is recorded as the action IAM authorises it as:
//!
//! | operation | action | resource |
//! |---|---|---|
//! | `PutObject`, `CreateMultipartUpload`, `UploadPart`, `CompleteMultipartUpload` | `s3:PutObject` | the object |
//! | `AbortMultipartUpload` | `s3:AbortMultipartUpload` | the object |
//! | `GetObject` (a presigned GET too: it is signed with the caller's credentials), `HeadObject` | `s3:GetObject` | the object |
//! | `DeleteObject`, `DeleteObjects` (one line per key) | `s3:DeleteObject` | the object |
//! | `ListObjectsV2` | `s3:ListBucket`, with `s3:prefix` | the bucket |
//! | `CreateBucket` | `s3:CreateBucket` | the bucket |
//!
//! Any other operation is recorded as `s3:unknown`, which the check fails. An object of a store
//! declared with [`super::artifacts_store`] is named under the template's bucket
//! (`Sub:${ArtifactsBucket.Arn}/runs/{run}/{step}/{attempt}/report.csv`, its prefix taken off,
//! the ids of the key layout as placeholders); any other, by its literal ARN.

use aws_sdk_s3::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_s3::error::BoxError;
use aws_sdk_s3::operation as op;
use aws_smithy_runtime_api::client::interceptors::context::Input;

use super::{Named, attribute, lock, sink, working_dir};

/// The interceptor that records each S3 operation of a client (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct S3CallLog {
    _private: (),
}

impl S3CallLog {
    /// The interceptor, when `RARA_AWS_CALL_LOG` is set.
    pub fn from_env() -> Option<S3CallLog> {
        sink().map(|_| S3CallLog::default())
    }
}

/// One S3 request as IAM authorises it.
#[derive(Debug, PartialEq)]
struct Request {
    action: &'static str,
    operation: &'static str,
    bucket: String,
    /// The object; `None` for a bucket-level action.
    key: Option<String>,
    /// `ListObjectsV2`'s prefix (the `s3:prefix` condition key).
    prefix: Option<String>,
}

impl Intercept for S3CallLog {
    fn name(&self) -> &'static str {
        "rara-s3-call-log"
    }

    /// Once per operation (before the retry loop), with the operation's input.
    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(sink) = sink() else { return Ok(()) };
        let (role, site) = attribute(&std::backtrace::Backtrace::force_capture().to_string(), &working_dir());
        let names = lock(&sink.names).clone();
        let lines: Vec<_> = requests(context.input())
            .into_iter()
            .map(|request| {
                let root = match names.get(&format!("s3://{}", request.bucket)) {
                    Some(Named::ArtifactsRoot(prefix)) => Some(prefix.as_str()),
                    _ => None,
                };
                let mut line = serde_json::json!({
                    "role": role, "action": request.action, "resource": resource(&request, root),
                    "site": site, "operation": request.operation,
                });
                if let Some(prefix) = &request.prefix {
                    line["context"] =
                        serde_json::json!({"s3:prefix": relative(prefix, root).unwrap_or(prefix.clone())});
                }
                line
            })
            .collect();
        sink.write(&lines)
    }
}

/// The requests of an operation's input, as IAM authorises them.
fn requests(input: &Input) -> Vec<Request> {
    let text = |s: Option<&str>| s.unwrap_or_default().to_owned();
    macro_rules! object {
        ($input:ty, $action:literal, $operation:literal) => {
            if let Some(i) = input.downcast_ref::<$input>() {
                return vec![Request {
                    action: $action,
                    operation: $operation,
                    bucket: text(i.bucket()),
                    key: Some(text(i.key())),
                    prefix: None,
                }];
            }
        };
    }
    object!(op::put_object::PutObjectInput, "s3:PutObject", "PutObject");
    object!(op::create_multipart_upload::CreateMultipartUploadInput, "s3:PutObject", "CreateMultipartUpload");
    object!(op::upload_part::UploadPartInput, "s3:PutObject", "UploadPart");
    object!(op::complete_multipart_upload::CompleteMultipartUploadInput, "s3:PutObject", "CompleteMultipartUpload");
    object!(op::abort_multipart_upload::AbortMultipartUploadInput, "s3:AbortMultipartUpload", "AbortMultipartUpload");
    object!(op::get_object::GetObjectInput, "s3:GetObject", "GetObject");
    object!(op::head_object::HeadObjectInput, "s3:GetObject", "HeadObject");
    object!(op::delete_object::DeleteObjectInput, "s3:DeleteObject", "DeleteObject");
    if let Some(i) = input.downcast_ref::<op::delete_objects::DeleteObjectsInput>() {
        let keys = i.delete().map(|d| d.objects()).unwrap_or_default();
        return keys
            .iter()
            .map(|o| Request {
                action: "s3:DeleteObject",
                operation: "DeleteObjects",
                bucket: text(i.bucket()),
                key: Some(o.key().to_owned()),
                prefix: None,
            })
            .collect();
    }
    if let Some(i) = input.downcast_ref::<op::list_objects_v2::ListObjectsV2Input>() {
        let (bucket, prefix) = (text(i.bucket()), Some(text(i.prefix())));
        return vec![Request { action: "s3:ListBucket", operation: "ListObjectsV2", bucket, key: None, prefix }];
    }
    if let Some(i) = input.downcast_ref::<op::create_bucket::CreateBucketInput>() {
        let bucket = text(i.bucket());
        return vec![Request { action: "s3:CreateBucket", operation: "CreateBucket", bucket, key: None, prefix: None }];
    }
    vec![Request { action: "s3:unknown", operation: "unknown", bucket: String::new(), key: None, prefix: None }]
}

/// The resource of `request`: under the template's `ArtifactsBucket` when its bucket is a
/// declared store with the prefix `root` and its object lies under that prefix.
fn resource(request: &Request, root: Option<&str>) -> String {
    let Some(key) = &request.key else {
        return match root {
            Some(_) => "GetAtt:ArtifactsBucket.Arn".into(),
            None => format!("arn:aws:s3:::{}", request.bucket),
        };
    };
    match relative(key, root) {
        Some(key) => format!("Sub:${{ArtifactsBucket.Arn}}/{key}"),
        None => format!("arn:aws:s3:::{}/{key}", request.bucket),
    }
}

/// `key` relative to the store's prefix `root`, its run, step and attempt as placeholders
/// (the decision depends on the layout, not on the ids); `None` outside a declared store.
fn relative(key: &str, root: Option<&str>) -> Option<String> {
    let root = root?;
    let key = if root.is_empty() { key } else { key.strip_prefix(root)?.strip_prefix('/')? };
    let mut segments: Vec<String> = key.split('/').map(str::to_owned).collect();
    if segments.first().is_some_and(|s| s == "runs") {
        for (i, name) in [(1, "{run}"), (2, "{step}")] {
            if segments.get(i).is_some_and(|s| uuid::Uuid::parse_str(s).is_ok()) {
                segments[i] = name.into();
            }
        }
        if let Some(attempt) = segments.get_mut(3) {
            let digits = attempt.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 {
                *attempt = format!("{{attempt}}{}", &attempt[digits..]);
            }
        }
    }
    Some(segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "0190d1c4-7b3a-7c1e-9a55-3f1e2d4c5b6a";
    const STEP: &str = "0190d1c4-7b3a-7c1e-9a55-3f1e2d4c5b6b";

    fn request(action: &'static str, key: Option<&str>) -> Request {
        Request { action, operation: "x", bucket: "rara-test-1".into(), key: key.map(str::to_owned), prefix: None }
    }

    #[test]
    fn objects_of_a_declared_store_stand_under_the_template_bucket() {
        let output = format!("cli/runs/{RUN}/{STEP}/2.output.json");
        assert_eq!(
            resource(&request("s3:PutObject", Some(&output)), Some("cli")),
            "Sub:${ArtifactsBucket.Arn}/runs/{run}/{step}/{attempt}.output.json"
        );
        let artifact = format!("runs/{RUN}/{STEP}/10/report.csv");
        assert_eq!(
            resource(&request("s3:GetObject", Some(&artifact)), Some("")),
            "Sub:${ArtifactsBucket.Arn}/runs/{run}/{step}/{attempt}/report.csv"
        );
        assert_eq!(resource(&request("s3:ListBucket", None), Some("cli")), "GetAtt:ArtifactsBucket.Arn");
        assert_eq!(relative(&format!("cli/runs/{RUN}/"), Some("cli")).as_deref(), Some("runs/{run}/"));
    }

    #[test]
    fn other_objects_keep_their_literal_arn() {
        // Outside the store's prefix, or a bucket nobody declared: the check sees the real ARN.
        assert_eq!(
            resource(&request("s3:GetObject", Some("elsewhere/k")), Some("cli")),
            "arn:aws:s3:::rara-test-1/elsewhere/k"
        );
        assert_eq!(resource(&request("s3:GetObject", Some("clix/k")), Some("cli")), "arn:aws:s3:::rara-test-1/clix/k");
        assert_eq!(resource(&request("s3:GetObject", Some("runs/k")), None), "arn:aws:s3:::rara-test-1/runs/k");
        assert_eq!(resource(&request("s3:CreateBucket", None), None), "arn:aws:s3:::rara-test-1");
    }

    #[test]
    fn operations_are_authorised_as_iam_names_them() {
        let upload = op::upload_part::UploadPartInput::builder().bucket("b").key("k").build().expect("input");
        assert_eq!(requests(&Input::erase(upload))[0].action, "s3:PutObject");
        let ids = ["a", "b"].map(|k| aws_sdk_s3::types::ObjectIdentifier::builder().key(k).build().expect("id"));
        let delete = aws_sdk_s3::types::Delete::builder().set_objects(Some(ids.to_vec())).build().expect("delete");
        let batch =
            op::delete_objects::DeleteObjectsInput::builder().bucket("b").delete(delete).build().expect("input");
        let lines = requests(&Input::erase(batch));
        assert_eq!(
            lines.iter().map(|r| (r.action, r.key.as_deref())).collect::<Vec<_>>(),
            [("s3:DeleteObject", Some("a")), ("s3:DeleteObject", Some("b"))]
        );
        let list =
            op::list_objects_v2::ListObjectsV2Input::builder().bucket("b").prefix("runs/").build().expect("input");
        assert_eq!(
            requests(&Input::erase(list))[0],
            Request {
                action: "s3:ListBucket",
                operation: "ListObjectsV2",
                bucket: "b".into(),
                key: None,
                prefix: Some("runs/".into())
            }
        );
        let other = op::get_bucket_acl::GetBucketAclInput::builder().bucket("b").build().expect("input");
        assert_eq!(requests(&Input::erase(other))[0].action, "s3:unknown");
    }
}
