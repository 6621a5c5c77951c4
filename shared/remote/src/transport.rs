//! The connections to remote executors and their deadlines ([`Transport`]): an endpoint
//! checked ([`Error`]), one lazily connected channel per endpoint (TLS for `https://`, with
//! the private CA and client identity of [`Security`], else the webpki roots).

use std::time::Duration;

use tonic::codegen::http::Uri;
use tonic::codegen::http::uri::InvalidUri;
use tonic::transport::{Channel, Endpoint};

use crate::security::Security;

/// How long opening a connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How often an HTTP/2 ping checks that a remote executor's connection is alive.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a ping may go unanswered before the connection is closed (and every stream on
/// it ends as a retryable `EXECUTOR_UNAVAILABLE`).
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a remote executor is asked to send a heartbeat on a quiet stream
/// (`ExecuteRequest.heartbeat_interval_ms`).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// A stream that has sent nothing, heartbeats included, for this many heartbeat intervals is
/// given up as a retryable `EXECUTOR_UNAVAILABLE` (its idle timeout).
pub const IDLE_HEARTBEATS: u32 = 3;

/// The deadlines of the connections to remote executors: a peer that accepts and never
/// answers is found out by the connect timeout or, on an open connection, by an unanswered
/// keep-alive ping (also while a long step's stream is quiet); an executor that answers
/// pings but sends nothing on a stream is found out by the stream's idle timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transport {
    pub connect_timeout: Duration,
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    /// The heartbeat interval asked of executors; a stream silent for [`IDLE_HEARTBEATS`]
    /// of them ends. Zero: no heartbeats asked and no idle timeout (for executors that
    /// predate heartbeats).
    pub heartbeat_interval: Duration,
}

impl Transport {
    /// How long an `Execute` or `Attach` stream may send nothing before it is given up
    /// (`None`: heartbeats are off).
    pub fn idle_timeout(&self) -> Option<Duration> {
        (!self.heartbeat_interval.is_zero()).then(|| self.heartbeat_interval * IDLE_HEARTBEATS)
    }
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            connect_timeout: CONNECT_TIMEOUT,
            keepalive_interval: KEEPALIVE_INTERVAL,
            keepalive_timeout: KEEPALIVE_TIMEOUT,
            heartbeat_interval: HEARTBEAT_INTERVAL,
        }
    }
}

/// A bad `RARA_REMOTE_EXECUTORS` value or endpoint.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("RARA_REMOTE_EXECUTORS lists no endpoint; expected comma-separated http://host:port or https://host:port")]
    NoEndpoints,
    #[error("remote executor endpoint {url:?} is not a valid URL")]
    InvalidUrl {
        url: String,
        #[source]
        source: InvalidUri,
    },
    #[error("remote executor endpoint {url:?} must start with http:// or https://")]
    Scheme { url: String },
    #[error("remote executor endpoint {url:?} must be scheme://host[:port], without a path or a query")]
    NotAnOrigin { url: String },
    #[error("remote executor endpoint {url:?} has a port that is not a number from 0 to 65535")]
    Port { url: String },
    /// The URL is not repeated: it holds a secret.
    #[error("remote executor endpoint #{position} holds credentials (user:password@); they are not supported")]
    Credentials { position: usize },
    #[error("remote executor endpoint {url:?} is listed twice")]
    Duplicate { url: String },
    #[error("remote executor endpoint {url:?} cannot be used as a gRPC endpoint")]
    Channel {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
}

/// A lazily connected channel to one endpoint (`http://host:port` or `https://host:port`),
/// with TLS (webpki roots) for `https`. Must be called inside a Tokio runtime.
pub fn lazy_channel(url: &str) -> Result<Channel, Error> {
    lazy_channel_with(url, &Security::default())
}

/// [`lazy_channel`] with the TLS trust and identity of `security`.
pub fn lazy_channel_with(url: &str, security: &Security) -> Result<Channel, Error> {
    let origin = origin(url, 1)?;
    connect_lazy(&origin, &Transport::default(), security)
}

/// Checks one configured endpoint and returns it as `scheme://authority`.
pub(crate) fn origin(raw: &str, position: usize) -> Result<String, Error> {
    let uri: Uri = raw.parse().map_err(|source| Error::InvalidUrl { url: raw.to_owned(), source })?;
    let scheme = match uri.scheme_str() {
        Some(scheme @ ("http" | "https")) => scheme,
        _ => return Err(Error::Scheme { url: raw.to_owned() }),
    };
    let Some(authority) = uri.authority() else {
        return Err(Error::NotAnOrigin { url: raw.to_owned() });
    };
    if authority.as_str().contains('@') {
        return Err(Error::Credentials { position });
    }
    if authority.host().is_empty() || !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(Error::NotAnOrigin { url: raw.to_owned() });
    }
    let port = authority.as_str().strip_prefix(authority.host()).and_then(|rest| rest.strip_prefix(':'));
    if port.is_some_and(|port| port.parse::<u16>().is_err()) {
        return Err(Error::Port { url: raw.to_owned() });
    }
    Ok(format!("{scheme}://{authority}"))
}

pub(crate) fn connect_lazy(origin: &str, transport: &Transport, security: &Security) -> Result<Channel, Error> {
    let channel_error = |source| Error::Channel { url: origin.to_owned(), source };
    let mut endpoint = Endpoint::from_shared(origin.to_owned())
        .map_err(channel_error)?
        .connect_timeout(transport.connect_timeout)
        .tcp_keepalive(Some(transport.keepalive_interval))
        .http2_keep_alive_interval(transport.keepalive_interval)
        .keep_alive_timeout(transport.keepalive_timeout)
        .keep_alive_while_idle(true);
    if origin.starts_with("https://") {
        endpoint = endpoint.tls_config(security.tls_config()).map_err(channel_error)?;
    }
    Ok(endpoint.connect_lazy())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn origins_are_normalised_and_checked() {
        assert_eq!(origin("http://127.0.0.1:50051", 1).unwrap(), "http://127.0.0.1:50051");
        assert_eq!(origin("https://exec.example.com/", 1).unwrap(), "https://exec.example.com");
        assert!(matches!(origin("127.0.0.1:50051", 1), Err(Error::Scheme { .. })));
        assert!(matches!(origin("grpc://host:1", 1), Err(Error::Scheme { .. })));
        assert!(matches!(origin("http://host:1/prefix", 1), Err(Error::NotAnOrigin { .. })));
        assert!(matches!(origin("http://host:1/?q=1", 1), Err(Error::NotAnOrigin { .. })));
        assert!(matches!(origin("http://host:port", 1), Err(Error::Port { .. })));
        assert!(matches!(origin("http://host:70000", 1), Err(Error::Port { .. })));
        assert_eq!(origin("http://[::1]:50051", 1).unwrap(), "http://[::1]:50051");
        assert!(matches!(origin("http://a b", 1), Err(Error::InvalidUrl { .. })));
    }

    #[test]
    fn credentials_are_refused_without_repeating_them() {
        let err = origin("https://user:s3cret@host:443", 2).unwrap_err();
        assert!(matches!(err, Error::Credentials { position: 2 }));
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }

    #[test]
    fn an_error_with_a_source_says_its_own_part_once() {
        let err = origin("http://a b", 1).unwrap_err();
        let source = std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default();
        assert_eq!(err.to_string(), "remote executor endpoint \"http://a b\" is not a valid URL");
        assert!(!source.is_empty() && !err.to_string().contains(&source), "{err} / {source}");
    }
}
