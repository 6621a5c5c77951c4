//! Numbers for people: durations and ratios rounded the way a person reads them (`2.67 s`,
//! `250 ms`, `4 min 10 s`, `1.45 ×`), for every message, table and progress line rara shows.
//! Machine output (`--json`, metrics) keeps exact values.

use std::fmt;
use std::time::Duration;

/// A duration shown to a person. `Display`: `0 s`, `250 ms`, `2.67 s`, `90 s`,
/// `4 min 10 s`, `2 h 5 min`, `3 d 4 h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Human(pub Duration);

/// `Human(d)`, for `format!("{}", human::duration(d))`.
pub fn duration(d: Duration) -> Human {
    Human(d)
}

/// A ratio to two decimals at most, trailing zeros dropped: `1.45`, `3`, `0.33`.
pub fn ratio(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    trim(format!("{value:.2}"))
}

/// A duration as an operator writes one: a whole number and a unit (`s`, `m`, `h`, `d`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration: expected a whole number and a unit s, m, h or d (`90m`, `7d`)");
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    // Beyond a hundred thousand years the cutoff is before any timestamp Postgres keeps.
    const MAX_SECONDS: u64 = 100_000 * 365 * 86_400;
    match number.checked_mul(seconds) {
        Some(total) if total <= MAX_SECONDS => Ok(Duration::from_secs(total)),
        _ => Err(format!("{text:?} is too long a duration (at most 100000 years)")),
    }
}

fn trim(text: String) -> String {
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_owned() } else { text }
}

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let secs = d.as_secs();
        if d.is_zero() {
            write!(f, "0 s")
        } else if d < Duration::from_secs(1) {
            // Below a millisecond, one decimal (`0.3 ms`); else whole milliseconds.
            let ms = d.as_secs_f64() * 1000.0;
            if ms < 1.0 { write!(f, "{} ms", trim(format!("{ms:.1}"))) } else { write!(f, "{} ms", ms.round()) }
        } else if secs < 100 {
            write!(f, "{} s", trim(format!("{:.2}", d.as_secs_f64())))
        } else if secs < 3600 {
            let rounded = (d.as_secs_f64()).round() as u64;
            match (rounded / 60, rounded % 60) {
                (m, 0) => write!(f, "{m} min"),
                (m, s) => write!(f, "{m} min {s} s"),
            }
        } else if secs < 86_400 {
            let minutes = (d.as_secs_f64() / 60.0).round() as u64;
            match (minutes / 60, minutes % 60) {
                (h, 0) => write!(f, "{h} h"),
                (h, m) => write!(f, "{h} h {m} min"),
            }
        } else {
            let hours = (d.as_secs_f64() / 3600.0).round() as u64;
            match (hours / 24, hours % 24) {
                (days, 0) => write!(f, "{days} d"),
                (days, h) => write!(f, "{days} d {h} h"),
            }
        }
    }
}

/// What a JSON value is, for a person (`a string`, `a list`): never the value itself.
pub fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_a_number_and_a_unit() {
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        for bad in ["", "7", "d", "7 d", "7w", "-1d", "1.5h", "7dd", "99999999999999999999d", "9999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn durations_read_as_a_person_writes_them() {
        let cases = [
            (Duration::ZERO, "0 s"),
            (Duration::from_micros(300), "0.3 ms"),
            (Duration::from_micros(250_400), "250 ms"),
            (Duration::from_secs_f64(2.666_666_666_000_000_2), "2.67 s"),
            (Duration::from_secs(6), "6 s"),
            (Duration::from_millis(1500), "1.5 s"),
            (Duration::from_secs(90), "90 s"),
            (Duration::from_secs(250), "4 min 10 s"),
            (Duration::from_secs(300), "5 min"),
            (Duration::from_secs(2 * 3600 + 5 * 60 + 10), "2 h 5 min"),
            (Duration::from_secs(12 * 3600), "12 h"),
            (Duration::from_secs(3 * 86_400 + 4 * 3600), "3 d 4 h"),
        ];
        for (d, expected) in cases {
            assert_eq!(duration(d).to_string(), expected, "{d:?}");
        }
    }

    #[test]
    fn ratios_have_two_decimals_at_most() {
        assert_eq!(ratio(1.4537), "1.45");
        assert_eq!(ratio(3.0), "3");
        assert_eq!(ratio(1.0 / 3.0), "0.33");
        assert_eq!(ratio(0.5), "0.5");
    }
}
