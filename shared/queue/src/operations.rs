//! The operations a message's steps run, as a hint beside its body: the attribute
//! [`OPERATIONS`] (`rara_operations`), the distinct operation names joined by commas
//! (`sleep,http.request`). The scheduler knows them when it leases; the executor reads them to
//! leave out work a batch cannot need (its quick steps' lock, when no message names a quick
//! operation). It is only a hint: the claim judges every step by its row, so a message
//! without the attribute, or with one this build does not read, is treated as naming
//! anything, and one that names the wrong operations costs at most a lock that finds nothing
//! or a quick step run on the ordinary path. Executors built before it ignore it.

/// The attribute naming the operations of a message's steps.
pub const OPERATIONS: &str = "rara_operations";
/// The longest attribute value written or read: beyond it (many distinct long names) the
/// message carries none, and an executor reads a longer one as absent.
pub const MAX_OPERATIONS_BYTES: usize = 1024;

/// The attribute's value for steps running `operations` (each name once, in the order first
/// seen); `None` when there are none, a name is not one the attribute can carry (empty, or
/// with a comma or a character outside printable ASCII), or the value would pass
/// [`MAX_OPERATIONS_BYTES`].
pub fn encode<'a>(operations: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut value = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for name in operations {
        if !carried(name) {
            return None;
        }
        if seen.contains(&name) {
            continue;
        }
        if !value.is_empty() {
            value.push(',');
        }
        value.push_str(name);
        if value.len() > MAX_OPERATIONS_BYTES {
            return None;
        }
        seen.push(name);
    }
    (!value.is_empty()).then_some(value)
}

/// The operation names an attribute value gives; `None` when it is not a value [`encode`]
/// writes (empty, too long, an empty or unprintable name): the message may name anything.
pub fn decode(value: &str) -> Option<Vec<&str>> {
    if value.is_empty() || value.len() > MAX_OPERATIONS_BYTES {
        return None;
    }
    let names: Vec<&str> = value.split(',').collect();
    names.iter().all(|name| carried(name)).then_some(names)
}

/// Whether a name can travel in the attribute: non-empty printable ASCII without a comma
/// (every valid operation name is: letters, digits and `. _ : -`).
fn carried(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b',')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_written_once_in_the_order_first_seen_and_read_back() {
        let value = encode(["sleep", "http.request", "sleep", "ml:train-v2"]).unwrap();
        assert_eq!(value, "sleep,http.request,ml:train-v2");
        assert_eq!(decode(&value), Some(vec!["sleep", "http.request", "ml:train-v2"]));
    }

    #[test]
    fn what_the_attribute_cannot_carry_is_not_written() {
        assert_eq!(encode([]), None, "no steps, no hint");
        assert_eq!(encode(["a,b"]), None, "a comma would split the name");
        assert_eq!(encode(["sleep", ""]), None);
        assert_eq!(encode(["two words"]), None);
        let long = "x".repeat(100);
        let names: Vec<String> = (0..11).map(|i| format!("{long}{i}")).collect();
        assert_eq!(encode(names.iter().map(String::as_str)), None, "past {MAX_OPERATIONS_BYTES} bytes");
        assert!(encode(names[..10].iter().map(String::as_str)).is_some(), "ten such names fit");
    }

    #[test]
    fn a_value_it_did_not_write_reads_as_absent() {
        for bad in ["", ",", "sleep,", ",sleep", "sleep,,noop", "sl eep", "slé", "\u{0}"] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
        assert_eq!(decode(&"x".repeat(MAX_OPERATIONS_BYTES + 1)), None);
        assert_eq!(decode(&"x".repeat(MAX_OPERATIONS_BYTES)).map(|n| n.len()), Some(1));
    }
}
