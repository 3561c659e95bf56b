//! Songloom Mini, the embedded default model (`models/songloom-mini`, trained by `tools/train`),
//! makes the music its descriptions ask for, on the CPU: 8 s songs at 20 flow steps (the default
//! is 30: at 20 the 136 songs fit CI's time on a slow 2-core VM; 15 steps measured the same key,
//! flatness and tempo numbers as 20, `tools/train/logs/eval-v3-15steps-*.log`), checked by
//! `songloom_tests::music_checks`, from two held-out sets:
//! - the 20 template captions (`tests/fixtures/heldout-captions.json`: v2's three templates, with
//!   styles, meters and keys of scores never trained on, four ensembles, tempos 64 to 156 BPM);
//! - 48 descriptions written by hand in free form (`tests/fixtures/freeform-descriptions.json`,
//!   written apart from the training grammar: other sentence shapes and words, the key and tempo
//!   said many ways or not at all, the four ensembles in other words).
//!
//! The random tiny test model on the same descriptions is the control each check must reject.
//!
//! Songloom Mini v3, measured 2026-12-06 on the 2-core Intel VM (`cargo test -p songloom-tests
//! --test trained_model -- --nocapture`, which prints each song's numbers;
//! `tools/train/logs/eval-v3-20steps-*.log`). At 30 steps on 2026-12-04 (an AMD VM, before the
//! CPU's exp changed the rounding, so other draws): 0.77, 3.00, 0.0001, 0.60, 0.63 hand-written and
//! 1.00, 1.15, 0.0001, 0.75, 0.27 templates. The tempo's r moves by about 0.2 from one draw of
//! songs to another (below): 0.45 against 0.63 is the other draws, not the steps, as 15 and 20
//! steps both give 0.45 (`docs/BENCHMARKS.md` has v2 and the other round-6 models beside it):
//!
//! | check                                  | v3, hand-written | random | bound   | v3, templates | random | bound  |
//! |----------------------------------------|------------------|--------|---------|---------------|--------|--------|
//! | asked key in the top 3 of 24           | 0.79             | 0.16   | >= 0.7  | 0.95          | 0.15   | >= 0.7 |
//! | asked key's rank of 24 (mean)          | 2.72             | 11.63  | <= 6    | 1.25          | 10.40  | <= 2   |
//! | flatness / white noise's (mean)        | 0.0005           | 0.081  | <= 0.05 | 0.0001        | 0.082  | <= 0.05 |
//! | ensemble from timbre, leave-one-out    | 0.69             | 0.31   | >= 0.5  | 0.75          | 0.20   | >= 0.45 |
//! | onset rate vs tempo, Pearson           | 0.45             | -0.30  | >= 0.4  | 0.28          | 0.14   | none   |

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use songloom_engine::pipeline::{Cancel, Event, MemoryRequest, Observer, Pipeline, Request};
use songloom_tests::music_checks::{
    Spectrogram, boundary_changes, key_rank, nearest_centroid_accuracy, pearson, section_level, section_plan,
};
use songloom_tests::{cpu, fixtures, tiny_model_dir};

const SECONDS: f64 = 8.0;
const STEPS: usize = 20;

/// One held-out description and what it asks for: the key where it names one (a mode alone, or
/// nothing, leaves the model to choose), and the tempo in BPM (for a tempo said in words, the
/// writer's nominal BPM for the word).
#[derive(serde::Deserialize)]
struct Description {
    #[serde(alias = "caption")]
    description: String,
    ensemble: String,
    tempo: u32,
    tonic: Option<usize>,
    mode: Option<String>,
}

impl Description {
    fn key(&self) -> Option<(usize, bool)> {
        Some((self.tonic?, self.mode.as_deref()? == "minor"))
    }
}

/// The shipped model, or a candidate for the next one where `SONGLOOM_CANDIDATE_MODEL=DIR` names it
/// (`cargo test -p songloom-tests --test trained_model -- --nocapture` then scores the candidate).
fn trained_model_dir() -> PathBuf {
    std::env::var_os("SONGLOOM_CANDIDATE_MODEL")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/songloom-mini"), PathBuf::from)
}

