//! Playback through the default output device, with play/pause, seek, a playhead and a level.
//!
//! The song's samples go to a feeder thread that keeps the whole song (so it can seek anywhere in
//! what has arrived) and moves them into a lock-free ring; the audio callback only pops, counts the
//! frames it played and measures their peak (no locks, no allocation, no logging), and plays
//! silence when paused or when the generator is behind. A seek asks the callback to drop what is
//! queued; the feeder waits for that before it queues from the new place.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::{FromSample, SampleFormat, SizedSample, StreamConfig};

const CHANNELS: usize = 2;
/// About 0.75 s of stereo audio at 44.1 kHz between the feeder and the callback.
const RING_SAMPLES: usize = 1 << 16;
/// How long the feeder waits for the callback to drop the queue on a seek. A stream that stopped
/// calling back would otherwise hang the seek.
const FLUSH_WAIT: Duration = Duration::from_millis(250);

/// Why playback could not start, in words for the user.
pub type NoPlayback = String;

/// What the window shows of playback.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PlaybackStatus {
    /// The playhead, in stereo frames from the song's start.
    pub position: usize,
    /// Frames of the song that have arrived.
    pub frames: usize,
    /// Whether the whole song has arrived.
    pub complete: bool,
    pub playing: bool,
    /// Peak of the last block played, 0..=1.
    pub level: f32,
    /// How often playback caught up with the generator and played silence.
    pub underruns: usize,
}

/// State shared by the feeder, the callback and the owner; each field has one writer, except
/// `flush`, which the feeder raises and the callback lowers.
#[derive(Default)]
struct Shared {
    playing: AtomicBool,
    position: AtomicUsize,
    frames: AtomicUsize,
    complete: AtomicBool,
    /// Raised by the feeder: drop everything queued and move the playhead to `seek_to`.
    flush: AtomicBool,
    seek_to: AtomicUsize,
    level: AtomicU32,
    underruns: AtomicUsize,
    /// The gain applied on the way to the device, 0..=1, as f32 bits.
    volume: AtomicU32,
}

enum Command {
    NewSong,
    Append(Vec<f32>),
    Complete,
    Seek(usize),
}

