//! The connections to remote executors and their deadlines ([`Transport`]): one lazily
//! connected channel per endpoint (TLS with the webpki roots for `https://`).

use std::time::Duration;

use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::router::{CONNECT_TIMEOUT, Error};

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

pub(crate) fn connect_lazy(origin: &str, transport: &Transport) -> Result<Channel, Error> {
    let channel_error = |source| Error::Channel { url: origin.to_owned(), source };
    let mut endpoint = Endpoint::from_shared(origin.to_owned())
        .map_err(channel_error)?
        .connect_timeout(transport.connect_timeout)
        .tcp_keepalive(Some(transport.keepalive_interval))
        .http2_keep_alive_interval(transport.keepalive_interval)
        .keep_alive_timeout(transport.keepalive_timeout)
        .keep_alive_while_idle(true);
    if origin.starts_with("https://") {
        endpoint = endpoint.tls_config(ClientTlsConfig::new().with_webpki_roots()).map_err(channel_error)?;
    }
    Ok(endpoint.connect_lazy())
}