/// The seed of a set's description `i`: `i`, or `i` plus `SONGLOOM_EVAL_SEED_OFFSET` where set, so a
/// candidate can be scored on another draw of the same songs (one draw moves r by about 0.2).
fn description_seed(i: usize) -> u64 {
    let offset = std::env::var("SONGLOOM_EVAL_SEED_OFFSET")
        .map_or(0, |v| v.parse().unwrap_or_else(|_| panic!("SONGLOOM_EVAL_SEED_OFFSET={v:?} is not a whole number")));
    i as u64 + offset
}

fn descriptions(file: &str) -> Vec<Description> {
    let text = std::fs::read_to_string(fixtures().join(file)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn template_captions() -> Vec<Description> {
    descriptions("heldout-captions.json")
}

fn free_form() -> Vec<Description> {
    descriptions("freeform-descriptions.json")
}

fn song(pipeline: &Pipeline, prompt: &str, seed: u64) -> Vec<f32> {
    song_with_lyrics(pipeline, prompt, "[instrumental]", SECONDS, STEPS, seed)
}

fn song_with_lyrics(
    pipeline: &Pipeline,
    prompt: &str,
    lyrics: &str,
    duration_s: f64,
    steps: usize,
    seed: u64,
) -> Vec<f32> {
    let audio = Mutex::new(Vec::new());
    let events = |e: Event| {
        if let Event::Audio { samples, .. } = e {
            audio.lock().unwrap().extend(samples);
        }
    };
    let req = Request { description: prompt.into(), lyrics: lyrics.into(), duration_s, seed, steps, guidance: None };
    pipeline.generate(&req, Observer { events: &events, cancel: &Cancel::default() }).unwrap();
    audio.into_inner().unwrap()
}

struct Scores {
    mean_key_rank: f32,
    /// The share of descriptions naming a key whose key ranks in the top 3 of 24.
    key_top3: f32,
    flatness_to_noise: f32,
    timbre_accuracy: f32,
    tempo_correlation: f32,
}

fn white_noise_flatness() -> f32 {
    let mut state = 7u64;
    let noise: Vec<f32> = (0..(SECONDS * 44100.0) as usize)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.5
        })
        .collect();
    Spectrogram::of_mono(&noise).flatness()
}

fn score(model: &Path, name: &str, set: &[Description]) -> Scores {
    // The plan reads the weights' stored formats (the trained model's AR half is a q8 copy).
    let device = cpu();
    let plan = Pipeline::plan(model, &device, MemoryRequest::default(), None).unwrap();
    let pipeline = Pipeline::load_planned(model, device, &plan, &|_| {}).unwrap();
    let (mut ranks, mut flatness, mut timbres, mut onsets) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, d) in set.iter().enumerate() {
        let audio = song(&pipeline, &d.description, description_seed(i));
        assert!(audio.iter().all(|v| v.is_finite()), "{name}: non-finite audio for {:?}", d.description);
        let s = Spectrogram::of_interleaved(&audio);
        let rank = d.key().map(|(tonic, minor)| key_rank(&s.chroma(), tonic, minor));
        if let Some(rank) = rank {
            ranks.push(rank as f32);
        }
        flatness.push(s.flatness());
        onsets.push(s.onset_rate());
        timbres.push(s.timbre());
        println!(
            "{name} {i:2} key rank {:>2} flatness {:.4} onsets/s {:.2}  {}",
            rank.map_or("-".to_string(), |r| r.to_string()),
            flatness[i],
            onsets[i],
            d.description
        );
    }
    let labels: Vec<&str> = set.iter().map(|d| d.ensemble.as_str()).collect();
    let tempos: Vec<f32> = set.iter().map(|d| d.tempo as f32).collect();
    let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
    let scores = Scores {
        mean_key_rank: mean(&ranks),
        key_top3: ranks.iter().filter(|&&r| r <= 3.0).count() as f32 / ranks.len() as f32,
        flatness_to_noise: mean(&flatness) / white_noise_flatness(),
        timbre_accuracy: nearest_centroid_accuracy(&timbres, &labels),
        tempo_correlation: pearson(&onsets, &tempos),
    };
    println!(
        "{name}: key rank {:.2} (chance 12.5), in the top 3 {:.2} (chance 0.125), flatness / noise's {:.4}, \
         timbre accuracy {:.2} (chance 0.25), onset rate vs tempo r = {:.2}",
        scores.mean_key_rank,
        scores.key_top3,
        scores.flatness_to_noise,
        scores.timbre_accuracy,
        scores.tempo_correlation
    );
    scores
}

