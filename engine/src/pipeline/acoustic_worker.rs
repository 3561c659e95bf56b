//! The acoustic half of a batch's songs on one thread. Each song's thread hands it a window's
//! frames and waits for the window's audio; meanwhile the windows of every song take their flow
//! steps together, one DiT pass a step over all their CFG pairs ([`step_together`]): the DiT's
//! products get the rows of every song at once, which fills a GPU's tensor cores the better. A
//! window joins at the next step, at its own flow time; one that is done is vocoded and handed
//! back while the others go on.
//!
//! On the CPU, which has no tensor cores to fill and whose products block their rows by the batch,
//! windows run apart, one after the other in the order they came, so a song in a batch is the song
//! alone bit for bit. On a GPU, a window's velocity is the one it gets alone within the f32 bound
//! (measured: bit for bit under CUDA, 3.3e-7 of the audio's RMS on lavapipe).

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;

use super::windows::{AcousticModels, Carry, Denoising, step_together};
use super::{AcousticHalf, Cancel, EventSink, Observer, Pipeline, SeededNoise};
use crate::device::DeviceKind;
use crate::error::{Error, Result};
use crate::models::scheduler::FlowMatchEuler;
use crate::tensor::Tensor;

/// A window a song hands the worker; everything on the host.
pub(super) struct WindowJob<'a> {
    pub index: usize,
    pub windows_expected: usize,
    /// `[n, layers * hidden]`.
    pub frames: Tensor,
    /// What the window before handed on.
    pub carry: Carry,
    pub noise: SeededNoise,
    pub schedule: FlowMatchEuler,
    pub guidance: Option<f32>,
    pub events: EventSink<'a>,
    pub cancel: Cancel,
    pub reply: mpsc::Sender<Result<WindowAudio>>,
}

/// A window's audio and what it hands the next, on the host.
pub(super) struct WindowAudio {
    /// Stereo `[2, length * hop]` interleaved by channel (row 0, then row 1), uncropped.
    pub waveform: Vec<f32>,
    pub carry: Carry,
    /// The latents carried (the score's seam).
    pub seam: Vec<f32>,
}

/// Where a song's thread sends its windows.
#[derive(Clone)]
pub(super) struct AcousticWorker<'a> {
    jobs: mpsc::Sender<WindowJob<'a>>,
}

/// Whether windows of several songs go through the DiT together on `kind`, unless told otherwise
/// ([`Pipeline::set_windows_together`]; `SONGLOOM_DIT_WINDOWS_TOGETHER=0` or `1` overrides this
/// default: to time the batch against).
pub(super) fn windows_together(kind: DeviceKind) -> bool {
    match std::env::var("SONGLOOM_DIT_WINDOWS_TOGETHER").as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => kind != DeviceKind::Cpu,
    }
}

impl<'a> AcousticWorker<'a> {
    pub(super) fn new() -> (Self, mpsc::Receiver<WindowJob<'a>>) {
        let (jobs, received) = mpsc::channel();
        (AcousticWorker { jobs }, received)
    }

    /// Runs a window on the worker, waiting for its audio.
    pub(super) fn run(
        &self,
        job: impl FnOnce(mpsc::Sender<Result<WindowAudio>>) -> WindowJob<'a>,
    ) -> Result<WindowAudio> {
        let (reply, audio) = mpsc::channel();
        self.jobs.send(job(reply)).map_err(|_| Error::Invalid("the acoustic thread has stopped".into()))?;
        audio.recv().map_err(|_| Error::Invalid("the acoustic thread stopped during a window".into()))?
    }
}

/// What the batches' acoustic threads have done, summed over the pipeline's life
/// ([`Pipeline::acoustic_tally`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AcousticTally {
    /// DiT passes, each one flow step of one or more windows.
    pub passes: usize,
    /// Windows over all passes (over `passes`: how many windows a pass took on average).
    pub windows_stepped: usize,
    /// Seconds the threads had a window to work on: the acoustic half's busy time, however many
    /// songs it served at once.
    pub busy_s: f64,
}

/// A window on the worker, besides its [`Denoising`]: its song's schedule, where its reports and
/// audio go, and what it hands on.
struct Active<'a> {
    schedule: FlowMatchEuler,
    guidance: Option<f32>,
    events: EventSink<'a>,
    cancel: Cancel,
    carry: Carry,
    reply: mpsc::Sender<Result<WindowAudio>>,
}

impl Active<'_> {
    fn observer(&self) -> Observer<'_> {
        Observer { events: &*self.events, cancel: &self.cancel }
    }
}

