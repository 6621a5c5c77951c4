//! The console's session and the one-time login codes that start one. Both are signed and
//! stateless, `<expiry>.<nonce>.<mac>` (a session prefixed `v1.`), the MAC an HMAC-SHA256 under
//! a key of their own derived from the [`ConsoleKey`]: every instance that shares the material
//! (the Lambda containers sharing the template's secret) accepts the others' sessions and
//! codes, and neither reveals the API token. A session lasts [`SESSION_LIFETIME`]; a login code
//! is spent by its first use in a process (the spent nonces are kept until they expire).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use super::{ConsoleKey, constant_time_eq, hex};

/// The purpose the session key is derived for ([`ConsoleKey::derive`]).
pub const SESSION_PURPOSE: &str = "rara console session v1";

/// The purpose the login codes' key is derived for.
pub const LOGIN_PURPOSE: &str = "rara console login v1";

/// How long a browser session lasts (the cookie's `Max-Age`).
pub const SESSION_LIFETIME: TimeDelta = TimeDelta::hours(12);

/// How long a login code from `POST /api/login` may wait before it is used.
pub const LOGIN_LIFETIME: TimeDelta = TimeDelta::minutes(5);

/// The version prefix of a session value.
const SESSION_VERSION: &str = "v1";

/// Spent login codes remembered at most (older ones are forgotten once expired; beyond this,
/// new codes are refused until some expire).
const MAX_SPENT: usize = 10_000;

/// Why a login code does not start a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the login code is not one this server issued")]
    Forged,
    #[error("the login code has expired")]
    Expired,
    #[error("the login code was used already")]
    Spent,
}

/// Signs and checks `<expiry>.<nonce>.<mac>` under one key.
#[derive(Clone)]
struct Signer([u8; 32]);

impl Signer {
    fn mac(&self, message: &str) -> String {
        // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
        let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(&self.0) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts keys of every length"),
        };
        mac.update(message.as_bytes());
        hex(&mac.finalize().into_bytes())
    }

    fn sign(&self, prefix: &str, expires: DateTime<Utc>) -> String {
        let mut nonce = [0u8; 16];
        rand::rng().fill_bytes(&mut nonce);
        let message = format!("{prefix}{}.{}", expires.timestamp(), hex(&nonce));
        let mac = self.mac(&message);
        format!("{message}.{mac}")
    }

    /// The expiry and nonce of a value this key signed, whatever the time.
    fn open<'a>(&self, prefix: &str, value: &'a str) -> Option<(i64, &'a str)> {
        let rest = value.strip_prefix(prefix)?;
        let (message, mac) = rest.rsplit_once('.')?;
        let (expires, nonce) = message.split_once('.')?;
        let signed = format!("{prefix}{message}");
        if !constant_time_eq(self.mac(&signed).as_bytes(), mac.as_bytes()) {
            return None;
        }
        Some((expires.parse().ok()?, nonce))
    }
}

/// The session and login keys of one console key, and the login codes this process spent.
#[derive(Clone)]
pub(crate) struct Sessions {
    session: Signer,
    login: Signer,
    spent: Arc<Mutex<HashMap<String, i64>>>,
}

impl Sessions {
    pub(crate) fn new(key: &ConsoleKey) -> Self {
        Sessions {
            session: Signer(key.derive(SESSION_PURPOSE)),
            login: Signer(key.derive(LOGIN_PURPOSE)),
            spent: Arc::default(),
        }
    }

    /// A session value that expires at `expires`.
    pub(crate) fn session(&self, expires: DateTime<Utc>) -> String {
        self.session.sign(&format!("{SESSION_VERSION}."), expires)
    }

    /// Whether `value` is a session this key signed that has not expired at `now`.
    pub(crate) fn is_session(&self, value: &str, now: DateTime<Utc>) -> bool {
        self.session.open(&format!("{SESSION_VERSION}."), value).is_some_and(|(expires, _)| expires > now.timestamp())
    }

    /// A login code that expires at `expires`.
    pub(crate) fn login_code(&self, expires: DateTime<Utc>) -> String {
        self.login.sign("", expires)
    }

    /// Spends `code`: it must be signed, unexpired at `now` and not spent in this process.
    pub(crate) fn redeem(&self, code: &str, now: DateTime<Utc>) -> Result<(), Refusal> {
        let (expires, nonce) = self.login.open("", code).ok_or(Refusal::Forged)?;
        if expires <= now.timestamp() {
            return Err(Refusal::Expired);
        }
        let mut spent = self.spent.lock().map_err(|_| Refusal::Spent)?;
        spent.retain(|_, until| *until > now.timestamp());
        if spent.contains_key(nonce) || spent.len() >= MAX_SPENT {
            return Err(Refusal::Spent);
        }
        spent.insert(nonce.to_owned(), expires);
        Ok(())
    }
}