/// The bounds a set's scores must meet.
struct Bounds {
    max_mean_key_rank: f32,
    min_key_top3: f32,
    max_flatness_to_noise: f32,
    min_timbre_accuracy: f32,
    /// None where the set's tempo is reported, not asserted.
    min_tempo_correlation: Option<f32>,
}

/// The template captions: no worse than v2 (mean key rank 1.85) on the key. Their tempo is
/// printed, not asserted: v3 follows it at r = 0.27 on these 20 captions, which the random model's
/// 0.22 does not tell from chance. v2's 0.63 was measured before the sampler was keyed by seed and
/// frame; on today's engine v2 scores 0.41, and at two other seed offsets v2 0.31 and 0.41, v3 0.62
/// and 0.41: one draw of 20 songs moves r by about 0.2 (`tools/train/logs/eval-templates-seeds.log`).
const TEMPLATES: Bounds = Bounds {
    max_mean_key_rank: 2.0,
    min_key_top3: 0.7,
    max_flatness_to_noise: 0.05,
    min_timbre_accuracy: 0.45,
    min_tempo_correlation: None,
};

/// The hand-written descriptions: issue 34's bars (the key in the top 3 for 70 % of those naming
/// one, the tempo at r >= 0.4, the ensemble told apart at 0.5), and the key rank bound above.
const FREE_FORM: Bounds = Bounds {
    max_mean_key_rank: 6.0,
    min_key_top3: 0.7,
    max_flatness_to_noise: 0.05,
    min_timbre_accuracy: 0.5,
    min_tempo_correlation: Some(0.4),
};

/// Which of the bounds `s` fails, by name.
fn failures(s: &Scores, b: &Bounds) -> Vec<&'static str> {
    let mut out = Vec::new();
    if s.mean_key_rank > b.max_mean_key_rank {
        out.push("mean key rank");
    }
    if s.key_top3 < b.min_key_top3 {
        out.push("key in the top 3");
    }
    if s.flatness_to_noise > b.max_flatness_to_noise {
        out.push("flatness");
    }
    if s.timbre_accuracy < b.min_timbre_accuracy {
        out.push("timbre");
    }
    if b.min_tempo_correlation.is_some_and(|min| s.tempo_correlation < min) {
        out.push("tempo");
    }
    out
}

fn fails_every_check(s: &Scores, b: &Bounds) -> bool {
    failures(s, b).len() == 4 + usize::from(b.min_tempo_correlation.is_some())
}

#[test]
fn songloom_mini_makes_the_music_its_template_captions_ask_for() {
    let control = score(&tiny_model_dir(), "random tiny model", &template_captions());
    assert!(
        fails_every_check(&control, &TEMPLATES),
        "a check passed the random model: {:?}",
        failures(&control, &TEMPLATES)
    );
    let trained = score(&trained_model_dir(), "Songloom Mini", &template_captions());
    let failed = failures(&trained, &TEMPLATES);
    assert!(failed.is_empty(), "Songloom Mini fails on the template captions: {failed:?}");
}

#[test]
fn songloom_mini_follows_descriptions_as_people_write_them() {
    let set = free_form();
    assert!(set.len() >= 40 && set.iter().filter(|d| d.key().is_some()).count() >= 30, "the hand-written set is short");
    let control = score(&tiny_model_dir(), "random tiny model", &set);
    assert!(
        fails_every_check(&control, &FREE_FORM),
        "a check passed the random model: {:?}",
        failures(&control, &FREE_FORM)
    );
    let trained = score(&trained_model_dir(), "Songloom Mini", &set);
    let failed = failures(&trained, &FREE_FORM);
    assert!(failed.is_empty(), "Songloom Mini fails on hand-written descriptions: {failed:?}");
}

/// A song with sections (`tools/train/data/section-songs.json`, written for round 7 apart from its
/// training lyrics): a description, lyrics with four section tags, and the same lyrics with the
/// tags in another order.
#[derive(serde::Deserialize)]
struct SectionSong {
    description: String,
    tempo: f32,
    seed: u64,
    lyrics: String,
    shuffled_lyrics: String,
}

