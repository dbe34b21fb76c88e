//! Times and durations on the command line: `--start-at 01:00`, `--deadline 07:00` or RFC 3339,
//! `--timeout 30m`, `--wait-server 10m`.

use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime};
use std::time::Duration;

/// Parses `HH:MM` (the next such wall-clock time after `now` in the time zone `tz`) or an
/// RFC 3339 time. `HH:MM` is placed on its day with the zone's rules for that day, so a night
/// that crosses a daylight-saving change gets the offset in force at that time, not the one in
/// force now; a time the clocks skip (02:30 on a spring-forward night) is read as the same
/// time after the jump (03:30), a time that happens twice as its first occurrence.
pub fn parse_when(text: &str, now: Timestamp, tz: &TimeZone) -> Result<ZonedDateTime, String> {
    let t = text.trim();
    let bad = || {
        format!("'{text}' is not a time: use HH:MM (local time, e.g. 07:00) or RFC 3339 (e.g. 2026-11-30T07:00:00+01:00)")
    };
    if t.len() > 5 {
        let at: Timestamp = t.parse().map_err(|_| bad())?;
        // Keep the offset as written.
        let offset = jiff::fmt::temporal::Pieces::parse(t)
            .ok()
            .and_then(|p| p.to_numeric_offset())
            .unwrap_or(jiff::tz::Offset::UTC);
        return Ok(at.to_zoned_datetime(TimeZone::fixed(offset)));
    }
    let (h, m) = t.split_once(':').ok_or_else(bad)?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return Err(bad());
    }
    let hour: i8 = h.parse().map_err(|_| bad())?;
    let minute: i8 = m.parse().map_err(|_| bad())?;
    if !(0..24).contains(&hour) || !(0..60).contains(&minute) {
        return Err(bad());
    }
    let today = now.to_zoned_datetime(tz.clone()).date();
    let mut day = today;
    // Today's, else tomorrow's (or the day after, should a zone skip a whole day).
    for _ in 0..3 {
        let at = day
            .at(hour, minute, 0, 0)
            .to_zoned_datetime(tz.clone())
            .map_err(|e| format!("'{text}': {e}"))?;
        if at.timestamp() > now {
            return Ok(at);
        }
        day = day.tomorrow().map_err(|e| format!("'{text}': {e}"))?;
    }
    Err(bad())
}

/// Formats a time as RFC 3339 with its offset (`2026-03-29T07:00:00+02:00`).
pub fn rfc3339(t: &ZonedDateTime) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
}

/// The machine's time zone (`TZ`, else the system setting), else UTC (with the reason).
pub fn local_zone() -> (TimeZone, Option<String>) {
    match TimeZone::try_system() {
        Ok(tz) => (tz, None),
        Err(e) => (
            TimeZone::UTC,
            Some(format!("cannot tell the local time zone ({e}); HH:MM times are read as UTC (pass RFC 3339 to be exact)")),
        ),
    }
}

/// The longest duration an option takes (a year): longer cannot be meant, and every deadline
/// computed from a shorter one fits in a clock.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a duration in jiff's friendly format (`90s`, `10m`, `1h30m`, `1h 30m`, `1.5m`,
/// `500ms`, `2d`, `10 minutes`) or ISO 8601 (`PT1H30M`). A plain number is refused (`30`:
/// seconds or minutes?), with the spellings that say which. A day is 24 hours. Never panics:
/// anything negative, in months or years, or over [`MAX_DURATION`] is refused.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let bad = || format!("'{text}' is not a duration (examples: 90s, 10m, 1h30m, 1.5m, 500ms)");
    let plain_number = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if plain_number {
        return Err(format!("{t} has no unit; write {t}s, 10m or 2h"));
    }
    let span: jiff::Span = t.parse().map_err(|e: jiff::Error| {
        // A number jiff cannot hold, or one over a year even in nanoseconds (the smallest
        // unit), is a duration too long rather than a typo.
        let e = e.to_string();
        let huge = t.split(|c: char| !c.is_ascii_digit()).any(|n| {
            n.parse::<u128>()
                .map_or(!n.is_empty(), |n| n > MAX_DURATION.as_nanos())
        });
        if huge || e.contains("too big") || e.contains("overflow") {
            too_long(text)
        } else {
            bad()
        }
    })?;
    if span.is_negative() {
        return Err(bad());
    }
    let exact = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|_| bad())?;
    Duration::try_from(exact)
        .ok()
        .filter(|d| *d <= MAX_DURATION)
        .ok_or_else(|| too_long(text))
}

