//! Units for people and for files: byte sizes (MiB/GiB constants and their printed forms), short
//! durations, and RFC 3339 timestamps (on `jiff`, the workspace's one date-time crate).
//!
//! The printed forms differ on purpose where the places that use them differ (a report table
//! rounds, a diagnosis keeps two decimals); each form has its own function here so that every
//! caller of one form prints the same bytes.

use jiff::tz::{Offset, TimeZone};
use jiff::Timestamp;

/// Bytes in a MiB.
pub(crate) const MIB: u64 = 1 << 20;
/// Bytes in a GiB.
pub(crate) const GIB: u64 = 1 << 30;

/// A MiB amount with two decimals: `1536.00 MiB` (diagnoses, advice).
pub(crate) fn mib(x: f64) -> String {
    format!("{x:.2} MiB")
}

/// A MiB amount rounded for a table: no decimals from 100 MiB on, else one (`512 MiB`, `12.5 MiB`).
pub(crate) fn mib_rounded(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} MiB")
    } else {
        format!("{v:.1} MiB")
    }
}

/// A byte count in GiB with two decimals: `7.50 GiB`.
pub fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / GIB as f64)
}

/// A memory size for people: GiB with one decimal from 1 GiB on, else whole MiB (`1.5 GiB`,
/// `640 MiB`).
pub(crate) fn gib_or_mib(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= GIB {
        format!("{:.1} GiB", b / GIB as f64)
    } else {
        format!("{:.0} MiB", b / MIB as f64)
    }
}

/// A file size for a report table: GiB with two decimals from 1 GiB on, MiB with one from
/// 1 MiB on, else bytes (`1.99 GiB`, `159.8 MiB`, `512 B`).
pub(crate) fn file_size(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= GIB {
        format!("{:.2} GiB", b / GIB as f64)
    } else if bytes >= MIB {
        format!("{:.1} MiB", b / MIB as f64)
    } else {
        format!("{bytes} B")
    }
}

/// Bytes as MiB, for the `*_mib` fields of the journal and the report.
pub(crate) fn to_mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// A byte count in the largest binary unit that keeps it at least 1, one decimal (bytes as a
/// whole number): `0 B`, `1.5 KiB`, `2.0 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Seconds for a report: one decimal under a minute, else minutes and seconds (`4.2 s`,
/// `3m 05s`).
pub(crate) fn seconds(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        let total = s.round() as u64;
        format!("{}m {:02}s", total / 60, total % 60)
    }
}

/// A duration for progress lines, whole seconds without spaces: `1h02m`, `3m05s`, `12s`.
pub fn compact_duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Now, UTC, RFC 3339 with as many fraction digits as needed: `2026-12-01T03:12:44.5Z`.
pub(crate) fn now_rfc3339() -> String {
    Timestamp::now().to_string()
}

/// A Unix time (seconds) as RFC 3339 UTC (`2026-12-01T03:12:44Z`); empty when out of range.
pub(crate) fn unix_rfc3339(seconds: i64) -> String {
    Timestamp::from_second(seconds)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Parses an RFC 3339 timestamp (any offset).
pub(crate) fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    parse_rfc3339_offset(text).map(|(t, _)| t)
}

/// Parses an RFC 3339 timestamp and keeps the offset it was written with.
pub(crate) fn parse_rfc3339_offset(text: &str) -> Option<(Timestamp, Offset)> {
    if !is_rfc3339(text) {
        return None;
    }
    let t: Timestamp = text.parse().ok()?;
    let offset = jiff::fmt::temporal::Pieces::parse(text)
        .ok()
        .and_then(|p| p.to_numeric_offset())
        .unwrap_or(Offset::UTC);
    Some((t, offset))
}

/// Formats a timestamp as RFC 3339 at `offset`: `Z` for UTC, else `±HH:MM`; fraction digits only
/// as many as needed.
pub(crate) fn format_rfc3339(t: Timestamp, offset: Offset) -> String {
    if offset == Offset::UTC {
        t.to_string()
    } else {
        t.display_with_offset(offset).to_string()
    }
}

/// An RFC 3339 time as the local wall-clock time to the second (`2026-12-06 03:39:30`), in the
/// system's time zone; the text unchanged when it does not parse.
pub fn local_seconds(text: &str) -> String {
    match parse_rfc3339(text) {
        Some(t) => t
            .to_zoned_datetime(TimeZone::system())
            .datetime()
            .strftime("%Y-%m-%d %H:%M:%S")
            .to_string(),
        None => text.to_string(),
    }
}

