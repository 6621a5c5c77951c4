use chrono::{TimeDelta, Utc};

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
    let value = auth.session_value(Utc::now() + TimeDelta::hours(1));
    let session = headers(axum::http::header::COOKIE, &format!("a=b; rara_session={value}"));
    assert!(auth.check_form(&session, None, &auth.csrf_token()).is_ok());
    assert!(auth.check_form(&session, None, "forged").is_err());
    assert!(auth.check_form(&HeaderMap::new(), None, &auth.csrf_token()).is_err());
    let token = headers(axum::http::header::COOKIE, "rara_session=s3cret");
    assert!(auth.check_form(&token, None, &auth.csrf_token()).is_err(), "the token is no session");
    assert_ne!(auth.csrf_token(), "s3cret");
}

#[test]
fn a_login_code_starts_one_session_once_and_not_after_it_expires() {
    let auth = Auth::with_token("s3cret".into());
    let (code, _) = auth.login_code(TimeDelta::minutes(5));
    let cookie = auth.start_session(&code).unwrap();
    assert!(cookie.starts_with("rara_session=v1.") && !cookie.contains("s3cret"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let spent = auth.start_session(&code).unwrap_err();
    assert_eq!(spent.status.as_u16(), 401);
    assert!(spent.body.message.contains("used already"), "{}", spent.body.message);
    let (expired, _) = auth.login_code(TimeDelta::seconds(-1));
    assert!(auth.start_session(&expired).unwrap_err().body.message.contains("expired"));
    let (other, _) = Auth::with_token("other".into()).login_code(TimeDelta::minutes(5));
    assert!(auth.start_session(&other).unwrap_err().body.message.contains("not one this server issued"));
    assert!(auth.start_session("s3cret").is_err(), "the token is no code");
    let (code, _) = auth.login_code(TimeDelta::minutes(5));
    let secure = auth.clone().with_secure_cookies().start_session(&code).unwrap();
    assert!(secure.ends_with("; Secure"), "{secure}");
}

#[test]
fn instances_sharing_the_console_key_accept_each_others_sessions_and_codes() {
    let key = ConsoleKey::new("a shared console key of thirty-two characters");
    let (one, two) = (Auth::iam(&key), Auth::with_token("t".into()).with_console_key(&key));
    let value = one.session_value(Utc::now() + TimeDelta::hours(1));
    let session = headers(axum::http::header::COOKIE, &format!("rara_session={value}"));
    assert!(two.has_session(&session));
    let (code, _) = one.login_code(TimeDelta::minutes(5));
    assert!(two.start_session(&code).is_ok());
    assert!(!Auth::with_token("t".into()).has_session(&session), "another key");
}

#[test]
fn reads_need_the_token_or_a_session_only_when_asked() {
    let open = Auth::with_token("s3cret".into());
    assert_eq!(open.check_read(&HeaderMap::new()).ok(), Some(false), "anonymous, but reads");
    let closed = open.clone().with_read_auth(true);
    assert_eq!(closed.check_read(&HeaderMap::new()).unwrap_err().status.as_u16(), 401);
    let bearer = headers(axum::http::header::AUTHORIZATION, "Bearer s3cret");
    assert_eq!(closed.check_read(&bearer).ok(), Some(true));
    let iam = Auth::iam(&ConsoleKey::random()).with_read_auth(true);
    assert_eq!(iam.check_read(&HeaderMap::new()).ok(), Some(true), "IAM admitted the caller");
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
