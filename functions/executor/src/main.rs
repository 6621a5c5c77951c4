//! The executor Lambda: read config, build the pool, the SQS client and the registry
//! (built-in executors and remote gRPC executors) once, hand the handler to the runtime.

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{LambdaEvent, service_fn};
use rara_runtime::invocation::FunctionTimeout;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    rara_platform::wiring::init_logging("rara-executor")?;
    let wiring = rara_platform::wiring::Wiring::from_env("executor").await?;
    wiring.settings.require_dlq()?;
    let executor = wiring.batch_executor().await?;
    let (timeout, margin) = (FunctionTimeout::executor(&wiring.settings), wiring.settings.deadline_margin);
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| executor::handle(&executor, timeout, margin, event)))
        .await
}
