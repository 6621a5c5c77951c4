//! Fan-out (DESIGN.md "Data flow"): a map step's first claim expands it into one child step
//! per element of its list, in one fenced statement for the whole batch (`sql/expand.sql` +
//! [`fence`](crate::fence)). Its second claim, once every child succeeded, gathers their
//! outputs like any references ([`child_name`] names the children it reads).
//!
//! An expansion is bounded where it enters the store, whatever the caller checked: a map of
//! more than [`MAX_MAP_ITEMS`] children, or one that would take its run past
//! [`MAX_RUN_STEPS`] steps in all (maps inside maps' runs included), fails the map step for
//! good (`INVALID_INPUT`, naming the count and the bound) and creates no child.

use std::collections::HashMap;

use rara_domain::StepError;
use rara_domain::step_error::codes;
use rara_domain::workflow::{MAX_MAP_ITEMS, MAX_RUN_STEPS};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::fence::{columns, per_holder};
use crate::outcome::fail_held;
use crate::{DUE_CHANNEL, Error, Holder, Store, sql};

/// One map step to expand: its holder and its children's inputs, in element order (the map's
/// input substituted whole, `$item` by its element).
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    pub holder: Holder,
    /// The map step's name (its children's are [`child_name`]s).
    pub name: String,
    pub children: Vec<serde_json::Value>,
}

/// The name of the map step `map`'s child `index`: `map[index]`. Step names cannot hold
/// brackets, so it is never a defined step's.
pub fn child_name(map: &str, index: u32) -> String {
    format!("{map}[{index}]")
}

impl Store {
    /// Expands map steps in one fenced statement: their children are created (due at once, or
    /// behind the child `max_concurrency` places earlier), and each map step waits on them.
    /// Listening schedulers are woken. One result per item, in order; a holder that lost its
    /// lease gets [`Error::LeaseLost`] and nothing of it is written. A map over its bounds (see
    /// the module) is failed instead, and its result is `Ok`: its outcome is recorded.
    ///
    /// In one transaction: the map steps are locked, then their runs (the order every
    /// statement that finishes steps takes), so that two expansions of one run count each
    /// other's children against [`MAX_RUN_STEPS`].
    pub async fn expand(&self, items: &[Expansion]) -> Result<Vec<Result<(), Error>>, Error> {
        let mut tx = self.pool.begin().await?;
        let refused = refusals(&mut tx, items).await?;
        let (over, within): (Vec<usize>, Vec<usize>) = (0..items.len()).partition(|i| refused.contains_key(i));
        let failed = fail_over_bounds(&mut tx, items, &over, &refused).await?;
        let expanded = expand_within(&mut tx, &within.iter().map(|&i| &items[i]).collect::<Vec<_>>()).await?;
        tx.commit().await?;
        let mut results: Vec<Option<Result<(), Error>>> = (0..items.len()).map(|_| None).collect();
        for (i, result) in over.into_iter().zip(failed).chain(within.into_iter().zip(expanded)) {
            results[i] = Some(result);
        }
        Ok(results.into_iter().flatten().collect())
    }
}

/// The items over a bound, each with the error its map step fails with: more children than
/// [`MAX_MAP_ITEMS`], or its run's steps (as they are, and with the items before it in the
/// batch) past [`MAX_RUN_STEPS`].
async fn refusals(tx: &mut PgConnection, items: &[Expansion]) -> Result<HashMap<usize, StepError>, Error> {
    let ids: Vec<Uuid> = items.iter().map(|e| e.holder.step_id).collect();
    let maps: Vec<(Uuid, Uuid)> =
        sqlx::query_as("SELECT id, run_id FROM steps WHERE id = ANY($1) ORDER BY id FOR UPDATE")
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
    let runs: Vec<Uuid> = maps.iter().map(|(_, run)| *run).collect();
    let mut totals: HashMap<Uuid, i64> = sqlx::query_as::<_, (Uuid, i64)>(
        "SELECT id, steps_total::bigint FROM workflow_runs WHERE id = ANY($1) ORDER BY id FOR UPDATE",
    )
    .bind(&runs)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .collect();
    let run_of: HashMap<Uuid, Uuid> = maps.into_iter().collect();
    let mut refused = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let n = item.children.len();
        let Some(total) = run_of.get(&item.holder.step_id).and_then(|run| totals.get_mut(run)) else { continue };
        let error = if n > MAX_MAP_ITEMS {
            format!("for_each found {n} elements; a map runs over at most {MAX_MAP_ITEMS}")
        } else if *total + n as i64 > MAX_RUN_STEPS as i64 {
            format!(
                "{n} children would take the run to {} steps; a run holds at most {MAX_RUN_STEPS}",
                *total + n as i64
            )
        } else {
            *total += n as i64;
            continue;
        };
        let details = serde_json::json!({"children": n, "run_steps": *total, "max_map_items": MAX_MAP_ITEMS, "max_run_steps": MAX_RUN_STEPS});
        refused.insert(i, StepError::permanent(codes::INVALID_INPUT, error).with_details(details));
    }
    Ok(refused)
}

/// Fails the map steps `over` with their errors (`sql/fail_targets.sql`, fenced).
async fn fail_over_bounds(
    tx: &mut PgConnection,
    items: &[Expansion],
    over: &[usize],
    refused: &HashMap<usize, StepError>,
) -> Result<Vec<Result<(), Error>>, Error> {
    if over.is_empty() {
        return Ok(Vec::new());
    }
    let holders: Vec<&Holder> = over.iter().map(|&i| &items[i].holder).collect();
    for (holder, i) in holders.iter().zip(over) {
        tracing::warn!(step_id = %holder.step_id, children = items[*i].children.len(), "a map over its bounds fails without children");
    }
    let errors: Vec<serde_json::Value> = over.iter().filter_map(|i| refused.get(i)).map(StepError::to_json).collect();
    fail_held(&mut *tx, &holders, &errors).await
}

/// Expands `items` in one fenced statement (`sql/expand.sql`).
async fn expand_within(tx: &mut PgConnection, items: &[&Expansion]) -> Result<Vec<Result<(), Error>>, Error> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let holders: Vec<&Holder> = items.iter().map(|e| &e.holder).collect();
    let held = columns(&holders);
    let sizes: Vec<i32> = items.iter().map(|e| e.children.len().min(i32::MAX as usize) as i32).collect();
    let count = items.iter().map(|e| e.children.len()).sum();
    let mut parents = Vec::with_capacity(count);
    let mut ids = Vec::with_capacity(count);
    let mut indices = Vec::with_capacity(count);
    let mut names = Vec::with_capacity(count);
    let mut inputs = Vec::with_capacity(count);
    for item in items {
        for (i, input) in item.children.iter().enumerate() {
            parents.push(item.holder.step_id);
            ids.push(Uuid::now_v7());
            indices.push(i as i32);
            names.push(child_name(&item.name, i as u32));
            inputs.push(input);
        }
    }
    let landed: Vec<Uuid> = sqlx::query_scalar(sql::EXPAND.as_str())
        .bind(&held.step_ids)
        .bind(&held.workers)
        .bind(&held.fences)
        .bind(&sizes)
        .bind(&parents)
        .bind(&ids)
        .bind(&indices)
        .bind(&names)
        .bind(&inputs)
        .bind(DUE_CHANNEL)
        .fetch_all(&mut *tx)
        .await?;
    Ok(per_holder(&holders, &landed))
}
