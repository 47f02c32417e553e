//! The one format of every timestamp Holdpoint writes: RFC 3339 in UTC with exactly
//! three fractional digits and `Z`, `2026-04-01T10:00:03.520Z` (millisecond
//! precision, as A2A v1.0 asks of `status.timestamp`; a valid ProtoJSON
//! `Timestamp` and CloudEvents `time`). CloudEvents `time`, the records' and the
//! REST views' times, A2A task statuses and A2A error details all use [`format`].
//!
//! Reading is lenient: any RFC 3339 timestamp (any number of fractional digits, any
//! offset) is accepted, so records written before keep reading.
//!
//! Use as `#[serde(with = "crate::timestamp")]` on an `OffsetDateTime`.

use serde::{Deserialize, Deserializer, Serializer};
use time::format_description::BorrowedFormatItem;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

const FORMAT: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// `t` in UTC as `YYYY-MM-DDTHH:MM:SS.mmmZ` (the sub-millisecond part is cut,
/// never rounded up).
pub fn format(t: OffsetDateTime) -> String {
    let utc = t.to_offset(UtcOffset::UTC);
    utc.format(FORMAT)
        .or_else(|_| utc.format(&Rfc3339))
        .unwrap_or_default()
}

/// `t` cut to the millisecond, as [`format`] writes it: a time a decision keeps in
/// a record held in memory then equals the same record read back from its JSON
/// (a deadline compared with the one a schedule carries, for one).
pub fn truncate(t: OffsetDateTime) -> OffsetDateTime {
    let millis = t.nanosecond() / 1_000_000 * 1_000_000;
    t.replace_nanosecond(millis).unwrap_or(t)
}

/// Parses an RFC 3339 timestamp (any precision, any offset).
///
/// # Errors
/// When `s` is not RFC 3339.
pub fn parse(s: &str) -> Result<OffsetDateTime, time::error::Parse> {
    OffsetDateTime::parse(s, &Rfc3339)
}

/// Serializes with [`format`].
///
/// # Errors
/// Those of the serializer.
pub fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*t))
}

/// Deserializes any RFC 3339 timestamp.
///
/// # Errors
/// When the value is not an RFC 3339 string.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
    let s = String::deserialize(d)?;
    parse(&s).map_err(serde::de::Error::custom)
}

/// The same format for an optional timestamp: use as
/// `#[serde(default, with = "crate::timestamp::option", skip_serializing_if = "Option::is_none")]`.
pub mod option {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::OffsetDateTime;

    /// Serializes `Some(t)` with [`super::format`], `None` as null.
    ///
    /// # Errors
    /// Those of the serializer.
    pub fn serialize<S: Serializer>(t: &Option<OffsetDateTime>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&super::format(*t)),
            None => s.serialize_none(),
        }
    }

    /// Deserializes an RFC 3339 timestamp or null.
    ///
    /// # Errors
    /// When the value is neither null nor an RFC 3339 string.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<OffsetDateTime>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(s) => super::parse(&s).map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn one_format_milliseconds_and_z() {
        assert_eq!(
            format(datetime!(2026-04-01 10:00:03.520034669 UTC)),
            "2026-04-01T10:00:03.520Z"
        );
        assert_eq!(
            format(datetime!(2026-04-01 10:00:03 UTC)),
            "2026-04-01T10:00:03.000Z"
        );
        assert_eq!(
            format(datetime!(2026-04-01 12:00:03.999999999 +02:00)),
            "2026-04-01T10:00:03.999Z"
        );
        // Whatever the instant, the same shape.
        let shape = regex_like(&format(OffsetDateTime::now_utc()));
        assert_eq!(shape, "dddd-dd-ddTdd:dd:dd.dddZ");
    }

    #[test]
    fn truncate_gives_what_a_record_reads_back() {
        let t = datetime!(2026-04-01 10:00:03.520034669 UTC);
        let cut = truncate(t);
        assert_eq!(cut, datetime!(2026-04-01 10:00:03.520 UTC));
        assert_eq!(parse(&format(t)).ok(), Some(cut));
        assert_eq!(truncate(cut), cut);
        let offset = datetime!(2026-04-01 12:00:03.999999999 +02:00);
        assert_eq!(format(truncate(offset)), "2026-04-01T10:00:03.999Z");
    }

    fn regex_like(s: &str) -> String {
        s.chars()
            .map(|c| if c.is_ascii_digit() { 'd' } else { c })
            .collect()
    }

    #[test]
    fn any_rfc3339_reads() {
        for s in [
            "2026-04-01T10:00:03.520034669Z",
            "2026-04-01T10:00:03Z",
            "2026-04-01T12:00:03.52+02:00",
        ] {
            assert!(parse(s).is_ok(), "{s}");
        }
        assert!(parse("2026-04-01 10:00:03").is_err());
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct T {
            #[serde(with = "crate::timestamp")]
            at: OffsetDateTime,
        }
        let t: T = serde_json::from_str(r#"{"at":"2026-04-01T10:00:03.520034669Z"}"#).expect("t");
        assert_eq!(
            serde_json::to_string(&t).expect("json"),
            r#"{"at":"2026-04-01T10:00:03.520Z"}"#
        );
    }
}
