//! Structural limits on JSON request bodies, checked before anything reads them:
//! no object may repeat a key (a `serde_json::Value` would keep the last one
//! silently), and nesting may not exceed [`MAX_DEPTH`] (stored records wrap a
//! person's value in a few more levels, and must stay readable under
//! `serde_json`'s recursion limit of 128).

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Deepest nesting of arrays and objects a body may have.
pub const MAX_DEPTH: usize = 32;

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Guard {
    /// An object repeats a key, at this depth (0 = the top-level value).
    #[error("the body repeats a JSON key")]
    DuplicateKey {
        /// Depth of the object.
        depth: usize,
    },
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("the body nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// A number beyond the range of a double (`1e400`): its digits would be kept,
    /// but most JSON readers cannot read it back.
    #[error("the body holds a number out of range")]
    NumberOutOfRange,
    /// Not JSON at all (the typed parse reports the details).
    #[error("the body is not valid JSON")]
    Invalid,
}

impl Guard {
    /// The depth of the offending object (0 for the top level or unknown).
    pub fn depth(&self) -> usize {
        match self {
            Guard::DuplicateKey { depth } => *depth,
            Guard::TooDeep | Guard::NumberOutOfRange | Guard::Invalid => 1,
        }
    }
}

const DUP: &str = "holdpoint-duplicate-key-depth:";
/// The key under which serde_json (built with `arbitrary_precision`, as Holdpoint
/// is) hands a number over as its text; such a "map" is one number.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";
const RANGE: &str = "holdpoint-number-out-of-range";
const DEEP: &str = "holdpoint-too-deep";

struct Walk(usize);

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.0 > MAX_DEPTH {
            return Err(serde::de::Error::custom(DEEP));
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Walk(self.0 + 1))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(k) = map.next_key::<String>()? {
            if keys.is_empty() && k == NUMBER_TOKEN {
                // A number serde_json hands over as its text (a decimal, or an
                // integer beyond 64 bits): a scalar, not an object. Its digits are
                // kept, but it must be a finite double, as JSON parsers elsewhere
                // (and this one without `arbitrary_precision`) require.
                let text = map.next_value::<String>()?;
                if !text.parse::<f64>().is_ok_and(f64::is_finite) {
                    return Err(serde::de::Error::custom(RANGE));
                }
                return Ok(());
            }
            if !keys.insert(k) {
                return Err(serde::de::Error::custom(format!("{DUP}{}", self.0)));
            }
            map.next_value_seed(Walk(self.0 + 1))?;
        }
        Ok(())
    }
}

/// Checks `bytes` against the limits.
///
/// # Errors
/// The first [`Guard`] the body breaks.
pub fn check(bytes: &[u8]) -> Result<(), Guard> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match Walk(0).deserialize(&mut de).and_then(|()| de.end()) {
        Ok(()) => Ok(()),
        Err(e) => {
            let text = e.to_string();
            if let Some(rest) = text.split(DUP).nth(1) {
                let depth = rest
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(0);
                Err(Guard::DuplicateKey { depth })
            } else if text.contains(RANGE) {
                Err(Guard::NumberOutOfRange)
            } else if text.contains(DEEP) || text.contains("recursion limit") {
                Err(Guard::TooDeep)
            } else {
                Err(Guard::Invalid)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert_eq!(check(br#"{"a":1,"b":[1,{"c":2}]}"#), Ok(()));
        assert_eq!(
            check(br#"{"a":1,"a":2}"#),
            Err(Guard::DuplicateKey { depth: 0 })
        );
        assert_eq!(
            check(br#"{"p":{"m":{"x":1,"x":1}}}"#),
            Err(Guard::DuplicateKey { depth: 2 })
        );
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(check(ok.as_bytes()), Ok(()));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 2), "]".repeat(MAX_DEPTH + 2));
        assert_eq!(check(deep.as_bytes()), Err(Guard::TooDeep));
        let very = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(check(very.as_bytes()), Err(Guard::TooDeep));
        assert_eq!(check(b"{"), Err(Guard::Invalid));
        // Numbers are scalars at any depth, whatever their spelling or size.
        let numbers = format!(
            "{}1.5, 12345678901234567890123, -0, 1e-400{}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        );
        assert_eq!(check(numbers.as_bytes()), Ok(()));
        assert_eq!(
            check(br#"{"a":1.5,"b":{"c":2.25,"c":1}}"#),
            Err(Guard::DuplicateKey { depth: 1 })
        );
        assert_eq!(check(b"[1e400]"), Err(Guard::NumberOutOfRange));
        assert_eq!(check(br#"{"v":-1e400}"#), Err(Guard::NumberOutOfRange));
    }
}
