//! Band-limited sample-rate conversion of a song (interleaved stereo), for answers asked at a
//! rate other than the model's: a polyphase windowed-sinc filter (Kaiser window) at the rational
//! ratio of the two rates, its cutoff below the lower rate's Nyquist frequency so nothing above it
//! folds back as an alias. It takes the song in pieces as it is made ([`Resampler::push`]) and
//! gives the same samples as all at once.

/// The rates a song is offered at, in Hz: the model's own and the lower ones MiniMax's cloud API
/// offers (`audio_setting.sample_rate`).
pub const OFFERED_RATES_HZ: [u32; 4] = [16_000, 24_000, 32_000, 44_100];

/// Zero crossings of the sinc on each side of a tap's centre: the filter's length, and so how
/// steep its transition band is (about 2.5% of the input rate wide at 32).
const ZERO_CROSSINGS: f64 = 32.0;
/// The cutoff as a share of the lower rate's Nyquist frequency: the transition band ends below
/// it, so the aliases of what the filter lets through stay above the new Nyquist frequency.
const ROLLOFF: f64 = 0.9;
/// The Kaiser window's shape: stopband about 90 dB down.
const KAISER_BETA: f64 = 9.0;

/// A stream of interleaved stereo samples converted from one rate to another.
pub struct Resampler {
    /// The output rate over the input rate, reduced: `up` output frames for every `down` input
    /// frames.
    up: u64,
    down: u64,
    /// Taps on each side of an output frame's position in the input.
    half_taps: usize,
    /// `up` phases of `2 * half_taps` taps: the filter at each fractional position.
    table: Vec<f32>,
    /// Input frames not yet behind every output frame still to come; `history[0]` is input frame
    /// `first`.
    history: Vec<[f32; 2]>,
    first: u64,
    /// Input frames taken so far.
    taken: u64,
    /// The next output frame.
    next: u64,
}

impl Resampler {
    /// A converter from `from_hz` to `to_hz` (both above zero).
    pub fn new(from_hz: u32, to_hz: u32) -> Result<Resampler, String> {
        if from_hz == 0 || to_hz == 0 {
            return Err(format!("sample rates must be above 0 Hz (got {from_hz} to {to_hz})"));
        }
        let divisor = gcd(u64::from(from_hz), u64::from(to_hz));
        let (up, down) = (u64::from(to_hz) / divisor, u64::from(from_hz) / divisor);
        if up == down {
            return Ok(Resampler {
                up,
                down,
                half_taps: 0,
                table: Vec::new(),
                history: Vec::new(),
                first: 0,
                taken: 0,
                next: 0,
            });
        }
        // The cutoff in cycles per input sample, times two (1 = the input's Nyquist frequency).
        let cutoff = (up as f64 / down as f64).min(1.0) * ROLLOFF;
        let half_taps = (ZERO_CROSSINGS / cutoff).ceil() as usize;
        let width = 2 * half_taps;
        let mut table = Vec::with_capacity(up as usize * width);
        for phase in 0..up {
            let offset = phase as f64 / up as f64;
            let start = table.len();
            for j in 0..width {
                // The distance, in input frames, from the output frame's position to this tap.
                let x = (half_taps - 1) as f64 - j as f64 + offset;
                table.push((cutoff * sinc(cutoff * x) * kaiser(x / half_taps as f64)) as f32);
            }
            // Each phase passes a constant through unchanged.
            let sum: f32 = table[start..].iter().sum();
            table[start..].iter_mut().for_each(|t| *t /= sum);
        }
        Ok(Resampler { up, down, half_taps, table, history: Vec::new(), first: 0, taken: 0, next: 0 })
    }

    /// Takes the next interleaved stereo samples; returns the output frames they complete.
    pub fn push(&mut self, samples: &[f32]) -> Vec<f32> {
        if self.up == self.down {
            return samples.to_vec();
        }
        self.history.extend(samples.chunks_exact(2).map(|f| [f[0], f[1]]));
        self.taken += (samples.len() / 2) as u64;
        self.drain(false)
    }

    /// The last output frames, with silence after the input's end.
    pub fn finish(mut self) -> Vec<f32> {
        if self.up == self.down {
            return Vec::new();
        }
        self.drain(true)
    }

    /// Output frames whose taps are all taken (or, at the end, every one the input covers).
    fn drain(&mut self, at_end: bool) -> Vec<f32> {
        let width = 2 * self.half_taps;
        // Output frames in all: ceil(taken * up / down).
        let total = (self.taken * self.up).div_ceil(self.down);
        let mut out = Vec::new();
        while self.next < total {
            let position = self.next * self.down;
            let (centre, phase) = (position / self.up, (position % self.up) as usize);
            // Taps from input frame `centre + 1 - half_taps` to `centre + half_taps`.
            let last = centre + self.half_taps as u64;
            if !at_end && last >= self.taken {
                break;
            }
            let taps = &self.table[phase * width..(phase + 1) * width];
            let mut frame = [0.0f32; 2];
            for (j, tap) in taps.iter().enumerate() {
                let Some(index) = (centre + 1 + j as u64).checked_sub(self.half_taps as u64) else { continue };
                let Some(input) = index.checked_sub(self.first).and_then(|i| self.history.get(i as usize)) else {
                    continue;
                };
                frame[0] += tap * input[0];
                frame[1] += tap * input[1];
            }
            out.extend_from_slice(&frame);
            self.next += 1;
        }
        // Input frames before the next output frame's first tap are needed no more.
        let needed_from = ((self.next * self.down) / self.up + 1).saturating_sub(self.half_taps as u64);
        let done = needed_from.saturating_sub(self.first).min(self.history.len() as u64);
        self.history.drain(..done as usize);
        self.first += done;
        out
    }
}

