//! rara's in-process executors, registered under explicit operation names (DESIGN.md
//! "Executors"): `noop`, `sleep`, `fail` and `http.request`.
//!
//! # Layout
//!
//! - [`config`]: [`BuiltinsConfig`], the limits the executors share, with named defaults.
//! - [`noop`], [`sleep`], [`fail`], [`http_request`]: one executor per module, each with its
//!   input format in the module docs and its unit tests next to it.
//! - [`egress`]: the egress policy of `http.request` (refused ranges, the operator's opened
//!   CIDRs and hosts) and the DNS resolver that enforces it at connect time.
//! - `input`: input parsing shared by all executors: every malformed input becomes a
//!   permanent `INVALID_INPUT` naming the field, without echoing the value.
//! - `guard`: races an execution against `ctx.cancel` and `ctx.deadline`.
//! - [`register_builtins`] (here): registers all four under their names.
//! - [`registry()`] (`registry.rs`): a registry of the built-ins alone, with the default
//!   config: what submit checks; [`registry_with`] with the executor's config.

pub mod config;
pub mod egress;
pub mod fail;
mod guard;
pub mod http_request;
mod input;
pub mod noop;
mod registry;
pub mod sleep;

#[cfg(test)]
mod testing;

pub use config::BuiltinsConfig;
pub use fail::Fail;
pub use http_request::HttpRequest;
pub use noop::Noop;
pub use registry::{registry, registry_with};
pub use sleep::Sleep;

use rara_domain::registry::Registry;

/// Why the builtins could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Registry(#[from] rara_domain::registry::Error),
    #[error(transparent)]
    Config(#[from] config::Error),
    #[error(transparent)]
    HttpRequest(#[from] http_request::Error),
}

/// Registers `noop`, `sleep`, `fail` and `http.request` in `registry`. The HTTP client is
/// built here, once, and shared by every `http.request` execution.
pub fn register_builtins(registry: &mut Registry, config: &BuiltinsConfig) -> Result<(), Error> {
    config.validate()?;
    registry
        .register(noop::NAME, Noop)?
        .register(sleep::NAME, Sleep)?
        .register(fail::NAME, Fail)?
        .register(http_request::NAME, HttpRequest::new(config)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn all_four_builtins_are_registered_under_their_names() {
        let mut registry = Registry::new();
        register_builtins(&mut registry, &BuiltinsConfig::default()).unwrap();
        assert_eq!(registry.names().collect::<Vec<_>>(), ["fail", "http.request", "noop", "sleep"]);
        for name in ["noop", "sleep", "fail", "http.request"] {
            assert!(registry.resolve(name, Some("1")).await.is_ok(), "{name}");
        }
    }

    #[test]
    fn registering_twice_is_a_duplicate() {
        let mut registry = Registry::new();
        register_builtins(&mut registry, &BuiltinsConfig::default()).unwrap();
        let err = register_builtins(&mut registry, &BuiltinsConfig::default()).unwrap_err();
        assert!(matches!(err, Error::Registry(rara_domain::registry::Error::Duplicate(_))), "{err}");
    }

    #[test]
    fn an_invalid_config_is_refused_before_anything_is_registered() {
        let mut registry = Registry::new();
        let config = BuiltinsConfig { http_default_timeout: std::time::Duration::ZERO, ..BuiltinsConfig::default() };
        let err = register_builtins(&mut registry, &config).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err}");
        assert_eq!(registry.names().count(), 0);
    }
}
