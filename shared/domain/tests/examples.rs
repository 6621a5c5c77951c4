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
        let text = std::fs::read_to_string(&path).unwrap();
        let plan = WorkflowDefinition::parse(&text, Format::from_path(&path))
            .and_then(|d| d.plan(&config))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        planned.push(plan.name);
    }
    planned.sort();
    assert!(planned.contains(&"data-flow".to_owned()), "{planned:?}");
}
