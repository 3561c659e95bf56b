//! Tests that tie what the interface crate (which also builds for the browser, without the engine)
//! says to what the engine does: the lyrics-tag rule and the names of devices and precisions.

use songloom_engine::prompt::normalize_lyrics;
use songloom_engine::{DeviceChoice, Precision};
use songloom_ui::contract::{PRECISIONS, Recipe, WEIGHTS};
use songloom_ui::lyrics::dropped_text;

/// Whether the engine's lyrics normalization loses any of `line`'s text (beyond whitespace, the
/// `^` line-break marker and the case of tags, which it changes on purpose).
fn engine_drops_text(line: &str) -> bool {
    let normalized = normalize_lyrics(line);
    let normalized = normalized.strip_prefix("[start]\n").expect("the reference's prefix");
    let compact = |s: &str| s.chars().filter(|c| !c.is_whitespace() && *c != '^').collect::<String>().to_lowercase();
    compact(normalized) != compact(line)
}

#[test]
fn the_window_flags_exactly_the_lyrics_lines_the_engine_cuts() {
    const PIECES: [&str; 10] = ["[verse]", "[Chorus]", "[]", "[a[b]", "la", " ", "\t", "]", "[", "x y"];
    let mut lines: Vec<String> = vec!["".into(), "[verse] la ^ la".into(), "  [intro][outro]  ".into()];
    for a in PIECES {
        lines.push(a.to_string());
        for b in PIECES {
            lines.push(format!("{a}{b}"));
            for c in PIECES {
                lines.push(format!("{a}{b}{c}"));
                for d in PIECES {
                    lines.push(format!("{a}{b}{c}{d}"));
                }
            }
        }
    }
    let mut flagged = 0;
    for line in &lines {
        let window = !dropped_text(line).is_empty();
        assert_eq!(window, engine_drops_text(line), "{line:?}: the window says {window}, the engine disagrees");
        flagged += window as usize;
    }
    assert!(flagged > 1000, "only {flagged} of {} lines lose text", lines.len());
}

/// The negative control: a rule that ignores tabs, as a careless copy might, disagrees.
#[test]
fn the_tie_catches_a_rule_that_differs() {
    let careless =
        |line: &str| line.trim_start_matches(' ').starts_with('[') && line.contains("] ") && !line.ends_with("] ");
    let disagree = ["\t[verse] la", "[verse]\tla"].iter().any(|l| careless(l) != engine_drops_text(l));
    assert!(disagree);
}

#[test]
fn the_window_offers_the_engines_precisions_and_device_names() {
    assert_eq!(PRECISIONS.to_vec(), Precision::ALL.map(Precision::name).to_vec());
    let recipe = Recipe::default();
    assert!(DeviceChoice::parse(&recipe.device).is_ok(), "{}", recipe.device);
    assert!(Precision::parse(&recipe.precision).is_ok(), "{}", recipe.precision);
    let weights = songloom_engine::plan::WeightsChoice::ALL.map(|w| w.name());
    assert_eq!(WEIGHTS.to_vec(), weights.to_vec());
    assert!(songloom_engine::plan::WeightsChoice::parse(&recipe.weights).is_ok(), "{}", recipe.weights);
}
