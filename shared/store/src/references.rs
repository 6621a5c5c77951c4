//! Data flow at claim (DESIGN.md "Data flow"): what the references of a claimed batch read
//! (upstream outputs, artifact descriptors, run inputs), in one statement for the whole batch
//! (`sql/references.sql`), and the input each attempt ran with, recorded for the batch in one
//! fenced statement (`sql/attempt_input.sql` + [`fence`](crate::fence)).

use std::collections::{HashMap, HashSet};

use rara_domain::references::{Reference, Sources};
use serde_json::Value;
use uuid::Uuid;

use crate::fence::{columns, per_holder};
use crate::{Error, Holder, Store, sql};

/// What the references of a batch read, gathered from the claimed steps' inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    outputs: HashSet<(Uuid, String)>,
    artifacts: HashSet<(Uuid, String, String)>,
    inputs: HashSet<Uuid>,
}

impl Needs {
    /// What `reference`, in a step of the run `run_id`, reads.
    pub fn add(&mut self, run_id: Uuid, reference: &Reference<'_>) {
        match *reference {
            Reference::Output { step, .. } => {
                self.outputs.insert((run_id, step.to_owned()));
            }
            Reference::Artifact { step, name } => {
                self.artifacts.insert((run_id, step.to_owned(), name.to_owned()));
            }
            Reference::Input { .. } => {
                self.inputs.insert(run_id);
            }
            // A map child's element, substituted when its map was expanded: nothing to read.
            Reference::Item { .. } => {}
        }
    }

    /// The output of the step `step` of the run `run_id` (a map's child, for its gathering).
    pub fn add_output(&mut self, run_id: Uuid, step: String) {
        self.outputs.insert((run_id, step));
    }

    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty() && self.artifacts.is_empty() && self.inputs.is_empty()
    }
}

/// What the store found for [`Needs`]: a step that has not succeeded has no output, a missing
/// artifact no descriptor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Upstream {
    pub outputs: HashMap<(Uuid, String), Value>,
    /// `{"uri", "media_type", "size_bytes", "digest"}`.
    pub artifacts: HashMap<(Uuid, String, String), Value>,
    pub inputs: HashMap<Uuid, Value>,
    /// Offloaded outputs (`{"$stored": …}` in `outputs`) read whole from the artifact store, for
    /// the references that point into them (the runtime reads them; this store never does).
    pub loaded: HashMap<(Uuid, String), Value>,
    /// The run each output was made in, where it is not the step's own run (a step a rerun
    /// carried over): its offloaded output lies under that run's prefix.
    pub homes: HashMap<(Uuid, String), Uuid>,
    /// Offloaded run inputs (`{"$stored": …}` in `inputs`) read whole from the artifact store,
    /// for the `$input` references that point into them.
    pub loaded_inputs: HashMap<Uuid, Value>,
    /// The run whose prefix each run's offloaded inputs lie under, where it is not the run
    /// itself (a rerun keeps the reference of the run it was made from).
    pub inputs_homes: HashMap<Uuid, Uuid>,
}

impl Upstream {
    /// The run the output of `step` of `run_id` was made in (its offloaded output's prefix).
    pub fn home_of(&self, run_id: Uuid, step: &str) -> Uuid {
        self.homes.get(&(run_id, step.to_owned())).copied().unwrap_or(run_id)
    }
}

impl Upstream {
    /// The values the references of a step of the run `run_id` find.
    pub fn of_run(&self, run_id: Uuid) -> RunValues<'_> {
        RunValues { upstream: self, run_id }
    }
}

/// [`Upstream`] as one run's steps see it.
#[derive(Debug, Clone, Copy)]
pub struct RunValues<'a> {
    upstream: &'a Upstream,
    run_id: Uuid,
}