/// `samples` (interleaved stereo at `from_hz`) at `to_hz`.
pub fn resample(samples: &[f32], from_hz: u32, to_hz: u32) -> Result<Vec<f32>, String> {
    let mut resampler = Resampler::new(from_hz, to_hz)?;
    let mut out = resampler.push(samples);
    out.extend(resampler.finish());
    Ok(out)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let pi_x = std::f64::consts::PI * x;
        pi_x.sin() / pi_x
    }
}

/// The Kaiser window at `u` (-1 to 1 across it).
fn kaiser(u: f64) -> f64 {
    if u.abs() > 1.0 {
        return 0.0;
    }
    bessel_i0(KAISER_BETA * (1.0 - u * u).sqrt()) / bessel_i0(KAISER_BETA)
}

/// The modified Bessel function of the first kind, order 0, by its power series.
fn bessel_i0(x: f64) -> f64 {
    let (mut sum, mut term, mut k) = (1.0, 1.0, 1.0);
    while term > sum * 1e-12 {
        term *= (x / (2.0 * k)) * (x / (2.0 * k));
        sum += term;
        k += 1.0;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stereo sine of `hz` at `rate`, `frames` long (the right channel at half the amplitude).
    fn sine(hz: f64, rate: u32, frames: usize) -> Vec<f32> {
        (0..frames)
            .flat_map(|n| {
                let v = (2.0 * std::f64::consts::PI * hz * n as f64 / rate as f64).sin() as f32;
                [v, 0.5 * v]
            })
            .collect()
    }

    /// The root mean square of the left channel, away from the edges.
    fn rms(samples: &[f32], edge: usize) -> f64 {
        let left: Vec<f64> = samples.chunks_exact(2).map(|f| f64::from(f[0])).collect();
        let middle = &left[edge..left.len() - edge];
        (middle.iter().map(|v| v * v).sum::<f64>() / middle.len() as f64).sqrt()
    }

    /// A tone below the new Nyquist frequency comes through at its frequency and level, at every
    /// rate offered; the length is the input's in time.
    #[test]
    fn a_tone_in_the_passband_keeps_its_frequency_and_level() {
        for to in OFFERED_RATES_HZ {
            let input = sine(1000.0, 44_100, 44_100);
            let out = resample(&input, 44_100, to).unwrap();
            assert_eq!(out.len(), 2 * to as usize, "{to} Hz");
            let want = sine(1000.0, to, to as usize);
            // Away from the edges, where the filter sees silence before and after the song.
            let edge = to as usize / 100;
            let worst = out[2 * edge..out.len() - 2 * edge]
                .iter()
                .zip(&want[2 * edge..])
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(worst < 2e-3, "{to} Hz: off by {worst}");
        }
    }

    /// A tone above the new Nyquist frequency is removed, not folded down as an alias; picking
    /// every nth sample without the filter (the negative control) keeps it at full level.
    #[test]
    fn a_tone_above_the_new_nyquist_frequency_is_removed() {
        let input = sine(9_000.0, 44_100, 44_100);
        let out = resample(&input, 44_100, 16_000).unwrap();
        let level = rms(&out, 400);
        assert!(level < 1e-3, "the 9 kHz tone left {level} (a full-scale sine is 0.707)");
        let picked: Vec<f32> = (0..16_000)
            .flat_map(|n| {
                let i = n * 44_100 / 16_000;
                [input[2 * i], input[2 * i + 1]]
            })
            .collect();
        assert!(rms(&picked, 400) > 0.5, "the control would not show an alias");
    }

    /// The song in pieces of any size gives the same samples as all at once.
    #[test]
    fn pieces_give_the_same_samples_as_the_whole() {
        let input: Vec<f32> = (0..20_000).map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0).collect();
        for to in [16_000, 24_000, 32_000, 48_000] {
            let whole = resample(&input, 44_100, to).unwrap();
            let mut resampler = Resampler::new(44_100, to).unwrap();
            let mut pieces = Vec::new();
            let mut at = 0;
            for size in [2, 6, 1000, 2, 4410, 10, 14_000].into_iter().cycle() {
                let end = (at + size).min(input.len());
                pieces.extend(resampler.push(&input[at..end]));
                at = end;
                if at == input.len() {
                    break;
                }
            }
            pieces.extend(resampler.finish());
            assert_eq!(pieces, whole, "{to} Hz");
        }
        assert_eq!(resample(&input, 44_100, 44_100).unwrap(), input);
        assert!(Resampler::new(0, 16_000).is_err());
    }
}
