//! Capability versions order as the shared table says (the Python executor reads the same one).

use std::cmp::Ordering;

use rara_remote::version;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Table {
    valid: Vec<String>,
    invalid: Vec<String>,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    versions: Vec<String>,
    order: Vec<String>,
    newest: String,
}

fn table() -> Table {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/capability-versions.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn newest(versions: &[String]) -> Option<&str> {
    versions.iter().max_by(|a, b| version::compare(a, b)).map(String::as_str)
}

#[test]
fn valid_versions_parse() {
    for v in table().valid {
        assert!(version::parse(&v).is_some(), "{v:?} should be a valid version");
    }
}

#[test]
fn invalid_versions_do_not_parse_and_rank_below_every_valid_one() {
    let table = table();
    for v in &table.invalid {
        assert!(version::parse(v).is_none(), "{v:?} should be invalid");
        for valid in &table.valid {
            assert_eq!(version::compare(v, valid), Ordering::Less, "{v:?} vs {valid:?}");
            assert_eq!(version::compare(valid, v), Ordering::Greater, "{valid:?} vs {v:?}");
        }
    }
}

#[test]
fn versions_sort_and_pick_the_newest_as_the_table_says() {
    for case in table().cases {
        let reversed: Vec<String> = case.versions.iter().rev().cloned().collect();
        for given in [&case.versions, &reversed, &case.order] {
            let mut sorted = given.clone();
            sorted.sort_by(|a, b| version::compare(a, b));
            assert_eq!(sorted, case.order, "{}", case.name);
            assert_eq!(newest(given), Some(case.newest.as_str()), "{}", case.name);
        }
        for (i, a) in case.order.iter().enumerate() {
            for (j, b) in case.order.iter().enumerate() {
                assert_eq!(version::compare(a, b), i.cmp(&j), "{}: {a:?} vs {b:?}", case.name);
            }
        }
    }
}