/// A duration option that must be more than zero (see [`parse_duration`]).
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err(format!("{text:?} must be longer than zero"));
    }
    Ok(d)
}

/// How a time given as `text` (HH:MM or RFC 3339) reads on the machine's clock, for the echo at
/// start: `21:00 tomorrow (Mon 2026-12-07 21:00 CET, in 23h27m)`. The day is named relative to
/// `now` (today, tomorrow), the date and zone always given.
pub fn describe_when(at: &ZonedDateTime, now: Timestamp, tz: &TimeZone) -> String {
    let local = at.timestamp().to_zoned_datetime(tz.clone());
    let today = now.to_zoned_datetime(tz.clone()).date();
    let day = match local.date().duration_since(today).as_secs() / 86_400 {
        0 => "today".to_string(),
        1 => "tomorrow".to_string(),
        -1 => "yesterday".to_string(),
        _ => local.strftime("%a %-d %b").to_string(),
    };
    let ahead = at.timestamp().duration_since(now);
    let ahead = if ahead.is_negative() {
        "already past".to_string()
    } else {
        let minutes = ahead.as_secs().unsigned_abs().div_ceil(60);
        match (minutes / 60, minutes % 60) {
            (0, m) => format!("in {m}m"),
            (h, 0) => format!("in {h}h"),
            (h, m) => format!("in {h}h{m:02}m"),
        }
    };
    format!(
        "{} {day} ({}, {ahead})",
        local.strftime("%H:%M"),
        local.strftime("%a %Y-%m-%d %H:%M %Z")
    )
}

