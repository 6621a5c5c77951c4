use super::*;

fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
    move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

#[test]
fn attempt_secrets_differ_per_attempt_and_key_and_are_stable() {
    let step = Uuid::from_u128(7);
    let a = Security::default().with_attempt_key("k".repeat(32)).unwrap();
    let b = Security::default().with_attempt_key("j".repeat(32)).unwrap();
    assert_eq!(a.attempt_secret(step, 1), a.clone().attempt_secret(step, 1));
    assert_eq!(a.attempt_secret(step, 1).len(), 64);
    assert_ne!(a.attempt_secret(step, 1), a.attempt_secret(step, 2));
    assert_ne!(a.attempt_secret(step, 1), a.attempt_secret(Uuid::from_u128(8), 1));
    assert_ne!(a.attempt_secret(step, 1), b.attempt_secret(step, 1));
    assert_eq!(a.prior_attempt_secrets(step, 3), [a.attempt_secret(step, 1), a.attempt_secret(step, 2)]);
    assert!(a.prior_attempt_secrets(step, 1).is_empty());
}

#[test]
fn the_token_rides_every_call_and_never_prints() {
    let security = Security::from_lookup(lookup(&[("RARA_REMOTE_TOKEN", "s3cret-token")])).unwrap();
    let request = security.credential().call(tonic::Request::new(())).unwrap();
    assert_eq!(request.metadata().get("authorization").unwrap(), "Bearer s3cret-token");
    assert!(!format!("{security:?} {:?}", security.credential()).contains("s3cret"));
    let none = Security::default().credential().call(tonic::Request::new(())).unwrap();
    assert!(none.metadata().get("authorization").is_none());
}

#[test]
fn bad_settings_say_which_without_the_value() {
    let err = Security::from_lookup(lookup(&[("RARA_REMOTE_ATTEMPT_KEY", "short-s3cret")])).unwrap_err();
    assert!(matches!(err, Error::AttemptKey) && !err.to_string().contains("s3cret"), "{err}");
    let err = Security::from_lookup(lookup(&[("RARA_REMOTE_TOKEN", "has space")])).unwrap_err();
    assert!(matches!(err, Error::Token), "{err}");
    let err = Security::from_lookup(lookup(&[("RARA_REMOTE_CLIENT_CERT_FILE", "/x.pem")])).unwrap_err();
    assert!(matches!(err, Error::HalfIdentity), "{err}");
    let err = Security::from_lookup(lookup(&[("RARA_REMOTE_CA_FILE", "/no/such/ca.pem")])).unwrap_err();
    assert_eq!(err.to_string(), "RARA_REMOTE_CA_FILE: cannot read \"/no/such/ca.pem\"");
}

#[test]
fn a_credentials_secret_gives_the_token_and_key_and_names_what_is_wrong() {
    let key = "k".repeat(40);
    let text = format!(r#"{{"token": "s3cret-token", "attempt_key": "{key}"}}"#);
    let from_secret = Security::default().with_credentials_json(&text).unwrap();
    let from_vars = Security::default().with_token("s3cret-token").unwrap().with_attempt_key(key).unwrap();
    let step = Uuid::from_u128(3);
    assert_eq!(from_secret.attempt_secret(step, 2), from_vars.attempt_secret(step, 2));
    let request = from_secret.credential().call(tonic::Request::new(())).unwrap();
    assert_eq!(request.metadata().get("authorization").unwrap(), "Bearer s3cret-token");
    assert!(from_secret.weaknesses().is_empty());
    let token_only = Security::default().with_credentials_json(r#"{"token": "s3cret-token"}"#).unwrap();
    assert_eq!(token_only.weaknesses().len(), 1, "no attempt key is still named");
    let rotating = Security::default().with_credentials_json(r#"{"token": "new-token,old-token"}"#).unwrap();
    let request = rotating.credential().call(tonic::Request::new(())).unwrap();
    assert_eq!(request.metadata().get("authorization").unwrap(), "Bearer new-token", "the first of the list");

    for (text, says) in [
        ("s3cret-token", "is not a JSON object"),
        (r#"["s3cret-token"]"#, "is not a JSON object"),
        (r#"{"attempt_key": "s3cret-kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"}"#, "has no `token`"),
        (r#"{"token": "s3cret token"}"#, "not printable ASCII"),
        (r#"{"token": ",s3cret-token"}"#, "not printable ASCII"),
        (r#"{"token": 7357}"#, "`token` that is not a string"),
        (r#"{"token": "t", "attempt_key": "s3cret-short"}"#, "shorter than 32"),
        (r#"{"token": "t", "tokens": "s3cret-token"}"#, r#"a key "tokens" it does not know"#),
    ] {
        let err = Security::default().with_credentials_json(text).unwrap_err();
        let message = err.to_string();
        assert!(message.contains(says) && !message.contains("s3cret") && !message.contains("7357"), "{message}");
        assert_eq!(err.var(), CREDENTIALS_SECRET_VAR);
    }
    let huge = format!(r#"{{"token": "{}"}}"#, "t".repeat(MAX_CREDENTIALS_BYTES));
    assert!(Security::default().with_credentials_json(&huge).unwrap_err().to_string().contains("over 8192 bytes"));

    let both = lookup(&[(CREDENTIALS_SECRET_VAR, "arn:aws:secretsmanager:x"), ("RARA_REMOTE_TOKEN", "t")]);
    assert!(matches!(Security::from_lookup(both), Err(Error::Credentials(_))));
    assert!(Security::from_lookup(lookup(&[(CREDENTIALS_SECRET_VAR, "arn:aws:secretsmanager:x")])).is_ok());
}

#[test]
fn weaknesses_are_named() {
    assert_eq!(Security::default().weaknesses().len(), 2);
    let strong = Security::default().with_token("t").unwrap().with_attempt_key("k".repeat(40)).unwrap();
    assert!(strong.weaknesses().is_empty());
}
