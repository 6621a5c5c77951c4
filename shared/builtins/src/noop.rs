//! `noop`: does nothing and returns `{}`. It ignores its input, so that benchmarks measure
//! the engine and not the executor.

use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};

/// The operation name.
pub const NAME: &str = "noop";

/// Returns `{}` for any input.
#[derive(Debug, Default, Clone, Copy)]
pub struct Noop;

#[async_trait::async_trait]
impl Executor for Noop {
    fn quick(&self) -> bool {
        true
    }

    async fn execute(&self, _ctx: ExecutionContext, _input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        // An empty map does not allocate.
        Ok(serde_json::Value::Object(serde_json::Map::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::context;
    use serde_json::json;

    #[tokio::test]
    async fn noop_returns_an_empty_object_whatever_the_input() {
        for input in [json!(null), json!({}), json!({ "anything": [1, 2] })] {
            assert_eq!(Noop.execute(context().0, input).await.unwrap(), json!({}));
        }
    }
}