impl Pipeline {
    /// The worker's loop: windows as they come, until every song's thread has let go of its
    /// [`AcousticWorker`].
    pub(super) fn serve_windows<'a>(&self, half: &AcousticHalf, jobs: mpsc::Receiver<WindowJob<'a>>) {
        let together = self.windows_together.load(Ordering::Relaxed);
        let mut active: Vec<Active<'a>> = Vec::new();
        let mut windows: Vec<Denoising> = Vec::new();
        let mut busy_since: Option<Instant> = None;
        loop {
            let mut arrived = Vec::new();
            if active.is_empty() {
                if let Some(since) = busy_since.take() {
                    self.tally(|t| t.busy_s += since.elapsed().as_secs_f64());
                }
                match jobs.recv() {
                    Ok(job) => arrived.push(job),
                    Err(_) => return,
                }
                busy_since = Some(Instant::now());
            }
            arrived.extend(jobs.try_iter());
            for job in arrived {
                let mut a = Active {
                    schedule: job.schedule,
                    guidance: job.guidance,
                    events: job.events,
                    cancel: job.cancel,
                    carry: job.carry,
                    reply: job.reply,
                };
                let models = self.acoustic(half, &a.schedule, a.guidance);
                let mut noise = job.noise;
                let begun = a.cancel.check().and_then(|()| {
                    a.carry = std::mem::take(&mut a.carry).to_device(&self.device)?;
                    Denoising::begin(&models, job.index, job.windows_expected, &job.frames, &a.carry, &mut noise)
                });
                match begun {
                    Ok(window) => {
                        windows.push(window);
                        active.push(a);
                    }
                    Err(e) => drop(a.reply.send(Err(e))),
                }
            }
            // A cancelled song's window leaves now; one that is done is vocoded and handed back.
            let mut going_on = (Vec::with_capacity(active.len()), Vec::with_capacity(active.len()));
            for (mut a, window) in active.drain(..).zip(windows.drain(..)) {
                let models = self.acoustic(half, &a.schedule, a.guidance);
                if let Err(e) = a.cancel.check() {
                    let _ = a.reply.send(Err(e));
                } else if window.denoised(&models) {
                    let mut carry = std::mem::take(&mut a.carry);
                    let audio = self.finish_window(&models, window, &mut carry, a.observer());
                    let _ = a.reply.send(audio);
                } else {
                    going_on.0.push(a);
                    going_on.1.push(window);
                }
            }
            (active, windows) = going_on;
            let n = active.len();
            // One pass over every window; or apart, the window that came first alone, to its end
            // (its song's audio comes no later than when songs took turns a window at a time).
            let groups: Vec<Range<usize>> = match (together, n) {
                (_, 0) => Vec::new(),
                (true, _) => std::iter::once(0..n).collect(),
                (false, _) => std::iter::once(0..1).collect(),
            };
            let models: Vec<AcousticModels> =
                active.iter().map(|a| self.acoustic(half, &a.schedule, a.guidance)).collect();
            let mut failed: Vec<Option<Error>> = (0..n).map(|_| None).collect();
            for group in groups {
                let mut step: Vec<_> = models[group.clone()]
                    .iter()
                    .zip(&mut windows[group.clone()])
                    .zip(&active[group.clone()])
                    .map(|((m, w), a)| (m, w, a.observer()))
                    .collect();
                let stepped = step_together(&mut step);
                self.tally(|t| {
                    t.passes += stepped.passes;
                    t.windows_stepped += step.len();
                });
                for (i, outcome) in group.zip(stepped.outcomes) {
                    // A window whose step failed has latents no one knows: it ends.
                    failed[i] = outcome.err();
                }
            }
            drop(models);
            let kept = std::mem::take(&mut active).into_iter().zip(std::mem::take(&mut windows)).zip(failed);
            for ((a, window), failure) in kept {
                match failure {
                    Some(e) => drop(a.reply.send(Err(e))),
                    None => {
                        active.push(a);
                        windows.push(window);
                    }
                }
            }
        }
    }

    /// Whether the windows of a batch's songs take their flow steps together (by default on a GPU,
    /// not on the CPU).
    pub fn set_windows_together(&self, together: bool) {
        self.windows_together.store(together, Ordering::Relaxed);
    }

    /// What the batches' acoustic threads have done so far.
    pub fn acoustic_tally(&self) -> AcousticTally {
        *self.acoustic_tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tally(&self, add: impl FnOnce(&mut AcousticTally)) {
        add(&mut self.acoustic_tally.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// A denoised window vocoded, its audio and what it hands on brought to the host.
    fn finish_window(
        &self,
        models: &AcousticModels,
        window: Denoising,
        carry: &mut Carry,
        observer: Observer,
    ) -> Result<WindowAudio> {
        let out = window.finish(models, carry, observer)?;
        let waveform = self.device.to_host(&out.waveform)?;
        let carry = carry.to_host(&self.device)?;
        let seam = carry.seam(&self.device)?.unwrap_or_default();
        Ok(WindowAudio { waveform, carry, seam })
    }
}
