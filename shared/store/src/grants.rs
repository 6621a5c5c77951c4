//! Secret grants (DESIGN.md "Trust boundaries"): a `{"$secret": name}` reference resolves only
//! when a grant of `secret_grants` permits it for the step's workflow and operation, and, for
//! an `http.request` step when the grant names hosts, only towards one of those hosts.
//!
//! Submit reads the grants in its transaction and refuses an ungranted reference with its
//! field path ([`check_plan`], [`Error::SecretNotGranted`]); the executor checks again at
//! claim (a grant may be revoked after submit), from grants cached for [`GRANTS_CACHE_TTL`]
//! and run names cached per run ([`Store::cached_secret_grants`], [`Store::cached_run_name`]):
//! no query per step.
//!
//! A pattern is matched whole, `*` standing for any run of characters (`payments/*`,
//! `nightly-*`, `*.example.com`); without `*` it is the name itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rara_domain::secret_material::{self, Reference};
use rara_domain::workflow::Plan;
use serde_json::Value;
use sqlx::Row;
use uuid::Uuid;

use crate::{Error, Store, sql};

/// How long the executor reuses the grants it read: a revoked grant stops new claims within it.
pub const GRANTS_CACHE_TTL: Duration = Duration::from_secs(5);
/// Run names kept by the executor's cache before it starts over (names never change).
const RUN_NAMES_KEPT: usize = 10_000;
/// The operation whose destination a grant's hosts restrict.
pub const HTTP_REQUEST: &str = "http.request";

/// One grant: which secrets, to which workflows and operations, towards which hosts.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    pub id: i64,
    /// A secret name or pattern.
    pub secret: String,
    /// A workflow (run name) pattern; `*` for any.
    pub workflow: String,
    /// An operation pattern; `*` for any.
    pub operation: String,
    /// The hosts an `http.request` may send the secret to (patterns); `None`: any host.
    pub hosts: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
}

/// Where a resolved secret would go: known only at claim, for an `http.request` step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination<'a> {
    /// Not checked: submit (the URL may come from a reference), or another operation.
    Unchecked,
    /// An `http.request` to this host (`None`: its URL has no host that can be checked).
    Host(Option<&'a str>),
}

/// What the grants say about one reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Granted,
    /// No grant covers the secret for this workflow and operation.
    NotGranted,
    /// Grants cover it, but none towards this host.
    HostNotGranted,
}

impl Grant {
    /// Whether the grant covers `secret` for `workflow` and `operation`.
    pub fn covers(&self, secret: &str, workflow: &str, operation: &str) -> bool {
        matches(&self.secret, secret) && matches(&self.workflow, workflow) && matches(&self.operation, operation)
    }

    fn sends_to(&self, destination: Destination<'_>) -> bool {
        match (destination, &self.hosts) {
            (Destination::Unchecked, _) | (_, None) => true,
            (Destination::Host(None), Some(_)) => false,
            (Destination::Host(Some(host)), Some(hosts)) => {
                let host = host.to_ascii_lowercase();
                hosts.iter().any(|pattern| matches(&pattern.to_ascii_lowercase(), &host))
            }
        }
    }
}

/// The verdict of `grants` on `secret` used by a step of `workflow` running `operation`,
/// sending it to `destination`.
pub fn verdict(
    grants: &[Grant],
    secret: &str,
    workflow: &str,
    operation: &str,
    destination: Destination<'_>,
) -> Verdict {
    let mut covered = grants.iter().filter(|g| g.covers(secret, workflow, operation)).peekable();
    if covered.peek().is_none() {
        return Verdict::NotGranted;
    }
    if covered.any(|g| g.sends_to(destination)) { Verdict::Granted } else { Verdict::HostNotGranted }
}

