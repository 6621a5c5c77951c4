//! The bounds a definition is held to, whatever the configuration says.

/// The most steps one workflow may have.
pub const MAX_STEPS: usize = 10_000;
/// The longest name (run or step) accepted.
pub const MAX_NAME_LEN: usize = 200;
/// The longest step timeout accepted (a day); heartbeats keep long steps leased.
pub const MAX_TIMEOUT_SECONDS: u64 = 24 * 60 * 60;
/// The longest deadline a run may have (`timeout_seconds` at the top level): a year.
pub const MAX_RUN_TIMEOUT_SECONDS: u64 = 366 * 24 * 60 * 60;
/// The most elements a map step runs over (its children).
pub const MAX_MAP_ITEMS: usize = 10_000;
/// The longest retry delay accepted (`retry.initial_delay_seconds`, `retry.max_delay_seconds`):
/// a day, the longest step timeout and the longest `retry_after_seconds` honoured.
pub const MAX_RETRY_DELAY_SECONDS: u64 = MAX_TIMEOUT_SECONDS;
/// The largest retry multiplier accepted (`retry.multiplier`): beyond it the backoff reaches
/// `max_delay_seconds` at the second retry anyway.
pub const MAX_RETRY_MULTIPLIER: f64 = 100.0;
/// The longest operation name accepted: it becomes a metric dimension.
pub const MAX_OPERATION_LEN: usize = 128;
/// The most steps one run may hold in all, its maps' children included: a map's expansion
/// that would take the run past it fails the map step (`INVALID_INPUT`) and creates no child.
/// Ten times [`MAX_STEPS`]: ten maps of a thousand, or one of [`MAX_MAP_ITEMS`] and spares.
pub const MAX_RUN_STEPS: usize = 10 * MAX_STEPS;

/// Whether `name` is a valid operation name: 1 to [`MAX_OPERATION_LEN`] characters of ASCII
/// letters, digits and `. _ : -` (`text.split`, `http.request`, `ml:train-v2`). The metrics
/// code uses it too: a name that is not valid is never a metric dimension.
pub fn valid_operation(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_OPERATION_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}