impl Sources for RunValues<'_> {
    fn output(&self, step: &str) -> Option<&Value> {
        self.upstream.outputs.get(&(self.run_id, step.to_owned()))
    }

    fn artifact(&self, step: &str, name: &str) -> Option<&Value> {
        self.upstream.artifacts.get(&(self.run_id, step.to_owned(), name.to_owned()))
    }

    fn inputs(&self) -> Option<&Value> {
        self.upstream.inputs.get(&self.run_id)
    }

    fn loaded(&self, step: &str) -> Option<&Value> {
        self.upstream.loaded.get(&(self.run_id, step.to_owned()))
    }

    fn loaded_inputs(&self) -> Option<&Value> {
        self.upstream.loaded_inputs.get(&self.run_id)
    }
}

impl Store {
    /// Reads everything `needs` names, in one statement.
    pub async fn references(&self, needs: &Needs) -> Result<Upstream, Error> {
        let (output_runs, output_steps): (Vec<Uuid>, Vec<&str>) =
            needs.outputs.iter().map(|(run, step)| (*run, step.as_str())).unzip();
        let mut artifact_runs = Vec::with_capacity(needs.artifacts.len());
        let mut artifact_steps = Vec::with_capacity(needs.artifacts.len());
        let mut artifact_names = Vec::with_capacity(needs.artifacts.len());
        for (run, step, name) in &needs.artifacts {
            artifact_runs.push(*run);
            artifact_steps.push(step.as_str());
            artifact_names.push(name.as_str());
        }
        let runs: Vec<Uuid> = needs.inputs.iter().copied().collect();
        let rows = sqlx::query_file!(
            "sql/references.sql",
            &output_runs,
            &output_steps as &[&str],
            &artifact_runs,
            &artifact_steps as &[&str],
            &artifact_names as &[&str],
            &runs,
        )
        .fetch_all(&self.pool)
        .await?;
        let mut upstream = Upstream::default();
        for row in rows {
            match (row.kind.as_str(), row.step, row.artifact) {
                ("output", Some(step), _) => {
                    if let Some(home) = row.home.filter(|home| *home != row.run_id) {
                        upstream.homes.insert((row.run_id, step.clone()), home);
                    }
                    upstream.outputs.insert((row.run_id, step), row.value);
                }
                ("artifact", Some(step), Some(name)) => {
                    upstream.artifacts.insert((row.run_id, step, name), row.value);
                }
                ("inputs", _, _) => {
                    if let Some(home) = row.home.filter(|home| *home != row.run_id) {
                        upstream.inputs_homes.insert(row.run_id, home);
                    }
                    upstream.inputs.insert(row.run_id, row.value);
                }
                _ => {}
            }
        }
        Ok(upstream)
    }

    /// What each of the map steps `maps` would gather of its children's outputs, in bytes of
    /// JSON text (`sql/gathered_bytes.sql`): measured in Postgres, nothing is read. A map
    /// without a succeeded child is absent.
    pub async fn gathered_bytes(&self, maps: &[Uuid]) -> Result<HashMap<Uuid, u64>, Error> {
        let rows = sqlx::query_file!("sql/gathered_bytes.sql", maps).fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(|row| (row.map_id, u64::try_from(row.bytes).unwrap_or(0))).collect())
    }

    /// Records the input each holder's attempt runs with (references substituted, secret
    /// references kept), in one fenced statement. One result per item, in order; a holder that
    /// lost its lease gets [`Error::LeaseLost`].
    pub async fn record_inputs(&self, items: &[(Holder, Value)]) -> Result<Vec<Result<(), Error>>, Error> {
        let holders: Vec<&Holder> = items.iter().map(|(h, _)| h).collect();
        let held = columns(&holders);
        let inputs: Vec<&Value> = items.iter().map(|(_, input)| input).collect();
        let landed: Vec<Uuid> = sqlx::query_scalar(sql::ATTEMPT_INPUT.as_str())
            .bind(&held.step_ids)
            .bind(&held.workers)
            .bind(&held.fences)
            .bind(&inputs)
            .fetch_all(&self.pool)
            .await?;
        Ok(per_holder(&holders, &landed))
    }
}
