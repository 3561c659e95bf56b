//! An edit of a library song as a song job, the same for the CLI, the server and the window: the
//! song's recipe, score and audio are read from the library, the edit is checked against the
//! loaded model before anything runs, and the new version's recipe records its parent and where
//! its audio changed.

use std::path::Path;

use anyhow::{Context, Result, bail};
use songloom_engine::pipeline::edit::{Edit, Original};
use songloom_engine::pipeline::score::Score;
use songloom_engine::pipeline::{Pipeline, Request};
use songloom_ui::contract::Recipe;
use songloom_wire::{EditOf, EditRequest};

use crate::library::Library;
use crate::song_job::{OutFile, SongJob};

/// The song an edit starts from, as the engine takes it.
pub struct EditSource {
    pub request: Request,
    pub score: Score,
    /// Planar stereo, as the library keeps it.
    pub audio: [Vec<f32>; 2],
    pub edit: Edit,
    pub seed: u64,
}

impl EditSource {
    pub fn original(&self) -> Original<'_> {
        Original { request: &self.request, score: &self.score, audio: &self.audio }
    }
}

/// The request a recipe describes (the song's own; the engine's fields are the pipeline's).
pub fn request_of(recipe: &Recipe) -> Request {
    Request {
        description: recipe.description.clone(),
        lyrics: recipe.lyrics.clone(),
        duration_s: recipe.duration_s,
        seed: recipe.seed,
        steps: recipe.steps,
        guidance: Some(recipe.guidance),
    }
}

/// A new seed (as a new song's), other than `not`.
fn fresh_seed(not: u64) -> u64 {
    let seed = crate::mcp::tools::new_seed();
    if seed == not { seed ^ 1 } else { seed }
}

/// The job that makes `edit` of library song `id` in `library_dir` with `pipeline`, loaded as
/// `engine` says (its device, precision, model, weights, budget and adapters); the new version
/// goes to the library, and to `out` when given.
pub fn edit_job(
    pipeline: &Pipeline,
    library_dir: &Path,
    id: i64,
    edit: &EditRequest,
    engine: &Recipe,
    out: Option<OutFile>,
) -> Result<SongJob> {
    let library = Library::open(library_dir)?;
    let song = library.get(id)?.with_context(|| format!("there is no song {id} in the library"))?;
    if song.recipe.adapters != engine.adapters {
        let names = |r: &Recipe| {
            if r.adapters.is_empty() {
                "none".to_string()
            } else {
                r.adapters.iter().map(|a| format!("{} at {}", a.name, a.scale)).collect::<Vec<_>>().join(", ")
            }
        };
        bail!(
            "song {id} was made with LoRA adapters {} and the engine has {}: load the same adapters (--lora) to edit it",
            names(&song.recipe),
            names(engine)
        );
    }
    let score = library.score(id)?.with_context(|| {
        format!(
            "song {id} cannot be edited: it has no codes (it was made before Songloom kept them, or imported from a \
             file without them)"
        )
    })?;
    let (samples, rate) = crate::wav::read_song(&song.wav)?;
    if rate != pipeline.sample_rate() {
        bail!(
            "song {id} is at {rate} Hz and the model makes {} Hz: it was not made by this model",
            pipeline.sample_rate()
        );
    }
    let audio = [samples.iter().step_by(2).copied().collect(), samples.iter().skip(1).step_by(2).copied().collect()];
    let request = request_of(&song.recipe);
    let seed = edit.seed.unwrap_or(if edit.edit.keeps_seed() { request.seed } else { fresh_seed(request.seed) });
    let source = EditSource { request, score, audio, edit: edit.edit.clone(), seed };
    let preview = pipeline.preview_edit(&source.original(), &source.edit, seed)?;
    let rate = f64::from(rate);
    let recipe = Recipe {
        description: preview.request.description.clone(),
        lyrics: preview.request.lyrics.clone(),
        duration_s: preview.request.duration_s,
        seed,
        steps: song.recipe.steps,
        guidance: song.recipe.guidance,
        edit: Some(Box::new(EditOf {
            parent: id,
            edit: edit.edit.clone(),
            changed_from_s: preview.changed_from_sample as f64 / rate,
            changed_to_s: preview.changed_to_sample.map(|s| s as f64 / rate),
        })),
        ..engine.clone()
    };
    Ok(SongJob { request: preview.request, recipe, out, library: Some(library_dir.to_path_buf()), edit: Some(source) })
}
