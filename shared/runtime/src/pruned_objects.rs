//! The objects of pruned runs, deleted from the artifact store after their rows (DESIGN.md
//! "Artifacts and large values"): the prune queues each run it deletes (`artifact_deletions`, in
//! the same statement); a pass takes the oldest queued runs, deletes everything under
//! `runs/{run}/` a batch of up to 1000 keys at a time, and drops them from the queue. A run whose
//! objects could not be deleted stays queued with the reason, for the next pass; after a failure
//! that says the store is unreachable, the pass stops (the rest waits too). Row pruning never
//! waits for this: its statement committed first.

use rara_artifacts::{ArtifactStore, Key};
use rara_store::Store;
use serde::Serialize;

/// Queued runs one pass takes.
pub const RUNS_PER_PASS: u32 = 100;

/// What a pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ObjectsPruned {
    /// Runs whose objects are all deleted now.
    pub runs: u64,
    /// Objects deleted.
    pub objects: u64,
    /// Runs whose objects could not be deleted: queued still.
    pub failed: u64,
}

impl std::ops::AddAssign for ObjectsPruned {
    fn add_assign(&mut self, o: ObjectsPruned) {
        self.runs += o.runs;
        self.objects += o.objects;
        self.failed += o.failed;
    }
}

/// One pass over at most `limit` queued runs.
pub async fn delete_pruned(
    store: &Store,
    artifacts: &dyn ArtifactStore,
    limit: u32,
) -> Result<ObjectsPruned, rara_store::Error> {
    let runs = store.artifact_deletions(limit).await?;
    let mut pass = ObjectsPruned::default();
    let (mut done, mut failed, mut why) = (Vec::new(), Vec::new(), String::new());
    for run in runs {
        match artifacts.delete_under(&Key::run(run)).await {
            Ok(objects) => {
                pass.objects += objects;
                done.push(run);
            }
            Err(e) => {
                why = chain(&e);
                tracing::warn!(run_id = %run, error = %why, "could not delete a pruned run's objects; the next prune retries");
                failed.push(run);
                if e.is_transient() {
                    break;
                }
            }
        }
    }
    if !done.is_empty() {
        store.artifact_deletions_done(&done).await?;
    }
    if !failed.is_empty() {
        store.artifact_deletions_failed(&failed, &why).await?;
    }
    pass.runs = done.len() as u64;
    pass.failed = failed.len() as u64;
    Ok(pass)
}

/// The error with its sources, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
