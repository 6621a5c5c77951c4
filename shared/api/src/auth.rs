//! Who may read and who may change state. Locally (`rara ui`) a random token, printed at start,
//! is required on every state-changing request: `Authorization: Bearer <token>` for the API; for
//! the console, a session cookie ([`session`]: its own signed value with an expiry, never the
//! token) started by opening the printed one-time login URL (`/login?code=…`; `POST /api/login`
//! with the token issues another), plus a CSRF token in every form. Reads need the session or the
//! token when [`Auth::with_read_auth`] says so (`rara ui` off loopback, or `--read-auth`);
//! otherwise an anonymous reader reads, without fences and lease data and without live updates
//! ([`Reader`]). In AWS the function URL's IAM auth admits callers before rara sees them, and
//! [`Auth::iam`] requires no token (forms still carry the CSRF token); with
//! [`Auth::with_operators`] only the listed IAM principals may change state ([`Caller`]).
//!
//! Every key of the console is derived from one [`ConsoleKey`] with its own purpose
//! (HMAC-SHA256 of the purpose under the key material), so the instances that share the
//! material (the template's secret) share the keys, and one key reveals nothing of another.
//! Every secret is compared in constant time.

pub mod session;

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use chrono::{DateTime, TimeDelta, Utc};
use hmac::{Hmac, Mac};
use rand::RngCore;
use session::{SESSION_LIFETIME, Sessions};
use sha2::Sha256;

use crate::{Api, Error};

/// The name of the console's session cookie.
pub const SESSION_COOKIE: &str = "rara_session";

/// The purpose the CSRF key is derived for ([`ConsoleKey::derive`]).
pub const CSRF_PURPOSE: &str = "rara console csrf v1";

/// The key material every console key is derived from. `Debug` never shows it.
#[derive(Clone)]
pub struct ConsoleKey(Vec<u8>);

impl ConsoleKey {
    pub fn new(material: impl Into<Vec<u8>>) -> Self {
        ConsoleKey(material.into())
    }

    /// Fresh random material: the keys of this instance alone.
    pub fn random() -> Self {
        let mut bytes = vec![0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        ConsoleKey(bytes)
    }

    /// The key of `purpose`: HMAC-SHA256(material, purpose).
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
        let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(&self.0) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts keys of every length"),
        };
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }
}

impl std::fmt::Debug for ConsoleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsoleKey(<redacted>)")
    }
}

/// The IAM identity the function URL admitted (`requestContext.authorizer.iam.userArn`),
/// put in the request's extensions by the Lambda adapter (`functions/api`); never read from a
/// header a caller could write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub arn: String,
}

/// What a request presents: its headers (bearer token, session cookie) and the IAM [`Caller`]
/// the adapter put in its extensions. Extracting it never fails.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub headers: HeaderMap,
    pub caller: Option<Caller>,
}

impl<S: Send + Sync> FromRequestParts<S> for Credentials {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Credentials { headers: parts.headers.clone(), caller: parts.extensions.get::<Caller>().cloned() })
    }
}

/// The token policy of one server.
#[derive(Clone)]
pub struct Auth {
    /// `None`: callers were authenticated before the request reached rara (IAM).
    token: Option<String>,
    /// The CSRF token every form carries, derived from the console key.
    csrf: String,
    /// The session and login keys, derived from the console key.
    sessions: Sessions,
    /// `Some`: only these IAM principals may change state (reads stay open).
    operators: Option<Vec<String>>,
    /// Reads need the session or the token.
    read_auth: bool,
    /// The session cookie is `Secure` (the server is reached over https).
    secure: bool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("operators", &self.operators)
            .field("read_auth", &self.read_auth)
            .finish_non_exhaustive()
    }
}

impl Auth {
    /// A fresh random token (what `rara ui` prints).
    pub fn random() -> Self {
        Self::with_token(random_hex())
    }

    /// The token is required, and is the console key's material.
    pub fn with_token(token: String) -> Self {
        let key = ConsoleKey::new(token.as_bytes());
        Self::new(Some(token), &key)
    }

