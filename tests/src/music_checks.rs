//! Objective checks that a song is music of the kind its caption asks for, on 44.1 kHz audio:
//! the key (pitch-class histogram against the Krumhansl-Kessler key profiles), the onset rate
//! (spectral-flux peaks), the spectral flatness (tones, not noise) and a timbre fingerprint (the
//! long-term spectral envelope in 24 log-spaced bands). Each can fail: white noise, silence and
//! the random test model fail them (`tests/tests/trained_model.rs`). And whether a song's
//! loudness and density change where its section tags ask (`boundary_changes`, the measure of
//! `tools/train/section_check.py`).

use std::ops::Range;
use std::sync::LazyLock;

const SAMPLE_RATE: f32 = 44100.0;
const FFT: usize = 4096;
const HOP: usize = 1024;
const BAND_COUNT: usize = 24;

const MAJOR_PROFILE: [f32; 12] = [6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88];
const MINOR_PROFILE: [f32; 12] = [6.33, 2.68, 3.52, 5.38, 2.60, 3.53, 2.54, 4.75, 3.98, 2.69, 3.34, 3.17];

/// Magnitude spectra of Hann-windowed frames of the mono mix of interleaved stereo.
pub struct Spectrogram {
    frames: Vec<Vec<f32>>,
    seconds: f32,
}

impl Spectrogram {
    pub fn of_interleaved(stereo: &[f32]) -> Self {
        let mono: Vec<f32> = stereo.chunks_exact(2).map(|p| 0.5 * (p[0] + p[1])).collect();
        Self::of_mono(&mono)
    }

