//! A rerun made from a newer registered version (`rara rerun RUN --from STEP --workflow
//! NAME@VERSION`, docs/src/guide/recover.md): the version's plan is submitted as the new run
//! and the steps the original carries over (those not downstream of STEP) are carried into it.
//! That is sound only when those steps are the same in the version: each must be there under
//! its name with the same operation, version, input and dependencies, and STEP must be there;
//! otherwise the rerun is refused naming the first difference.

use std::collections::{HashMap, HashSet};

use rara_domain::workflow::{Plan, PlannedStep};
use uuid::Uuid;

use super::{NewVersion, Original, Rerun, RerunRequest};
use crate::Error;
use crate::submit::{Origin, submit_in};

/// Makes the rerun of `run_id` from `version` in `tx` (see the module); `steps` are the
/// original's, `again` those that run again.
pub(crate) async fn make(
    tx: &mut sqlx::PgConnection,
    run_id: Uuid,
    steps: &[Original],
    again: &HashSet<Uuid>,
    version: &NewVersion,
    request: &RerunRequest,
) -> Result<Rerun, Error> {
    let carried: Vec<&Original> = steps.iter().filter(|s| !again.contains(&s.id)).collect();
    check(&version.plan, steps, &carried, request.from.as_deref(), version.version)?;
    let mut plan = version.plan.clone();
    plan.idempotency_key = request.idempotency_key.clone();
    let origin = Origin { workflow_version: Some(version.version), schedule: None, run_id: None };
    let submitted = submit_in(&mut *tx, &plan, None, origin).await?;
    let names: Vec<String> = carried.iter().map(|s| s.name.clone()).collect();
    let rerun_names = plan.steps.iter().map(|s| s.name.clone()).filter(|n| !names.contains(n)).collect();
    if submitted.created {
        sqlx::query_file_scalar!("sql/rerun_carry.sql", submitted.run_id, run_id, &names).fetch_one(&mut *tx).await?;
    }
    Ok(Rerun {
        run_id: submitted.run_id,
        created: submitted.created,
        rerun_of: run_id,
        carried: names,
        rerun: rerun_names,
    })
}

/// The first difference between the original's carried steps and the version's, as a refusal.
fn check(
    plan: &Plan,
    steps: &[Original],
    carried: &[&Original],
    from: Option<&str>,
    version: i32,
) -> Result<(), Error> {
    let refused = |why: String| Error::RerunRefused(format!("version {version} cannot be used: {why}"));
    let planned: HashMap<&str, &PlannedStep> = plan.steps.iter().map(|s| (s.name.as_str(), s)).collect();
    if let Some(from) = from.filter(|f| !planned.contains_key(f)) {
        return Err(refused(format!("it has no step {from:?}")));
    }
    let name_of: HashMap<Uuid, &str> = steps.iter().map(|s| (s.id, s.name.as_str())).collect();
    for step in carried {
        let Some(new) = planned.get(step.name.as_str()) else {
            return Err(refused(format!("step {:?} (carried over) is not in it", step.name)));
        };
        let before: HashSet<&str> = step.depends_on.iter().filter_map(|d| name_of.get(d).copied()).collect();
        let after: HashSet<&str> = new.depends_on.iter().map(|&i| plan.steps[i].name.as_str()).collect();
        let difference = if new.operation != step.operation {
            Some(format!("operation {:?}, was {:?}", new.operation, step.operation))
        } else if new.version != step.version {
            Some(format!("version {:?}, was {:?}", new.version, step.version))
        } else if new.input != step.input {
            Some("its input differs".to_owned())
        } else if before != after {
            Some("its dependencies differ".to_owned())
        } else {
            None
        };
        if let Some(difference) = difference {
            return Err(refused(format!("step {:?} (carried over) changed: {difference}", step.name)));
        }
    }
    Ok(())
}
