//! Times and durations on the command line: `--start-at 01:00`, `--deadline 07:00` or RFC 3339,
//! `--timeout 30m`, `--wait-server 10m`.

use std::time::Duration;
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, Time, UtcOffset};

/// Parses `HH:MM` (the next such local time after `now`, in `offset`) or an RFC 3339 time.
pub fn parse_when(
    text: &str,
    now: OffsetDateTime,
    offset: UtcOffset,
) -> Result<OffsetDateTime, String> {
    let t = text.trim();
    if let Ok(at) = OffsetDateTime::parse(t, &Rfc3339) {
        return Ok(at);
    }
    let bad = || {
        format!("'{text}' is not a time: use HH:MM (local time, e.g. 07:00) or RFC 3339 (e.g. 2026-11-30T07:00:00+01:00)")
    };
    let (h, m) = t.split_once(':').ok_or_else(bad)?;
    let hour: u8 = h.parse().map_err(|_| bad())?;
    let minute: u8 = m.parse().map_err(|_| bad())?;
    let clock = Time::from_hms(hour, minute, 0).map_err(|_| bad())?;
    let local_now = now.to_offset(offset);
    let mut at = local_now.replace_time(clock);
    if at <= local_now {
        at += time::Duration::days(1);
    }
    Ok(at)
}

/// Formats a time as RFC 3339.
pub fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

/// The machine's UTC offset, from `date +%z` (which honours `TZ`), else UTC (with the reason).
pub fn local_offset() -> (UtcOffset, Option<String>) {
    if let Ok(out) = std::process::Command::new("date").arg("+%z").output() {
        if let Some(o) = parse_numeric_offset(String::from_utf8_lossy(&out.stdout).trim()) {
            return (o, None);
        }
    }
    (
        UtcOffset::UTC,
        Some("cannot tell the local time zone; HH:MM times are read as UTC (pass RFC 3339 to be exact)".into()),
    )
}

fn parse_numeric_offset(s: &str) -> Option<UtcOffset> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    if rest.len() != 4 || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: i8 = rest[..2].parse().ok()?;
    let m: i8 = rest[2..].parse().ok()?;
    UtcOffset::from_hms(sign * h, sign * m, 0).ok()
}

/// The longest duration an option takes (a year): longer cannot be meant, and every deadline
/// computed from a shorter one fits in a clock.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a duration: `90` (seconds), `90s`, `10m`, `1h30m`, `2h`, `500ms`, `1.5m`. Never
/// panics: sums are checked and anything over [`MAX_DURATION`] is refused.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let bad = || format!("'{text}' is not a duration (examples: 90s, 10m, 1h30m, 1.5m, 500ms)");
    if t.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        // `1h30` is refused (30 what?); a plain number alone means seconds.
        if number.is_empty() || (unit.is_empty() && number_len != t.len()) {
            return Err(bad());
        }
        let value: f64 = number.parse().map_err(|_| bad())?;
        let seconds_per_unit = match unit {
            "" | "s" | "sec" => 1.0,
            "ms" => 0.001,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => {
                return Err(format!(
                    "unknown unit '{unit}' in '{text}'; use ms, s, m, h or d"
                ))
            }
        };
        let part = Duration::try_from_secs_f64(value * seconds_per_unit)
            .ok()
            .filter(|d| *d <= MAX_DURATION)
            .ok_or_else(too_long(text))?;
        total = total
            .checked_add(part)
            .filter(|d| *d <= MAX_DURATION)
            .ok_or_else(too_long(text))?;
        rest = after;
    }
    Ok(total)
}

fn too_long(text: &str) -> impl FnOnce() -> String + '_ {
    move || format!("'{text}' is longer than a year; give a shorter duration")
}

/// Formats a duration for people: `1h02m`, `3m05s`, `12s`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> OffsetDateTime {
        OffsetDateTime::parse(s, &Rfc3339).unwrap()
    }

    #[test]
    fn hh_mm_is_the_next_such_local_time() {
        let offset = UtcOffset::from_hms(1, 0, 0).unwrap();
        let now = at("2026-11-29T21:30:00Z"); // 22:30 local
        assert_eq!(
            parse_when("23:00", now, offset).unwrap(),
            at("2026-11-29T23:00:00+01:00")
        );
        assert_eq!(
            parse_when("07:00", now, offset).unwrap(),
            at("2026-11-30T07:00:00+01:00")
        );
        assert_eq!(
            parse_when("22:30", now, offset).unwrap(),
            at("2026-11-30T22:30:00+01:00")
        );
        assert_eq!(
            parse_when("2026-12-01T05:00:00Z", now, offset).unwrap(),
            at("2026-12-01T05:00:00Z")
        );
        for bad in ["25:00", "7", "seven", "07:60"] {
            let e = parse_when(bad, now, offset).unwrap_err();
            assert!(e.contains("HH:MM"), "{e}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        for bad in ["", "10x", "m", "1h30", "1..5s", "-5s", "5 s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        // What used to panic ("overflow when adding durations") or wrap.
        for huge in [
            "18446744073709551615s1s",
            "18446744073709551615",
            "5124095576030431h",
            "9999999999999999999999h",
            "366d",
            "1e400s",
        ] {
            assert!(parse_duration(huge).is_err(), "{huge}");
        }
        assert_eq!(human(Duration::from_secs(3725)), "1h02m");
        assert_eq!(human(Duration::from_secs(185)), "3m05s");
    }

    #[test]
    fn numeric_offsets() {
        assert_eq!(
            parse_numeric_offset("+0130"),
            UtcOffset::from_hms(1, 30, 0).ok()
        );
        assert_eq!(
            parse_numeric_offset("-0800"),
            UtcOffset::from_hms(-8, 0, 0).ok()
        );
        assert_eq!(parse_numeric_offset("UTC"), None);
    }
}
