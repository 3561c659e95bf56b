//! One song, from request to file, the same for the CLI and the window: the request runs against
//! a pipeline, its events go to a [`SongSink`] as they come (progress bars, the window, the
//! player), and its audio to a writer thread, so the acoustic compute thread never waits on the
//! disk. The writer completes the WAV with its recipe and score and moves it to the output file,
//! the library, or both; a failed or cancelled song leaves neither.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use songloom_engine::pipeline::score::Score;
use songloom_engine::pipeline::{BatchSong, Cancel, Event, Observer, Pipeline, Request, Stats, no_arrivals};
use songloom_ui::contract::{Recipe, Timings};

use crate::library::{Library, Song, title_of};
use crate::wav::{CompleteWav, FileFormat, IfTaken, WavFile, WavFormat};

/// What to make and where it goes.
pub struct SongJob {
    pub request: Request,
    /// Written into the file's comment and the library with the song.
    pub recipe: Recipe,
    /// The file to write, if any.
    pub out: Option<OutFile>,
    /// The library to keep the song in, if any (as a float WAV, or the output file's WAV).
    pub library: Option<PathBuf>,
    /// The song this one edits, if it is an edit ([`crate::edit_job::edit_job`] makes such jobs).
    pub edit: Option<crate::edit_job::EditSource>,
}

/// A file a song is written to.
pub struct OutFile {
    pub path: PathBuf,
    pub format: FileFormat,
    /// Whether a file already there is replaced; without it, the song is refused before it starts
    /// (and one that appears while it is made keeps its name).
    pub replace: bool,
}

impl OutFile {
    /// Refuses a file that is there and may not be replaced.
    pub fn check_free(&self) -> Result<()> {
        if !self.replace && self.path.exists() {
            bail!("{} already exists; give --force to replace it, or another --out", self.path.display());
        }
        Ok(())
    }
}

/// Where a running song's events go; called from the engine's threads.
pub trait SongSink: Sync {
    fn event(&self, event: &Event);
}

impl<T: SongSink + ?Sized> SongSink for &T {
    fn event(&self, event: &Event) {
        (**self).event(event);
    }
}

/// A finished song and where it went.
#[derive(Debug)]
pub struct FinishedSong {
    pub stats: Stats,
    /// The file written, when the job named one.
    pub out: Option<PathBuf>,
    /// The library entry, when the job named a library.
    pub saved: Option<Song>,
}

/// What the writer thread gets: audio as it comes, the song's score, then the go-ahead to complete
/// the song.
enum ToWriter {
    Audio(Vec<f32>),
    Score(Arc<Score>),
    Finish(Stats),
    /// The song failed: drop the unfinished file (its channel may stay open a while).
    Abandon,
}

/// A job whose WAV file is open: the output can be written, and nothing has been generated yet.
pub struct Prepared<'a> {
    pipeline: &'a Pipeline,
    job: &'a SongJob,
    wav: WavFile,
}

/// Opens the job's WAV (beside its output file, or in the library), so an output that cannot be
/// written fails before any work is done.
pub fn prepare<'a>(pipeline: &'a Pipeline, job: &'a SongJob) -> Result<Prepared<'a>> {
    let sample_rate = pipeline.sample_rate();
    let wav = match (&job.out, &job.library) {
        (Some(out), _) => {
            out.check_free()?;
            WavFile::create(&out.path, sample_rate, out.format.wav_format())?
        }
        (None, Some(dir)) => {
            let library = Library::open(dir)?;
            WavFile::create_in(library.songs_dir(), "new-song.wav", sample_rate, WavFormat::F32)?
        }
        (None, None) => bail!("a song job needs an output file or a library"),
    };
    Ok(Prepared { pipeline, job, wav })
}

/// [`prepare`] then [`Prepared::run`].
pub fn run(pipeline: &Pipeline, job: &SongJob, sink: &dyn SongSink, cancel: &Cancel) -> Result<FinishedSong> {
    prepare(pipeline, job)?.run(sink, cancel)
}

impl Prepared<'_> {
    /// Makes the song; `cancel` stops it between frames and steps.
    pub fn run(self, sink: &dyn SongSink, cancel: &Cancel) -> Result<FinishedSong> {
        let Prepared { pipeline, job, wav } = self;
        generate(pipeline, job, wav, sink, cancel)
    }
}

fn generate(
    pipeline: &Pipeline,
    job: &SongJob,
    wav: WavFile,
    sink: &dyn SongSink,
    cancel: &Cancel,
) -> Result<FinishedSong> {
    let (to_writer, writer_rx) = mpsc::channel::<ToWriter>();
    let write_error = Mutex::new(None);
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name("songloom-writer".into())
            .spawn_scoped(scope, || write_song(job, wav, writer_rx, cancel, &write_error))
            .context("starting the writer thread")?;
        let events = |event: Event| hand_on(&to_writer, sink, event);
        let observer = Observer { events: &events, cancel };
        let result = match &job.edit {
            None => pipeline.generate(&job.request, observer),
            Some(source) => pipeline.edit(&source.original(), &source.edit, source.seed, observer).map(|e| e.stats),
        };
        if let Ok(stats) = &result {
            let _ = to_writer.send(ToWriter::Finish(stats.clone()));
        }
        // Without a Finish, the writer drops the unfinished file.
        drop(to_writer);
        finished(result, writer.join(), &write_error)
    })
}

