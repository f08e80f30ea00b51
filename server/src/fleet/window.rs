//! Maintenance windows per group: a group's devices are offered updates only inside its window,
//! a span of local time in an IANA time zone, every day or on the days of the week it names
//! (`PUT /api/v1/groups/{group}/window`).
//!
//! | Rule                          | Why                                                              |
//! |-------------------------------|------------------------------------------------------------------|
//! | checked at each poll, by the device decision (`device/decide.rs`) | a snapshot lives for hours; the window opens and closes without any change to rebuild it |
//! | a new offer only              | a device that already holds the manifest (its `If-None-Match` names it) still gets 304, and a download it started is still served: it may finish |
//! | `end` before `start`          | the window runs over midnight (22:00–04:00)                       |
//! | `days` (`mon` … `sun`; absent or empty: every day) | the local days on which the window *opens*: `sat` with 22:00–04:00 is Saturday night into Sunday morning |
//! | `start == end`                | refused: an empty window would hold every update forever, silently |
//! | local time, from the tz database | a window follows daylight-saving time; on a day the clocks skip its start, it opens when the local time reaches it |
//!
//! This file holds the window itself (the device decision and the snapshot import it); the
//! routes that set it are `fleet/maintenance.rs`.
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::error::ApiError;

/// Minutes in a day.
const DAY_MINUTES: u16 = 24 * 60;
/// The days of the week as the API names them, Monday first: bit `i` of [`Days`] is `DAY_NAMES[i]`.
pub const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
/// Every day: the bit set of a window without `days`.
pub const EVERY_DAY: u8 = 0x7f;

/// A set of days of the week, bit 0 Monday to bit 6 Sunday; never empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Days(u8);

impl Days {
    /// From a stored bit set; `None` when empty or beyond Sunday.
    pub fn from_bits(bits: i64) -> Option<Self> {
        u8::try_from(bits)
            .ok()
            .filter(|b| *b != 0 && *b <= EVERY_DAY)
            .map(Self)
    }

    /// The bit set.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// Whether `weekday` (0 Monday … 6 Sunday) is in the set.
    fn has(self, weekday: i64) -> bool {
        u32::try_from(weekday).is_ok_and(|d| d < 7 && self.0 & (1 << d) != 0)
    }
}

/// A group's maintenance window, ready to be asked whether it is open.
#[derive(Debug, Clone)]
pub struct Window {
    /// Minutes after local midnight it opens.
    start: u16,
    /// Minutes after local midnight it closes (before `start`: the next day).
    end: u16,
    /// The local days on which it opens.
    days: Days,
    /// Where "local" is.
    zone: TimeZone,
}

impl Window {
    /// A window from its stored row; `None` when the stored zone is no longer known (the
    /// system's tz database changed): the caller logs it and offers as if there were none.
    /// A stored bit set of days that is empty or out of range reads as none known either.
    pub fn new(start: i64, end: i64, days: i64, zone: &str) -> Option<Self> {
        let start = u16::try_from(start).ok().filter(|m| *m < DAY_MINUTES)?;
        let end = u16::try_from(end).ok().filter(|m| *m < DAY_MINUTES)?;
        Some(Self {
            start,
            end,
            days: Days::from_bits(days)?,
            zone: TimeZone::get(zone).ok()?,
        })
    }

    /// Whether the window is open at `now_ms` (unix milliseconds). Allocates nothing.
    pub fn open_at(&self, now_ms: i64) -> bool {
        let Ok(at) = jiff::Timestamp::from_millisecond(now_ms) else {
            return true;
        };
        let offset = self.zone.to_offset(at);
        let local_secs = now_ms.div_euclid(1000) + i64::from(offset.seconds());
        let minute = u16::try_from(local_secs.rem_euclid(86_400) / 60).unwrap_or(0);
        // 1970-01-01, local day 0, was a Thursday (3 with Monday as 0).
        let today = (local_secs.div_euclid(86_400) + 3).rem_euclid(7);
        let yesterday = (today + 6) % 7;
        if self.start <= self.end {
            self.start <= minute && minute < self.end && self.days.has(today)
        } else {
            (minute >= self.start && self.days.has(today))
                || (minute < self.end && self.days.has(yesterday))
        }
    }
}

