use std::net::SocketAddr;
use std::sync::Arc;

use super::*;

fn policy(vars: &[(&str, &str)]) -> Result<Policy, Error> {
    Policy::from_lookup(|var| vars.iter().find(|(k, _)| *k == var).map(|(_, v)| (*v).to_owned()))
}

fn url(text: &str) -> Url {
    Url::parse(text).unwrap()
}

#[test]
fn the_default_refuses_loopback_in_every_spelling_of_a_url() {
    let default = Policy::default();
    for text in [
        "http://127.0.0.1:9/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::1]/",
    ] {
        let denied = default.check_url(&url(text)).unwrap_err();
        assert_eq!(denied.rule, "loopback", "{text}");
    }
    assert_eq!(default.check_url(&url("http://169.254.169.254/latest")).unwrap_err().rule, "link-local");
    assert_eq!(default.check_url(&url("http://example.com/")), Ok(()), "names are checked at connect time");
    assert_eq!(default.check_url(&url("http://8.8.8.8/")), Ok(()));
}

#[test]
fn an_opened_cidr_opens_its_addresses_and_their_mapped_forms() {
    let opened = policy(&[(ALLOW_CIDRS_VAR, " 127.0.0.1/32, 10.1.0.0/16 ,fd00::1")]).unwrap();
    assert_eq!(opened.check_ip("127.0.0.1".parse().unwrap()), Ok(()));
    assert_eq!(opened.check_ip("::ffff:127.0.0.1".parse().unwrap()), Ok(()));
    assert_eq!(opened.check_ip("10.1.9.9".parse().unwrap()), Ok(()));
    assert_eq!(opened.check_ip("fd00::1".parse().unwrap()), Ok(()));
    assert_eq!(opened.check_ip("127.0.0.2".parse().unwrap()), Err("loopback"));
    assert_eq!(opened.check_ip("10.2.0.1".parse().unwrap()), Err("private"));
}

#[test]
fn the_allowlist_mode_opens_only_what_is_listed() {
    let only = policy(&[(EGRESS_VAR, "allowlist"), (ALLOW_HOSTS_VAR, "api.example.com,*.corp.example")]).unwrap();
    assert_eq!(only.check_ip("8.8.8.8".parse().unwrap()), Err(NOT_ALLOWED));
    assert_eq!(only.check_url(&url("https://api.example.com/x")), Ok(()));
    assert_eq!(only.check_url(&url("https://a.b.corp.example/x")), Ok(()));
    assert_eq!(only.check_url(&url("https://corp.example/x")).unwrap_err().rule, NOT_ALLOWED);
    assert_eq!(only.check_url(&url("https://evil.example/x")).unwrap_err().rule, NOT_ALLOWED);
    assert!(only.opens_host("API.example.com."));
}

#[test]
fn bad_settings_name_the_variable_and_the_entry() {
    let err = policy(&[(ALLOW_CIDRS_VAR, "10.0.0.0/8, 300.1.0.0/16")]).unwrap_err();
    assert_eq!((err.var, err.entry.as_str()), (ALLOW_CIDRS_VAR, "300.1.0.0/16"));
    assert!(err.to_string().contains("RARA_HTTP_ALLOW_CIDRS"), "{err}");
    let err = policy(&[(ALLOW_CIDRS_VAR, "10.0.0.0/33")]).unwrap_err();
    assert_eq!(err.entry, "10.0.0.0/33");
    let err = policy(&[(ALLOW_HOSTS_VAR, "ok.example, bad host")]).unwrap_err();
    assert_eq!((err.var, err.entry.as_str()), (ALLOW_HOSTS_VAR, "bad host"));
    let err = policy(&[(ALLOW_HOSTS_VAR, "127.0.0.1")]).unwrap_err();
    assert!(err.reason.contains(ALLOW_CIDRS_VAR), "{err}");
    let err = policy(&[(EGRESS_VAR, "open")]).unwrap_err();
    assert_eq!(err.var, EGRESS_VAR);
    assert_eq!(policy(&[(EGRESS_VAR, ""), (ALLOW_CIDRS_VAR, "")]), Ok(Policy::default()));
}

#[test]
fn the_resolver_keeps_only_opened_addresses_and_refuses_a_name_with_none() {
    let addr = |s: &str| -> SocketAddr { s.parse().unwrap() };
    let resolver = Resolver::new(Arc::new(Policy::default()));
    let mixed = vec![addr("10.0.0.5:0"), addr("93.184.215.14:0")];
    assert_eq!(resolver.filter("mixed.example", mixed), Ok(vec![addr("93.184.215.14:0")]));
    let denied = resolver.filter("localhost", vec![addr("127.0.0.1:0"), addr("[::1]:0")]).unwrap_err();
    assert_eq!(denied, Denied { host: "localhost".into(), rule: "loopback" });
    assert_eq!(resolver.filter("nothing.example", vec![]), Ok(vec![]));

    let hosts = Resolver::new(Arc::new(policy(&[(ALLOW_HOSTS_VAR, "db.internal")]).unwrap()));
    assert_eq!(hosts.filter("db.internal", vec![addr("10.0.0.5:0")]), Ok(vec![addr("10.0.0.5:0")]));
}

#[test]
fn the_policy_shows_itself_for_the_log() {
    assert_eq!(Policy::default().to_string(), "public addresses");
    let shown =
        policy(&[(EGRESS_VAR, "allowlist"), (ALLOW_CIDRS_VAR, "10.0.0.1"), (ALLOW_HOSTS_VAR, "*.corp.example")]);
    assert_eq!(
        shown.unwrap().to_string(),
        "the allow-list only; CIDRs opened: 10.0.0.1/32; hosts opened: *.corp.example"
    );
}