    /// No token: the function URL's IAM auth admits callers. CSRF tokens come from `key` (the
    /// same material on every instance: the template's secret, or `RARA_CSRF_KEY`).
    pub fn iam(key: &ConsoleKey) -> Self {
        Self::new(None, key)
    }

    fn new(token: Option<String>, key: &ConsoleKey) -> Self {
        let (csrf, sessions) = (csrf_token(key), Sessions::new(key));
        Auth { token, csrf, sessions, operators: None, read_auth: false, secure: false }
    }

    /// CSRF tokens, sessions and login codes from `key` rather than from the token (instances
    /// that share the key accept each other's forms and sessions).
    pub fn with_console_key(mut self, key: &ConsoleKey) -> Self {
        self.csrf = csrf_token(key);
        self.sessions = Sessions::new(key);
        self
    }

    /// Whether reads need the session or the token (else anonymous readers read, without
    /// fences and lease data).
    pub fn with_read_auth(mut self, required: bool) -> Self {
        self.read_auth = required;
        self
    }

    /// The session cookie carries `Secure`: the server is reached over https.
    pub fn with_secure_cookies(mut self) -> Self {
        self.secure = true;
        self
    }

    pub fn reads_need_auth(&self) -> bool {
        self.read_auth
    }

    pub fn secure_cookies(&self) -> bool {
        self.secure
    }

    /// Only these IAM principals ([`Caller`]) may change state: an exact ARN, or a role whose
    /// assumed-role sessions count as the role.
    pub fn with_operators(mut self, operators: Vec<String>) -> Self {
        self.operators = Some(operators);
        self
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The API's check: the bearer token, when one is required, and the caller, when
    /// operators are named.
    pub fn check_bearer(&self, headers: &HeaderMap, caller: Option<&Caller>) -> Result<(), Error> {
        if self.token.is_some() && !self.has_bearer(headers) {
            return Err(Error::unauthorized());
        }
        self.check_operator(caller)
    }

    /// Whether the request carries the token as `Authorization: Bearer` (never, without one).
    fn has_bearer(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else { return false };
        headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes()))
    }

    /// Whether the request is authenticated: the token, a session, or IAM in front.
    pub fn authenticated(&self, headers: &HeaderMap) -> bool {
        self.token.is_none() || self.has_bearer(headers) || self.has_session(headers)
    }

    /// The check of a read: whether the caller is authenticated, or `401` when reads need it.
    pub fn check_read(&self, headers: &HeaderMap) -> Result<bool, Error> {
        match self.authenticated(headers) {
            false if self.read_auth => Err(Error::unauthenticated(
                "this server serves reads to authenticated callers only: open the one-time login URL \
                 `rara ui` printed, or send the token as `Authorization: Bearer <token>`",
            )),
            authenticated => Ok(authenticated),
        }
    }

    /// [`check_bearer`](Self::check_bearer) of what a request presents.
    pub fn check_request(&self, credentials: &Credentials) -> Result<(), Error> {
        self.check_bearer(&credentials.headers, credentials.caller.as_ref())
    }

    /// Whether the caller is one of the operators (always, when none are named).
    fn check_operator(&self, caller: Option<&Caller>) -> Result<(), Error> {
        let Some(operators) = &self.operators else { return Ok(()) };
        match caller {
            Some(caller) if operators.iter().any(|o| is_principal(o, &caller.arn)) => Ok(()),
            Some(caller) => Err(Error::forbidden(format!(
                "{} may read but not change state: it is not among the operators (RARA_API_OPERATORS)",
                caller.arn
            ))),
            None => Err(Error::forbidden(
                "no IAM caller identity on this request, and only operators (RARA_API_OPERATORS) may change state",
            )),
        }
    }

    /// Whether the session cookie holds an unexpired session (always, without a token).
    pub fn has_session(&self, headers: &HeaderMap) -> bool {
        self.token.is_none()
            || cookie(headers, SESSION_COOKIE).is_some_and(|value| self.sessions.is_session(value, Utc::now()))
    }

    /// A session value that expires at `expires` (what the cookie holds).
    pub fn session_value(&self, expires: DateTime<Utc>) -> String {
        self.sessions.session(expires)
    }

    /// A one-time login code valid for `lifetime`, and when it expires.
    pub fn login_code(&self, lifetime: TimeDelta) -> (String, DateTime<Utc>) {
        let expires = Utc::now() + lifetime;
        (self.sessions.login_code(expires), expires)
    }

    /// Spends a login code and returns the `Set-Cookie` value of the session it starts.
    pub fn start_session(&self, code: &str) -> Result<String, Error> {
        let now = Utc::now();
        self.sessions.redeem(code, now).map_err(|refusal| {
            Error::unauthenticated(format!(
                "{refusal}: ask for a new one (`POST /api/login` with the token, or restart `rara ui`)"
            ))
        })?;
        let value = self.sessions.session(now + SESSION_LIFETIME);
        let secure = if self.secure { "; Secure" } else { "" };
        let age = SESSION_LIFETIME.num_seconds();
        Ok(format!("{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={age}{secure}"))
    }

    /// Whether the console shows this request its forms: a session and, when operators are
    /// named, an operator.
    pub fn may_act(&self, headers: &HeaderMap, caller: Option<&Caller>) -> bool {
        self.has_session(headers) && self.check_operator(caller).is_ok()
    }

    /// The console's check of a form: a session, an operator, and the CSRF token of the form.
    pub fn check_form(&self, headers: &HeaderMap, caller: Option<&Caller>, csrf: &str) -> Result<(), Error> {
        if !self.has_session(headers) {
            return Err(Error::unauthorized());
        }
        self.check_operator(caller)?;
        if !constant_time_eq(csrf.as_bytes(), self.csrf.as_bytes()) {
            return Err(Error::forbidden("the form's CSRF token is missing or wrong: reload the page"));
        }
        Ok(())
    }

    /// The CSRF token every console form carries: derived from the console key, so it is the
    /// same for every page and every instance that shares the key, and reveals nothing of it.
    pub fn csrf_token(&self) -> String {
        self.csrf.clone()
    }
}

