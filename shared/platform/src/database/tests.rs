use super::*;
use serde_json::Value;
use std::collections::HashMap;

const ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:rara-db-AbCdEf";
const PASSWORD: &str = "s3cr3t-hunter2";

fn parse(secret: &str) -> Result<ConnectOptions, Error> {
    options_from_secret(ARN, secret, None, None, DEFAULT_SECRET_SSL_MODE)
}

fn rds_secret() -> String {
    serde_json::json!({
        "engine": "postgres", "username": "rara", "password": PASSWORD,
        "host": "db.example.internal", "port": 6432, "dbname": "rara_prod",
        "dbInstanceIdentifier": "rara-db"
    })
    .to_string()
}

fn source(vars: &[(&str, &str)]) -> Result<DatabaseSource, config::Error> {
    let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let core = Config::from_lookup("test", |k| map.get(k).cloned())?;
    DatabaseSource::from_lookup(&core, |k| map.get(k).cloned())
}

#[test]
fn an_rds_secret_becomes_connect_options_with_tls_required() {
    let options = parse(&rds_secret()).unwrap().into_inner();
    assert_eq!(options.get_host(), "db.example.internal");
    assert_eq!(options.get_port(), 6432);
    assert_eq!(options.get_username(), "rara");
    assert_eq!(options.get_database(), Some("rara_prod"));
    assert!(matches!(options.get_ssl_mode(), PgSslMode::Require));
}

#[test]
fn port_defaults_to_5432_and_may_be_a_string() {
    let base = serde_json::json!({"username": "u", "password": "p", "host": "h"});
    assert_eq!(parse(&base.to_string()).unwrap().get().get_port(), DEFAULT_PORT);
    let mut quoted = base.clone();
    quoted["port"] = "5433".into();
    assert_eq!(parse(&quoted.to_string()).unwrap().get().get_port(), 5433);
    let mut bad = base;
    bad["port"] = PASSWORD.into();
    let err = parse(&bad.to_string()).unwrap_err().to_string();
    assert!(err.contains("`port`") && !err.contains(PASSWORD), "{err}");
}

#[test]
fn overrides_replace_host_and_dbname() {
    let options = options_from_secret(ARN, &rds_secret(), Some("proxy.example"), Some("other"), PgSslMode::VerifyFull)
        .unwrap()
        .into_inner();
    assert_eq!(options.get_host(), "proxy.example");
    assert_eq!(options.get_database(), Some("other"));
    assert!(matches!(options.get_ssl_mode(), PgSslMode::VerifyFull));
}

#[test]
fn a_host_override_makes_the_secrets_host_optional() {
    let secret = serde_json::json!({"username": "u", "password": PASSWORD}).to_string();
    let err = parse(&secret).unwrap_err().to_string();
    assert!(err.contains("no `host`") && err.contains("RARA_DATABASE_HOST"), "{err}");
    let options = options_from_secret(ARN, &secret, Some("proxy"), None, DEFAULT_SECRET_SSL_MODE).unwrap();
    assert_eq!(options.get().get_host(), "proxy");
    assert_eq!(options.get().get_database(), None);
}

#[test]
fn missing_fields_are_named() {
    for field in ["username", "password"] {
        let mut secret = serde_json::from_str::<Value>(&rds_secret()).unwrap();
        secret.as_object_mut().unwrap().remove(field);
        let err = parse(&secret.to_string()).unwrap_err();
        assert!(matches!(err, Error::MissingField { field: f, .. } if f == field), "{err}");
        assert!(err.to_string().contains(&format!("no `{field}`")), "{err}");
    }
}

