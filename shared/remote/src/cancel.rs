//! `Cancel`, by whoever must send it: the client of a running attempt, or an operator's
//! cancel of an attempt that runs detached (DESIGN.md "Long steps": a cancel reaches a
//! detached attempt at once, not at the next re-attach).

use std::time::Duration;

use uuid::Uuid;

use crate::pb;
use crate::security::{Client, Security};

/// Why a `Cancel` did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Endpoint(#[from] crate::transport::Error),
    #[error("the executor refused the cancel: {code:?}: {message}")]
    Refused { code: tonic::Code, message: String },
    #[error("the executor did not answer the cancel within {0:?}")]
    TimedOut(Duration),
}

/// Asks the executor behind `client` to cancel attempt `attempt` of `step_id` (presenting the
/// attempt's `secret`), saying `reason`; bounded by `timeout`. `Ok(found)`: whether the
/// attempt was still running there.
pub async fn cancel(
    mut client: Client,
    (step_id, attempt, secret): (Uuid, u32, &str),
    reason: &str,
    timeout: Duration,
) -> Result<bool, Error> {
    let request = pb::CancelRequest {
        step_id: step_id.to_string(),
        attempt,
        reason: reason.into(),
        attempt_secret: secret.to_owned(),
    };
    match tokio::time::timeout(timeout, client.cancel(request)).await {
        Ok(Ok(response)) => Ok(response.into_inner().found),
        Ok(Err(status)) => Err(Error::Refused { code: status.code(), message: status.message().to_owned() }),
        Err(_) => Err(Error::TimedOut(timeout)),
    }
}

/// [`cancel`] on the executor at `endpoint` (`scheme://host:port`, as the attempt row names
/// it): how an operator's cancel reaches an attempt that runs detached.
pub async fn cancel_detached(
    endpoint: &str,
    step_id: Uuid,
    attempt: u32,
    reason: &str,
    timeout: Duration,
) -> Result<bool, Error> {
    cancel_detached_with(&Security::default(), endpoint, step_id, attempt, reason, timeout).await
}

/// [`cancel_detached`] with the TLS settings, token and attempt secret of `security`.
pub async fn cancel_detached_with(
    security: &Security,
    endpoint: &str,
    step_id: Uuid,
    attempt: u32,
    reason: &str,
    timeout: Duration,
) -> Result<bool, Error> {
    let client = security.client(crate::transport::lazy_channel_with(endpoint, security)?);
    let secret = security.attempt_secret(step_id, attempt);
    cancel(client, (step_id, attempt, &secret), reason, timeout).await
}
