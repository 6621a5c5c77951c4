//! Every workflow under `examples/` (the README shows them) is a valid definition.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rara_domain::config::Config;
use rara_domain::workflow::{Format, WorkflowDefinition};

#[test]
fn every_example_plans() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let config = Config::from_lookup("test", |_| None).unwrap();
    let mut planned = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        // The clients' examples (examples/python, examples/typescript) are programs, not definitions.
        if !path.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // Planned as a registration checks it: a required input stands in with a value of its type.
        let definition = WorkflowDefinition::parse(&text, Format::from_path(&path))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        definition.check_for_register(&config, |_, _| false).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        planned.push(definition.name);
    }
    planned.sort();
    assert!(planned.contains(&"data-flow".to_owned()), "{planned:?}");
}