/// Whether `text` matches `pattern` whole, `*` matching any run of characters.
pub fn matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Every well-formed `{"$secret": name}` of `input` with its path (`headers.authorization`,
/// `items[2]`), in document order.
pub fn references(input: &Value) -> Vec<(String, &str)> {
    fn walk<'a>(value: &'a Value, path: &mut String, found: &mut Vec<(String, &'a str)>) {
        match (secret_material::reference(value), value) {
            (Some(Reference::Name(name)), _) => found.push((path.clone(), name)),
            (Some(Reference::Malformed), _) => {}
            (None, Value::Object(object)) => {
                for (key, v) in object {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                    walk(v, path, found);
                    path.truncate(len);
                }
            }
            (None, Value::Array(items)) => {
                for (i, v) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    walk(v, path, found);
                    path.truncate(len);
                }
            }
            (None, _) => {}
        }
    }
    let mut found = Vec::new();
    walk(input, &mut String::new(), &mut found);
    found
}

/// Submit's check: every reference of every step granted for the plan's workflow and the
/// step's operation, else [`Error::SecretNotGranted`] naming the first one's field path.
pub fn check_plan(grants: &[Grant], plan: &Plan) -> Result<(), Error> {
    for (i, step) in plan.steps.iter().enumerate() {
        for (path, secret) in references(&step.input) {
            if verdict(grants, secret, &plan.name, &step.operation, Destination::Unchecked) != Verdict::Granted {
                let dot = if path.is_empty() { "" } else { "." };
                return Err(Error::SecretNotGranted {
                    path: format!("steps[{i}].input{dot}{path}"),
                    secret: secret.to_owned(),
                    workflow: plan.name.clone(),
                    operation: step.operation.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Whether any step of `plan` references a secret (only then does submit read the grants).
pub fn plan_references_secrets(plan: &Plan) -> bool {
    plan.steps.iter().any(|s| secret_material::has_reference(&s.input))
}

/// The executor's cache of grants and run names (shared by a store's clones).
#[derive(Debug, Default)]
pub struct GrantCache {
    grants: Mutex<Option<(Instant, Arc<[Grant]>)>>,
    run_names: Mutex<HashMap<Uuid, Arc<str>>>,
}

fn grant_from(row: sqlx::postgres::PgRow) -> Result<Grant, sqlx::Error> {
    Ok(Grant {
        id: row.try_get("id")?,
        secret: row.try_get("secret")?,
        workflow: row.try_get("workflow")?,
        operation: row.try_get("operation")?,
        hosts: row.try_get("hosts")?,
        created_at: row.try_get("created_at")?,
    })
}

impl Store {
    /// Grants `secret` (a name or pattern) to the `workflow` and `operation` patterns,
    /// towards `hosts` only when given; granting the same scope again replaces its hosts.
    pub async fn grant_secret(
        &self,
        secret: &str,
        workflow: &str,
        operation: &str,
        hosts: Option<&[String]>,
    ) -> Result<Grant, Error> {
        let hosts: Option<Vec<String>> = hosts.map(|h| h.iter().map(|h| h.to_ascii_lowercase()).collect());
        let row = sqlx::query(sql::GRANT_SECRET)
            .bind(secret)
            .bind(workflow)
            .bind(operation)
            .bind(hosts)
            .fetch_one(&self.pool)
            .await?;
        Ok(grant_from(row)?)
    }

    /// Revokes the grant of exactly this scope; `false` when there was none.
    pub async fn revoke_secret(&self, secret: &str, workflow: &str, operation: &str) -> Result<bool, Error> {
        let row = sqlx::query(sql::REVOKE_SECRET)
            .bind(secret)
            .bind(workflow)
            .bind(operation)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// Every grant, oldest first.
    pub async fn secret_grants(&self) -> Result<Vec<Grant>, Error> {
        read_grants(&self.pool).await
    }

    /// The grants, read at most once per [`GRANTS_CACHE_TTL`].
    pub async fn cached_secret_grants(&self) -> Result<Arc<[Grant]>, Error> {
        {
            let cached = self.grants.grants.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, grants)) = cached.as_ref()
                && at.elapsed() < GRANTS_CACHE_TTL
            {
                return Ok(grants.clone());
            }
        }
        let grants: Arc<[Grant]> = self.secret_grants().await?.into();
        *self.grants.grants.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), grants.clone()));
        Ok(grants)
    }

    /// The workflow name of run `run_id`, read once per run.
    pub async fn cached_run_name(&self, run_id: Uuid) -> Result<Arc<str>, Error> {
        if let Some(name) = self.grants.run_names.lock().unwrap_or_else(|p| p.into_inner()).get(&run_id) {
            return Ok(name.clone());
        }
        let row = sqlx::query(sql::RUN_NAME).bind(run_id).fetch_optional(&self.pool).await?;
        let name: Arc<str> = match row {
            Some(row) => row.try_get::<String, _>("name")?.into(),
            None => return Err(Error::RunNotFound(run_id)),
        };
        let mut names = self.grants.run_names.lock().unwrap_or_else(|p| p.into_inner());
        if names.len() >= RUN_NAMES_KEPT {
            names.clear();
        }
        names.insert(run_id, name.clone());
        Ok(name)
    }
}

/// Every grant, through `executor` (the pool, or submit's transaction).
pub(crate) async fn read_grants<'c>(executor: impl sqlx::PgExecutor<'c>) -> Result<Vec<Grant>, Error> {
    let rows = sqlx::query(sql::SECRET_GRANTS).fetch_all(executor).await?;
    Ok(rows.into_iter().map(grant_from).collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grant(secret: &str, workflow: &str, operation: &str, hosts: Option<&[&str]>) -> Grant {
        Grant {
            id: 1,
            secret: secret.into(),
            workflow: workflow.into(),
            operation: operation.into(),
            hosts: hosts.map(|h| h.iter().map(|s| s.to_string()).collect()),
            created_at: Utc::now(),
        }
    }

    #[test]
    fn patterns_match_whole_with_stars_for_any_run() {
        for (pattern, text) in
            [("api", "api"), ("pay/*", "pay/x"), ("*", ""), ("a*c", "abbc"), ("*.ex.com", "a.ex.com")]
        {
            assert!(matches(pattern, text), "{pattern} {text}");
        }
        for (pattern, text) in
            [("api", "api2"), ("api", "ap"), ("pay/*", "pays/x"), ("a*c", "ab"), ("*.ex.com", "ex.com")]
        {
            assert!(!matches(pattern, text), "{pattern} {text}");
        }
        assert!(!matches("ab*ba", "aba"), "a star never lets the ends overlap");
    }

    #[test]
    fn a_reference_is_granted_by_workflow_operation_and_host() {
        let grants =
            [grant("api", "billing-*", "*", None), grant("hook", "*", HTTP_REQUEST, Some(&["hooks.example.com"]))];
        let v = |secret, workflow, operation, dest| verdict(&grants, secret, workflow, operation, dest);
        assert_eq!(v("api", "billing-daily", "noop", Destination::Unchecked), Verdict::Granted);
        assert_eq!(v("api", "other", "noop", Destination::Unchecked), Verdict::NotGranted);
        assert_eq!(v("db", "billing-daily", "noop", Destination::Unchecked), Verdict::NotGranted);
        assert_eq!(v("hook", "any", HTTP_REQUEST, Destination::Host(Some("Hooks.Example.com"))), Verdict::Granted);
        assert_eq!(v("hook", "any", HTTP_REQUEST, Destination::Host(Some("evil.test"))), Verdict::HostNotGranted);
        assert_eq!(v("hook", "any", HTTP_REQUEST, Destination::Host(None)), Verdict::HostNotGranted);
        assert_eq!(v("hook", "any", "remote.op", Destination::Unchecked), Verdict::NotGranted);
    }

    #[test]
    fn references_carry_their_paths() {
        let input =
            json!({"headers": {"authorization": {"$secret": "api"}}, "x": [1, {"$secret": "db"}], "m": {"$secret": 1}});
        let found = references(&input);
        assert_eq!(found, vec![("headers.authorization".to_owned(), "api"), ("x[1]".to_owned(), "db")]);
        assert_eq!(references(&json!({"$secret": "top"})), vec![(String::new(), "top")]);
    }
}
