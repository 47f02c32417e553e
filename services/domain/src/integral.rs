//! Integers as JSON Schema reads them: `2` and `2.0` are the same number there
//! (an `integer` is any number without a fractional part), so a request body built
//! from the OpenAPI document may send either. These deserializers read both into
//! Rust integers and refuse a fraction, a negative or an out-of-range value with
//! serde's own error (the ingress answers it as `400 NRY-0001`). They serialize
//! nothing: what Holdpoint writes is always the plain integer.

use serde::de::{Deserialize, Deserializer, Error as _};
use serde_json::{Number, Value};

fn whole(n: &Number) -> Option<u64> {
    if let Some(u) = n.as_u64() {
        return Some(u);
    }
    let f = n.as_f64()?;
    // Exactly representable integers only (at most 2^53), as a double holds them.
    (f.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(&f)).then_some(f as u64)
}

fn read<E: serde::de::Error>(v: &Value, max: u64) -> Result<u64, E> {
    match v {
        Value::Number(n) => whole(n)
            .filter(|u| *u <= max)
            .ok_or_else(|| E::custom(format!("expected a whole number from 0 to {max}, got {n}"))),
        other => Err(E::custom(format!("expected a whole number, got {other}"))),
    }
}

/// A `u64` written `7` or `7.0`.
///
/// # Errors
/// A fraction, a negative, a number above `u64::MAX` or not a number.
pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    read(&Value::deserialize(d)?, u64::MAX)
}

/// An optional `u64` written `7` or `7.0` (`null` is `None`).
///
/// # Errors
/// As [`u64`].
pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        v => read(&v, u64::MAX).map(Some),
    }
}

/// A list of `u32`s, each written `7` or `7.0`.
///
/// # Errors
/// Not a list, or an item as [`u64`] or above `u32::MAX`.
pub fn u32s<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
    match Value::deserialize(d)? {
        Value::Array(items) => items
            .iter()
            .map(|v| read(v, u64::from(u32::MAX)).map(|u| u as u32))
            .collect(),
        other => Err(D::Error::custom(format!(
            "expected a list of whole numbers, got {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct T {
        #[serde(deserialize_with = "super::u32s")]
        options: Vec<u32>,
        #[serde(default, deserialize_with = "super::opt_u64")]
        secs: Option<u64>,
    }

    #[test]
    fn whole_numbers_in_either_spelling() {
        let t: T =
            serde_json::from_str(r#"{"options": [1, 2.0, 0.0], "secs": 3600.0}"#).expect("reads");
        assert_eq!((t.options, t.secs), (vec![1, 2, 0], Some(3600)));
        let t: T = serde_json::from_str(r#"{"options": [], "secs": null}"#).expect("reads");
        assert_eq!(t.secs, None);
        for bad in [
            r#"{"options": [1.5]}"#,
            r#"{"options": [-1]}"#,
            r#"{"options": [4294967296]}"#,
            r#"{"options": ["1"]}"#,
            r#"{"options": 1}"#,
            r#"{"options": [], "secs": 1e400}"#,
            r#"{"options": [], "secs": -0.5}"#,
        ] {
            assert!(serde_json::from_str::<T>(bad).is_err(), "{bad}");
        }
    }
}
