//! What the loops run on: the queue under test ([`QueueSetup`]) and the connection pools
//! ([`Pools`]), one per Lambda container.

use std::sync::Arc;

use anyhow::Context;
use rara_queue::Queue;
use rara_queue::memory::MemoryQueue;
use rara_queue::sqs::SqsQueue;
use rara_runtime::settings::Settings;
use rara_testkit::scratch::ScratchDb;
use sqlx::PgPool;

use super::POOL_CONNECTIONS;
use crate::options::QueueKind;
use crate::system::pool;

/// The queue under test: in memory, or a fresh SQS queue pair.
pub struct QueueSetup {
    pub queue: Arc<dyn Queue>,
    pub url: String,
    pub dlq_url: Option<String>,
    pub memory: Option<Arc<MemoryQueue>>,
    /// The SQS queue and the URLs to delete at the end.
    sqs: Option<(Arc<SqsQueue>, [String; 2])>,
}

impl QueueSetup {
    /// A queue with `probe`'s visibility timeout and `maxReceiveCount`.
    pub async fn new(kind: QueueKind, probe: &Settings) -> anyhow::Result<Self> {
        let (visibility, max_receive) = (probe.core.visibility_timeout, probe.core.max_receive_count);
        if kind == QueueKind::Memory {
            let memory = Arc::new(MemoryQueue::new(visibility, max_receive));
            return Ok(QueueSetup {
                queue: memory.clone(),
                url: "memory://rara-bench".into(),
                dlq_url: None,
                memory: Some(memory),
                sqs: None,
            });
        }
        let client = SqsQueue::client_from_env().await;
        let name = format!("rara-bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let pair = rara_queue::sqs::create_queue_pair(&client, &name, visibility, max_receive)
            .await
            .context("cannot create the SQS queues (is AWS_ENDPOINT_URL pointing at LocalStack?)")?;
        let queue = Arc::new(SqsQueue::new(client, pair.queue_url.clone(), Some(pair.dlq_url.clone())));
        Ok(QueueSetup {
            queue: queue.clone(),
            url: pair.queue_url.clone(),
            dlq_url: Some(pair.dlq_url.clone()),
            memory: None,
            sqs: Some((queue, [pair.queue_url, pair.dlq_url])),
        })
    }

    pub async fn delete_sqs_queues(&self) {
        if let Some((queue, urls)) = &self.sqs {
            for url in urls {
                let _ = queue.client().delete_queue().queue_url(url).send().await;
            }
        }
    }
}

/// One pool per "container": the scheduler's, one per executor loop, and the submitter's.
pub struct Pools {
    pub scheduler: PgPool,
    pub executors: Vec<PgPool>,
    pub submitter: Option<PgPool>,
}

impl Pools {
    pub async fn open(scratch: &ScratchDb, executors: u32, with_submitter: bool) -> anyhow::Result<Self> {
        let db = scratch.connect_options();
        let scheduler = pool(&db, POOL_CONNECTIONS).await?;
        // The executor function's sessions (`rara_platform::wiring`): generic plans always.
        let executor_db = rara_store::executor_session(db.clone());
        let mut executor_pools = Vec::new();
        for _ in 0..executors {
            executor_pools.push(pool(&executor_db, POOL_CONNECTIONS).await?);
        }
        let submitter = if with_submitter { Some(pool(&db, 1).await?) } else { None };
        Ok(Pools { scheduler, executors: executor_pools, submitter })
    }

    pub async fn close(&self) {
        self.scheduler.close().await;
        for p in &self.executors {
            p.close().await;
        }
        if let Some(p) = &self.submitter {
            p.close().await;
        }
    }
}
