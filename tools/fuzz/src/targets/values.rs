//! Generators shared by the targets: arbitrary JSON values and numbers at the edges of what
//! `f64`, `u64` and `Duration` hold.

use proptest::prelude::*;
use serde_json::{Value, json};

/// Numbers a hostile peer would send: the edges of every integer and float type, and some
/// ordinary ones.
pub fn edge_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop::sample::select(vec![
            json!(0), json!(1), json!(-1), json!(0.5), json!(7.5), json!(86_400), json!(86_401),
            json!(u64::MAX), json!(i64::MIN), json!(i64::MAX), json!(u32::MAX), json!(1e300),
            json!(-1e300), json!(f64::MAX), json!(f64::MIN_POSITIVE), json!(1e-300), json!(1.8446744073709552e19),
            json!(1e16), json!(-0.0),
        ]),
        1 => any::<f64>().prop_map(|f| json!(f)),
        1 => any::<u64>().prop_map(|n| json!(n)),
        1 => any::<i64>().prop_map(|n| json!(n)),
    ]
}

/// Text a hostile peer would send: numbers spelt as text, `NaN`, empty, long, any Unicode.
pub fn edge_text() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(vec![
            "", "NaN", "nan", "inf", "-inf", "Infinity", "1e300", "18446744073709551615", "-1", "7",
            "0x10", " 5", "5 ", "1_000",
        ]).prop_map(str::to_owned),
        6 => ".{0,40}",
        1 => prop::collection::vec(any::<char>(), 0..8).prop_map(|c| c.into_iter().collect()),
        1 => prop::sample::select(vec![200usize, 4_097, 16_385, 70_000]).prop_map(|n| "x".repeat(n)),
    ]
}

/// Any JSON value (depth at most 4), numbers and strings from the edges.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        edge_number(),
        edge_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_$]{0,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
