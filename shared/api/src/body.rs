//! Request bodies. Every request of the API is a JSON **object**: serde reads a struct from a
//! JSON array too (`[{}, null]` fills the fields in order), so a body is read as an object
//! first and only then as the request, and an array, a string or a number is refused with 400
//! `bad_request` like any other body that is not the request.

use axum::Json;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{Error, serde_field};

/// A JSON body that is an object, read as `T`. Refuses what `Json` refuses (no JSON content
/// type 415, bad syntax 400, over the size limit 413) and any other JSON value than an object.
#[derive(Debug)]
pub struct ObjectBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ObjectBody<T> {
    type Rejection = Error;

    async fn from_request(request: Request, state: &S) -> Result<Self, Error> {
        let Json(object) = Json::<Map<String, Value>>::from_request(request, state).await?;
        from_object(object).map(ObjectBody)
    }
}

/// An optional body (no Content-Type needed): none at all, or only white space, reads as the
/// default; anything else must be a JSON object that reads as `T`.
pub(crate) fn optional_object<T: Default + DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let object: Map<String, Value> = serde_json::from_slice(body).map_err(not_the_request)?;
    from_object(object)
}

/// A payload that may be any JSON value: none at all (or only white space) reads as `{}`.
pub(crate) fn payload(body: &[u8]) -> Result<Value, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_slice(body).map_err(|e| Error::bad_request(format!("the body is not JSON: {e}")))
}

/// `object` read as the request `T`.
pub(crate) fn from_object<T: DeserializeOwned>(object: Map<String, Value>) -> Result<T, Error> {
    serde_json::from_value(Value::Object(object)).map_err(not_the_request)
}

/// A body that does not read as the request: 400 naming the field serde names, if any.
fn not_the_request(e: serde_json::Error) -> Error {
    let error = Error::bad_request(format!("the body is not a valid request: {e}"));
    match serde_field(&e.to_string()) {
        Some(field) => error.with_field(field),
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Reason {
        reason: Option<String>,
    }

    #[test]
    fn an_array_is_not_a_request_though_serde_reads_a_struct_from_one() {
        assert!(serde_json::from_slice::<Reason>(br#"["x"]"#).is_ok(), "serde's own reading");
        for body in [&br#"["x"]"#[..], b"[]", b"\"x\"", b"1", b"null"] {
            let error = optional_object::<Reason>(body).unwrap_err();
            assert_eq!(error.body.code, "bad_request", "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn no_body_is_the_default_and_an_object_is_read() {
        assert_eq!(optional_object::<Reason>(b" \n").unwrap().reason, None);
        assert_eq!(optional_object::<Reason>(br#"{"reason": "r"}"#).unwrap().reason.as_deref(), Some("r"));
        let error = optional_object::<Reason>(br#"{"colour": 1}"#).unwrap_err();
        assert_eq!(error.body.field.as_deref(), Some("colour"));
    }
}
