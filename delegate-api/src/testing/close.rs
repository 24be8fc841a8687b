//! Element-wise comparison of a result against its expected values.

/// Asserts that `actual` matches `expected` element by element: NaN where NaN is expected,
/// the same infinity where one is expected, else `|actual - expected| <= atol + rtol *
/// |expected|`.
///
/// On failure it panics naming the first element out of tolerance, both values, and how
/// many elements are out of tolerance in all: one wrong element and a wrong half are
/// different bugs.
pub fn assert_close<A, E>(actual: &[A], expected: &[E], atol: f64, rtol: f64)
where
    A: Copy + Into<f64>,
    E: Copy + Into<f64>,
{
    if let Err(why) = compare(actual, expected, atol, rtol) {
        panic!("{why}");
    }
}

/// [`assert_close`], with `label` (which output, which case) leading the panic message.
pub fn assert_close_labelled<A, E>(label: &str, actual: &[A], expected: &[E], atol: f64, rtol: f64)
where
    A: Copy + Into<f64>,
    E: Copy + Into<f64>,
{
    if let Err(why) = compare(actual, expected, atol, rtol) {
        panic!("{label}: {why}");
    }
}

fn compare<A, E>(actual: &[A], expected: &[E], atol: f64, rtol: f64) -> Result<(), String>
where
    A: Copy + Into<f64>,
    E: Copy + Into<f64>,
{
    if actual.len() != expected.len() {
        return Err(format!(
            "{} elements, expected {}",
            actual.len(),
            expected.len()
        ));
    }
    let mut first = None;
    let mut mismatches = 0;
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let (a, e): (f64, f64) = (a.into(), e.into());
        let ok = if e.is_nan() {
            a.is_nan()
        } else if e.is_infinite() {
            a == e
        } else {
            (a - e).abs() <= atol + rtol * e.abs()
        };
        if !ok {
            mismatches += 1;
            first.get_or_insert((i, a, e));
        }
    }
    match first {
        None => Ok(()),
        Some((i, a, e)) => Err(format!(
            "element {i}: got {a}, expected {e} ({mismatches} of {} elements out of \
             tolerance atol {atol}, rtol {rtol})",
            actual.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{assert_close, compare};

    #[test]
    fn special_values_match_only_themselves() {
        assert_close(
            &[f32::NAN, f32::INFINITY, 1.0],
            &[f64::NAN, f64::INFINITY, 1.0],
            0.0,
            0.0,
        );
        assert!(compare(&[1.0f32], &[f64::NAN], 1.0, 1.0).is_err());
        assert!(compare(&[f32::MAX], &[f64::INFINITY], 1.0, 1.0).is_err());
    }

    #[test]
    fn the_message_names_the_first_mismatch_and_counts_them_all() {
        let why =
            compare(&[0.0f32, 5.0, 1.0, 7.0], &[0.0f64, 1.0, 1.0, 1.0], 0.5, 0.0).unwrap_err();
        assert!(
            why.starts_with("element 1: got 5, expected 1 (2 of 4 elements"),
            "{why}"
        );
        assert!(compare(&[1.0f32], &[1.0f64, 2.0], 0.0, 0.0).is_err());
    }
}
