//! The offloaded outputs a claimed batch's pointer references point into, read once each and
//! checked against their digests ([`crate::executor::offload`]); a step whose read fails ends
//! without running.

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
            let loaded = self.env.artifacts.load(home, &descriptor, bound).await;
            (key, waiting, loaded)
        });
        for (key, waiting, loaded) in futures::future::join_all(reads).await {
            match loaded {
                Ok(value) => {
                    upstream.loaded.insert(key, value);
                }
                Err(error) => {
                    for id in waiting {
                        ended.insert(id, Execution::Failed(error.clone()));
                    }
                }
            }
        }
    }
}