/// A maintenance window as the API reads and writes it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// Local time it opens, `HH:MM` (24-hour).
    #[schema(example = "02:00")]
    pub start: String,
    /// Local time it closes, `HH:MM`; before `start`: it runs over midnight.
    #[schema(example = "04:30")]
    pub end: String,
    /// An IANA time zone name.
    #[schema(example = "Europe/Berlin")]
    pub time_zone: String,
    /// The local days on which the window opens (`mon`, `tue`, `wed`, `thu`, `fri`, `sat`,
    /// `sun`); absent or empty: every day. Answered in that order, and absent for every day.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(example = json!(["sat", "sun"]))]
    pub days: Vec<String>,
}

/// `HH:MM` as minutes after midnight; 422 naming `field`.
fn minutes(field: &str, text: &str) -> Result<u16, ApiError> {
    let bad = || {
        ApiError::invalid(format!(
            "{field}: {text:?} is not a time of day as HH:MM (00:00 to 23:59)"
        ))
    };
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 {
        return Err(bad());
    }
    let h: u16 = h.parse().map_err(|_| bad())?;
    let m: u16 = m.parse().map_err(|_| bad())?;
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

fn hhmm(minutes: i64) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

impl WindowSpec {
    /// Checks it: `(start, end)` in minutes and the days as a bit set, the zone known. 422 naming
    /// the field.
    pub fn check(&self) -> Result<(u16, u16, Days), ApiError> {
        let start = minutes("start", &self.start)?;
        let end = minutes("end", &self.end)?;
        let mut days = 0u8;
        for day in &self.days {
            let Some(i) = DAY_NAMES.iter().position(|d| d == day) else {
                return Err(ApiError::invalid(format!(
                    "days: {day:?} is not a day of the week ({})",
                    DAY_NAMES.join(", ")
                )));
            };
            if days & (1 << i) != 0 {
                return Err(ApiError::invalid(format!("days: {day:?} is given twice")));
            }
            days |= 1 << i;
        }
        let days = Days::from_bits(i64::from(days)).unwrap_or(Days(EVERY_DAY));
        if start == end {
            return Err(ApiError::invalid(
                "end: equal to start would be a window that never opens",
            ));
        }
        let plausible = !self.time_zone.is_empty()
            && self.time_zone.len() <= 64
            && self
                .time_zone
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_+-/".contains(&b));
        if !plausible || TimeZone::get(&self.time_zone).is_err() {
            return Err(ApiError::invalid(format!(
                "time_zone: {:?} is not an IANA time zone this server knows (e.g. Europe/Berlin, UTC)",
                self.time_zone
            )));
        }
        Ok((start, end, days))
    }

    /// From a stored row.
    pub fn of_row(start: i64, end: i64, days: i64, time_zone: String) -> Self {
        let days = match Days::from_bits(days) {
            Some(d) if d.bits() != EVERY_DAY => DAY_NAMES
                .iter()
                .enumerate()
                .filter(|(i, _)| d.has(*i as i64))
                .map(|(_, n)| (*n).to_owned())
                .collect(),
            _ => Vec::new(),
        };
        Self {
            start: hhmm(start),
            end: hhmm(end),
            time_zone,
            days,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-15 (winter, Berlin is UTC+1) at `h:m` UTC, in unix ms.
    fn utc(h: i64, m: i64) -> i64 {
        1_768_435_200_000 + (h * 60 + m) * 60_000
    }

    #[test]
    fn a_window_opens_in_its_own_zone_and_may_run_over_midnight() {
        let berlin = Window::new(2 * 60, 4 * 60, 127, "Europe/Berlin").unwrap();
        // 02:00-04:00 in Berlin is 01:00-03:00 UTC in January.
        assert!(!berlin.open_at(utc(0, 59)));
        assert!(berlin.open_at(utc(1, 0)));
        assert!(berlin.open_at(utc(2, 59)));
        assert!(!berlin.open_at(utc(3, 0)));
        let night = Window::new(22 * 60, 4 * 60, 127, "UTC").unwrap();
        assert!(night.open_at(utc(23, 0)));
        assert!(night.open_at(utc(3, 59)));
        assert!(!night.open_at(utc(12, 0)));
        // July: Berlin is UTC+2, so the same window is 00:00-02:00 UTC.
        let july = 1_784_073_600_000; // 2026-07-15T00:00:00Z
        assert!(berlin.open_at(july + 60 * 60_000));
        assert!(!berlin.open_at(july + 150 * 60_000));
    }

    #[test]
    fn rejects_a_bad_time_an_empty_window_or_an_unknown_zone() {
        let spec = |s: &str, e: &str, z: &str| WindowSpec {
            start: s.into(),
            end: e.into(),
            time_zone: z.into(),
            days: Vec::new(),
        };
        for (s, e, z, words) in [
            (
                "2:00",
                "04:00",
                "UTC",
                "start: \"2:00\" is not a time of day",
            ),
            (
                "02:00",
                "24:00",
                "UTC",
                "end: \"24:00\" is not a time of day",
            ),
            ("02:00", "02:00", "UTC", "never opens"),
            (
                "02:00",
                "03:00",
                "Mars/Olympus",
                "time_zone: \"Mars/Olympus\"",
            ),
        ] {
            let err = spec(s, e, z).check().unwrap_err().to_string();
            assert!(err.contains(words), "{err}");
        }
        assert_eq!(
            spec("22:30", "04:00", "Europe/Berlin").check().unwrap(),
            (1350, 240, Days(EVERY_DAY))
        );
        let days = |d: &[&str]| WindowSpec {
            days: d.iter().map(|d| (*d).to_owned()).collect(),
            ..spec("22:30", "04:00", "UTC")
        };
        let err = days(&["sat", "Sunday"]).check().unwrap_err().to_string();
        assert!(
            err.contains("days: \"Sunday\" is not a day of the week (mon, "),
            "{err}"
        );
        let err = days(&["sat", "sat"]).check().unwrap_err().to_string();
        assert!(err.contains("days: \"sat\" is given twice"), "{err}");
        assert_eq!(days(&["sun", "mon"]).check().unwrap().2, Days(0b100_0001));
    }

    #[test]
    fn a_window_opens_only_on_its_days_and_closes_on_the_next() {
        // 2026-01-15 was a Thursday. Saturday and Sunday nights, 22:00-04:00 UTC.
        let weekend = Window::new(22 * 60, 4 * 60, 0b110_0000, "UTC").unwrap();
        let day = 86_400_000;
        assert!(!weekend.open_at(utc(23, 0)), "Thursday night");
        assert!(!weekend.open_at(utc(23, 0) + day), "Friday night");
        assert!(weekend.open_at(utc(23, 0) + 2 * day), "Saturday night");
        assert!(
            weekend.open_at(utc(3, 0) + 3 * day),
            "Sunday morning, Saturday's window"
        );
        assert!(weekend.open_at(utc(23, 0) + 3 * day), "Sunday night");
        assert!(
            weekend.open_at(utc(3, 0) + 4 * day),
            "Monday morning, Sunday's window"
        );
        assert!(!weekend.open_at(utc(23, 0) + 4 * day), "Monday night");
        assert!(!weekend.open_at(utc(3, 0) + 5 * day), "Tuesday morning");
        // The day is the local one: Thursday 00:30 in Berlin is Wednesday 23:30 UTC.
        let thursday = Window::new(0, 60, 0b000_1000, "Europe/Berlin").unwrap();
        assert!(thursday.open_at(utc(23, 30) - day));
        assert!(!thursday.open_at(utc(23, 30)));
        // Read back in the API's order, every day as none.
        assert_eq!(
            WindowSpec::of_row(0, 60, 0b100_0001, "UTC".into()).days,
            ["mon", "sun"]
        );
        assert!(WindowSpec::of_row(0, 60, 127, "UTC".into()).days.is_empty());
        assert!(Window::new(0, 60, 0, "UTC").is_none());
    }
}
