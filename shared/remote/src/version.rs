//! How capability versions compare when a step pins none and several are offered.
//!
//! A valid version is a SemVer 2.0 string (`MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`, as the
//! [`semver`] crate parses it). Valid versions order by SemVer precedence (`1.10.0` >
//! `1.9.0` > `1.9.0-rc.1`; build metadata is ignored), versions of equal precedence by their
//! text. Every invalid version (`1.x`, `1.10`, `v1.0.0`) ranks below every valid one, invalid
//! ones by their text: an executor that offers one is still routed to when a step pins that
//! exact string, or when nothing valid is offered.
//!
//! The Python executor applies the same rule (`rara_worker.capability.compare_versions`, which
//! also refuses to register an invalid version); both are tested against one table,
//! `tests/fixtures/capability-versions.json`.

use std::cmp::Ordering;

/// The SemVer version `version` spells, or `None` when it is not one.
pub fn parse(version: &str) -> Option<semver::Version> {
    semver::Version::parse(version).ok()
}

/// Orders two capability versions; the highest one is routed to when none is pinned.
pub fn compare(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp_precedence(&y).then_with(|| a.cmp(b)),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => a.cmp(b),
    }
}
