//! The browser's player: a song's interleaved stereo samples as they arrive, played through Web
//! Audio by scheduling each new stretch as a buffer right after the one before (the ring of the
//! desktop player, in the audio clock's terms). Running out of samples while a song is still being
//! made waits for more instead of ending.

use songloom_ui::contract::PlaybackState;
use web_sys::{AudioBufferSourceNode, AudioContext, GainNode};

/// Seconds of headroom given to the first buffer after a start, a seek or a wait for samples.
const LEAD_S: f64 = 0.05;
/// The fewest frames worth scheduling while more are still to come.
const MIN_FRAMES: usize = 2048;

pub struct WebPlayer {
    context: Result<AudioContext, String>,
    /// The volume, between the buffers and the speakers (none where the browser made none).
    volume: Option<GainNode>,
    samples: Vec<f32>,
    sample_rate: u32,
    /// Every sample of the song has arrived, so running out of them is its end.
    complete: bool,
    playing: bool,
    /// While playing: the frame that plays at `anchor_time` on the audio clock.
    anchor_frame: usize,
    anchor_time: f64,
    /// Frames handed to Web Audio so far (while playing).
    scheduled: usize,
    sources: Vec<AudioBufferSourceNode>,
    /// The playhead while paused.
    paused_at: usize,
}

impl WebPlayer {
    pub fn new() -> Self {
        let context = AudioContext::new().map_err(|e| format!("this browser cannot play audio: {e:?}"));
        let volume = context.as_ref().ok().and_then(|c| {
            let gain = c.create_gain().ok()?;
            gain.connect_with_audio_node(&c.destination()).ok()?;
            Some(gain)
        });
        WebPlayer {
            context,
            volume,
            samples: Vec::new(),
            sample_rate: 44_100,
            complete: true,
            playing: false,
            anchor_frame: 0,
            anchor_time: 0.0,
            scheduled: 0,
            sources: Vec::new(),
            paused_at: 0,
        }
    }

    fn frames(&self) -> usize {
        self.samples.len() / 2
    }

    fn now(&self) -> f64 {
        self.context.as_ref().map_or(0.0, |c| c.current_time())
    }

    pub fn position(&self) -> usize {
        if !self.playing {
            return self.paused_at;
        }
        let played = ((self.now() - self.anchor_time).max(0.0) * self.sample_rate as f64) as usize;
        (self.anchor_frame + played).min(self.scheduled)
    }

    /// Starts a song that is still being made: its samples come with [`push`](Self::push).
    pub fn begin(&mut self, sample_rate: u32) {
        self.stop_sources();
        self.samples.clear();
        self.sample_rate = sample_rate;
        self.complete = false;
        self.playing = false;
        self.paused_at = 0;
    }

    /// A song's next samples (a song being made starts paused: the window asks for
    /// [`play`](Self::play) once the rest can play through).
    pub fn push(&mut self, samples: &[f32]) {
        self.samples.extend_from_slice(samples);
        self.schedule();
    }

    /// Plays from the playhead, unless playing already.
    pub fn play(&mut self) {
        if !self.playing {
            self.toggle();
        }
    }

    /// The gain on the way to the speakers, 0..=1.
    pub fn set_volume(&mut self, volume: f32) {
        if let Some(gain) = &self.volume {
            gain.gain().set_value(volume.clamp(0.0, 1.0));
        }
    }

    pub fn complete(&mut self) {
        self.complete = true;
        self.schedule();
    }

    /// A whole song, played from its start.
    pub fn load(&mut self, samples: Vec<f32>, sample_rate: u32) {
        self.stop_sources();
        self.samples = samples;
        self.sample_rate = sample_rate;
        self.complete = true;
        self.start(0);
    }

    pub fn stop(&mut self) {
        self.stop_sources();
        self.playing = false;
        self.paused_at = 0;
        self.samples.clear();
        self.complete = true;
    }

    pub fn toggle(&mut self) {
        if self.playing {
            self.paused_at = self.position();
            self.stop_sources();
            self.playing = false;
        } else {
            let from = if self.complete && self.paused_at >= self.frames() { 0 } else { self.paused_at };
            self.start(from);
        }
    }

    pub fn seek(&mut self, frame: usize) {
        let frame = frame.min(self.frames());
        if self.playing {
            self.stop_sources();
            self.start(frame);
        } else {
            self.paused_at = frame;
        }
    }

    fn start(&mut self, frame: usize) {
        let Ok(context) = &self.context else { return };
        // A context made before the page was touched starts suspended; a click has touched it.
        let _ = context.resume();
        self.playing = true;
        self.anchor_frame = frame;
        self.anchor_time = context.current_time() + LEAD_S;
        self.scheduled = frame;
        self.schedule();
    }

    fn stop_sources(&mut self) {
        for source in self.sources.drain(..) {
            #[allow(deprecated)]
            let _ = source.stop();
        }
    }

    /// Hands Web Audio what has arrived past what it has; called whenever samples arrive and
    /// whenever the window draws.
    pub fn schedule(&mut self) {
        if !self.playing {
            return;
        }
        let frames = self.frames();
        if self.complete && self.position() >= frames && self.now() >= self.end_time() {
            // Played to its end.
            self.playing = false;
            self.paused_at = frames;
            self.sources.clear();
            return;
        }
        let ready = frames - self.scheduled.min(frames);
        if ready == 0 || (ready < MIN_FRAMES && !self.complete) {
            return;
        }
        let Ok(context) = &self.context else { return };
        let rate = self.sample_rate as f64;
        let mut at = self.anchor_time + (self.scheduled - self.anchor_frame) as f64 / rate;
        if at < context.current_time() {
            // The song outran its making: continue from here after a short lead.
            at = context.current_time() + LEAD_S;
            self.anchor_time = at - (self.scheduled - self.anchor_frame) as f64 / rate;
        }
        let Ok(buffer) = context.create_buffer(2, ready as u32, self.sample_rate as f32) else { return };
        let from = &self.samples[2 * self.scheduled..2 * frames];
        for channel in 0..2 {
            let data: Vec<f32> = from.iter().skip(channel).step_by(2).copied().collect();
            let _ = buffer.copy_to_channel(&data, channel as i32);
        }
        let Ok(source) = context.create_buffer_source() else { return };
        source.set_buffer(Some(&buffer));
        let connected = match &self.volume {
            Some(gain) => source.connect_with_audio_node(gain),
            None => source.connect_with_audio_node(&context.destination()),
        };
        if connected.is_err() || source.start_with_when(at).is_err() {
            return;
        }
        self.sources.push(source);
        self.scheduled = frames;
    }

    fn end_time(&self) -> f64 {
        self.anchor_time + (self.scheduled.saturating_sub(self.anchor_frame)) as f64 / self.sample_rate as f64
    }

    pub fn state(&self) -> PlaybackState {
        let position = self.position();
        let from = 2 * position.saturating_sub(512).min(self.frames());
        let to = (2 * (position + 512)).min(self.samples.len());
        let level = self.samples[from..to.max(from)].iter().fold(0.0f32, |m, s| m.max(s.abs())).min(1.0);
        PlaybackState {
            position,
            frames: self.frames(),
            sample_rate: self.sample_rate,
            playing: self.playing,
            level: if self.playing { level * self.volume.as_ref().map_or(1.0, |g| g.gain().value()) } else { 0.0 },
            unavailable: self.context.as_ref().err().cloned(),
        }
    }
}
