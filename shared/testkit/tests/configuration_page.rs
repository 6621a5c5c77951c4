//! The configuration page and the code name the same `RARA_*` variables.
//!
//! The code's variables are the string literals that are exactly a `RARA_*` name
//! (`"RARA_LEASE_SECONDS"`: how every read is written, `std::env::var`, the settings' readers,
//! clap's `env = ".."`, the constants that name a variable), in the production sources: every
//! `src/` directory under `shared/`, `functions/`, `cli/` and `tools/`, each file up to its first
//! `#[cfg(test)]`, without `shared/testkit` (test support). A literal ending in `_` is a prefix
//! (`"RARA_SECRET_"`), written on the page as `RARA_SECRET_*`.
//!
//! The page's variables are the first column of the tables of
//! `docs/src/operating/configuration.md`, each in backticks.

#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const PAGE: &str = "docs/src/operating/configuration.md";
const SOURCE_ROOTS: [&str; 4] = ["shared", "functions", "cli", "tools"];
/// Crates whose `src/` only serves tests.
const TEST_SUPPORT: [&str; 1] = ["shared/testkit"];

#[test]
fn every_variable_the_code_reads_is_on_the_configuration_page_and_no_other() {
    let root = workspace_root();
    let in_code = variables_in_code(&root);
    let on_page = variables_on_page(&fs::read_to_string(root.join(PAGE)).expect("the configuration page"));
    assert!(in_code.len() > 40, "the scan found only {} variables: is it reading the sources?", in_code.len());

    let missing: Vec<String> = in_code
        .iter()
        .filter(|(name, _)| !on_page.contains(*name))
        .map(|(name, file)| format!("  {} (read in {})", shown(name), file.display()))
        .collect();
    let stale: Vec<String> =
        on_page.iter().filter(|name| !in_code.contains_key(*name)).map(|name| format!("  {}", shown(name))).collect();

    let mut problems = String::new();
    if !missing.is_empty() {
        problems += &format!(
            "read in code but missing from {PAGE} (add a row whose first column is the variable in backticks):\n{}\n",
            missing.join("\n")
        );
    }
    if !stale.is_empty() {
        problems += &format!("on {PAGE} but no longer read in code (remove the row):\n{}\n", stale.join("\n"));
    }
    assert!(problems.is_empty(), "{problems}");
}

#[test]
fn the_page_parser_reads_names_and_prefixes_from_the_first_column_only() {
    let page = "| variable | default |\n|---|---|\n| `RARA_A` | `RARA_B` |\n| `RARA_SECRET_*` | x |\n\
                | `RARA_C_<NAME>` | y |\n| `DATABASE_URL` | z |\nprose `RARA_D`\n";
    let names: Vec<String> = variables_on_page(page).into_iter().collect();
    assert_eq!(names, ["RARA_A", "RARA_C_", "RARA_SECRET_"]);
}

#[test]
fn the_source_scanner_reads_whole_literals_before_the_tests() {
    let source = "let a = env(\"RARA_A\");\n// \"RARA_COMMENTED\" in a comment counts too\n\
                  let b = \"see RARA_B\";\nconst P: &str = \"RARA_P_\";\n#[cfg(test)]\nmod tests { \"RARA_T\" }\n";
    let names = literals(source);
    assert_eq!(names, ["RARA_A", "RARA_COMMENTED", "RARA_P_"]);
}

/// `RARA_X` or, for a prefix, `RARA_X_*`.
fn shown(name: &str) -> String {
    if name.ends_with('_') { format!("`{name}*`") } else { format!("`{name}`") }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root")
}

/// Each variable the production sources read, with the first file that names it.
fn variables_in_code(root: &Path) -> BTreeMap<String, PathBuf> {
    let mut files = Vec::new();
    for dir in SOURCE_ROOTS {
        rust_sources(root, &root.join(dir), &mut files);
    }
    files.sort();
    let mut found = BTreeMap::new();
    for file in files {
        let source = fs::read_to_string(&file).expect("a source file");
        for name in literals(&source) {
            let relative = file.strip_prefix(root).unwrap_or(&file).to_path_buf();
            found.entry(name).or_insert(relative);
        }
    }
    found
}

/// The `.rs` files under a `src/` directory below `dir`, test support and build output left out.
fn rust_sources(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let name = entry.file_name();
        if path.is_dir() {
            let skip = ["target", "tests", "node_modules", "benches", "examples"].iter().any(|s| name == *s)
                || TEST_SUPPORT.iter().any(|s| relative == Path::new(s));
            if !skip {
                rust_sources(root, &path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") && relative.components().any(|c| c.as_os_str() == "src") {
            out.push(path);
        }
    }
}

/// The string literals of `source` (up to its first `#[cfg(test)]`) that are exactly a
/// `RARA_*` name.
fn literals(source: &str) -> Vec<String> {
    let production = source.split("#[cfg(test)]").next().unwrap_or("");
    let mut names = Vec::new();
    for (start, _) in production.match_indices("\"RARA_") {
        let rest = &production[start + 1..];
        let Some(end) = rest.find('"') else { continue };
        if is_variable(&rest[..end]) {
            names.push(rest[..end].to_owned());
        }
    }
    names.sort();
    names.dedup();
    names
}

fn is_variable(text: &str) -> bool {
    text.strip_prefix("RARA_").is_some_and(|rest| {
        !rest.is_empty() && rest.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

/// The first cells of the page's table rows that hold a `RARA_*` name in backticks; a name
/// written `RARA_X_*` or `RARA_X_<NAME>` is the prefix `RARA_X_`.
fn variables_on_page(page: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in page.lines() {
        let Some(row) = line.trim().strip_prefix('|') else { continue };
        let first = row.split('|').next().unwrap_or("").trim();
        let Some(name) = first.strip_prefix('`').and_then(|s| s.strip_suffix('`')) else { continue };
        let name = match name.find(['*', '<']) {
            Some(end) => &name[..end],
            None => name,
        };
        if is_variable(name) {
            names.insert(name.to_owned());
        }
    }
    names
}
