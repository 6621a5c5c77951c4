//! The API Lambda: check the auth policy, read config, build the pool and fetch the console key
//! once, hand the router to `lambda_http`. It sends nothing to SQS, so it builds no SQS client.

use api::KeySource;
use rara_api::ConsoleKey;
use rara_platform::aws::{AwsConfig, secrets_manager_client};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    rara_platform::wiring::init_logging("rara-api")?;
    let policy = api::Policy::from_lookup(|k| std::env::var(k).ok()).map_err(refuse)?;
    let (settings, store) = rara_platform::wiring::store_from_env("api").await?;
    let aws = settings.timeouts.aws_config().await;
    let key = match &policy.key {
        KeySource::Secret(arn) => api::fetch_console_key(&secrets_manager_client(&aws), arn).await.map_err(refuse)?,
        KeySource::Value(value) => ConsoleKey::new(value.as_bytes()),
        KeySource::Random => {
            tracing::warn!(
                "neither {} nor {} is set: forms rendered here are refused by every other instance",
                api::CONSOLE_KEY_SECRET_VAR,
                api::CSRF_KEY_VAR
            );
            ConsoleKey::random()
        }
    };
    let mut api = rara_api::Api::new(store, settings.core.clone(), policy.auth(&key))?
        .with_hosts(policy.hosts())
        .with_remote_security(settings.remote_security.clone());
    if let Some(artifacts) = rara_platform::wiring::artifact_store(&settings, &aws)? {
        api = api.with_artifacts(artifacts, settings.inline_output_bytes);
    }
    lambda_http::run(api::router(api)).await
}

/// Logs why the API does not start and returns it with its message (`main`'s error is printed
/// with `Debug`, which would show only the variant's name).
fn refuse(error: api::Error) -> lambda_http::Error {
    tracing::error!(error = %error, "the API does not start");
    error.to_string().into()
}
