//! The offloaded outputs and run inputs a claimed batch's pointer references point into, read
//! once each and checked against their digests ([`crate::executor::offload`]); a step whose read
//! fails ends without running.

use std::collections::HashMap;

use rara_domain::references::{self, Reference};
use rara_domain::stored::Descriptor;
use rara_store::claim::ClaimedStep;
use rara_store::references::Upstream;
use uuid::Uuid;

use super::BatchExecutor;
use crate::executor::execution::Execution;

impl BatchExecutor {
    /// Puts into `upstream.loaded` the offloaded outputs that `steps`' `$output` references
    /// with a pointer need; the steps whose read failed end in `ended`.
    pub(super) async fn load_stored(
        &self,
        steps: &[&mut ClaimedStep],
        upstream: &mut Upstream,
        ended: &mut HashMap<Uuid, Execution>,
    ) {
        let mut wanted: HashMap<(Uuid, String), (Descriptor, Vec<Uuid>)> = HashMap::new();
        for step in steps {
            for found in references::scan(&step.input) {
                let Ok(Reference::Output { step: upstream_step, pointer: Some(_) }) = found.reference else { continue };
                let key = (step.run_id, upstream_step.to_owned());
                let Some(descriptor) = upstream.outputs.get(&key).and_then(Descriptor::of) else { continue };
                wanted.entry(key).or_insert_with(|| (descriptor, Vec::new())).1.push(step.holder.step_id);
            }
        }
        if wanted.is_empty() {
            return;
        }
        let bound = self.env.returns.max_output_bytes as u64;
        let upstream_ref = &*upstream;
        let reads = wanted.into_iter().map(|(key, (descriptor, waiting))| async move {
            let home = upstream_ref.home_of(key.0, &key.1);
            let loaded = self.env.artifacts.load(home, &descriptor, bound, "output").await;
            (key, waiting, loaded)
        });
        settle(futures::future::join_all(reads).await, &mut upstream.loaded, ended);
    }
}

impl BatchExecutor {
    /// Puts into `upstream.loaded_inputs` the offloaded run inputs that `steps`' `$input`
    /// references with a pointer, and the expanding `maps`, need (bounded by
    /// `RARA_MAX_INPUT_BYTES`, as they were at submit); the steps whose read failed end in
    /// `ended`.
    pub(super) async fn load_stored_inputs(
        &self,
        steps: &[&mut ClaimedStep],
        maps: &[&ClaimedStep],
        upstream: &mut Upstream,
        ended: &mut HashMap<Uuid, Execution>,
    ) {
        let pointing = |step: &ClaimedStep| {
            references::scan(&step.input)
                .into_iter()
                .any(|found| matches!(found.reference, Ok(Reference::Input { pointer }) if !pointer.is_empty()))
        };
        let expanding = maps.iter().filter(|m| m.map.as_ref().is_some_and(|map| !super::map::gathers(map)));
        let mut wanted: HashMap<Uuid, (Descriptor, Vec<Uuid>)> = HashMap::new();
        for step in steps.iter().map(|s| &**s).filter(|s| pointing(s)).chain(expanding.copied()) {
            let Some(descriptor) = upstream.inputs.get(&step.run_id).and_then(Descriptor::of) else { continue };
            wanted.entry(step.run_id).or_insert_with(|| (descriptor, Vec::new())).1.push(step.holder.step_id);
        }
        let bound = self.max_input_bytes as u64;
        let homes = &upstream.inputs_homes;
        let reads = wanted.into_iter().map(|(run, (descriptor, waiting))| async move {
            let home = homes.get(&run).copied().unwrap_or(run);
            (run, waiting, self.env.artifacts.load(home, &descriptor, bound, "run inputs").await)
        });
        settle(futures::future::join_all(reads).await, &mut upstream.loaded_inputs, ended);
    }
}

/// Each value read into `loaded` under its key; each failed read ends the steps waiting on it.
fn settle<K: std::hash::Hash + Eq>(
    reads: Vec<(K, Vec<Uuid>, Result<serde_json::Value, rara_domain::StepError>)>,
    loaded: &mut HashMap<K, serde_json::Value>,
    ended: &mut HashMap<Uuid, Execution>,
) {
    for (key, waiting, read) in reads {
        match read {
            Ok(value) => {
                loaded.insert(key, value);
            }
            Err(error) => {
                for id in waiting {
                    ended.insert(id, Execution::Failed(error.clone()));
                }
            }
        }
    }
}
