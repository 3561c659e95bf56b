//! Song lengths as people write them: seconds (`90`, `90.5`, `90s`), minutes and seconds (`1:30`),
//! or with units (`1m30s`, `2m`, `1m 30s`, `1.5min`). Shared by the window and the CLI.

/// The longest song the model makes, in seconds.
pub const MAX_SECONDS: f64 = 360.0;

/// `seconds` as the Duration field shows it: `45` below a minute, `1:30` from there (tenths kept
/// where there are any).
pub fn format_duration(seconds: f64) -> String {
    let tenths = (seconds * 10.0).round() as u64;
    let (whole, tenth) = (tenths / 10, tenths % 10);
    let fraction = if tenth > 0 { format!(".{tenth}") } else { String::new() };
    if whole < 60 { format!("{whole}{fraction}") } else { format!("{}:{:02}{fraction}", whole / 60, whole % 60) }
}

/// The seconds `text` says, or a message that shows how to write one.
pub fn parse_duration(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let parsed = if let Some((minutes, seconds)) = t.split_once(':') {
        minutes_and_seconds(minutes, seconds)
    } else if let Ok(seconds) = t.parse::<f64>() {
        Some(seconds)
    } else {
        with_units(t)
    };
    parsed
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("`{text}` is not a length: write seconds (90), minutes and seconds (1:30) or 1m30s"))
}

/// `M:SS`, seconds below 60.
fn minutes_and_seconds(minutes: &str, seconds: &str) -> Option<f64> {
    let minutes: u32 = minutes.trim().parse().ok()?;
    let seconds: f64 = seconds.trim().parse().ok().filter(|s: &f64| (0.0..60.0).contains(s))?;
    Some(minutes as f64 * 60.0 + seconds)
}

/// Numbers each followed by `m`/`min` or `s`/`sec`, minutes before seconds, spaces between.
fn with_units(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut rest = text;
    let mut seen_seconds = false;
    let mut parts = 0;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let value: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "m" | "min" | "mins" if !seen_seconds && parts == 0 => 60.0,
            "s" | "sec" | "secs" if !seen_seconds => {
                seen_seconds = true;
                1.0
            }
            _ => return None,
        };
        total += value * factor;
        parts += 1;
        rest = rest[unit_len..].trim_start();
    }
    (parts > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_usual_ways_of_writing_a_length_read_as_seconds() {
        for (text, seconds) in [
            ("90", 90.0),
            (" 90.5 ", 90.5),
            ("90s", 90.0),
            ("1:30", 90.0),
            ("1:05.5", 65.5),
            ("1m30s", 90.0),
            ("1m 30s", 90.0),
            ("2m", 120.0),
            ("1.5min", 90.0),
            ("0:45", 45.0),
            ("-3", -3.0),
        ] {
            assert_eq!(parse_duration(text), Ok(seconds), "{text}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_the_forms_that_work() {
        for text in ["", "1m30", "30s1m", "1:60", "1:-5", "a minute", "1h", "1m1m", "NaN", "inf", "1e999", ":", "1:"] {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains("1:30") && err.contains(&format!("`{text}`")), "{text}: {err}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Whatever is typed, the answer is a finite length or a message, never a panic.
        #[test]
        fn any_text_gives_a_finite_length_or_a_message(text in "\\PC{0,24}") {
            if let Ok(seconds) = parse_duration(&text) {
                prop_assert!(seconds.is_finite());
            }
        }

        /// Text made of the characters lengths are written with: a length or a message.
        #[test]
        fn length_like_text_gives_a_finite_length_or_a_message(text in "[0-9.:msinec -]{0,12}") {
            if let Ok(seconds) = parse_duration(&text) {
                prop_assert!(seconds.is_finite());
            }
        }

        /// Every length from one second to the model's six minutes reads back in every form.
        #[test]
        fn each_form_of_a_length_reads_back(seconds in 1u32..=360) {
            let (m, s) = (seconds / 60, seconds % 60);
            for text in [format!("{seconds}"), format!("{m}:{s:02}"), format!("{m}m{s}s"), format!("{seconds}s")] {
                prop_assert_eq!(parse_duration(&text), Ok(seconds as f64), "{}", text);
            }
        }
    }
}
