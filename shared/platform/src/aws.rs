//! The AWS SDK configuration every client of a function is built from (SQS, Secrets
//! Manager, S3): the environment's region, credentials and `AWS_ENDPOINT_URL`, with rara's
//! [`Timeouts`] and the SDK's standard retry mode. Each client records its calls for the
//! IAM check when `RARA_AWS_CALL_LOG` is set ([`crate::call_log`]).

use rara_runtime::timeouts::Timeouts;

use crate::call_log::{CallLog, S3CallLog};

/// The SDK configuration of a function's [`Timeouts`].
#[allow(async_fn_in_trait)]
pub trait AwsConfig {
    /// The AWS SDK configuration of the environment (region, credentials,
    /// `AWS_ENDPOINT_URL`) with these timeouts and the standard retry mode.
    async fn aws_config(&self) -> aws_config::SdkConfig;
}

impl AwsConfig for Timeouts {
    async fn aws_config(&self) -> aws_config::SdkConfig {
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(self.aws_connect)
            .operation_attempt_timeout(self.aws_attempt)
            .operation_timeout(self.aws_operation)
            .build();
        let retry = aws_config::retry::RetryConfig::standard().with_max_attempts(self.aws_max_attempts);
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .timeout_config(timeouts)
            .retry_config(retry)
            .load()
            .await
    }
}

/// An SQS client of `config` (recording its calls when `RARA_AWS_CALL_LOG` is set).
pub fn sqs_client(config: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
    sqs_client_of(aws_sdk_sqs::config::Builder::from(config))
}

/// An SQS client of `builder` (recording its calls when `RARA_AWS_CALL_LOG` is set).
pub fn sqs_client_of(mut builder: aws_sdk_sqs::config::Builder) -> aws_sdk_sqs::Client {
    if let Some(log) = CallLog::from_env() {
        builder.push_interceptor(aws_sdk_sqs::config::SharedInterceptor::new(log));
    }
    aws_sdk_sqs::Client::from_conf(builder.build())
}

/// An SQS client from the SDK's standard environment (region, credentials,
/// `AWS_ENDPOINT_URL`) without rara's timeouts: the CLI's operator commands.
pub async fn sqs_client_from_env() -> aws_sdk_sqs::Client {
    sqs_client(&aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await)
}

/// An S3 client of `config` for the artifact store (path-style addressing when an endpoint is
/// set), recording its calls when `RARA_AWS_CALL_LOG` is set ([`S3CallLog`]).
pub fn s3_client(config: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let mut builder = rara_artifacts::s3::client_config(config);
    if let Some(log) = S3CallLog::from_env() {
        builder.push_interceptor(aws_sdk_s3::config::SharedInterceptor::new(log));
    }
    aws_sdk_s3::Client::from_conf(builder.build())
}

/// The artifact store `uri` names (with `s3`'s client for `s3://`). For the IAM check, an S3
/// store stands for the template's `ArtifactsBucket` (a no-op unless recording).
pub fn open_artifacts(
    uri: &str,
    s3: impl FnOnce() -> aws_sdk_s3::Client,
) -> Result<std::sync::Arc<dyn rara_artifacts::ArtifactStore>, rara_artifacts::Error> {
    if let rara_artifacts::Location::S3 { bucket, prefix } = rara_artifacts::Location::parse(uri)? {
        crate::call_log::artifacts_store(&bucket, &prefix);
    }
    rara_artifacts::open(uri, s3)
}

/// The artifact store of `RARA_ARTIFACTS_URI`, if set, with an S3 client from the SDK's
/// standard environment (the CLI's commands).
pub async fn artifact_store_from_env()
-> Result<Option<std::sync::Arc<dyn rara_artifacts::ArtifactStore>>, rara_artifacts::Error> {
    let Some(uri) = std::env::var("RARA_ARTIFACTS_URI").ok().filter(|u| !u.is_empty()) else { return Ok(None) };
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    open_artifacts(&uri, || s3_client(&config)).map(Some)
}

/// A Secrets Manager client of `config` (recording its calls when `RARA_AWS_CALL_LOG` is set).
pub fn secrets_manager_client(config: &aws_config::SdkConfig) -> aws_sdk_secretsmanager::Client {
    let mut builder = aws_sdk_secretsmanager::config::Builder::from(config);
    if let Some(log) = CallLog::from_env() {
        builder.push_interceptor(aws_sdk_secretsmanager::config::SharedInterceptor::new(log));
    }
    aws_sdk_secretsmanager::Client::from_conf(builder.build())
}

/// Why a secret's text could not be read ([`secret_text`]). No variant holds the value.
#[derive(Debug, thiserror::Error)]
pub enum SecretTextError {
    #[error("cannot fetch {arn}: {detail}")]
    Fetch { arn: String, detail: String },
    #[error("{arn} has no SecretString (a binary secret?)")]
    NotText { arn: String },
}

/// The text of the secret `arn`, fetched once with `client`; `resource` is what the secret
/// stands for in the template (`Ref:ConsoleKeySecret`, ...), for the IAM check.
pub async fn secret_text(
    client: &aws_sdk_secretsmanager::Client,
    arn: &str,
    resource: &str,
) -> Result<String, SecretTextError> {
    crate::call_log::stands_for(arn, resource);
    let output = client.get_secret_value().secret_id(arn).send().await.map_err(|e| SecretTextError::Fetch {
        arn: arn.to_owned(),
        detail: aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string(),
    })?;
    output.secret_string().map(str::to_owned).ok_or_else(|| SecretTextError::NotText { arn: arn.to_owned() })
}
