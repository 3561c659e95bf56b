//! The in-process engine behind the window: a worker thread runs one song at a time with the
//! Songloom pipeline, plays it while it is made, writes its WAV and keeps it in the library; the
//! window sees only the contract's requests and events.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use songloom_engine::Device;
use songloom_engine::device::F32Math;
use songloom_engine::pipeline::{Cancel, Event, Observer, Pipeline, Request as SongRequest, StageName};
use songloom_ui::contract::{Engine, EngineEvent, JobId, Recipe, Request, Stage, Timings};

use crate::library::{Library, default_dir, timings_of};
use crate::player::Player;
use crate::wav::{WavFile, WavFormat};

pub struct InProcessEngine {
    jobs: mpsc::Sender<(JobId, Recipe)>,
    events: mpsc::Receiver<EngineEvent>,
    running: Arc<Mutex<Option<(JobId, Cancel)>>>,
}

impl InProcessEngine {
    /// Starts the worker; `repaint` wakes the window when an event arrives.
    pub fn spawn(library_dir: Option<PathBuf>, repaint: impl Fn() + Send + Sync + 'static) -> Self {
        let (jobs, job_rx) = mpsc::channel::<(JobId, Recipe)>();
        let (event_tx, events) = mpsc::channel();
        let running: Arc<Mutex<Option<(JobId, Cancel)>>> = Arc::default();
        let worker_running = running.clone();
        std::thread::spawn(move || {
            let mut worker = Worker { library_dir: library_dir.unwrap_or_else(default_dir), pipeline: None };
            for (job, recipe) in job_rx {
                let cancel = Cancel::default();
                *worker_running.lock().expect("not poisoned") = Some((job, cancel.clone()));
                let send = |e: EngineEvent| {
                    let _ = event_tx.send(e);
                    repaint();
                };
                let last = match worker.run(job, &recipe, &cancel, &send) {
                    Ok(timings) => EngineEvent::Finished { job, timings },
                    Err(e) if cancel.is_cancelled() => {
                        let _ = e;
                        EngineEvent::Cancelled { job }
                    }
                    Err(e) => EngineEvent::Failed { job, message: format!("{e:#}") },
                };
                *worker_running.lock().expect("not poisoned") = None;
                send(last);
            }
        });
        InProcessEngine { jobs, events, running }
    }
}

impl Engine for InProcessEngine {
    fn send(&self, request: Request) {
        match request {
            Request::Generate { job, recipe } => {
                let _ = self.jobs.send((job, recipe));
            }
            Request::Cancel { job } => {
                if let Some((running, cancel)) = self.running.lock().expect("not poisoned").as_ref()
                    && *running == job
                {
                    cancel.cancel();
                }
            }
        }
    }

    fn poll(&self) -> Vec<EngineEvent> {
        self.events.try_iter().collect()
    }
}

struct Worker {
    library_dir: PathBuf,
    /// The last pipeline, kept while the model, device and precision stay the same.
    pipeline: Option<((String, String, String), Pipeline)>,
}

impl Worker {
    fn pipeline(&mut self, recipe: &Recipe) -> anyhow::Result<&Pipeline> {
        let key = (recipe.model.clone(), recipe.device.clone(), recipe.precision.clone());
        if self.pipeline.as_ref().is_none_or(|(k, _)| *k != key) {
            self.pipeline = None;
            let math = if recipe.precision == "tf32" { F32Math::Tf32 } else { F32Math::Exact };
            let device = Device::from_name_with(&recipe.device, math)?;
            let dir =
                if recipe.model.is_empty() { crate::default_model::path()? } else { PathBuf::from(&recipe.model) };
            self.pipeline = Some((key, Pipeline::load(&dir, device)?));
        }
        Ok(&self.pipeline.as_ref().expect("just loaded").1)
    }

    fn run(
        &mut self,
        job: JobId,
        recipe: &Recipe,
        cancel: &Cancel,
        send: &(dyn Fn(EngineEvent) + Sync),
    ) -> anyhow::Result<Timings> {
        let library_dir = self.library_dir.clone();
        let pipeline = self.pipeline(recipe)?;
        let sample_rate = pipeline.sample_rate();
        std::fs::create_dir_all(&library_dir)?;
        let staged = library_dir.join(format!(".job-{job}-{}.wav", std::process::id()));
        let wav = Mutex::new(Some(WavFile::create(&staged, sample_rate, WavFormat::F32)?));
        let player = Player::open(sample_rate).ok();
        let write_error = Mutex::new(None);
        let events = |event: Event| match event {
            Event::Stage { stage, done, total } => {
                send(EngineEvent::Stage { job, stage: stage_of(stage), done, total })
            }
            Event::Audio { first_sample, samples } => {
                if let Some(p) = &player {
                    p.push(&samples);
                }
                if let Some(w) = wav.lock().expect("not poisoned").as_mut()
                    && let Err(e) = w.write(&samples)
                {
                    *write_error.lock().expect("not poisoned") = Some(e);
                    cancel.cancel();
                }
                send(EngineEvent::Audio { job, first_sample, samples, sample_rate });
            }
            Event::Finished { .. } => {}
        };
        let request = SongRequest {
            prompt: recipe.description.clone(),
            lyrics: recipe.lyrics.clone(),
            duration_s: recipe.duration_s,
            seed: recipe.seed,
            steps: recipe.steps,
        };
        let result = pipeline.generate(&request, Observer { events: &events, cancel });
        if let Some(e) = write_error.lock().expect("not poisoned").take() {
            return Err(e);
        }
        let stats = result?;
        let timings = timings_of(&stats);
        let path =
            wav.lock().expect("not poisoned").take().expect("written once").finish(&serde_json::to_string(recipe)?)?;
        let seconds = stats.samples as f64 / sample_rate as f64;
        let title: String = recipe.description.chars().take(60).collect();
        Library::open(&library_dir)?.add(&title, recipe, seconds, &timings, &path)?;
        Ok(timings)
    }
}

fn stage_of(stage: StageName) -> Stage {
    match stage {
        StageName::Tokenize => Stage::Tokenize,
        StageName::ArFrames => Stage::ArFrames,
        StageName::Denoise { window, windows } => Stage::Denoise { window, windows },
        StageName::Vocoder { window, windows } => Stage::Vocoder { window, windows },
    }
}