    pub fn of_mono(mono: &[f32]) -> Self {
        let window: Vec<f32> =
            (0..FFT).map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / FFT as f32).cos()).collect();
        let mut frames = Vec::new();
        let mut start = 0;
        while start + FFT <= mono.len() {
            let mut re: Vec<f32> = mono[start..start + FFT].iter().zip(&window).map(|(x, w)| x * w).collect();
            let mut im = vec![0.0; FFT];
            fft(&mut re, &mut im);
            frames.push((0..=FFT / 2).map(|k| (re[k] * re[k] + im[k] * im[k]).sqrt()).collect());
            start += HOP;
        }
        Spectrogram { frames, seconds: mono.len() as f32 / SAMPLE_RATE }
    }

    fn frequency(bin: usize) -> f32 {
        bin as f32 * SAMPLE_RATE / FFT as f32
    }

    /// The share of spectral magnitude in each pitch class (55 Hz to 2 kHz).
    pub fn chroma(&self) -> [f32; 12] {
        let mut histogram = [0f32; 12];
        for frame in &self.frames {
            for (bin, m) in frame.iter().enumerate() {
                let f = Self::frequency(bin);
                if f > 55.0 && f < 2000.0 {
                    let midi = 69.0 + 12.0 * (f / 440.0).log2();
                    histogram[(midi.round() as i64).rem_euclid(12) as usize] += m;
                }
            }
        }
        let total: f32 = histogram.iter().sum::<f32>().max(1e-12);
        histogram.map(|h| h / total)
    }

    /// Onsets a second: peaks of the positive spectral flux of compressed band energies, above
    /// the flux around them by a fixed margin. Bands, not bins, and a margin in absolute units:
    /// a vibrato moves a partial between bins, never between bands, and a steady tone's small
    /// ripples never reach the margin (bin flux normalized by its own peak counted a string's
    /// vibrato as 5-8 onsets a second). The margin is the one whose counts agree best with the
    /// true note starts of the synthesizer's renderings of the held-out captions (r = 0.98).
    pub fn onset_rate(&self) -> f32 {
        const COMPRESSION: f64 = 100.0;
        const MARGIN: f64 = 0.6;
        let energies: Vec<Vec<f64>> = self.frames.iter().map(|f| self.band_powers(f)).collect();
        let loudest = energies.iter().flatten().cloned().fold(1e-12, f64::max);
        let log: Vec<Vec<f64>> =
            energies.iter().map(|e| e.iter().map(|p| (COMPRESSION * p / loudest).ln_1p()).collect()).collect();
        let flux: Vec<f64> =
            log.windows(2).map(|w| w[1].iter().zip(&w[0]).map(|(b, a)| (b - a).max(0.0)).sum()).collect();
        let mut onsets: Vec<usize> = Vec::new();
        for i in 1..flux.len().saturating_sub(1) {
            let around = &flux[i.saturating_sub(8)..(i + 8).min(flux.len())];
            let local = around.iter().sum::<f64>() / around.len() as f64;
            let is_peak = flux[i] > flux[i - 1] && flux[i] >= flux[i + 1] && flux[i] > local + MARGIN;
            if is_peak && onsets.last().is_none_or(|&last| i - last >= 3) {
                onsets.push(i);
            }
        }
        onsets.len() as f32 / self.seconds
    }

    /// A frame's power in each of 24 log-spaced bands from 80 Hz to 16 kHz.
    fn band_powers(&self, frame: &[f32]) -> Vec<f64> {
        BANDS.iter().map(|band| band.clone().map(|b| (frame[b] as f64).powi(2)).sum()).collect()
    }

    /// The mean over frames with sound of the power spectrum's geometric over arithmetic mean
    /// (50 Hz to 16 kHz): near 0.56 for white noise, near 0 for tones.
    pub fn flatness(&self) -> f32 {
        let bins: Vec<usize> =
            (0..=FFT / 2).filter(|&b| Self::frequency(b) > 50.0 && Self::frequency(b) < 16000.0).collect();
        let energies: Vec<f32> = self.frames.iter().map(|f| bins.iter().map(|&b| f[b] * f[b]).sum()).collect();
        let loudest = energies.iter().cloned().fold(0.0, f32::max);
        let mut sum = 0.0;
        let mut count = 0;
        for (frame, energy) in self.frames.iter().zip(&energies) {
            if *energy <= loudest * 1e-4 {
                continue;
            }
            let powers: Vec<f64> = bins.iter().map(|&b| (frame[b] as f64).powi(2) + 1e-12).collect();
            let geometric = (powers.iter().map(|p| p.ln()).sum::<f64>() / powers.len() as f64).exp();
            let arithmetic = powers.iter().sum::<f64>() / powers.len() as f64;
            sum += geometric / arithmetic;
            count += 1;
        }
        if count == 0 { 0.0 } else { (sum / count as f64) as f32 }
    }

    /// How much of the spectrum sounds: the mean, over frames with sound, of the bands within
    /// 30 dB of the frame's loudest.
    pub fn density(&self) -> f32 {
        let floor = 10f64.powf(-DENSITY_FLOOR_DB / 10.0);
        let counts: Vec<usize> = self
            .frames
            .iter()
            .filter_map(|frame| {
                let bands = self.band_powers(frame);
                let top = bands.iter().cloned().fold(0.0, f64::max);
                (top > SILENT_BAND_POWER).then(|| bands.iter().filter(|&&p| p > top * floor).count())
            })
            .collect();
        if counts.is_empty() { 0.0 } else { counts.iter().sum::<usize>() as f32 / counts.len() as f32 }
    }

    /// The long-term spectral envelope: mean log power in the 24 bands of `band_powers`, less its
    /// mean (so loudness does not count).
    pub fn timbre(&self) -> Vec<f32> {
        let mut total = [0f64; BAND_COUNT];
        for frame in &self.frames {
            for (t, p) in total.iter_mut().zip(self.band_powers(frame)) {
                *t += p;
            }
        }
        let bands: Vec<f32> = total
            .iter()
            .zip(BANDS.iter())
            .map(|(t, band)| ((t / band.len().max(1) as f64 / self.frames.len().max(1) as f64) + 1e-12).ln() as f32)
            .collect();
        let mean = bands.iter().sum::<f32>() / bands.len() as f32;
        bands.iter().map(|b| b - mean).collect()
    }
}

