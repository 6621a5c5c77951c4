//! The AWS SDK configuration every client of a function is built from (SQS, Secrets
//! Manager): the environment's region, credentials and `AWS_ENDPOINT_URL`, with rara's
//! [`Timeouts`] and the SDK's standard retry mode.

use rara_runtime::timeouts::Timeouts;

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

/// An SQS client of `config`.
pub fn sqs_client(config: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(config)
}

/// A Secrets Manager client of `config`.
pub fn secrets_manager_client(config: &aws_config::SdkConfig) -> aws_sdk_secretsmanager::Client {
    aws_sdk_secretsmanager::Client::new(config)
}
