//! Playback through the default output device. The engine side pushes samples through a feeder
//! thread into a lock-free ring; the audio callback only pops (no locks, no allocation, no logging)
//! and plays silence on underrun.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::{FromSample, SampleFormat, SizedSample, StreamConfig};

const CHANNELS: usize = 2;
/// About 1.5 s of stereo audio at 44.1 kHz between the feeder and the callback.
const RING_SAMPLES: usize = 1 << 17;

pub struct Player {
    _stream: cpal::Stream,
    chunks: Option<mpsc::Sender<Vec<f32>>>,
    feeder: Option<JoinHandle<()>>,
    played: Arc<AtomicUsize>,
    pushed: Arc<AtomicUsize>,
    underruns: Arc<AtomicUsize>,
}

/// Why playback could not start, in words for the user.
pub type NoPlayback = String;

impl Player {
    /// Opens the default output device at `sample_rate`, stereo.
    pub fn open(sample_rate: u32) -> Result<Player, NoPlayback> {
        if !sound_output_configured() {
            return Err("no sound card or sound server found".into());
        }
        let host = cpal::default_host();
        let device = host.default_output_device().ok_or("no sound output device")?;
        let default =
            device.default_output_config().map_err(|e| format!("the sound device has no usable configuration: {e}"))?;
        let config = StreamConfig { channels: CHANNELS as u16, sample_rate, buffer_size: cpal::BufferSize::Default };
        let (producer, consumer) = rtrb::RingBuffer::<f32>::new(RING_SAMPLES);
        let played = Arc::new(AtomicUsize::new(0));
        let underruns = Arc::new(AtomicUsize::new(0));
        let stream = match default.sample_format() {
            SampleFormat::I16 => build::<i16>(&device, &config, consumer, &played, &underruns),
            SampleFormat::U16 => build::<u16>(&device, &config, consumer, &played, &underruns),
            SampleFormat::I32 => build::<i32>(&device, &config, consumer, &played, &underruns),
            _ => build::<f32>(&device, &config, consumer, &played, &underruns),
        }?;
        stream.play().map_err(|e| format!("the sound device did not start: {e}"))?;
        let (tx, rx) = mpsc::channel::<Vec<f32>>();
        let feeder = std::thread::spawn(move || feed(rx, producer));
        Ok(Player {
            _stream: stream,
            chunks: Some(tx),
            feeder: Some(feeder),
            played,
            pushed: Arc::new(AtomicUsize::new(0)),
            underruns,
        })
    }

    /// Queues interleaved stereo samples; never blocks the caller.
    pub fn push(&self, samples: &[f32]) {
        if let Some(tx) = &self.chunks {
            self.pushed.fetch_add(samples.len(), Ordering::Relaxed);
            let _ = tx.send(samples.to_vec());
        }
    }

    /// Waits until everything queued has been played (or `limit` passed); returns how often the
    /// device ran dry.
    pub fn finish(mut self, limit: Duration) -> usize {
        drop(self.chunks.take());
        if let Some(f) = self.feeder.take() {
            let _ = f.join();
        }
        let deadline = std::time::Instant::now() + limit;
        while self.played.load(Ordering::Relaxed) < self.pushed.load(Ordering::Relaxed)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.underruns.load(Ordering::Relaxed)
    }
}

/// Moves chunks into the ring, waiting for room as the device drains it.
fn feed(rx: mpsc::Receiver<Vec<f32>>, mut producer: rtrb::Producer<f32>) {
    for chunk in rx {
        let mut rest = chunk.as_slice();
        while !rest.is_empty() {
            let n = producer.slots().min(rest.len());
            if n == 0 {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            if let Ok(mut slots) = producer.write_chunk_uninit(n) {
                let (a, b) = slots.as_mut_slices();
                let (head, tail) = rest[..n].split_at(a.len());
                for (d, s) in a.iter_mut().zip(head) {
                    d.write(*s);
                }
                for (d, s) in b.iter_mut().zip(tail) {
                    d.write(*s);
                }
                // SAFETY: every one of the n slots was written just above.
                unsafe { slots.commit_all() };
            }
            rest = &rest[n..];
        }
    }
}

fn build<T: SizedSample + FromSample<f32> + Send + 'static>(
    device: &cpal::Device,
    config: &StreamConfig,
    mut consumer: rtrb::Consumer<f32>,
    played: &Arc<AtomicUsize>,
    underruns: &Arc<AtomicUsize>,
) -> Result<cpal::Stream, NoPlayback> {
    let (played, underruns) = (played.clone(), underruns.clone());
    let starved = AtomicBool::new(false);
    device
        .build_output_stream::<T, _, _>(
            *config,
            move |out: &mut [T], _| {
                let n = consumer.slots().min(out.len());
                if let Ok(chunk) = consumer.read_chunk(n) {
                    let (a, b) = chunk.as_slices();
                    for (d, s) in out.iter_mut().zip(a.iter().chain(b)) {
                        *d = T::from_sample(*s);
                    }
                    chunk.commit_all();
                }
                for d in &mut out[n..] {
                    *d = T::EQUILIBRIUM;
                }
                played.fetch_add(n, Ordering::Relaxed);
                let short = n < out.len();
                if short && !starved.swap(true, Ordering::Relaxed) {
                    underruns.fetch_add(1, Ordering::Relaxed);
                } else if !short {
                    starved.store(false, Ordering::Relaxed);
                }
            },
            |_err| {},
            None,
        )
        .map_err(|e| format!("cannot play 44.1 kHz stereo on the default sound device: {e}"))
}

/// Whether this machine has any sound output that ALSA could reach: a sound card, a PulseAudio or
/// PipeWire socket, or an ALSA configuration of its own (such as a `null` sink). Asking ALSA
/// blindly on a machine with none prints pages of library errors.
#[cfg(target_os = "linux")]
fn sound_output_configured() -> bool {
    let has_card = std::fs::read_to_string("/proc/asound/cards")
        .is_ok_and(|c| !c.contains("no soundcards") && !c.trim().is_empty());
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(std::path::PathBuf::from);
    let has_server = runtime.is_some_and(|r| r.join("pulse/native").exists() || r.join("pipewire-0").exists())
        || std::env::var_os("PULSE_SERVER").is_some();
    let home_rc = std::env::var_os("HOME").is_some_and(|h| std::path::Path::new(&h).join(".asoundrc").exists());
    has_card || has_server || home_rc || std::path::Path::new("/etc/asound.conf").exists()
}

#[cfg(not(target_os = "linux"))]
fn sound_output_configured() -> bool {
    true
}
