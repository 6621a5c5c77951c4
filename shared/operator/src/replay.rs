//! Bulk replay (`rara replay`, `POST /api/bulk/replay`; docs/src/guide/recover.md): one new
//! run per finished run a filter matches, with the same inputs, or with `from_failed` a rerun
//! from each run's first failed step. Idempotent: a replay carries the key `replay:<original>`,
//! so replaying a run twice, in one call or two, makes one replay. A call takes at most
//! [`MAX_REPLAYS`] runs (more is refused whole, with the count, before anything is made);
//! each replay is one transaction of its own.

use rara_store::Store;
use rara_store::browse::RunFilter;
use rara_store::rerun::{RerunRequest, replay_key};
use uuid::Uuid;

use crate::bulk::Error;

/// The most runs one replay call takes.
pub const MAX_REPLAYS: usize = 1_000;

/// What a replay did (or, for a dry run, would do).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// Finished runs the filter matched.
    pub matched: u64,
    /// Of those, replayed before (their replay exists: nothing is made for them).
    pub already: u64,
    /// Replays made now (0 for a dry run).
    pub made: u64,
    /// With `from_failed`: runs with no failed step, left alone.
    pub nothing_failed: u64,
    /// Runs whose replay was refused, each with why.
    pub refused: Vec<(Uuid, String)>,
    /// The replays made now: (original, new run).
    pub runs: Vec<(Uuid, Uuid)>,
}

/// Replays the finished runs `filter` matches (see the module); counts only when `dry_run`.
pub async fn replay(store: &Store, filter: &RunFilter, from_failed: bool, dry_run: bool) -> Result<Replayed, Error> {
    let candidates = store.replay_candidates(filter, MAX_REPLAYS as u32 + 1).await?;
    if candidates.len() > MAX_REPLAYS {
        return Err(Error::TooMany { action: "replay", what: "runs", matched: candidates.len(), limit: MAX_REPLAYS });
    }
    let mut done = Replayed { matched: candidates.len() as u64, ..Replayed::default() };
    for candidate in candidates {
        if candidate.replayed {
            done.already += 1;
            continue;
        }
        let from = match (from_failed, candidate.first_failed) {
            (false, _) => None,
            (true, Some(step)) => Some(step),
            (true, None) => {
                done.nothing_failed += 1;
                continue;
            }
        };
        if dry_run {
            continue;
        }
        let request = RerunRequest {
            version: None,
            from,
            idempotency_key: Some(replay_key(candidate.run_id)),
            inputs: serde_json::Map::new(),
            force: false,
        };
        match store.rerun(candidate.run_id, &request).await {
            Ok(made) if made.created => {
                done.made += 1;
                done.runs.push((candidate.run_id, made.run_id));
            }
            // Made by a call running beside this one.
            Ok(_) => done.already += 1,
            Err(rara_store::Error::RerunRefused(why)) => done.refused.push((candidate.run_id, why)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}
