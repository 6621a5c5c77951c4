//! [`Error`]: what a queue operation can fail with; [`Chain`] to log one with its causes.

/// The cause of a failed SQS request: the SDK's error as it came (its own sources below it),
/// or the in-memory queue's account of what SQS would have refused.
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the queue failed; what went wrong is the source (the SDK's error, whose
    /// own `Display` is terse: a caller that logs it prints the chain).
    #[error("SQS {operation} failed")]
    Sqs {
        operation: &'static str,
        #[source]
        source: Source,
    },
    /// The queue is not set up for what was asked (no DLQ URL, a queue without a URL or ARN).
    #[error("invalid queue configuration: {0}")]
    Config(String),
}

impl Error {
    /// A failed `operation`, its cause kept as the source.
    pub fn sqs(operation: &'static str, source: impl Into<Source>) -> Self {
        Error::Sqs { operation, source: source.into() }
    }

    /// Whether trying again later may succeed: a failed request may (a timeout, throttling, an
    /// endpoint that did not answer; the scheduler and the runner retry them at their next
    /// round); a configuration that lacks what was asked does not.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Sqs { .. } => true,
            Error::Config(_) => false,
        }
    }
}

/// An error and its causes, `a: b: c`, as the CLI prints them: for a log line
/// (`error = %Chain(&e)`), since an [`Error`]'s own `Display` names only its part.
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(err: &(dyn std::error::Error + 'static)) -> String {
        Chain(err).to_string()
    }

    #[derive(Debug, thiserror::Error)]
    #[error("dispatch failure")]
    struct Sdk(#[source] std::io::Error);

    #[test]
    fn an_sqs_error_keeps_its_cause_as_the_source_and_says_its_own_part_once() {
        let err = Error::sqs("ReceiveMessage", Sdk(std::io::Error::other("connection refused")));
        assert_eq!(err.to_string(), "SQS ReceiveMessage failed");
        assert_eq!(chain(&err), "SQS ReceiveMessage failed: dispatch failure: connection refused");
        assert!(std::error::Error::source(&err).is_some_and(|s| s.is::<Sdk>()), "the SDK's error, not its text");
    }

    #[test]
    fn a_failed_request_is_transient_and_a_missing_setting_is_not() {
        assert!(Error::sqs("SendMessage", "throttled").is_transient());
        assert!(!Error::Config("no dead-letter queue URL (RARA_DLQ_URL)".into()).is_transient());
    }
}
