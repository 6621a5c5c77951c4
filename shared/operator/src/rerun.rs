//! The registered version a rerun is made from (`rara rerun RUN --from STEP --workflow
//! NAME@VERSION`, `POST /api/runs/{id}/rerun` with `"workflow"`): read and planned with the
//! rerun's inputs. The store refuses it unless the steps it carries over are unchanged in it.

use rara_domain::config::Config;
use rara_domain::workflow::{WorkflowDefinition, WorkflowRef};
use rara_store::Store;
use rara_store::rerun::NewVersion;
use serde_json::{Map, Value};

use crate::schedules::InProcess;

/// `workflow` planned with the rerun's `inputs` (the original's with the given ones replaced).
/// A version that is not registered is [`rara_store::Error::DefinitionNotFound`]; one that does
/// not plan with those inputs is refused ([`rara_store::Error::RerunRefused`], every problem).
pub async fn plan_version(
    store: &Store,
    config: &Config,
    in_process: InProcess<'_>,
    inputs: &Map<String, Value>,
    workflow: &WorkflowRef,
) -> Result<NewVersion, rara_store::Error> {
    let found = store.definition(&workflow.name, workflow.version).await?;
    let shown = format!("{}@{}", found.name, found.version);
    let refused = |why: String| rara_store::Error::RerunRefused(format!("{shown} {why}"));
    if inputs.contains_key(rara_domain::stored::KEY) {
        // Planning needs the values; the run keeps only their reference.
        return Err(refused("cannot plan with the run's inputs: they are in the artifact store (by reference)".into()));
    }
    let definition: WorkflowDefinition =
        serde_json::from_value(found.definition).map_err(|e| refused(format!("does not read: {e}")))?;
    let plan = definition
        .plan_for(config, inputs, in_process)
        .map_err(|e| refused(format!("does not plan with the rerun's inputs: {e}")))?;
    Ok(NewVersion { plan, version: found.version })
}