const SECTION_SONG_S: f64 = 22.0;
/// Songs at 8 flow steps score as at 20 (`section_check.py --steps`: rounds 7g and 7h at seed
/// offset 0, `tools/train/logs/eval-round7{g,h}-sections.log`), 32 s a song on 2 cores against 55 s.
const SECTION_STEPS: usize = 8;
/// Each song is made at its seed plus each of these: one draw of 6 songs moves r by up to 0.4
/// (round 7f scored density 0.48, -0.08 and 0.04 at these three), so three are pooled.
const SECTION_SEED_OFFSETS: [u64; 3] = [0, 100, 200];

fn section_songs() -> Vec<SectionSong> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/train/data/section-songs.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn tag_levels(lyrics: &str) -> Vec<i32> {
    lyrics.lines().filter_map(section_level).collect()
}

/// (loudness r, density r): at every boundary of every song at every seed offset, the change
/// measured against the change its true tags ask for; the songs made from their true lyrics, or
/// from the shuffled ones (the control: the tags the songs were given are not the ones they are
/// scored against).
fn section_scores(model: &Path, name: &str, songs: &[SectionSong], shuffled: bool) -> (f32, f32) {
    let device = cpu();
    let plan = Pipeline::plan(model, &device, MemoryRequest::default(), None).unwrap();
    let pipeline = Pipeline::load_planned(model, device, &plan, &|_| {}).unwrap();
    let mut changes = Vec::new();
    for (song, offset) in songs.iter().flat_map(|song| SECTION_SEED_OFFSETS.map(|offset| (song, offset))) {
        let lyrics = if shuffled { &song.shuffled_lyrics } else { &song.lyrics };
        let audio =
            song_with_lyrics(&pipeline, &song.description, lyrics, SECTION_SONG_S, SECTION_STEPS, song.seed + offset);
        assert!(audio.iter().all(|v| v.is_finite()), "{name}: non-finite audio for {:?}", song.description);
        let mono: Vec<f32> = audio.chunks_exact(2).map(|p| 0.5 * (p[0] + p[1])).collect();
        let sections = section_plan(&tag_levels(&song.lyrics), song.tempo, mono.len() as f32 / 44100.0);
        let song_changes = boundary_changes(&mono, &sections);
        println!(
            "{name}{}, seed +{offset}: {song_changes:?}  {}",
            if shuffled { ", shuffled tags" } else { "" },
            song.description
        );
        changes.extend(song_changes);
    }
    let column = |k: usize| changes.iter().map(|c| c[k]).collect::<Vec<f32>>();
    let scores = (pearson(&column(0), &column(1)), pearson(&column(0), &column(2)));
    println!(
        "{name}{}: loudness r = {:.2}, density r = {:.2} over {} boundaries",
        if shuffled { ", shuffled tags" } else { "" },
        scores.0,
        scores.1,
        changes.len()
    );
    scores
}

/// The renderings Songloom Mini learns from follow their tags at loudness r = 0.66 and density
/// r = 0.87 (`tools/train/section_check.py` on 40 held-out pieces with four random tags); a
/// model follows the tags when its songs reach half of that.
const MIN_SECTION_LOUDNESS_R: f32 = 0.33;
const MIN_SECTION_DENSITY_R: f32 = 0.43;

fn follows_sections((loudness_r, density_r): (f32, f32)) -> bool {
    loudness_r >= MIN_SECTION_LOUDNESS_R && density_r >= MIN_SECTION_DENSITY_R
}

/// Run on a candidate with `SONGLOOM_CANDIDATE_MODEL=DIR cargo test -p songloom-tests --test
/// trained_model -- --ignored --nocapture songloom_mini_follows`. Its 36 songs of 22 s take about
/// 20 minutes on 2 cores: before it gates CI, they must cost less.
#[test]
#[ignore = "Songloom Mini v3 ignores section tags; this gates v4 (issue 34), not yet shipped"]
fn songloom_mini_follows_the_section_tags() {
    let model = trained_model_dir();
    let songs = section_songs();
    let random = section_scores(&tiny_model_dir(), "random tiny model", &songs, false);
    assert!(!follows_sections(random), "the random model passed the section check: {random:?}");
    let trained = section_scores(&model, "Songloom Mini", &songs, false);
    assert!(follows_sections(trained), "Songloom Mini does not follow the section tags: {trained:?}");
    let shuffled = section_scores(&model, "Songloom Mini", &songs, true);
    assert!(!follows_sections(shuffled), "songs made from shuffled tags passed the section check: {shuffled:?}");
}