/// The UTC calendar fields of a timestamp (for file names and log stamps).
pub(crate) fn utc(t: Timestamp) -> jiff::civil::DateTime {
    t.to_zoned_datetime(TimeZone::UTC).datetime()
}

/// Whether `text` has RFC 3339's shape: `YYYY-MM-DDTHH:MM:SS[.f…](Z|±HH:MM)` (`t`/`z` allowed
/// as RFC 3339 allows). Stricter than `jiff`'s parser, which also takes ISO 8601 forms
/// (no seconds, basic format) that RFC 3339 does not.
fn is_rfc3339(text: &str) -> bool {
    let b = text.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || !matches!(b[10], b'T' | b't')
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    let mut i = 19;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', ..] => {
            b.len() == i + 6 && digits(i + 1..i + 3) && b[i + 3] == b':' && digits(i + 4..i + 6)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_forms() {
        assert_eq!(mib(1536.0), "1536.00 MiB");
        assert_eq!(mib_rounded(99.94), "99.9 MiB");
        assert_eq!(mib_rounded(100.0), "100 MiB");
        assert_eq!(gib(3 * GIB / 2), "1.50 GiB");
        assert_eq!(gib_or_mib(GIB - 1), "1024 MiB");
        assert_eq!(gib_or_mib(GIB), "1.0 GiB");
        assert_eq!(gib_or_mib(640 * MIB), "640 MiB");
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(2 << 30), "2.0 GiB");
        assert_eq!(file_size(2_136_746_229), "1.99 GiB");
        assert_eq!(file_size(GIB - 1), "1024.0 MiB");
        assert_eq!(file_size(MIB), "1.0 MiB");
        assert_eq!(file_size(MIB - 1), "1048575 B");
        assert_eq!(to_mib(3 * MIB / 2), 1.5);
    }

    #[test]
    fn seconds_form() {
        assert_eq!(seconds(4.25), "4.2 s");
        assert_eq!(seconds(59.9), "59.9 s");
        assert_eq!(seconds(185.4), "3m 05s");
        use std::time::Duration;
        assert_eq!(compact_duration(Duration::from_secs(3725)), "1h02m");
        assert_eq!(compact_duration(Duration::from_secs(185)), "3m05s");
        assert_eq!(compact_duration(Duration::from_millis(12_900)), "12s");
    }

    #[test]
    fn timestamps_print_as_before() {
        // The forms `time`'s RFC 3339 formatter wrote (journal compat files have them).
        let t = parse_rfc3339("2026-12-01T03:12:44.120000Z").unwrap();
        assert_eq!(t.to_string(), "2026-12-01T03:12:44.12Z");
        assert_eq!(unix_rfc3339(1_764_558_764), "2025-12-01T03:12:44Z");
        let (t, o) = parse_rfc3339_offset("2026-12-02T05:00:00+02:00").unwrap();
        assert_eq!(
            t.as_second(),
            parse_rfc3339("2026-12-02T03:00:00Z").unwrap().as_second()
        );
        assert_eq!(format_rfc3339(t, o), "2026-12-02T05:00:00+02:00");
        let (t, o) = parse_rfc3339_offset("2026-12-02T05:00:00.000001+00:00").unwrap();
        assert_eq!(format_rfc3339(t, o), "2026-12-02T05:00:00.000001Z");
        let (t, o) = parse_rfc3339_offset("2026-12-02T05:00:00-05:30").unwrap();
        assert_eq!(format_rfc3339(t, o), "2026-12-02T05:00:00-05:30");
        let now = now_rfc3339();
        assert!(now.ends_with('Z') && parse_rfc3339(&now).is_some(), "{now}");
        let d = utc(parse_rfc3339("2026-01-02T03:04:05.678+01:00").unwrap());
        assert_eq!((d.year(), d.month(), d.day(), d.hour()), (2026, 1, 2, 2));
    }

    #[test]
    fn rejects_what_rfc3339_does_not_allow() {
        for bad in [
            "",
            "2026-12-01",
            "2026-12-01T03:12Z",
            "2026-12-01T03:12:44",
            "20261201T031244Z",
            "2026-12-01T03:12:44.Z",
            "2026-12-01T03:12:44+0200",
            "2026-12-01T03:12:44+02",
            "2026-13-01T03:12:44Z",
        ] {
            assert!(parse_rfc3339(bad).is_none(), "{bad}");
        }
    }
}
