use super::*;

fn headers(name: axum::http::HeaderName, value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(name, value.parse().unwrap());
    h
}

fn caller(arn: &str) -> Caller {
    Caller { arn: arn.to_owned() }
}

#[test]
fn a_bearer_token_is_required_and_must_match() {
    let auth = Auth::with_token("s3cret".into());
    assert!(auth.check_bearer(&HeaderMap::new(), None).is_err());
    assert!(auth.check_bearer(&headers(axum::http::header::AUTHORIZATION, "Bearer nope"), None).is_err());
    assert!(auth.check_bearer(&headers(axum::http::header::AUTHORIZATION, "Bearer s3cret"), None).is_ok());
    assert!(Auth::iam(&ConsoleKey::random()).check_bearer(&HeaderMap::new(), None).is_ok());
}

#[test]
fn a_form_needs_the_session_cookie_and_the_csrf_token() {
    let auth = Auth::with_token("s3cret".into());
    let session = headers(axum::http::header::COOKIE, "a=b; rara_session=s3cret");
    assert!(auth.check_form(&session, None, &auth.csrf_token()).is_ok());
    assert!(auth.check_form(&session, None, "forged").is_err());
    assert!(auth.check_form(&HeaderMap::new(), None, &auth.csrf_token()).is_err());
    assert_ne!(auth.csrf_token(), "s3cret");
}

#[test]
fn instances_sharing_the_key_material_share_the_csrf_token_and_no_other_does() {
    let (one, two) = (Auth::iam(&ConsoleKey::new("material")), Auth::iam(&ConsoleKey::new("material")));
    assert_eq!(one.csrf_token(), two.csrf_token());
    assert_ne!(one.csrf_token(), Auth::iam(&ConsoleKey::new("other")).csrf_token());
    let key = ConsoleKey::new("material");
    assert_ne!(key.derive(CSRF_PURPOSE), key.derive("rara console session v1"), "one key per purpose");
    assert!(!one.csrf_token().contains("material"));
    assert_eq!(format!("{key:?}"), "ConsoleKey(<redacted>)");
    assert!(!format!("{:?}", Auth::with_token("s3cret".into())).contains("s3cret"));
}

#[test]
fn the_csrf_key_is_hmac_sha256_of_the_purpose() {
    // RFC 4231 test case 2: HMAC-SHA256("Jefe", "what do ya want for nothing?").
    let derived = ConsoleKey::new("Jefe").derive("what do ya want for nothing?");
    assert_eq!(hex(&derived), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

#[test]
fn with_operators_only_they_change_state_and_reads_stay_open() {
    let operator = "arn:aws:iam::123456789012:role/ops/Operator";
    let auth = Auth::iam(&ConsoleKey::random()).with_operators(vec![operator.to_owned()]);
    let none = HeaderMap::new();
    assert!(auth.check_bearer(&none, Some(&caller(operator))).is_ok());
    assert!(auth.check_bearer(&none, Some(&caller("arn:aws:sts::123456789012:assumed-role/Operator/alice"))).is_ok());
    let refused = auth.check_bearer(&none, Some(&caller("arn:aws:iam::123456789012:user/reader"))).unwrap_err();
    assert_eq!((refused.status.as_u16(), refused.body.code.as_str()), (403, "forbidden"));
    assert!(refused.body.message.contains("user/reader"), "{}", refused.body.message);
    assert!(auth.check_bearer(&none, None).is_err(), "no identity is no operator");
    assert!(
        auth.check_form(&none, Some(&caller("arn:aws:iam::123456789012:user/reader")), &auth.csrf_token()).is_err()
    );
    assert!(!auth.may_act(&none, Some(&caller("arn:aws:iam::123456789012:user/reader"))));
    assert!(auth.may_act(&none, Some(&caller(operator))));
}

#[test]
fn a_role_admits_its_own_sessions_only() {
    let role = "arn:aws:iam::123456789012:role/Operator";
    assert!(is_principal(role, "arn:aws:sts::123456789012:assumed-role/Operator/s"));
    assert!(!is_principal(role, "arn:aws:sts::999999999999:assumed-role/Operator/s"), "another account");
    assert!(!is_principal(role, "arn:aws:sts::123456789012:assumed-role/OperatorX/s"), "another role");
    assert!(!is_principal(role, "arn:aws-cn:sts::123456789012:assumed-role/Operator/s"), "another partition");
    assert!(!is_principal(
        "arn:aws:iam::123456789012:user/Operator",
        "arn:aws:sts::123456789012:assumed-role/Operator/s"
    ));
    assert!(!is_principal(role, "not an arn"));
}
