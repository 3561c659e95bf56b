//! One song, from request to file, the same for the CLI and the window: the request runs against
//! a pipeline, its events go to a [`SongSink`] as they come (progress bars, the window, the
//! player), and its audio to a writer thread, so the acoustic compute thread never waits on the
//! disk. The writer completes the WAV with its recipe and moves it to the output file, the
//! library, or both; a failed or cancelled song leaves neither.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc;

use anyhow::{Context, Result, bail};
use songloom_engine::pipeline::{Cancel, Event, Observer, Pipeline, Request, Stats};
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

/// A finished song and where it went.
#[derive(Debug)]
pub struct FinishedSong {
    pub stats: Stats,
    /// The file written, when the job named one.
    pub out: Option<PathBuf>,
    /// The library entry, when the job named a library.
    pub saved: Option<Song>,
}

/// What the writer thread gets: audio as it comes, then the go-ahead to complete the song.
enum ToWriter {
    Audio(Vec<f32>),
    Finish(Stats),
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
        let events = |event: Event| {
            if let Event::Audio { samples, .. } = &event {
                let _ = to_writer.send(ToWriter::Audio(samples.clone()));
            }
            sink.event(&event);
        };
        let result = pipeline.generate(&job.request, Observer { events: &events, cancel });
        if let Ok(stats) = &result {
            let _ = to_writer.send(ToWriter::Finish(stats.clone()));
        }
        // Without a Finish, the writer drops the unfinished file.
        drop(to_writer);
        let written = writer.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the writer thread failed")));
        // A write error cancels the song; it, not the cancel, is the cause.
        if let Some(e) = write_error.lock().expect("not poisoned").take() {
            return Err(e);
        }
        let stats = result?;
        let (out, saved) = written?.expect("a finished song is written");
        Ok(FinishedSong { stats, out, saved })
    })
}

/// The writer thread: appends audio as it comes; on Finish completes the WAV and moves it where the
/// job says. A write error is kept in `error` and cancels the song.
fn write_song(
    job: &SongJob,
    mut wav: WavFile,
    audio: mpsc::Receiver<ToWriter>,
    cancel: &Cancel,
    error: &Mutex<Option<anyhow::Error>>,
) -> Result<Option<(Option<PathBuf>, Option<Song>)>> {
    for message in audio {
        match message {
            ToWriter::Audio(samples) => {
                if let Err(e) = wav.write(&samples) {
                    *error.lock().expect("not poisoned") = Some(e);
                    cancel.cancel();
                    return Ok(None);
                }
            }
            ToWriter::Finish(stats) => return complete(job, wav, &stats).map(Some),
        }
    }
    Ok(None)
}

/// The WAV completed with its recipe, at the output file and in the library as the job asks.
fn complete(job: &SongJob, wav: WavFile, stats: &Stats) -> Result<(Option<PathBuf>, Option<Song>)> {
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
            let (path, float_wav) = match out.format {
                FileFormat::Flac => {
                    let recipe = serde_json::to_string(&job.recipe)?;
                    (crate::flac::export(complete.path(), &out.path, &title, &recipe, if_taken)?, Some(complete))
                }
                _ => (complete.place(&out.path, if_taken)?, None),
            };
            let Some(dir) = library else { return Ok((Some(path), None)) };
            // The library keeps a WAV: the one just written, or the float one the FLAC was made from.
            let wav = float_wav.as_ref().map_or(path.as_path(), CompleteWav::path);
            let song = open_library(dir)?.add_copy(&title, &job.recipe, seconds, &timings, wav)?;
            Ok((Some(path), Some(song)))
        }
        (None, Some(dir)) => {
            Ok((None, Some(open_library(dir)?.add(&title, &job.recipe, seconds, &timings, complete)?)))
        }
        (None, None) => unreachable!("checked when the job started"),
    }
}
