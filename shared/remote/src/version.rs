//! How capability versions compare when a step pins none and several are offered: by
//! dot-separated components, numerically where both components are numbers and in string
//! order otherwise (`1.10.0` > `1.9.0` > `1.9`; `2` > `1.99`).

use std::cmp::Ordering;

/// Orders two capability versions; the highest one is routed to when none is pinned.
pub fn compare(a: &str, b: &str) -> Ordering {
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return a.cmp(b),
            (Some(_), None) => return Ordering::Greater,
            (None, Some(_)) => return Ordering::Less,
            (Some(x), Some(y)) => {
                let by_component = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(x), Ok(y)) => x.cmp(&y),
                    _ => x.cmp(y),
                };
                if by_component != Ordering::Equal {
                    return by_component;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_components_compare_as_numbers() {
        assert_eq!(compare("1.10.0", "1.9.0"), Ordering::Greater);
        assert_eq!(compare("2", "1.99"), Ordering::Greater);
        assert_eq!(compare("1.0.0", "1.0.0"), Ordering::Equal);
        assert_eq!(compare("1.0", "1.0.0"), Ordering::Less);
        assert_eq!(compare("0.9", "0.10"), Ordering::Less);
    }

    #[test]
    fn non_numeric_components_fall_back_to_string_order() {
        assert_eq!(compare("1.0.beta", "1.0.alpha"), Ordering::Greater);
        assert_eq!(compare("abc", "abd"), Ordering::Less);
        assert_eq!(compare("1.x", "1.10"), Ordering::Greater);
    }

    #[test]
    fn the_highest_of_a_list_is_found_whatever_the_order() {
        let mut versions = vec!["1.2.0", "1.10.0", "0.9", "1.9.9"];
        versions.sort_by(|a, b| compare(a, b));
        assert_eq!(versions, ["0.9", "1.2.0", "1.9.9", "1.10.0"]);
    }

    #[test]
    fn equal_numbers_written_differently_still_order_deterministically() {
        assert_eq!(compare("01", "1"), Ordering::Less);
        assert_eq!(compare("1", "01"), Ordering::Greater);
    }
}
