//! The lists of values the sweeps and benches take (`--pages 16,...,256`, `--devices 1,2,4`).

use tessera_core::PageSize;

/// The first value `values` names a second time, if any: lists of settings to compare refuse
/// it, since each setting is measured once.
pub fn repeated<T: PartialEq>(values: &[T]) -> Option<&T> {
    (1..values.len())
        .find(|&i| values[..i].contains(&values[i]))
        .map(|i| &values[i])
}

/// A parsed, sorted list without duplicates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct List(pub Vec<u32>);

/// Parses `a,b,c` where `...` between two values keeps doubling from the one before it;
/// `check` refuses a value, `what` names the values in messages.
pub fn parse_list_of(
    s: &str,
    what: &str,
    check: impl Fn(u32) -> Result<(), String>,
) -> Result<List, String> {
    let mut out: Vec<u32> = Vec::new();
    let mut pending_dots = false;
    for tok in s.split(',').map(str::trim) {
        if tok == "..." {
            if out.is_empty() || pending_dots {
                return Err(format!(
                    "`...` in {what} list {s:?} must stand between two values"
                ));
            }
            pending_dots = true;
            continue;
        }
        if tok.is_empty() {
            return Err(if s.trim().is_empty() {
                format!("the {what} list is empty")
            } else {
                format!("an empty entry in {what} list {s:?}")
            });
        }
        let v: u32 = tok.parse().map_err(|_| match tok.parse::<u128>() {
            Ok(_) => format!("{what} {tok} is too large (in {s:?})"),
            Err(_) => format!("{what} {tok:?} is not a whole number (in {s:?})"),
        })?;
        check(v)?;
        if pending_dots {
            let mut x = *out.last().unwrap_or(&v);
            if x >= v {
                return Err(format!(
                    "`...` in {what} list {s:?} doubles from {x} up to a larger value, not to {v}"
                ));
            }
            while x.saturating_mul(2) < v {
                x *= 2;
                // A value the list makes is held to what a given one is, and says where it
                // came from: `3,...,11` makes 6, an even filter no one typed.
                check(x).map_err(|e| format!("{e} (made by the `...` in {s:?}, which doubles)"))?;
                out.push(x);
            }
            pending_dots = false;
        }
        out.push(v);
    }
    if pending_dots {
        return Err(format!(
            "`...` in {what} list {s:?} must stand between two values"
        ));
    }
    let mut sorted = out.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("{what} {} appears twice in {s:?}", w[0]));
    }
    Ok(List(sorted))
}

pub fn parse_pages(s: &str) -> Result<List, String> {
    parse_list_of(s, "page size", |p| {
        PageSize::new(p).map(|_| ()).map_err(|_| {
            if p.is_power_of_two() {
                format!("page size {p} is out of range: a power of two between 1 and 512")
            } else {
                format!("page size {p} is not a power of two (1, 2, 4, ..., 512)")
            }
        })
    })
}

pub fn parse_devices(s: &str) -> Result<List, String> {
    parse_list_of(s, "device count", |d| {
        if d == 0 || d as usize > tessera_core::MAX_DEVICES {
            Err(format!(
                "device count {d} is out of range: between 1 and {}",
                tessera_core::MAX_DEVICES
            ))
        } else {
            Ok(())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_lists_expand_and_sort() {
        assert_eq!(
            parse_pages("1,2,...,512").unwrap().0,
            vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
        );
        assert_eq!(parse_pages("64, 16,32").unwrap().0, vec![16, 32, 64]);
        assert_eq!(parse_pages("8,...,64").unwrap().0, vec![8, 16, 32, 64]);
        assert_eq!(parse_devices("1,...,8").unwrap().0, vec![1, 2, 4, 8]);
        assert_eq!(parse_devices("3,5").unwrap().0, vec![3, 5]);
    }

    #[test]
    fn a_value_the_dots_make_is_checked_as_a_given_one() {
        let odd = |f: u32| match f % 2 {
            1 => Ok(()),
            _ => Err(format!("filter {f} is even")),
        };
        let e = parse_list_of("3,...,11", "filter size", odd).unwrap_err();
        assert!(e.contains("filter 6 is even (made by the `...` in"), "{e}");
        assert_eq!(
            parse_list_of("3,5,7", "filter size", odd).unwrap().0,
            [3, 5, 7]
        );
    }

    #[test]
    fn bad_lists_say_what_is_wrong() {
        for (s, needle) in [
            ("1,3,4", "page size 3 is not a power of two"),
            ("1024", "out of range"),
            ("0", "not a power of two"),
            ("16,16", "appears twice"),
            ("", "the page size list is empty"),
            ("16,,32", "an empty entry in page size list"),
            ("99999999999999999999", "99999999999999999999 is too large"),
            ("sixteen", "not a whole number"),
            ("-4", "not a whole number"),
            ("...,64", "between two values"),
            ("8,...", "between two values"),
            ("8,...,...,64", "between two values"),
            ("8,...,48", "not a power of two"),
            ("4,8,...,2", "up to a larger value, not to 2"),
            ("8,...,8", "up to a larger value, not to 8"),
        ] {
            let e = parse_pages(s).unwrap_err();
            assert!(e.contains(needle), "{s:?}: {e}");
        }
        assert!(parse_devices("0,2").unwrap_err().contains("out of range"));
        assert!(parse_devices("65")
            .unwrap_err()
            .contains("out of range: between 1 and 64"));
    }
}