/// The FFT bins of each of 24 log-spaced bands from 80 Hz to 16 kHz.
static BANDS: LazyLock<Vec<Range<usize>>> = LazyLock::new(|| {
    let first_at = |hz: f32| (0..=FFT / 2).find(|&b| Spectrogram::frequency(b) >= hz).unwrap_or(FFT / 2 + 1);
    let edge = |i: usize| 80.0 * (16000f32 / 80.0).powf(i as f32 / BAND_COUNT as f32);
    (0..BAND_COUNT).map(|i| first_at(edge(i))..first_at(edge(i + 1))).collect()
});

const DENSITY_FLOOR_DB: f64 = 30.0;
/// A frame's loudest band below this (-130 dB of full scale, summed over its bins) is silence.
const SILENT_BAND_POWER: f64 = 1e-13;
/// Each section lasts this long, its start moved to the nearest quarter note
/// (`tools/train/sections.py`).
const SECTION_S: f32 = 6.0;
/// A section is measured this far from its edges, where the change is under way.
const SECTION_EDGE_S: f32 = 0.5;

/// One section a song's lyrics ask for: its texture level (0 for intro and outro, 1 for verse
/// and bridge, 2 for chorus: how loud and how dense) and where it lies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Section {
    pub level: i32,
    pub start_s: f32,
    pub end_s: f32,
}

/// The texture level of a section tag, in the spellings the training lyrics use; `None` for a
/// line that names no section.
pub fn section_level(tag_line: &str) -> Option<i32> {
    let tag = tag_line.trim().strip_prefix('[')?.strip_suffix(']')?.to_lowercase();
    let word = tag.split_whitespace().next()?;
    match word {
        "intro" | "outro" | "ending" => Some(0),
        "verse" | "bridge" => Some(1),
        "chorus" | "hook" | "refrain" => Some(2),
        _ => None,
    }
}

/// Where the sections of `levels` (in the lyrics' order) lie in a song of `length_s` at
/// `tempo_bpm`: each SECTION_S long, its start moved to the nearest quarter note, the last one
/// to the end; those that would start after the end are left out. (Ties round to even, as
/// Python's `round` placed the training songs' sections.)
pub fn section_plan(levels: &[i32], tempo_bpm: f32, length_s: f32) -> Vec<Section> {
    let quarter_s = 60.0 / tempo_bpm;
    let mut plan: Vec<Section> = Vec::new();
    for (k, &level) in levels.iter().enumerate() {
        let start_s = if k == 0 { 0.0 } else { (k as f32 * SECTION_S / quarter_s).round_ties_even() * quarter_s };
        if start_s >= length_s {
            break;
        }
        if let Some(last) = plan.last_mut() {
            last.end_s = start_s;
        }
        plan.push(Section { level, start_s, end_s: length_s });
    }
    plan
}

/// The loudness of `mono` in dB of its mean square.
pub fn loudness_db(mono: &[f32]) -> f32 {
    let mean_square = mono.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / mono.len().max(1) as f64;
    (10.0 * (mean_square + 1e-12).log10()) as f32
}

/// At each boundary of `plan` in the mono audio `mono`: [the change of level asked for, the
/// change of loudness in dB, the change of density in bands], each section measured
/// SECTION_EDGE_S away from its edges. A section too short to measure leaves out its boundaries.
pub fn boundary_changes(mono: &[f32], plan: &[Section]) -> Vec<[f32; 3]> {
    let measured: Vec<Option<(i32, f32, f32)>> = plan
        .iter()
        .map(|section| {
            let from = ((section.start_s + SECTION_EDGE_S) * SAMPLE_RATE) as usize;
            let to = (((section.end_s - SECTION_EDGE_S) * SAMPLE_RATE) as usize).min(mono.len());
            (to >= from + 2 * FFT).then(|| {
                let part = &mono[from..to];
                (section.level, loudness_db(part), Spectrogram::of_mono(part).density())
            })
        })
        .collect();
    measured
        .windows(2)
        .filter_map(|pair| match pair {
            [Some(before), Some(after)] => Some([(after.0 - before.0) as f32, after.1 - before.1, after.2 - before.2]),
            _ => None,
        })
        .collect()
}

