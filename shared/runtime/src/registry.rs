//! The registry an executor runs with: the built-in executors, and the remote executors of
//! `RARA_REMOTE_EXECUTORS` for every other operation.

use std::sync::Arc;

use rara_builtins::BuiltinsConfig;
use rara_domain::registry::Registry;
use rara_remote::RemoteExecutors;

use crate::settings::Settings;

/// Why the registry could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot register the built-in executors: {0}")]
    Builtins(#[from] rara_builtins::Error),
    #[error("RARA_REMOTE_EXECUTORS is not valid: {0}")]
    Remote(#[from] rara_remote::router::Error),
}

/// The built-in executors (`noop`, `sleep`, `fail`, `http.request` with the settings' egress
/// policy) plus the remote executors of `RARA_REMOTE_EXECUTORS` for every other operation.
/// Remote capabilities are discovered here, during init (the first connection is paid once
/// per container).
pub async fn standard_registry(settings: &Settings) -> Result<Registry, Error> {
    let builtins = BuiltinsConfig { egress: settings.egress.clone(), ..BuiltinsConfig::default() };
    let mut registry = rara_builtins::registry_with(&builtins)?;
    if let Some(endpoints) = &settings.remote_executors {
        let security = settings.remote_security.clone();
        let remote = RemoteExecutors::from_config_value_secured(endpoints, settings.timeouts.grpc, security)?;
        let remote = Arc::new(remote.with_limits(settings.returns));
        remote.refresh().await;
        registry.with_remote(remote);
    }
    Ok(registry)
}
