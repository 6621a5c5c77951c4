//! Flow control in a definition (DESIGN.md "Flow control"): a step's concurrency key and limit,
//! the key's template over the run's inputs, and the spelling of a rate (`50/s`).
//!
//! ```yaml
//! inputs: { tenant: { type: string, default: acme } }
//! steps:
//!   - name: call
//!     operation: http.request
//!     concurrency: { key: "tenant-{input.tenant}", limit: 2 }   # key filled at submit: tenant-acme
//!     priority: 10                                               # higher first; default 0
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The longest concurrency key accepted (after its template is filled).
pub const MAX_KEY_LEN: usize = 200;

/// `concurrency:` of a step as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencySpec {
    /// The key, static or a template over the run's inputs: `tenant-{input.tenant}`.
    pub key: String,
    /// At most this many steps of the key held at once (leased or running). Operators may set
    /// a limit for the key too (`rara limits set`); the smaller one holds.
    #[serde(default)]
    pub limit: Option<u32>,
}

/// A step's concurrency as stored: the key with its template filled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concurrency {
    pub key: String,
    pub limit: Option<u32>,
}

/// Fills `{input.NAME}` (or `{input.a.b}` for a nested value) from the run's inputs; a string
/// goes in as it is, any other value as JSON. The result must be a valid key ([`check_key`]).
pub fn fill_key(template: &str, inputs: &serde_json::Value) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or_else(|| format!("{template:?}: a '{{' without its '}}'"))?;
        let field = &after[..close];
        let path = field
            .strip_prefix("input.")
            .filter(|p| !p.is_empty())
            .ok_or_else(|| format!("{template:?}: {{{field}}} is not a run input; write {{input.NAME}}"))?;
        let value = path
            .split('.')
            .try_fold(inputs, |v, part| v.get(part))
            .ok_or_else(|| format!("{template:?}: the run has no input {path:?}"))?;
        match value {
            serde_json::Value::String(s) => out.push_str(s),
            other => out.push_str(&other.to_string()),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    check_key(&out)?;
    Ok(out)
}

/// A key is 1 to [`MAX_KEY_LEN`] bytes without `*` (which names a group of keys in operators'
/// limits and pauses) and without control characters. A key too long is not echoed back.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(format!("{} bytes; a key is 1 to {MAX_KEY_LEN} bytes", key.len()));
    }
    if key.contains('*') {
        return Err(format!("{key:?}: a key cannot hold '*' (it names a group of keys: `tenant-*`)"));
    }
    if key.chars().any(char::is_control) {
        return Err(format!("{key:?}: a key cannot hold control characters (newlines, tabs, ...)"));
    }
    Ok(())
}

/// A rate: `count` per `period` (`50/s`, `600/min`, `10/2s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub period: Duration,
}

impl Rate {
    /// How many tokens the bucket holds at most: a tenth of a period's, at least one, so a
    /// key that waited long starts with a short burst rather than a whole period at once.
    pub fn burst(&self) -> u32 {
        self.count.div_ceil(10).max(1)
    }
}

impl std::str::FromStr for Rate {
    type Err = String;

    fn from_str(text: &str) -> Result<Rate, String> {
        let bad = || format!("{text:?}: a rate is COUNT/PERIOD, e.g. 50/s, 600/min, 10/2s, 1000/h");
        let (count, period) = text.split_once('/').ok_or_else(bad)?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        let period = period.trim();
        let digits = period.find(|c: char| !c.is_ascii_digit()).unwrap_or(period.len());
        let times: u64 = if digits == 0 { 1 } else { period[..digits].parse().map_err(|_| bad())? };
        let unit = match &period[digits..] {
            "ms" => Duration::from_millis(1),
            "s" | "sec" => Duration::from_secs(1),
            "m" | "min" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        if count == 0 || times == 0 {
            return Err(format!("{text:?}: a rate needs a count and a period above zero"));
        }
        let times = u32::try_from(times).map_err(|_| bad())?;
        Ok(Rate { count, period: unit.checked_mul(times).ok_or_else(bad)? })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.period.as_millis();
        match ms {
            1000 => write!(f, "{}/s", self.count),
            60_000 => write!(f, "{}/min", self.count),
            3_600_000 => write!(f, "{}/h", self.count),
            ms if ms % 1000 == 0 => write!(f, "{}/{}s", self.count, ms / 1000),
            ms => write!(f, "{}/{ms}ms", self.count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_template_is_filled_from_run_inputs() {
        let inputs = serde_json::json!({"tenant": "acme", "n": 3, "org": {"id": "o1"}});
        assert_eq!(fill_key("tenant-{input.tenant}", &inputs).unwrap(), "tenant-acme");
        assert_eq!(fill_key("{input.org.id}/{input.n}", &inputs).unwrap(), "o1/3");
        assert_eq!(fill_key("static", &inputs).unwrap(), "static");
        assert!(fill_key("tenant-{input.nope}", &inputs).unwrap_err().contains("no input \"nope\""));
        assert!(fill_key("tenant-{tenant}", &inputs).unwrap_err().contains("write {input.NAME}"));
        assert!(fill_key("tenant-{input.tenant", &inputs).unwrap_err().contains("without"));
        assert!(fill_key("tenant-*", &inputs).unwrap_err().contains("'*'"));
        assert!(fill_key("", &inputs).is_err());
        assert!(fill_key("a\nb", &inputs).unwrap_err().contains("control characters"));
        let long = fill_key(&"k".repeat(MAX_KEY_LEN + 1), &inputs).unwrap_err();
        assert_eq!(long, format!("{} bytes; a key is 1 to {MAX_KEY_LEN} bytes", MAX_KEY_LEN + 1));
    }

    #[test]
    fn rates_parse_and_print_back() {
        for (text, count, ms, shown) in [
            ("50/s", 50, 1000, "50/s"),
            ("600/min", 600, 60_000, "600/min"),
            ("10/2s", 10, 2000, "10/2s"),
            ("5/250ms", 5, 250, "5/250ms"),
            ("1000/h", 1000, 3_600_000, "1000/h"),
        ] {
            let rate: Rate = text.parse().unwrap();
            assert_eq!((rate.count, rate.period.as_millis()), (count, ms), "{text}");
            assert_eq!(rate.to_string(), shown);
        }
        for bad in ["50", "0/s", "50/0s", "50/fortnight", "x/s", "10/4294967296s"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad} must be refused");
        }
        assert_eq!("50/s".parse::<Rate>().unwrap().burst(), 5);
        assert_eq!("1/min".parse::<Rate>().unwrap().burst(), 1);
    }
}