/// The rank (1 = best) of the requested key among the 24 major and minor keys, by the
/// correlation of the chroma with each key's profile.
pub fn key_rank(chroma: &[f32; 12], tonic: usize, minor: bool) -> usize {
    let score = |t: usize, minor: bool| {
        let profile = if minor { MINOR_PROFILE } else { MAJOR_PROFILE };
        let rotated: Vec<f32> = (0..12).map(|pc| profile[(pc + 12 - t) % 12]).collect();
        pearson(chroma, &rotated)
    };
    let wanted = score(tonic, minor);
    1 + (0..12)
        .flat_map(|t| [(t, false), (t, true)])
        .filter(|&(t, m)| (t, m) != (tonic, minor) && score(t, m) > wanted)
        .count()
}

pub fn pearson(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len() as f32;
    let (ma, mb) = (a.iter().sum::<f32>() / n, b.iter().sum::<f32>() / n);
    let cov: f32 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f32 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f32 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt().max(1e-12)
}

/// Leave-one-out nearest-centroid accuracy: how often a song's fingerprint is nearest the mean
/// fingerprint of the other songs of its own label.
pub fn nearest_centroid_accuracy(features: &[Vec<f32>], labels: &[&str]) -> f32 {
    let mut kinds: Vec<&str> = labels.to_vec();
    kinds.sort();
    kinds.dedup();
    let correct = (0..features.len())
        .filter(|&k| {
            let distance = |label: &str| {
                let members: Vec<&Vec<f32>> =
                    (0..features.len()).filter(|&j| j != k && labels[j] == label).map(|j| &features[j]).collect();
                let centroid: Vec<f32> = (0..features[k].len())
                    .map(|d| members.iter().map(|m| m[d]).sum::<f32>() / members.len().max(1) as f32)
                    .collect();
                features[k].iter().zip(&centroid).map(|(a, b)| (a - b).powi(2)).sum::<f32>()
            };
            let nearest = kinds.iter().min_by(|a, b| distance(a).total_cmp(&distance(b))).unwrap();
            *nearest == labels[k]
        })
        .count();
    correct as f32 / features.len() as f32
}

