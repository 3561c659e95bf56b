//! What a song run takes and reports: the request, its stage events and statistics, the
//! cancellation token and the observer a run reports to.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use songloom_wire::{Half, Stage, Stats};

use crate::error::{Error, Result};

/// The longest song the model makes (its 9000-frame limit at 25 frames/s).
pub const MAX_DURATION_S: f64 = 360.0;

/// A request for one song.
#[derive(Debug, Clone)]
pub struct Request {
    /// The music description: genre, mood, instruments, vocals, tempo.
    pub description: String,
    pub lyrics: String,
    /// An upper bound: the model may end the song earlier.
    pub duration_s: f64,
    pub seed: u64,
    pub steps: usize,
    /// The DiT's classifier-free guidance scale; `None` for the model's own (1.7).
    pub guidance: Option<f32>,
}

#[derive(Debug, Clone)]
pub enum Event {
    Stage {
        stage: Stage,
        done: usize,
        total: usize,
    },
    /// Interleaved stereo samples, starting at stereo frame `first_sample`; in order, never revised.
    Audio {
        first_sample: usize,
        samples: Vec<f32>,
        sample_rate: u32,
    },
    /// What the song is made of (for its edits), once it is whole: just before `Finished`.
    Score(Arc<super::score::Score>),
    Finished {
        stats: Stats,
    },
}

/// A cancellation token, checked between frames and steps. A child token is cancelled with its
/// parent, or alone (one take of several, one job of a batch).
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    own: Arc<AtomicBool>,
    /// The flags of the tokens this one is a child of, at any depth.
    parents: Vec<Arc<AtomicBool>>,
}

impl Cancel {
    pub fn cancel(&self) {
        self.own.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.own.load(Ordering::Relaxed) || self.parents.iter().any(|p| p.load(Ordering::Relaxed))
    }

    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() { Err(Error::Cancelled) } else { Ok(()) }
    }

    /// A token cancelled when this one is, which can also be cancelled alone.
    pub fn child(&self) -> Cancel {
        let parents = self.parents.iter().cloned().chain([self.own.clone()]).collect();
        Cancel { own: Arc::default(), parents }
    }
}

/// Where a run reports its events and learns that it is cancelled.
#[derive(Clone, Copy)]
pub struct Observer<'a> {
    pub events: &'a (dyn Fn(Event) + Sync),
    pub cancel: &'a Cancel,
}
