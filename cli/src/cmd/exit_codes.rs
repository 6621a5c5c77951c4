//! `rara exit-codes` (hidden): prints the table of exit codes as the CLI page of the book holds
//! it, so that the page can be regenerated from the code (`cli/tests/exit_codes.rs` compares them).

use clap::Args;

use crate::Failure;

/// Print the markdown table of rara's exit codes.
#[derive(Debug, Args)]
pub struct ExitCodes {}

pub fn run(_args: ExitCodes) -> Result<(), Failure> {
    print!("{}", crate::exit::table());
    Ok(())
}