/// A job of a batch and who is told how it ended.
pub struct BatchJob<'a> {
    pub job: SongJob,
    pub sink: Box<dyn SongSink + Send + 'a>,
    /// The job's own (a child of the batch's, for takes).
    pub cancel: Cancel,
    pub finished: Box<dyn FnOnce(Result<FinishedSong>) + Send + 'a>,
}

/// Several jobs made together (takes), each with its own file or library entry, events and
/// outcome; they are checked and their files opened before any work. One that fails or is
/// cancelled leaves the others as they are.
pub fn run_batch(pipeline: &Pipeline, jobs: Vec<BatchJob<'_>>) -> Result<()> {
    let mut songs = Vec::with_capacity(jobs.len());
    for job in jobs {
        songs.push(batch_song(pipeline, job)?);
    }
    pipeline.generate_batch(songs, &no_arrivals);
    Ok(())
}

/// A job as a song of an engine batch: its file opened (an error if it cannot be), a writer thread
/// of its own, and its outcome told once the file is complete or dropped.
pub fn batch_song<'a>(pipeline: &Pipeline, batch_job: BatchJob<'a>) -> Result<BatchSong<'a>> {
    let BatchJob { job, sink, cancel, finished } = batch_job;
    if job.edit.is_some() {
        bail!("edits are made one at a time, not in a batch");
    }
    let wav = prepare(pipeline, &job)?.wav;
    let job = Arc::new(job);
    let write_error = Arc::new(Mutex::new(None));
    let (to_writer, writer_rx) = mpsc::channel::<ToWriter>();
    let writer = {
        let (job, cancel, write_error) = (job.clone(), cancel.clone(), write_error.clone());
        std::thread::Builder::new()
            .name("songloom-writer".into())
            .spawn(move || write_song(&job, wav, writer_rx, &cancel, &write_error))
            .context("starting the writer thread")?
    };
    let finish = to_writer.clone();
    Ok(BatchSong {
        req: job.request.clone(),
        prompt: None,
        events: Arc::new(move |event: Event| hand_on(&to_writer, &*sink, event)),
        cancel,
        started: std::time::Instant::now(),
        done: Box::new(move |outcome: songloom_engine::Result<Stats>| {
            match &outcome {
                Ok(stats) => {
                    let _ = finish.send(ToWriter::Finish(stats.clone()));
                }
                Err(_) => {
                    let _ = finish.send(ToWriter::Abandon);
                }
            }
            finished(self::finished(outcome, writer.join(), &write_error));
        }),
    })
}

/// Audio and the score to the writer, every event to the sink.
fn hand_on(to_writer: &mpsc::Sender<ToWriter>, sink: &dyn SongSink, event: Event) {
    match &event {
        Event::Audio { samples, .. } => {
            let _ = to_writer.send(ToWriter::Audio(samples.clone()));
        }
        Event::Score(score) => {
            let _ = to_writer.send(ToWriter::Score(score.clone()));
        }
        _ => {}
    }
    sink.event(&event);
}

type Written = Result<Option<(Option<PathBuf>, Option<Song>)>>;

/// A song's outcome from the engine's result and its writer's: a write error, not the cancel it
/// caused, is the cause.
fn finished(
    result: songloom_engine::Result<Stats>,
    written: std::thread::Result<Written>,
    write_error: &Mutex<Option<anyhow::Error>>,
) -> Result<FinishedSong> {
    let written = written.unwrap_or_else(|_| Err(anyhow::anyhow!("the writer thread failed")));
    if let Some(e) = write_error.lock().expect("not poisoned").take() {
        return Err(e);
    }
    let stats = result?;
    let (out, saved) = written?.ok_or_else(|| anyhow::anyhow!("the finished song was not written"))?;
    Ok(FinishedSong { stats, out, saved })
}

/// The writer thread: appends audio as it comes and keeps the score; on Finish completes the WAV
/// and moves it where the job says. A write error is kept in `error` and cancels the song.
fn write_song(
    job: &SongJob,
    mut wav: WavFile,
    audio: mpsc::Receiver<ToWriter>,
    cancel: &Cancel,
    error: &Mutex<Option<anyhow::Error>>,
) -> Written {
    let mut score = None;
    for message in audio {
        match message {
            ToWriter::Audio(samples) => {
                if let Err(e) = wav.write(&samples) {
                    *error.lock().expect("not poisoned") = Some(e);
                    cancel.cancel();
                    return Ok(None);
                }
            }
            ToWriter::Score(made) => score = Some(made),
            ToWriter::Finish(stats) => return complete(job, wav, &stats, score.as_deref()).map(Some),
            ToWriter::Abandon => return Ok(None),
        }
    }
    Ok(None)
}