pub struct Player {
    _stream: cpal::Stream,
    commands: Option<mpsc::Sender<Command>>,
    feeder: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl Player {
    /// Opens the default output device at `sample_rate`, stereo, with an empty song that plays as
    /// soon as samples arrive.
    pub fn open(sample_rate: u32) -> Result<Player, NoPlayback> {
        Self::open_with_monitor(sample_rate, None)
    }

    /// As [`open`](Self::open), also copying every sample given to the device into `monitor`.
    fn open_with_monitor(sample_rate: u32, monitor: Option<rtrb::Producer<f32>>) -> Result<Player, NoPlayback> {
        if !sound_output_configured() {
            return Err("no sound card or sound server found".into());
        }
        let host = cpal::default_host();
        let device = host.default_output_device().ok_or("no sound output device")?;
        let default =
            device.default_output_config().map_err(|e| format!("the sound device has no usable configuration: {e}"))?;
        let config = StreamConfig { channels: CHANNELS as u16, sample_rate, buffer_size: cpal::BufferSize::Default };
        let (producer, consumer) = rtrb::RingBuffer::<f32>::new(RING_SAMPLES);
        let shared = Arc::new(Shared {
            playing: AtomicBool::new(true),
            volume: AtomicU32::new(1.0f32.to_bits()),
            ..Shared::default()
        });
        let output = Output { consumer, shared: shared.clone(), monitor, starved: false };
        let stream = match default.sample_format() {
            SampleFormat::I16 => build::<i16>(&device, &config, output),
            SampleFormat::U16 => build::<u16>(&device, &config, output),
            SampleFormat::I32 => build::<i32>(&device, &config, output),
            _ => build::<f32>(&device, &config, output),
        }?;
        stream.play().map_err(|e| format!("the sound device did not start: {e}"))?;
        let (tx, rx) = mpsc::channel();
        let feeder_shared = shared.clone();
        let feeder = std::thread::Builder::new()
            .name("songloom-feeder".into())
            .spawn(move || Feeder { producer, shared: feeder_shared, song: Vec::new(), cursor: 0 }.run(rx))
            .map_err(|e| format!("the playback thread did not start: {e}"))?;
        Ok(Player { _stream: stream, commands: Some(tx), feeder: Some(feeder), shared })
    }

    fn send(&self, command: Command) {
        if let Some(tx) = &self.commands {
            let _ = tx.send(command);
        }
    }

    /// Drops the current song and starts an empty one that plays as samples arrive.
    pub fn new_song(&self) {
        self.send(Command::NewSong);
        self.shared.playing.store(true, Ordering::Relaxed);
    }

    /// Drops the song and stays silent until the next one.
    pub fn stop(&self) {
        self.send(Command::NewSong);
        self.pause();
    }

    /// Appends interleaved stereo samples to the song; never blocks the caller.
    pub fn push(&self, samples: &[f32]) {
        self.send(Command::Append(samples.to_vec()));
    }

    /// Says that the whole song has arrived, so running out of samples is its end.
    pub fn complete(&self) {
        self.send(Command::Complete);
    }

    pub fn play(&self) {
        self.shared.playing.store(true, Ordering::Relaxed);
    }

    pub fn pause(&self) {
        self.shared.playing.store(false, Ordering::Relaxed);
    }

    /// Sets the gain on the way to the device, 0..=1; what is kept of the song is unchanged.
    pub fn set_volume(&self, volume: f32) {
        self.shared.volume.store(volume.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
    }

    /// Pauses, or plays; a song that has played to its end plays again from the start.
    pub fn toggle(&self) {
        let s = self.status();
        if s.playing {
            self.pause();
        } else {
            if s.complete && s.position >= s.frames {
                self.seek(0);
            }
            self.play();
        }
    }

    /// Moves the playhead to stereo frame `frame` (clamped to what has arrived).
    pub fn seek(&self, frame: usize) {
        self.send(Command::Seek(frame));
    }

    pub fn status(&self) -> PlaybackStatus {
        let s = &self.shared;
        let frames = s.frames.load(Ordering::Acquire);
        let complete = s.complete.load(Ordering::Acquire);
        let position = s.position.load(Ordering::Relaxed).min(frames);
        PlaybackStatus {
            position,
            frames,
            complete,
            playing: s.playing.load(Ordering::Relaxed) && !(complete && position >= frames),
            level: f32::from_bits(s.level.load(Ordering::Relaxed)),
            underruns: s.underruns.load(Ordering::Relaxed),
        }
    }

    /// Marks the song complete and waits until it has played to its end (or `limit` passed);
    /// returns how often the device ran dry before then.
    pub fn finish(mut self, limit: Duration) -> usize {
        self.complete();
        let deadline = Instant::now() + limit;
        loop {
            let s = self.status();
            if (s.complete && s.position >= s.frames) || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(self.commands.take());
        if let Some(f) = self.feeder.take() {
            let _ = f.join();
        }
        self.shared.underruns.load(Ordering::Relaxed)
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        drop(self.commands.take());
        if let Some(f) = self.feeder.take() {
            let _ = f.join();
        }
    }
}

/// The feeder thread: keeps the song and queues it from the playhead on.
struct Feeder {
    producer: rtrb::Producer<f32>,
    shared: Arc<Shared>,
    /// The whole song so far, interleaved.
    song: Vec<f32>,
    /// The next sample to queue.
    cursor: usize,
}

impl Feeder {
    fn run(mut self, commands: mpsc::Receiver<Command>) {
        loop {
            // Wait only when there is nothing to queue (or no room for it).
            let wait = if self.cursor < self.song.len() && self.producer.slots() >= CHANNELS {
                Duration::ZERO
            } else {
                Duration::from_millis(5)
            };
            match commands.recv_timeout(wait) {
                Ok(command) => self.apply(command),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            while let Ok(command) = commands.try_recv() {
                self.apply(command);
            }
            self.queue();
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::NewSong => {
                self.song.clear();
                self.shared.frames.store(0, Ordering::Release);
                self.shared.complete.store(false, Ordering::Release);
                self.flush_to(0);
            }
            Command::Append(samples) => {
                self.song.extend_from_slice(&samples);
                self.shared.frames.store(self.song.len() / CHANNELS, Ordering::Release);
            }
            Command::Complete => self.shared.complete.store(true, Ordering::Release),
            Command::Seek(frame) => self.flush_to(frame.min(self.song.len() / CHANNELS)),
        }
    }

    /// Has the callback drop what is queued and continue from `frame`.
    fn flush_to(&mut self, frame: usize) {
        self.shared.seek_to.store(frame, Ordering::Relaxed);
        self.shared.flush.store(true, Ordering::Release);
        let deadline = Instant::now() + FLUSH_WAIT;
        while self.shared.flush.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.shared.flush.swap(false, Ordering::AcqRel) {
            // The device stopped calling back; the playhead moves anyway.
            self.shared.position.store(frame, Ordering::Relaxed);
        }
        self.cursor = frame * CHANNELS;
    }

    fn queue(&mut self) {
        let n = self.producer.slots().min(self.song.len() - self.cursor) / CHANNELS * CHANNELS;
        if n == 0 {
            return;
        }
        if let Ok(mut slots) = self.producer.write_chunk_uninit(n) {
            let (a, b) = slots.as_mut_slices();
            let source = &self.song[self.cursor..self.cursor + n];
            for (d, s) in a.iter_mut().chain(b.iter_mut()).zip(source) {
                d.write(*s);
            }
            // SAFETY: every one of the n slots was written just above.
            unsafe { slots.commit_all() };
            self.cursor += n;
        }
    }
}

/// The audio callback's side: pops what is queued into the device's buffer.
struct Output {
    consumer: rtrb::Consumer<f32>,
    shared: Arc<Shared>,
    /// Tests read back what the device was given.
    monitor: Option<rtrb::Producer<f32>>,
    /// Whether the last block ran short before the song's end (to count each underrun once).
    starved: bool,
}

impl Output {
    /// Fills `out` (interleaved stereo) from the queue; silence where paused or starved.
    fn render<T: SizedSample + FromSample<f32>>(&mut self, out: &mut [T]) {
        let shared = &*self.shared;
        if shared.flush.load(Ordering::Acquire) {
            let queued = self.consumer.slots();
            if let Ok(chunk) = self.consumer.read_chunk(queued) {
                chunk.commit_all();
            }
            shared.position.store(shared.seek_to.load(Ordering::Relaxed), Ordering::Relaxed);
            shared.flush.store(false, Ordering::Release);
        }
        let mut written = 0;
        let mut peak = 0.0f32;
        if shared.playing.load(Ordering::Relaxed) {
            let n = self.consumer.slots().min(out.len()) / CHANNELS * CHANNELS;
            if let Ok(chunk) = self.consumer.read_chunk(n) {
                let (a, b) = chunk.as_slices();
                let volume = f32::from_bits(shared.volume.load(Ordering::Relaxed));
                for (d, s) in out.iter_mut().zip(a.iter().chain(b)) {
                    let heard = s * volume;
                    *d = T::from_sample(heard);
                    peak = peak.max(heard.abs());
                }
                if let Some(m) = &mut self.monitor {
                    for s in a.iter().chain(b) {
                        let _ = m.push(s * volume);
                    }
                }
                chunk.commit_all();
                written = n;
            }
            let position = shared.position.fetch_add(written / CHANNELS, Ordering::Relaxed) + written / CHANNELS;
            let at_end = shared.complete.load(Ordering::Acquire) && position >= shared.frames.load(Ordering::Acquire);
            let short = written < out.len() && !at_end;
            if short && !self.starved {
                shared.underruns.fetch_add(1, Ordering::Relaxed);
            }
            self.starved = short;
        }
        for d in &mut out[written..] {
            *d = T::EQUILIBRIUM;
        }
        shared.level.store(peak.min(1.0).to_bits(), Ordering::Relaxed);
    }
}

fn build<T: SizedSample + FromSample<f32> + Send + 'static>(
    device: &cpal::Device,
    config: &StreamConfig,
    mut output: Output,
) -> Result<cpal::Stream, NoPlayback> {
    device
        .build_output_stream::<T, _, _>(*config, move |out: &mut [T], _| output.render(out), |_err| {}, None)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A callback side over a ring of `capacity` samples, with its producer and monitor.
    fn output(capacity: usize) -> (rtrb::Producer<f32>, Output, rtrb::Consumer<f32>) {
        let (producer, consumer) = rtrb::RingBuffer::new(capacity);
        let (monitor, monitored) = rtrb::RingBuffer::new(1 << 16);
        let shared = Arc::new(Shared {
            playing: AtomicBool::new(true),
            volume: AtomicU32::new(1.0f32.to_bits()),
            ..Shared::default()
        });
        (producer, Output { consumer, shared, monitor: Some(monitor), starved: false }, monitored)
    }

    fn push(p: &mut rtrb::Producer<f32>, out: &Output, samples: &[f32]) {
        for s in samples {
            p.push(*s).unwrap();
        }
        out.shared.frames.fetch_add(samples.len() / CHANNELS, Ordering::Release);
    }

    fn drain(c: &mut rtrb::Consumer<f32>) -> Vec<f32> {
        std::iter::from_fn(|| c.pop().ok()).collect()
    }

    #[test]
    fn the_volume_scales_what_the_device_hears_and_the_level() {
        let (mut p, mut out, _monitor) = output(64);
        push(&mut p, &out, &[0.8, -0.4, 0.2, 0.6]);
        out.shared.volume.store(0.5f32.to_bits(), Ordering::Relaxed);
        let mut block = [0.0f32; 4];
        out.render(&mut block);
        assert_eq!(block, [0.4, -0.2, 0.1, 0.3]);
        assert_eq!(f32::from_bits(out.shared.level.load(Ordering::Relaxed)), 0.4);
    }

    #[test]
    fn the_callback_plays_the_queue_in_order_and_counts_frames() {
        let (mut p, mut out, mut monitor) = output(64);
        let song: Vec<f32> = (0..24).map(|i| i as f32 / 32.0).collect();
        push(&mut p, &out, &song);
        let mut block = [0.0f32; 8];
        let mut played = Vec::new();
        for _ in 0..3 {
            out.render(&mut block);
            played.extend_from_slice(&block);
        }
        assert_eq!(played, song);
        assert_eq!(drain(&mut monitor), song);
        assert_eq!(out.shared.position.load(Ordering::Relaxed), 12);
        assert_eq!(f32::from_bits(out.shared.level.load(Ordering::Relaxed)), 23.0 / 32.0);
        assert_eq!(out.shared.underruns.load(Ordering::Relaxed), 0);
        // Integer devices get the same samples converted.
        push(&mut p, &out, &[0.5, -0.5]);
        let mut ints = [7i16; 4];
        out.render(&mut ints);
        assert_eq!(ints, [16384, -16384, 0, 0]);
    }

    #[test]
    fn an_underrun_plays_silence_is_counted_once_and_the_song_end_is_not_one() {
        let (mut p, mut out, _monitor) = output(64);
        push(&mut p, &out, &[0.25; 4]);
        let mut block = [1.0f32; 8];
        out.render(&mut block);
        assert_eq!(block, [0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0]);
        out.render(&mut block);
        assert_eq!(block, [0.0; 8]);
        assert_eq!(out.shared.underruns.load(Ordering::Relaxed), 1, "one starved stretch, one underrun");
        push(&mut p, &out, &[0.5; 8]);
        out.render(&mut block);
        assert_eq!(block, [0.5; 8]);
        out.render(&mut block);
        assert_eq!(out.shared.underruns.load(Ordering::Relaxed), 2);
        // Once the song is complete, running out is its end, not an underrun.
        push(&mut p, &out, &[0.5; 4]);
        out.shared.complete.store(true, Ordering::Release);
        out.render(&mut block);
        out.render(&mut block);
        assert_eq!(out.shared.underruns.load(Ordering::Relaxed), 2);
        assert_eq!(out.shared.position.load(Ordering::Relaxed), 8);
    }

    #[test]
    fn paused_plays_silence_and_keeps_the_queue() {
        let (mut p, mut out, mut monitor) = output(64);
        push(&mut p, &out, &[0.75; 8]);
        out.shared.playing.store(false, Ordering::Relaxed);
        let mut block = [1.0f32; 8];
        out.render(&mut block);
        assert_eq!(block, [0.0; 8]);
        assert!(drain(&mut monitor).is_empty());
        assert_eq!(out.shared.position.load(Ordering::Relaxed), 0);
        out.shared.playing.store(true, Ordering::Relaxed);
        out.render(&mut block);
        assert_eq!(block, [0.75; 8]);
    }

    #[test]
    fn a_flush_drops_the_queue_and_moves_the_playhead() {
        let (mut p, mut out, mut monitor) = output(64);
        push(&mut p, &out, &[0.1; 16]);
        out.shared.seek_to.store(40, Ordering::Relaxed);
        out.shared.flush.store(true, Ordering::Release);
        let mut block = [1.0f32; 4];
        out.render(&mut block);
        assert_eq!(block, [0.0; 4]);
        assert!(!out.shared.flush.load(Ordering::Acquire), "the callback lowers the flag");
        assert_eq!(out.shared.position.load(Ordering::Relaxed), 40);
        assert!(drain(&mut monitor).is_empty());
        push(&mut p, &out, &[0.2; 4]);
        out.render(&mut block);
        assert_eq!(block, [0.2; 4]);
        assert_eq!(out.shared.position.load(Ordering::Relaxed), 42);
    }

    /// Waits (bounded) for `done`; playback through ALSA's `null` device runs as fast as it is fed.
    fn wait_for(player: &Player, done: impl Fn(&PlaybackStatus) -> bool) -> PlaybackStatus {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = player.status();
            if done(&s) || Instant::now() > deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The real device path, cpal and ALSA, on ALSA's `null` device: the callback drains the ring in
    /// order, a starved stretch is an underrun, a seek plays from the new place.
    #[test]
    fn through_the_alsa_null_device_the_song_plays_in_order_and_seeks() {
        let home = tempfile::tempdir().unwrap();
        let _home = crate::test_home::null_sound_home(home.path());
        let (monitor, mut monitored) = rtrb::RingBuffer::new(1 << 20);
        let player = match Player::open_with_monitor(44100, Some(monitor)) {
            Ok(p) => p,
            Err(why) => panic!("ALSA's null device did not open: {why}"),
        };
        let first: Vec<f32> = (0..20_000).map(|i| (i % 1000) as f32 / 1000.0).collect();
        player.push(&first);
        let s = wait_for(&player, |s| s.position >= 10_000 && s.underruns > 0);
        assert_eq!((s.position, s.frames), (10_000, 10_000), "{s:?}");
        assert!(s.underruns >= 1, "the device ran ahead of the generator: {s:?}");
        let second: Vec<f32> = (0..8_000).map(|i| -((i % 500) as f32) / 500.0).collect();
        player.push(&second);
        player.complete();
        let s = wait_for(&player, |s| s.position >= 14_000);
        assert_eq!(s.position, 14_000);
        assert!(!s.playing, "a complete song stops at its end");
        let played: Vec<f32> = std::iter::from_fn(|| monitored.pop().ok()).collect();
        assert_eq!(played, [first.as_slice(), second.as_slice()].concat(), "every sample once, in order");

        player.seek(12_000);
        player.play();
        let mut replayed = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while replayed.len() < 4_000 && Instant::now() < deadline {
            replayed.extend(std::iter::from_fn(|| monitored.pop().ok()));
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(replayed, &second[4_000..], "from the seek to the end");
        assert_eq!(wait_for(&player, |s| !s.playing).position, 14_000);
    }
}
