//! The `api` Lambda: rara's HTTP API and console ([`rara_api`]) behind a function URL or API
//! Gateway, through `lambda_http` (the same router `rara ui` serves).
//!
//! # Layout
//!
//! - `main.rs`: wiring once (the [`Policy`] checked first, then pool, console key), then
//!   `lambda_http::run(router)`.
//! - this file: the auth policy from the environment ([`Policy`]), the console key from its
//!   secret ([`fetch_console_key`]) and the router with the caller's IAM identity ([`router`]).
//!
//! The API refuses to start open: it needs `RARA_API_TOKEN` (a bearer token on every
//! state-changing request, for any front door) or `RARA_API_AUTH=iam`, the declaration that
//! it runs behind a function URL with `AuthType: AWS_IAM` (the template sets it), where IAM
//! admits a caller before rara sees the request. `RARA_API_OPERATORS` then splits IAM callers:
//! every admitted caller reads, only the listed principals change state.
//!
//! Reads need authentication too: IAM admits every caller of the IAM function URL; with a token,
//! a reader sends it, or a session from `POST /api/login`'s one-time URL (the session cookie is
//! `Secure`: the function is reached over https). The `Host` is not checked (a function URL's
//! host is its own) unless `RARA_API_HOSTS` names the hosts to answer to.
//!
//! Pages render without the live script ([`rara_api::Updates::Static`]): a buffered function
//! URL would hold an invocation per open tab until the timeout (docs: internals/api-console.md).

use axum::extract::Request;
use lambda_http::request::RequestContext;
use rara_api::{Api, Auth, Caller, ConsoleKey, Hosts, Updates};
use rara_platform::aws::SecretTextError;

/// The bearer token state-changing requests must carry, when set.
pub const TOKEN_VAR: &str = "RARA_API_TOKEN";
/// `iam`: the function runs behind an IAM function URL, so it may start without a token.
pub const AUTH_VAR: &str = "RARA_API_AUTH";
/// Comma-separated IAM principal ARNs that may change state (empty: every IAM caller may).
pub const OPERATORS_VAR: &str = "RARA_API_OPERATORS";
/// Comma-separated host names (`NAME` or `NAME:PORT`) the API answers to; unset: any.
pub const HOSTS_VAR: &str = "RARA_API_HOSTS";
/// The secret whose value every console key is derived from (the same on every instance).
pub const CONSOLE_KEY_SECRET_VAR: &str = "RARA_CONSOLE_KEY_SECRET_ARN";
/// The console key's material given directly (local runs); the secret wins when both are set.
pub const CSRF_KEY_VAR: &str = "RARA_CSRF_KEY";
/// The shortest console key material accepted (the template generates 64 characters).
pub const MIN_KEY_CHARS: usize = 32;

/// Why the API does not start. No variant holds a token or a key.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "refusing to start open: set {TOKEN_VAR} (a bearer token on every state-changing request), \
         or {AUTH_VAR}=iam when the function runs behind a function URL with AuthType AWS_IAM"
    )]
    Open,
    #[error("{AUTH_VAR} is `{0}`; its one value is `iam` (behind a function URL with AuthType AWS_IAM)")]
    UnknownAuth(String),
    #[error("{OPERATORS_VAR} names operators, but only IAM callers have an identity: set {AUTH_VAR}=iam")]
    OperatorsWithoutIam,
    #[error("{OPERATORS_VAR}: `{0}` is not an IAM principal ARN (arn:PARTITION:iam::ACCOUNT:role/NAME or user/NAME)")]
    Operator(String),
    #[error("cannot fetch the console key secret {arn}: {detail}")]
    Fetch { arn: String, detail: String },
    #[error("the console key secret {arn} has no SecretString")]
    NotText { arn: String },
    #[error("the console key secret {arn} is shorter than {MIN_KEY_CHARS} characters")]
    TooShort { arn: String },
}

/// Where the console key comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The secret of this ARN ([`fetch_console_key`]).
    Secret(String),
    /// `RARA_CSRF_KEY`.
    Value(String),
    /// Nothing configured: each instance draws its own (forms work only on the instance that
    /// rendered them).
    Random,
}

impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Secret(arn) => f.debug_tuple("Secret").field(arn).finish(),
            KeySource::Value(_) => f.write_str("Value(<redacted>)"),
            KeySource::Random => f.write_str("Random"),
        }
    }
}

/// The auth policy the environment asks for, validated before anything connects.
#[derive(Clone)]
pub struct Policy {
    token: Option<String>,
    operators: Option<Vec<String>>,
    hosts: Vec<String>,
    pub key: KeySource,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("operators", &self.operators)
            .field("hosts", &self.hosts)
            .field("key", &self.key)
            .finish()
    }
}

