//! The bounds a definition is held to, whatever the configuration says.

/// The most steps one workflow may have.
pub const MAX_STEPS: usize = 10_000;
/// The longest name (run or step) accepted.
pub const MAX_NAME_LEN: usize = 200;
/// The longest step timeout accepted (a day); heartbeats keep long steps leased.
pub const MAX_TIMEOUT_SECONDS: u64 = 24 * 60 * 60;
/// The most elements a map step runs over (its children).
pub const MAX_MAP_ITEMS: usize = 10_000;
