//! The API Lambda: read config, build the pool once, hand the router to `lambda_http`. It sends
//! nothing to SQS, so it builds no SQS client.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    rara_platform::wiring::init_logging("rara-api")?;
    let (settings, store) = rara_platform::wiring::store_from_env("api").await?;
    let auth = api::auth_from_lookup(|k| std::env::var(k).ok());
    let api = rara_api::Api::new(store, settings.core.clone(), auth)?;
    lambda_http::run(api.router()).await
}
