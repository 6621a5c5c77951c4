//! The claim's check of secret grants ([`rara_store::grants`]), just before a step's secret
//! references are resolved: a grant revoked after submit fails the step, and an
//! `http.request` step may send a secret only to a host its grant names. Nothing is
//! resolved, nothing is sent, when the check refuses.
//!
//! The grants come from the store's cache (read at most once per
//! [`GRANTS_CACHE_TTL`](rara_store::grants::GRANTS_CACHE_TTL)) and the run's workflow name once
//! per run: a step without references reads nothing.

use rara_domain::StepError;
use rara_domain::step_error::codes;
use rara_store::Store;
use rara_store::claim::ClaimedStep;
use rara_store::grants::{self, Destination, HTTP_REQUEST, Verdict};
use serde_json::json;

/// `Ok` when every secret reference of `step`'s input is granted for its workflow, its
/// operation and (for `http.request`) its URL's host; else a permanent `SECRET_NOT_GRANTED`
/// naming the secret (a retryable `SECRET_UNAVAILABLE` when the grants cannot be read). A
/// re-attached attempt is not checked again: its values were sent when it started.
pub async fn check(store: &Store, step: &ClaimedStep) -> Result<(), StepError> {
    if step.resume.is_some() {
        return Ok(());
    }
    let references = grants::references(&step.input);
    if references.is_empty() {
        return Ok(());
    }
    let unavailable = |e: rara_store::Error| {
        StepError::retryable(codes::SECRET_UNAVAILABLE, format!("the secret grants could not be read: {e}"))
    };
    let grants = store.cached_secret_grants().await.map_err(unavailable)?;
    let workflow = store.cached_run_name(step.run_id).await.map_err(unavailable)?;
    let host = (step.operation == HTTP_REQUEST).then(|| url_host(&step.input));
    let destination = match &host {
        Some(host) => Destination::Host(host.as_deref()),
        None => Destination::Unchecked,
    };
    for (path, secret) in references {
        let message = match grants::verdict(&grants, secret, &workflow, &step.operation, destination) {
            Verdict::Granted => continue,
            Verdict::NotGranted => format!(
                "secret {secret:?} is not granted to workflow {workflow:?} (operation {:?}); an operator grants it \
                 with: rara secrets grant {secret} --workflow {workflow}",
                step.operation
            ),
            Verdict::HostNotGranted => format!(
                "secret {secret:?} is not granted towards host {}: its grants name other hosts",
                host.flatten().map_or_else(|| "(none)".to_owned(), |h| format!("{h:?}"))
            ),
        };
        return Err(StepError::permanent(codes::SECRET_NOT_GRANTED, message).with_details(json!({
            "secret": secret,
            "path": path,
            "workflow": &*workflow,
            "operation": step.operation,
        })));
    }
    Ok(())
}

/// The host `http.request` would reach first (its `url` parsed as it parses it), lower-case;
/// `None` when the URL is not a string with a host (then no grant naming hosts permits it).
fn url_host(input: &serde_json::Value) -> Option<String> {
    let url = url::Url::parse(input.get("url")?.as_str()?).ok()?;
    Some(url.host_str()?.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_the_one_the_url_parser_reaches() {
        let host = |url: &str| url_host(&json!({ "url": url }));
        assert_eq!(host("https://API.example.com:8443/a?b=c").as_deref(), Some("api.example.com"));
        // WHATWG: a backslash ends the authority of an http URL, as reqwest reads it.
        assert_eq!(host("http://user:pw@a.test\\@b.test/").as_deref(), Some("a.test"));
        assert_eq!(host("http://[::1]:80/").as_deref(), Some("[::1]"));
        assert_eq!(host("http://2130706433/").as_deref(), Some("127.0.0.1"));
        assert_eq!(url_host(&json!({ "url": {"$secret": "u"} })), None);
        assert_eq!(url_host(&json!({})), None);
    }
}
