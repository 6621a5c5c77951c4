//! The exit-code table of the CLI page (`docs/src/operating/cli.md`, between
//! `<!-- exit-codes:begin -->` and `<!-- exit-codes:end -->`) is the one `rara exit-codes`
//! prints from the `ExitCode` enum: the page cannot drift from the code.
//!
//! After changing a code: `cargo test -p rara --test exit_codes -- --ignored` rewrites the block.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

const BEGIN: &str = "<!-- exit-codes:begin -->";
const END: &str = "<!-- exit-codes:end -->";

fn page() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/src/operating/cli.md")
}

/// The table as the binary prints it.
fn generated() -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_rara"))
        .arg("exit-codes")
        .env_remove("RARA_API_URL")
        .output()
        .expect("run rara exit-codes");
    assert!(output.status.success(), "rara exit-codes failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// The page split around its block: (before and the begin line, the block, the end line and after).
fn split(text: &str) -> (&str, &str, &str) {
    let begin = text.find(BEGIN).unwrap_or_else(|| panic!("{} has no {BEGIN} line", page().display()));
    let inner = begin + BEGIN.len() + 1;
    let end = text[inner..].find(END).unwrap_or_else(|| panic!("{} has no {END} line after {BEGIN}", page().display()));
    (&text[..inner], &text[inner..inner + end], &text[inner + end..])
}

#[test]
fn the_exit_code_table_of_the_cli_page_is_the_enums() {
    let text = std::fs::read_to_string(page()).unwrap_or_else(|e| panic!("cannot read {}: {e}", page().display()));
    let (_, block, _) = split(&text);
    assert_eq!(
        block,
        generated(),
        "the exit codes of {} differ from the ExitCode enum (cli/src/exit.rs); \
         rewrite the block with `cargo test -p rara --test exit_codes -- --ignored`",
        page().display()
    );
}

#[test]
#[ignore = "rewrites docs/src/operating/cli.md; run it after changing an exit code"]
fn rewrite_the_exit_code_table_of_the_cli_page() {
    let text = std::fs::read_to_string(page()).unwrap_or_else(|e| panic!("cannot read {}: {e}", page().display()));
    let (before, _, after) = split(&text);
    std::fs::write(page(), format!("{before}{}{after}", generated())).expect("write the CLI page");
}
