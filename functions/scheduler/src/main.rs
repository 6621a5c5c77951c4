//! The scheduler Lambda: read config, build the pool and the SQS client once, hand the
//! handler to the runtime.

use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    rara_platform::wiring::init_logging("rara-scheduler")?;
    let wiring = rara_platform::wiring::Wiring::from_env("scheduler").await?;
    let scheduler = wiring.scheduler()?;
    let (budget, margin) = (wiring.settings.scheduler_budget, wiring.settings.deadline_margin);
    lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| {
        scheduler::handle(&scheduler, budget, margin, event)
    }))
    .await
}
