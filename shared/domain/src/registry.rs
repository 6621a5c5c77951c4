//! Explicit registrations of executors by operation name, and routing (DESIGN.md
//! "Executors"): an in-process registration first, then a remote capability matching name
//! and version, otherwise a permanent `UNKNOWN_OPERATION` failure. When the remote executors
//! that might offer the operation cannot be asked, the router's retryable error (usually
//! `EXECUTOR_UNAVAILABLE`) is the answer instead: the step is retried, not failed for good.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::StepError;
use crate::executor::Executor;
use crate::step_error::codes;

/// Finds a remote executor offering a capability (name and, when pinned, version).
#[async_trait::async_trait]
pub trait RemoteRouter: Send + Sync {
    /// - `Ok(Some(executor))`: a remote executor offers it;
    /// - `Ok(None)`: the remote executors' capabilities are known and none matches (the
    ///   registry then fails the step for good with `UNKNOWN_OPERATION`);
    /// - `Err(error)`: whether one offers it cannot be told now, e.g. no endpoint that could
    ///   serve it has answered discovery (a retryable `EXECUTOR_UNAVAILABLE`).
    async fn route(&self, operation: &str, version: Option<&str>) -> Result<Option<Arc<dyn Executor>>, StepError>;

    /// The executor that re-attaches to an attempt of `operation` running detached on
    /// `endpoint` (DESIGN.md "Long steps"): the attempt row names the endpoint, and re-attach
    /// goes there, whatever routing would choose now. `None` when `endpoint` is not one of
    /// the configured remote executors.
    fn attach(&self, endpoint: &str, operation: &str) -> Option<Arc<dyn Executor>>;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("an executor is already registered under {0:?}")]
    Duplicate(String),
    #[error("operation names must be non-empty and without whitespace, got {0:?}")]
    InvalidName(String),
}

