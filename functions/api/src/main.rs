//! The API Lambda: read config, build the pool once, hand the router to `lambda_http`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    rara_runtime::wiring::init_logging("rara-api")?;
    let wiring = rara_runtime::wiring::Wiring::from_env("api").await?;
    let auth = api::auth_from_lookup(|k| std::env::var(k).ok());
    let api = rara_api::Api::new(wiring.store.clone(), wiring.settings.core.clone(), auth)?;
    lambda_http::run(api.router()).await
}