fn too_long(text: &str) -> String {
    format!("'{text}' is longer than a year; give a shorter duration")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn when(text: &str, now: &str, tz: &TimeZone) -> String {
        rfc3339(&parse_when(text, at(now), tz).unwrap())
    }

    /// Europe/Berlin's rules as a POSIX TZ string, so the test needs no system tzdata.
    fn berlin() -> TimeZone {
        TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap()
    }

    #[test]
    fn hh_mm_is_the_next_such_local_time() {
        let tz = berlin();
        let now = "2026-11-29T21:30:00Z"; // 22:30 local
        assert_eq!(when("23:00", now, &tz), "2026-11-29T23:00:00+01:00");
        assert_eq!(when("07:00", now, &tz), "2026-11-30T07:00:00+01:00");
        assert_eq!(when("22:30", now, &tz), "2026-11-30T22:30:00+01:00");
        assert_eq!(
            when("2026-12-01T05:00:00Z", now, &tz),
            "2026-12-01T05:00:00+00:00"
        );
        assert_eq!(
            when("2026-12-01T05:00:00-03:00", now, &tz),
            "2026-12-01T05:00:00-03:00"
        );
        for bad in ["25:00", "7", "seven", "07:60", "-1:00", "7:5", ""] {
            let e = parse_when(bad, at(now), &tz).unwrap_err();
            assert!(e.contains("HH:MM"), "{e}");
        }
    }

    #[test]
    fn a_night_across_a_daylight_saving_change_gets_each_time_its_own_offset() {
        let tz = berlin();
        // Spring forward: 2026-03-29 02:00 CET → 03:00 CEST. Started at 22:00 (CET).
        let evening = "2026-03-28T21:00:00Z";
        assert_eq!(when("01:00", evening, &tz), "2026-03-29T01:00:00+01:00");
        assert_eq!(when("07:00", evening, &tz), "2026-03-29T07:00:00+02:00");
        // 07:00 CEST is 05:00 UTC (a fixed +01:00 said 06:00: an hour late).
        assert_eq!(
            parse_when("07:00", at(evening), &tz).unwrap().timestamp(),
            at("2026-03-29T05:00:00Z")
        );
        // 02:30 does not exist that night: the same time after the jump.
        assert_eq!(when("02:30", evening, &tz), "2026-03-29T03:30:00+02:00");
        // Fall back: 2026-10-25 03:00 CEST → 02:00 CET. Started at 22:00 (CEST).
        let autumn = "2026-10-24T20:00:00Z";
        assert_eq!(when("07:00", autumn, &tz), "2026-10-25T07:00:00+01:00");
        assert_eq!(
            parse_when("07:00", at(autumn), &tz).unwrap().timestamp(),
            at("2026-10-25T06:00:00Z")
        );
        // 02:30 happens twice: the first one.
        assert_eq!(when("02:30", autumn, &tz), "2026-10-25T02:30:00+02:00");
    }

    #[test]
    fn a_time_is_echoed_with_its_day_date_and_zone() {
        let tz = berlin();
        let now = at("2026-12-06T20:33:00Z"); // 21:33 local, Sunday
        let echo = |text: &str| describe_when(&parse_when(text, now, &tz).unwrap(), now, &tz);
        // 21:00 has passed today: tomorrow, said so.
        assert_eq!(
            echo("21:00"),
            "21:00 tomorrow (Mon 2026-12-07 21:00 CET, in 23h27m)"
        );
        assert_eq!(
            echo("23:00"),
            "23:00 today (Sun 2026-12-06 23:00 CET, in 1h27m)"
        );
        // RFC 3339 in another offset: shown on the local clock.
        assert_eq!(
            echo("2026-12-09T05:00:00Z"),
            "06:00 Wed 9 Dec (Wed 2026-12-09 06:00 CET, in 56h27m)"
        );
        assert_eq!(
            echo("2026-12-06T20:00:00Z"),
            "21:00 today (Sun 2026-12-06 21:00 CET, already past)"
        );
    }

    #[test]
    fn a_bare_number_is_no_duration() {
        for (bare, unit) in [("30", "30s"), ("0", "0s"), ("1.5", "1.5s"), (" 90 ", "90s")] {
            let e = parse_duration(bare).unwrap_err();
            assert!(e.contains("has no unit"), "{bare}: {e}");
            assert!(
                e.contains(unit) && e.contains("10m") && e.contains("2h"),
                "{bare}: {e}"
            );
        }
        assert_eq!(
            parse_duration("30").unwrap_err(),
            "30 has no unit; write 30s, 10m or 2h"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        // What jiff's friendly and ISO 8601 formats add.
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("5 s").unwrap(), Duration::from_secs(5));
        assert_eq!(
            parse_duration("10 minutes").unwrap(),
            Duration::from_secs(600)
        );
        assert_eq!(
            parse_duration("PT1H30M").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_duration("1d 2h").unwrap(),
            Duration::from_secs(93_600)
        );
        assert_eq!(parse_duration(" 30sec ").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5min").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        for bad in [
            "", "10x", "m", "1h30", "1..5s", "-5s", "1 month", "2y", "s", "1.5.5",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_positive_duration("0s").is_err());
        assert_eq!(
            parse_positive_duration("2m").unwrap(),
            Duration::from_secs(120)
        );
        // What used to panic ("overflow when adding durations") or wrap.
        for huge in [
            "18446744073709551615s1s",
            "5124095576030431h",
            "9999999999999999999999h",
            "366d",
            "1e400s",
        ] {
            assert!(parse_duration(huge).is_err(), "{huge}");
        }
        for huge in ["18446744073709551615s1s", "366d", "9999999999999999999999h"] {
            let e = parse_duration(huge).unwrap_err();
            assert!(e.contains("longer than a year"), "{huge}: {e}");
        }
    }
}