/// The WAV completed with its recipe and score, at the output file and in the library as the job
/// asks. The output file carries the score's codes alone (small, and enough to edit it); the
/// library keeps the whole score, so its edits need not render the song again to find the seams.
fn complete(
    job: &SongJob,
    wav: WavFile,
    stats: &Stats,
    score: Option<&Score>,
) -> Result<(Option<PathBuf>, Option<Song>)> {
    let title = title_of(&job.recipe);
    let complete = wav.finish(&title, &serde_json::to_string(&job.recipe)?)?;
    let seconds = stats.samples as f64 / stats.sample_rate.max(1) as f64;
    let timings = Timings::from(stats);
    let open_library =
        |dir: &Path| Library::open(dir).with_context(|| format!("opening the library in {}", dir.display()));
    match (&job.out, &job.library) {
        (Some(out), library) => {
            // Free when the song started (or to be replaced); a file that appeared there while it was
            // made keeps its name and the song takes the next free one, so neither is lost.
            let if_taken = if out.replace { IfTaken::Replace } else { IfTaken::NextFreeName };
            let codes = score.map(Score::codes_only);
            let (path, float_wav) = match out.format {
                FileFormat::Flac => {
                    let recipe = serde_json::to_string(&job.recipe)?;
                    let path =
                        crate::flac::export(complete.path(), &out.path, &title, &recipe, codes.as_ref(), if_taken)?;
                    (path, Some(complete))
                }
                _ => {
                    if let Some(codes) = &codes {
                        complete.set_score(codes)?;
                    }
                    (complete.place(&out.path, if_taken)?, None)
                }
            };
            let Some(dir) = library else { return Ok((Some(path), None)) };
            // The library keeps a WAV: the one just written, or the float one the FLAC was made from.
            let wav = float_wav.as_ref().map_or(path.as_path(), CompleteWav::path);
            let song = open_library(dir)?.add_copy(&title, &job.recipe, seconds, &timings, wav, score)?;
            Ok((Some(path), Some(song)))
        }
        (None, Some(dir)) => {
            Ok((None, Some(open_library(dir)?.add(&title, &job.recipe, seconds, &timings, complete, score)?)))
        }
        (None, None) => unreachable!("checked when the job started"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wav::tests::{assert_same_score, made_up_score};

    fn job(out: Option<OutFile>, library: &Path) -> SongJob {
        let request = Request {
            description: "scored".into(),
            lyrics: String::new(),
            duration_s: 1.0,
            seed: 1,
            steps: 1,
            guidance: None,
        };
        let recipe = Recipe { description: "scored".into(), ..Recipe::default() };
        SongJob { request, recipe, out, library: Some(library.to_path_buf()), edit: None }
    }

    /// What the writer thread writes for `job` into `wav` when the song brings `score`.
    fn write(job: &SongJob, wav: WavFile, score: &Arc<Score>) -> (Option<PathBuf>, Option<Song>) {
        let (to_writer, messages) = mpsc::channel();
        to_writer.send(ToWriter::Audio(vec![0.1, -0.1, 0.2, -0.2])).unwrap();
        to_writer.send(ToWriter::Score(score.clone())).unwrap();
        let stats = Stats { samples: 2, sample_rate: 44100, ..Stats::default() };
        to_writer.send(ToWriter::Finish(stats)).unwrap();
        drop(to_writer);
        write_song(job, wav, messages, &Cancel::default(), &Mutex::new(None)).unwrap().expect("written")
    }

    /// The output file carries the score's codes alone, in each format; the library's WAV the
    /// whole score, whether it is the output file's copy or the song's own.
    #[test]
    fn the_writer_keeps_the_score() {
        let score = Arc::new(made_up_score());
        let codes = score.codes_only();
        for format in [FileFormat::F32, FileFormat::Pcm16, FileFormat::Flac] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(format!("song.{}", format.extension()));
            let job = job(Some(OutFile { path: path.clone(), format, replace: false }), &dir.path().join("library"));
            let wav = WavFile::create(&path, 44100, format.wav_format()).unwrap();
            let (out, saved) = write(&job, wav, &score);
            let out = out.unwrap();
            let in_out =
                if format == FileFormat::Flac { crate::flac::read_score(&out) } else { crate::wav::read_score(&out) };
            assert_same_score(in_out.unwrap(), &codes);
            assert_same_score(crate::wav::read_score(&saved.unwrap().wav).unwrap(), &score);
        }
        let dir = tempfile::tempdir().unwrap();
        let job = job(None, dir.path());
        let wav =
            WavFile::create_in(Library::open(dir.path()).unwrap().songs_dir(), "new-song.wav", 44100, WavFormat::F32);
        let (_, saved) = write(&job, wav.unwrap(), &score);
        assert_same_score(crate::wav::read_score(&saved.unwrap().wav).unwrap(), &score);
    }
}