impl Policy {
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let var = |k: &str| lookup(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let iam = match var(AUTH_VAR).as_deref() {
            None => false,
            Some("iam") => true,
            Some(other) => return Err(Error::UnknownAuth(other.to_owned())),
        };
        let token = var(TOKEN_VAR);
        if token.is_none() && !iam {
            return Err(Error::Open);
        }
        let operators = match var(OPERATORS_VAR) {
            None => None,
            Some(_) if !iam => return Err(Error::OperatorsWithoutIam),
            Some(list) => Some(operators(&list)?),
        };
        let key = match (var(CONSOLE_KEY_SECRET_VAR), var(CSRF_KEY_VAR)) {
            (Some(arn), _) => KeySource::Secret(arn),
            (None, Some(value)) => KeySource::Value(value),
            (None, None) => KeySource::Random,
        };
        let hosts = var(HOSTS_VAR)
            .map(|list| list.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default();
        Ok(Policy { token, operators, hosts, key })
    }

    /// The [`Auth`] of this policy with the console's `key`: reads need authentication, and
    /// the session cookie is `Secure`.
    pub fn auth(&self, key: &ConsoleKey) -> Auth {
        let auth = match &self.token {
            Some(token) => Auth::with_token(token.clone()).with_console_key(key),
            None => Auth::iam(key),
        };
        let auth = auth.with_read_auth(true).with_secure_cookies();
        match &self.operators {
            Some(operators) => auth.with_operators(operators.clone()),
            None => auth,
        }
    }

    /// The hosts the API answers to: `RARA_API_HOSTS`, or any.
    pub fn hosts(&self) -> Hosts {
        Hosts::named(&self.hosts)
    }
}

fn operators(list: &str) -> Result<Vec<String>, Error> {
    list.split(',')
        .map(str::trim)
        .filter(|arn| !arn.is_empty())
        .map(|arn| {
            let iam = arn.starts_with("arn:") && arn.split(':').nth(2) == Some("iam");
            let principal = arn.split(':').nth(5).is_some_and(|r| r.starts_with("role/") || r.starts_with("user/"));
            if iam && principal { Ok(arn.to_owned()) } else { Err(Error::Operator(arn.to_owned())) }
        })
        .collect()
}

/// The console key from the secret `arn`, fetched once at start (its value never leaves the
/// key: no log line, no error carries it).
pub async fn fetch_console_key(client: &aws_sdk_secretsmanager::Client, arn: &str) -> Result<ConsoleKey, Error> {
    let value = rara_platform::aws::secret_text(client, arn, "Ref:ConsoleKeySecret").await.map_err(|e| match e {
        SecretTextError::Fetch { arn, detail } => Error::Fetch { arn, detail },
        SecretTextError::NotText { arn } => Error::NotText { arn },
    })?;
    if value.chars().count() < MIN_KEY_CHARS {
        return Err(Error::TooShort { arn: arn.to_owned() });
    }
    Ok(ConsoleKey::new(value.as_bytes()))
}

/// The router of `api` with pages for Lambda ([`Updates::Static`]) and the caller's IAM
/// identity put where [`rara_api::auth`] reads it.
pub fn router(api: Api) -> axum::Router {
    api.with_updates(Updates::Static).router().layer(axum::middleware::map_request(identify))
}

/// Puts the IAM caller the function URL admitted (`requestContext.authorizer.iam.userArn`)
/// in the request's extensions as a [`Caller`]; a request without one has none.
async fn identify(mut request: Request) -> Request {
    let arn = match request.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(context)) => {
            context.authorizer.as_ref().and_then(|a| a.iam.as_ref()).and_then(|iam| iam.user_arn.clone())
        }
        _ => None,
    };
    request.extensions_mut().remove::<Caller>();
    if let Some(arn) = arn {
        request.extensions_mut().insert(Caller { arn });
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(vars: &[(&str, &str)]) -> Result<Policy, Error> {
        Policy::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()))
    }

    #[test]
    fn without_a_token_or_iam_the_api_refuses_to_start_naming_both() {
        let message = policy(&[]).unwrap_err().to_string();
        assert!(message.contains(TOKEN_VAR) && message.contains(&format!("{AUTH_VAR}=iam")), "{message}");
        assert!(matches!(policy(&[(TOKEN_VAR, " ")]), Err(Error::Open)), "a blank token is no token");
        assert!(matches!(policy(&[(AUTH_VAR, "none")]), Err(Error::UnknownAuth(_))));
        assert!(policy(&[(TOKEN_VAR, "t")]).is_ok());
        assert!(policy(&[(AUTH_VAR, "iam")]).is_ok());
    }

    #[test]
    fn operators_need_iam_and_must_be_iam_principals() {
        let role = "arn:aws:iam::123456789012:role/Operator";
        assert!(matches!(policy(&[(TOKEN_VAR, "t"), (OPERATORS_VAR, role)]), Err(Error::OperatorsWithoutIam)));
        assert!(matches!(policy(&[(AUTH_VAR, "iam"), (OPERATORS_VAR, "operator")]), Err(Error::Operator(_))));
        let ok = policy(&[(AUTH_VAR, "iam"), (OPERATORS_VAR, &format!("{role}, arn:aws:iam::1:user/u"))]).unwrap();
        assert_eq!(ok.operators.as_deref().map(<[String]>::len), Some(2));
    }

    #[test]
    fn the_secret_wins_over_the_local_key_and_neither_shows_in_debug() {
        let both = policy(&[(AUTH_VAR, "iam"), (CONSOLE_KEY_SECRET_VAR, "arn:s"), (CSRF_KEY_VAR, "hunter2")]).unwrap();
        assert_eq!(both.key, KeySource::Secret("arn:s".into()));
        let local = policy(&[(AUTH_VAR, "iam"), (CSRF_KEY_VAR, "hunter2"), (TOKEN_VAR, "tok3n")]).unwrap();
        let shown = format!("{local:?}");
        assert!(!shown.contains("hunter2") && !shown.contains("tok3n"), "{shown}");
    }

    #[test]
    fn hosts_are_checked_only_when_named_and_reads_need_authentication() {
        let any = policy(&[(AUTH_VAR, "iam")]).unwrap();
        assert_eq!(any.hosts(), Hosts::Any, "a function URL's host varies");
        let named = policy(&[(TOKEN_VAR, "t"), (HOSTS_VAR, "rara.example.com, ops.example.com:8443")]).unwrap();
        assert!(named.hosts().allows("rara.example.com") && !named.hosts().allows("evil.example"));
        let auth = named.auth(&ConsoleKey::random());
        assert!(auth.reads_need_auth() && auth.secure_cookies());
    }
}