/// Executors by operation name.
#[derive(Default, Clone)]
pub struct Registry {
    local: BTreeMap<String, Arc<dyn Executor>>,
    remote: Option<Arc<dyn RemoteRouter>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("local", &self.local.keys().collect::<Vec<_>>())
            .field("remote", &self.remote.is_some())
            .finish()
    }
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `executor` under `name`. A second registration of a name is an error.
    pub fn register(&mut self, name: &str, executor: impl Executor) -> Result<&mut Self, Error> {
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(Error::InvalidName(name.to_owned()));
        }
        if self.local.contains_key(name) {
            return Err(Error::Duplicate(name.to_owned()));
        }
        self.local.insert(name.to_owned(), Arc::new(executor));
        Ok(self)
    }

    /// Routes operations that no in-process registration serves to remote executors.
    pub fn with_remote(&mut self, router: Arc<dyn RemoteRouter>) -> &mut Self {
        self.remote = Some(router);
        self
    }

    /// The in-process executor that routing gives `operation` (at `version` when pinned): an
    /// explicit registration comes first. Such a step runs inside one invocation.
    pub fn in_process(&self, operation: &str, version: Option<&str>) -> Option<&Arc<dyn Executor>> {
        self.local.get(operation).filter(|local| version.is_none_or(|v| v == local.version()))
    }

    /// The in-process operations whose executors are [`Executor::quick`].
    pub fn quick_names(&self) -> Vec<&str> {
        self.local.iter().filter(|(_, e)| e.quick()).map(|(n, _)| n.as_str()).collect()
    }

    /// The registered in-process operation names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.local.keys().map(String::as_str)
    }

    /// The executor that re-attaches to an attempt of `operation` running detached on
    /// `endpoint`; a retryable `EXECUTOR_UNAVAILABLE` when that endpoint is no longer
    /// configured (the attempt then fails and a new one runs where routing says).
    pub fn attach(&self, endpoint: &str, operation: &str) -> Result<Arc<dyn Executor>, StepError> {
        self.remote.as_ref().and_then(|remote| remote.attach(endpoint, operation)).ok_or_else(|| {
            StepError::retryable(
                codes::EXECUTOR_UNAVAILABLE,
                format!("the detached attempt runs on {endpoint}, which is not a configured remote executor"),
            )
            .with_details(serde_json::json!({ "endpoint": endpoint, "operation": operation }))
        })
    }

    /// The executor for `operation` (at `version` when pinned); a permanent
    /// `UNKNOWN_OPERATION` when nothing serves it, or the remote router's error (retryable
    /// `EXECUTOR_UNAVAILABLE`) when the remote executors that might serve it cannot be asked.
    pub async fn resolve(&self, operation: &str, version: Option<&str>) -> Result<Arc<dyn Executor>, StepError> {
        if let Some(local) = self.in_process(operation, version) {
            return Ok(local.clone());
        }
        if let Some(remote) = &self.remote
            && let Some(executor) = remote.route(operation, version).await?
        {
            return Ok(executor);
        }
        let wanted = match version {
            Some(v) => format!("operation {operation:?} at version {v:?}"),
            None => format!("operation {operation:?}"),
        };
        Err(StepError::permanent(
            codes::UNKNOWN_OPERATION,
            format!("no in-process executor or remote capability serves {wanted}"),
        )
        .with_details(serde_json::json!({
            "operation": operation,
            "version": version,
            "in_process": self.local.keys().collect::<Vec<_>>(),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::ExecutionContext;

    struct Echo;

    #[async_trait::async_trait]
    impl Executor for Echo {
        async fn execute(
            &self,
            _ctx: ExecutionContext,
            input: serde_json::Value,
        ) -> Result<serde_json::Value, StepError> {
            Ok(input)
        }
    }

    #[tokio::test]
    async fn unknown_operation_is_a_permanent_failure_naming_it() {
        let mut registry = Registry::new();
        registry.register("echo", Echo).unwrap();
        assert!(registry.resolve("echo", None).await.is_ok());
        let err = registry.resolve("missing", None).await.err().unwrap();
        assert_eq!(err.code, codes::UNKNOWN_OPERATION);
        assert!(!err.retryable);
        assert!(err.message.contains("\"missing\""));
    }

    #[tokio::test]
    async fn pinned_version_must_match_the_registration() {
        let mut registry = Registry::new();
        registry.register("echo", Echo).unwrap();
        assert!(registry.resolve("echo", Some("1")).await.is_ok());
        let err = registry.resolve("echo", Some("2")).await.err().unwrap();
        assert!(err.message.contains("version \"2\""), "{}", err.message);
    }

    /// A remote router that answers every route the same way.
    struct Answers(Result<bool, StepError>);

    #[async_trait::async_trait]
    impl RemoteRouter for Answers {
        async fn route(
            &self,
            _operation: &str,
            _version: Option<&str>,
        ) -> Result<Option<Arc<dyn Executor>>, StepError> {
            match &self.0 {
                Ok(true) => Ok(Some(Arc::new(Echo))),
                Ok(false) => Ok(None),
                Err(error) => Err(error.clone()),
            }
        }

        fn attach(&self, _endpoint: &str, _operation: &str) -> Option<Arc<dyn Executor>> {
            None
        }
    }

    fn with_remote(answer: Result<bool, StepError>) -> Registry {
        let mut registry = Registry::new();
        registry.register("echo", Echo).unwrap();
        registry.with_remote(Arc::new(Answers(answer)));
        registry
    }

    #[tokio::test]
    async fn an_operation_no_reachable_remote_offers_is_a_permanent_unknown_operation() {
        assert!(with_remote(Ok(true)).resolve("remote.op", None).await.is_ok());
        let err = with_remote(Ok(false)).resolve("remote.op", Some("9.9.9")).await.err().unwrap();
        assert_eq!((err.code.as_str(), err.retryable), (codes::UNKNOWN_OPERATION, false));
        assert!(err.message.contains("\"remote.op\" at version \"9.9.9\""), "{}", err.message);
    }

    #[tokio::test]
    async fn unreachable_remote_executors_give_the_routers_retryable_error() {
        let unavailable = StepError::retryable(codes::EXECUTOR_UNAVAILABLE, "no remote executor answered");
        let registry = with_remote(Err(unavailable.clone()));
        assert_eq!(registry.resolve("remote.op", None).await.err(), Some(unavailable));
        // In-process registrations never ask the router.
        assert!(registry.resolve("echo", None).await.is_ok());
    }

    #[test]
    fn duplicate_and_blank_names_are_refused() {
        let mut registry = Registry::new();
        registry.register("echo", Echo).unwrap();
        assert!(matches!(registry.register("echo", Echo), Err(Error::Duplicate(_))));
        assert!(matches!(registry.register("has space", Echo), Err(Error::InvalidName(_))));
    }
}