/// In-place radix-2 FFT (the length a power of two).
fn fft(re: &mut [f32], im: &mut [f32]) {
    let n = re.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            re.swap(i, j);
            im.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let angle = -2.0 * std::f64::consts::PI / len as f64;
        // Each twiddle once a stage, for every block of the stage.
        for k in 0..len / 2 {
            let (s, c) = (angle * k as f64).sin_cos();
            for start in (0..n).step_by(len) {
                let (a, b) = (start + k, start + k + len / 2);
                let (tr, ti) = (re[b] * c as f32 - im[b] * s as f32, re[b] * s as f32 + im[b] * c as f32);
                re[b] = re[a] - tr;
                im[b] = im[a] - ti;
                re[a] += tr;
                im[a] += ti;
            }
        }
        len <<= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(freqs: &[f32], seconds: f32) -> Vec<f32> {
        (0..(seconds * SAMPLE_RATE) as usize)
            .map(|i| {
                freqs.iter().map(|f| (2.0 * std::f32::consts::PI * f * i as f32 / SAMPLE_RATE).sin()).sum::<f32>() * 0.2
            })
            .collect()
    }

    #[test]
    fn a_c_major_triad_is_in_c_major_and_flat() {
        let s = Spectrogram::of_mono(&tone(&[261.63, 329.63, 392.0], 2.0));
        assert!(key_rank(&s.chroma(), 0, false) <= 2, "C major ranks {}", key_rank(&s.chroma(), 0, false));
        assert!(key_rank(&s.chroma(), 6, false) > 12);
        assert!(s.flatness() < 0.05, "a triad's flatness {}", s.flatness());
    }

    #[test]
    fn noise_is_flat_and_clicks_have_onsets() {
        let mut state = 1u64;
        let noise: Vec<f32> = (0..88200)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.5
            })
            .collect();
        assert!(Spectrogram::of_mono(&noise).flatness() > 0.4);
        let mut clicks = vec![0f32; 4 * 44100];
        for beat in 0..8 {
            for i in 0..400 {
                clicks[beat * 22050 + i] = (i as f32 * 0.3).sin() * (1.0 - i as f32 / 400.0);
            }
        }
        let rate = Spectrogram::of_mono(&clicks).onset_rate();
        assert!((1.5..=2.5).contains(&rate), "8 clicks in 4 s gave {rate} onsets a second");
    }

    #[test]
    fn louder_fuller_sections_follow_their_levels_and_rotated_levels_do_not() {
        let levels = [0, 1, 2, 1, 0, 2];
        let plan = section_plan(&levels, 100.0, 36.0);
        assert_eq!(plan.len(), 6);
        assert_eq!(plan[1].start_s, 6.0);
        // Level 0 one tone, 1 three tones, 2 six tones, each louder.
        let partials = [220.0, 330.0, 440.0, 660.0, 990.0, 1480.0, 2220.0];
        let song: Vec<f32> = (0..(36.0 * SAMPLE_RATE) as usize)
            .map(|i| {
                let t = i as f32 / SAMPLE_RATE;
                let level = plan.iter().find(|s| t >= s.start_s && t < s.end_s).unwrap().level as usize;
                let gain = [0.05, 0.1, 0.2][level];
                partials[..[1, 3, 6][level]].iter().map(|f| (2.0 * std::f32::consts::PI * f * t).sin()).sum::<f32>()
                    * gain
            })
            .collect();
        let changes = boundary_changes(&song, &plan);
        assert_eq!(changes.len(), 5);
        let column = |c: &[[f32; 3]], k: usize| c.iter().map(|x| x[k]).collect::<Vec<f32>>();
        let asked = column(&changes, 0);
        assert!(pearson(&asked, &column(&changes, 1)) > 0.9, "{changes:?}");
        assert!(pearson(&asked, &column(&changes, 2)) > 0.9, "{changes:?}");
        let mut rotated = levels;
        rotated.rotate_left(1);
        let wrong = boundary_changes(&song, &section_plan(&rotated, 100.0, 36.0));
        let wrong_asked = column(&wrong, 0);
        assert!(pearson(&wrong_asked, &column(&wrong, 1)) < 0.0, "{wrong:?}");
        assert!(pearson(&wrong_asked, &column(&wrong, 2)) < 0.0, "{wrong:?}");
    }

    #[test]
    fn section_tags_read_as_people_spell_them() {
        assert_eq!(section_level("[Verse 2]"), Some(1));
        assert_eq!(section_level(" [CHORUS] "), Some(2));
        assert_eq!(section_level("[outro fade]"), Some(0));
        assert_eq!(section_level("[instrumental]"), None);
        assert_eq!(section_level("we sing it loud tonight"), None);
    }

    #[test]
    fn a_held_note_with_vibrato_has_no_onsets() {
        // A string-like tone: 13 partials, 5.5 Hz vibrato of 0.4 %, held for 4 s.
        let mut phase = 0.0f64;
        let tone: Vec<f32> = (0..4 * 44100)
            .map(|i| {
                let t = i as f64 / 44100.0;
                phase +=
                    2.0 * std::f64::consts::PI * 440.0 * (1.0 + 0.004 * (2.0 * std::f64::consts::PI * 5.5 * t).sin())
                        / 44100.0;
                ((1..14).map(|k| (k as f64 * phase).sin() / k as f64).sum::<f64>() * 0.1) as f32
            })
            .collect();
        let rate = Spectrogram::of_mono(&tone).onset_rate();
        assert!(rate < 0.5, "a held vibrato tone gave {rate} onsets a second");
    }
}
