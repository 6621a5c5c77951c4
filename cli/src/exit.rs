//! [`ExitCode`]: every code `rara` exits with, one variant each, so that a script can rely on
//! them; [`table`] renders them for the CLI page of the book (`docs/src/operating/cli.md`).

/// Declares [`ExitCode`] from one list, so that each variant's doc comment is also the meaning
/// [`ExitCode::meaning`] returns and the table prints: the docs cannot drift from the code.
macro_rules! exit_codes {
    ($($(#[doc = $doc:literal])+ $variant:ident = $code:literal,)+) => {
        /// How `rara` exits. The API's error bodies carry the same numbers (`exit_code`), so
        /// a command exits alike over the database and over `--api`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u8)]
        pub enum ExitCode {
            $($(#[doc = $doc])+ $variant = $code,)+
        }

        impl ExitCode {
            /// Every code, in increasing order.
            pub const ALL: &[ExitCode] = &[$(ExitCode::$variant),+];

            /// What the code means, as the table says it: the variant's doc comment.
            pub fn meaning(self) -> String {
                let lines: &[&str] = match self {
                    $(ExitCode::$variant => &[$($doc),+],)+
                };
                lines.iter().map(|line| line.trim()).collect::<Vec<_>>().join(" ")
            }
        }
    };
}

exit_codes! {
    /// Success.
    Success = 0,
    /// Failure: anything no other code names (an unreachable API, a queue error, a refused
    /// request).
    Failure = 1,
    /// Bad usage: an unknown flag, a missing or malformed argument, a command `--api` cannot run.
    Usage = 2,
    /// Not found: the run, step, operator limit, pause or secret grant named does not exist.
    NotFound = 3,
    /// The workflow definition is invalid.
    InvalidWorkflow = 4,
    /// The watched run ended other than `succeeded`.
    RunDidNotSucceed = 5,
    /// `watch --timeout-seconds` ran out with the run still running.
    StillRunning = 6,
    /// Postgres cannot be reached (or refuses the credentials, or the database does not exist).
    DatabaseUnreachable = 7,
    /// The idempotency key names a run submitted with different inputs.
    IdempotencyConflict = 8,
    /// `rara signal`: no step of the run waits for the signal now (it finished, or another
    /// completion came first, or nothing waits for that name).
    NotWaiting = 9,
    /// `rara rerun`: the rerun cannot be made as asked (no such step; a step that would be
    /// carried over did not succeed; a carried-over step read a run input that changes;
    /// `--workflow`'s version changed a carried-over step, lacks STEP, or does not plan with the
    /// rerun's inputs).
    RerunRefused = 10,
}

impl ExitCode {
    /// The number the process exits with.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The variant exiting with `code`, if there is one (an API error's `exit_code`).
    pub fn from_code(code: u8) -> Option<ExitCode> {
        ExitCode::ALL.iter().copied().find(|c| c.code() == code)
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code.code())
    }
}

/// The markdown table `| Code | Meaning |` of every code, one row each, as the CLI page holds
/// it between `<!-- exit-codes:begin -->` and `<!-- exit-codes:end -->`.
pub fn table() -> String {
    let mut out = String::from("| Code | Meaning |\n|-----:|---------|\n");
    for code in ExitCode::ALL {
        out.push_str(&format!("| {} | {} |\n", code.code(), code.meaning()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_back_to_its_variant_and_the_table_has_a_row_each() {
        for (i, code) in ExitCode::ALL.iter().enumerate() {
            assert_eq!(usize::from(code.code()), i, "codes are dense and in order");
            assert_eq!(ExitCode::from_code(code.code()), Some(*code));
        }
        assert_eq!(ExitCode::from_code(200), None);
        assert_eq!(table().lines().count(), ExitCode::ALL.len() + 2);
        assert!(
            table().contains(
                "| 3 | Not found: the run, step, operator limit, pause or secret grant named does not exist. |"
            )
        );
    }
}
