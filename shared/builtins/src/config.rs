//! [`BuiltinsConfig`]: the limits the builtin executors share, read once at start.

use std::time::Duration;

use crate::egress::Policy;

/// The most response body `http.request` returns by default (64 KiB).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// The `http.request` timeout when the input names none.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `http.request` waits for a TCP/TLS connection.
pub const DEFAULT_HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The `User-Agent` `http.request` sends unless the input sets one.
pub const DEFAULT_USER_AGENT: &str = concat!("rara/", env!("CARGO_PKG_VERSION"));

/// Limits for the builtin executors. Build it once; [`crate::register_builtins`] validates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinsConfig {
    /// `http.request` returns at most this many bytes of a response body and sets
    /// `"truncated": true` when it cut one.
    pub max_response_bytes: usize,
    /// The `http.request` timeout when the input has no `timeout_seconds`.
    pub http_default_timeout: Duration,
    /// How long `http.request` waits for a connection.
    pub http_connect_timeout: Duration,
    /// The `User-Agent` header `http.request` sends unless the input sets one.
    pub user_agent: String,
    /// What `http.request` may connect to (`RARA_HTTP_EGRESS`, `RARA_HTTP_ALLOW_CIDRS`,
    /// `RARA_HTTP_ALLOW_HOSTS`; validated when parsed). The default refuses loopback,
    /// link-local, private and the other special-purpose ranges, and opens nothing.
    pub egress: Policy,
}

impl Default for BuiltinsConfig {
    fn default() -> Self {
        Self {
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            http_default_timeout: DEFAULT_HTTP_TIMEOUT,
            http_connect_timeout: DEFAULT_HTTP_CONNECT_TIMEOUT,
            user_agent: DEFAULT_USER_AGENT.to_owned(),
            egress: Policy::default(),
        }
    }
}

/// A configuration value out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("builtins config: http_default_timeout must be greater than zero")]
    ZeroHttpTimeout,
    #[error("builtins config: http_connect_timeout must be greater than zero")]
    ZeroConnectTimeout,
}

impl BuiltinsConfig {
    /// Checks the values; [`crate::register_builtins`] calls it.
    pub fn validate(&self) -> Result<(), Error> {
        if self.http_default_timeout.is_zero() {
            return Err(Error::ZeroHttpTimeout);
        }
        if self.http_connect_timeout.is_zero() {
            return Err(Error::ZeroConnectTimeout);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid() {
        let config = BuiltinsConfig::default();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.max_response_bytes, 65_536);
    }

    #[test]
    fn zero_timeouts_are_refused() {
        let zero = BuiltinsConfig { http_connect_timeout: Duration::ZERO, ..BuiltinsConfig::default() };
        assert_eq!(zero.validate(), Err(Error::ZeroConnectTimeout));
    }
}