#[test]
fn errors_never_quote_the_secret() {
    let not_json = format!("username=rara password={PASSWORD}");
    let not_object = serde_json::to_string(PASSWORD).unwrap();
    let wrong_type = serde_json::json!({"username": "u", "password": [PASSWORD], "host": "h"}).to_string();
    let other_engine = serde_json::json!({"engine": PASSWORD, "username": "u", "password": "p"}).to_string();
    for secret in [not_json.as_str(), &not_object, &wrong_type, &other_engine, "{\"password\": \"s3cr3t"] {
        let err = parse(secret).unwrap_err();
        for shown in [err.to_string(), format!("{err:?}")] {
            assert!(!shown.contains(PASSWORD) && !shown.contains("s3cr3t"), "{shown}");
        }
    }
    assert!(matches!(parse(&not_json), Err(Error::NotJson { line: 1, column: 1, .. })));
    assert!(matches!(parse(&not_object), Err(Error::NotAnObject { .. })));
}

#[test]
fn debug_of_connect_options_and_source_redacts_the_password() {
    let options = parse(&rds_secret()).unwrap();
    let shown = format!("{options:?}");
    assert!(!shown.contains(PASSWORD) && shown.contains("db.example.internal"), "{shown}");
    let url = source(&[("DATABASE_URL", &format!("postgres://u:{PASSWORD}@db/x"))]).unwrap();
    assert!(!format!("{url:?}").contains(PASSWORD));
    assert!(!format!("{:?}", options_from_url(&format!("postgres://u:{PASSWORD}@db/x")).unwrap()).contains(PASSWORD));
}

#[test]
fn the_secret_is_used_only_when_its_arn_is_set() {
    assert!(matches!(source(&[]).unwrap(), DatabaseSource::Url(url) if url == config::DEFAULT_DATABASE_URL));
    assert!(matches!(source(&[(SECRET_ARN_VAR, " ")]).unwrap(), DatabaseSource::Url(_)));
    let secret = source(&[(SECRET_ARN_VAR, ARN), (HOST_VAR, ""), (NAME_VAR, "rara"), (SSL_MODE_VAR, "")]);
    let DatabaseSource::Secret { arn, host_override, name_override, ssl_mode, .. } = secret.unwrap() else {
        panic!("expected the secret");
    };
    assert_eq!((arn.as_str(), host_override, name_override.as_deref()), (ARN, None, Some("rara")));
    assert!(matches!(ssl_mode, PgSslMode::Require));
}

#[test]
fn ssl_mode_is_validated() {
    for (raw, expected) in [("disable", "Disable"), ("Prefer", "Prefer"), ("verify-full", "VerifyFull")] {
        let found = source(&[(SECRET_ARN_VAR, ARN), (SSL_MODE_VAR, raw), (SSL_ROOT_CERT_VAR, "/ca.pem")]).unwrap();
        assert!(format!("{found:?}").contains(&format!("ssl_mode: {expected}")), "{found:?}");
    }
    let err = source(&[(SECRET_ARN_VAR, ARN), (SSL_MODE_VAR, "on")]).unwrap_err().to_string();
    assert!(err.starts_with("RARA_DATABASE_SSL_MODE=\"on\" is not valid"), "{err}");
}

#[test]
fn checking_the_certificate_needs_a_ca_bundle() {
    for mode in ["verify-full", "verify-ca"] {
        let err = source(&[(SECRET_ARN_VAR, ARN), (SSL_MODE_VAR, mode)]).unwrap_err().to_string();
        assert!(err.contains(SSL_ROOT_CERT_VAR) && err.contains("global-bundle.pem"), "{err}");
        let found = source(&[(SECRET_ARN_VAR, ARN), (SSL_MODE_VAR, mode), (SSL_ROOT_CERT_VAR, "/opt/rds/ca.pem")]);
        assert!(format!("{:?}", found.unwrap()).contains("/opt/rds/ca.pem"));
        assert!(source(&[(SECRET_ARN_VAR, ARN), (SSL_MODE_VAR, mode), (PG_SSL_ROOT_CERT_VAR, "/ca.pem")]).is_ok());
    }
    let missing = parse(&rds_secret()).unwrap().with_root_cert(std::path::Path::new("/nonexistent/ca.pem"));
    let err = missing.expect_err("a missing bundle is an error").to_string();
    assert!(err.contains("/nonexistent/ca.pem") && err.contains(SSL_ROOT_CERT_VAR), "{err}");
}