/// A caller allowed to read, and whether it is authenticated: only then does it see fences and
/// lease data, and live pages. Refused with `401` when reads need authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reader {
    pub authenticated: bool,
}

impl FromRequestParts<Api> for Reader {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, api: &Api) -> Result<Self, Self::Rejection> {
        Ok(Reader { authenticated: api.auth().check_read(&parts.headers)? })
    }
}

fn csrf_token(key: &ConsoleKey) -> String {
    hex(&key.derive(CSRF_PURPOSE))
}

/// Whether `arn` (a caller) is the principal `operator`: the same ARN, or a session of the
/// role `operator` (`arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION` for
/// `arn:aws:iam::ACCOUNT:role/PATH/NAME`).
pub fn is_principal(operator: &str, arn: &str) -> bool {
    if operator == arn {
        return true;
    }
    let (Some(role), Some(session)) = (split_arn(operator), split_arn(arn)) else { return false };
    let (Some(role_path), Some(assumed)) =
        (role.resource.strip_prefix("role/"), session.resource.strip_prefix("assumed-role/"))
    else {
        return false;
    };
    let role_name = role_path.rsplit('/').next().unwrap_or(role_path);
    let assumed_name = assumed.split('/').next().unwrap_or_default();
    role.service == "iam"
        && session.service == "sts"
        && role.partition == session.partition
        && role.account == session.account
        && !role_name.is_empty()
        && role_name == assumed_name
}

struct Arn<'a> {
    partition: &'a str,
    service: &'a str,
    account: &'a str,
    resource: &'a str,
}

fn split_arn(arn: &str) -> Option<Arn<'_>> {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some(service), Some(_region), Some(account), Some(resource)) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    Some(Arn { partition, service, account, resource })
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    hex(&bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
