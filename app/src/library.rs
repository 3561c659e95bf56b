//! The library of finished songs: a SQLite database in the user's data directory, each song's WAV
//! beside it, and its recipe (description, lyrics, parameters, seed, model, engine version,
//! timings) so it can be played again, generated again, renamed, exported or deleted. The WAV also
//! carries the song's score, which its edits start from; a version made by an edit names its
//! parent in its recipe. The files hold everything, so the database can be rebuilt from them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OptionalExtension, params};
use songloom_engine::pipeline::score::Score;
use songloom_ui::contract::{Recipe, Timings};

use crate::wav::{CompleteWav, WavFile, WavFormat, WavInfo};

/// The schema version this code writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;

pub struct Library {
    conn: Connection,
    /// The database file, named in every error about it.
    path: PathBuf,
    songs_dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Song {
    pub id: i64,
    pub title: String,
    pub recipe: Recipe,
    pub seconds: f64,
    pub timings: Timings,
    pub engine_version: String,
    pub created_unix: i64,
    pub wav: PathBuf,
    /// The song this one was made from by an edit (its recipe's `edit`); `None` for a song made
    /// from scratch.
    pub parent: Option<i64>,
}

impl Song {
    /// The name of the edit that made this song from its parent (`extend`, `from`, ...).
    pub fn edit_kind(&self) -> Option<&'static str> {
        self.recipe.edit.as_ref().map(|edit| edit.edit.name())
    }
}

/// What a repair did.
#[derive(Debug, Default)]
pub struct Repair {
    /// Where the old database was moved, if there was one.
    pub old_database: Option<PathBuf>,
    pub restored: usize,
    /// Files in `songs/` that could not be listed again, and why.
    pub skipped: Vec<(PathBuf, String)>,
    /// Songs listed again whose score does not read (they play, but cannot be edited), and why.
    pub damaged_scores: Vec<(PathBuf, String)>,
}

/// A song [`Library::import`] added.
#[derive(Debug)]
pub struct Imported {
    pub song: Song,
    /// Whether the file carried the song's score: without it, the song plays but cannot be edited.
    pub editable: bool,
}

/// The user's data directory's `songloom` folder (`~/.local/share/songloom` on Linux).
pub fn default_dir() -> PathBuf {
    dirs::data_dir().unwrap_or_else(std::env::temp_dir).join("songloom")
}

const DATABASE: &str = "library.sqlite3";

impl Library {
    /// Opens (or creates) the library in `dir`, removing what a killed run left in `songs/`.
    pub fn open(dir: &Path) -> Result<Self> {
        let songs_dir = dir.join("songs");
        std::fs::create_dir_all(&songs_dir).with_context(|| format!("creating {}", songs_dir.display()))?;
        crate::stale::sweep(&songs_dir);
        let path = dir.join(DATABASE);
        let broken = |e: rusqlite::Error| {
            anyhow::anyhow!(
                "the library database {} cannot be used ({e}); run `songloom library repair` to rebuild it from the \
                 song files (the old file is kept aside)",
                path.display()
            )
        };
        let conn = Connection::open(&path).map_err(broken)?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(broken)?;
        if version > SCHEMA_VERSION {
            bail!(
                "the library database {} was written by a newer Songloom (schema {version}, this one reads \
                 {SCHEMA_VERSION}); use that version, or `songloom library repair` to rebuild it for this one",
                path.display()
            );
        }
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS songs (
                id INTEGER PRIMARY KEY,
                title TEXT NOT NULL,
                recipe TEXT NOT NULL,
                seconds REAL NOT NULL,
                timings TEXT NOT NULL,
                engine_version TEXT NOT NULL,
                created_unix INTEGER NOT NULL
            );
            PRAGMA user_version = 1;",
        )
        .map_err(broken)?;
        Ok(Library { conn, path, songs_dir })
    }

    /// Lists the songs in `dir`'s `songs/` again from the recipes and titles their files carry, in a
    /// new database; the old one, if any, is moved aside first.
    pub fn repair(dir: &Path) -> Result<Repair> {
        let path = dir.join(DATABASE);
        let mut report = Repair::default();
        if path.exists() {
            let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let aside = dir.join(format!("{DATABASE}.replaced-{unix}"));
            std::fs::rename(&path, &aside)
                .with_context(|| format!("moving {} aside to {}", path.display(), aside.display()))?;
            report.old_database = Some(aside);
        }
        let mut library = Library::open(dir)?;
        let mut files: Vec<(i64, PathBuf)> = song_files(&library.songs_dir)?;
        files.sort();
        for (id, wav) in files {
            match library.restore(id, &wav) {
                Ok(()) => report.restored += 1,
                Err(e) => {
                    report.skipped.push((wav, format!("{e:#}")));
                    continue;
                }
            }
            // The score stays in the file; one that does not read is said now, not at the first edit.
            if let Err(e) = crate::wav::read_score(&wav) {
                report.damaged_scores.push((wav, format!("{e:#}")));
            }
        }
        Ok(report)
    }

    /// Lists `songs/<id>.wav` under `id` from what the file says of itself (its parent, if any, is
    /// in its recipe, and keeps its id, as every song does).
    fn restore(&mut self, id: i64, wav: &Path) -> Result<()> {
        let info = crate::wav::read_info(wav)?;
        let recipe = recipe_in(&info)?;
        let (samples, rate) = crate::wav::read_song(wav)?;
        let title = info.title.unwrap_or_else(|| title_of(&recipe));
        let engine = info.software.as_deref().and_then(|s| s.strip_prefix("Songloom ")).unwrap_or("").to_string();
        let created_unix = std::fs::metadata(wav)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64);
        self.conn
            .execute(
                "INSERT INTO songs (id, title, recipe, seconds, timings, engine_version, created_unix)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    id,
                    title,
                    serde_json::to_string(&recipe)?,
                    samples.len() as f64 / 2.0 / rate.max(1) as f64,
                    timings_json(&Timings::default()),
                    engine,
                    created_unix
                ],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// A database error, with the database it happened in.
    fn error(&self, e: rusqlite::Error) -> anyhow::Error {
        anyhow::anyhow!("the library database {}: {e}", self.path.display())
    }

    fn wav_path(&self, id: i64) -> PathBuf {
        self.songs_dir.join(format!("{id}.wav"))
    }

    /// The folder the song files live in.
    pub fn songs_dir(&self) -> &Path {
        &self.songs_dir
    }

    /// Adds a copy of the finished WAV at `source`, with `score` in place of the one it carries.
    pub fn add_copy(
        &mut self,
        title: &str,
        recipe: &Recipe,
        seconds: f64,
        timings: &Timings,
        source: &Path,
        score: Option<&Score>,
    ) -> Result<Song> {
        let copy = CompleteWav::copy_of(source, &self.songs_dir)?;
        self.add(title, recipe, seconds, timings, copy, score)
    }

    /// Adds a finished song: records it and moves its WAV into the library, with `score` (whole,
    /// seams included) written into it. If the move fails the record is rolled back, so the
    /// library never lists a song without its file. The id is past every song the database lists
    /// and every file in `songs/`, so a song file is never overwritten, even when the database was
    /// reset or edited by hand.
    pub fn add(
        &mut self,
        title: &str,
        recipe: &Recipe,
        seconds: f64,
        timings: &Timings,
        wav: CompleteWav,
        score: Option<&Score>,
    ) -> Result<Song> {
        if let Some(score) = score {
            wav.set_score(score)?;
        }
        let created_unix =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let path = self.path.clone();
        let in_db = |e| anyhow::anyhow!("the library database {}: {e}", path.display());
        // Immediate: songs finishing together (takes, a server's batch) each wait for the write
        // lock, where two deferred transactions reading the same largest id could not both write.
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(in_db)?;
        let on_disk = song_files(&self.songs_dir)?.into_iter().map(|(id, _)| id).max().unwrap_or(0);
        let listed: i64 = tx.query_row("SELECT COALESCE(MAX(id), 0) FROM songs", [], |r| r.get(0)).map_err(in_db)?;
        let id = listed.max(on_disk) + 1;
        tx.execute(
            "INSERT INTO songs (id, title, recipe, seconds, timings, engine_version, created_unix)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                id,
                title,
                serde_json::to_string(recipe)?,
                seconds,
                timings_json(timings),
                env!("CARGO_PKG_VERSION"),
                created_unix
            ],
        )
        .map_err(in_db)?;
        wav.persist_new(&self.songs_dir.join(format!("{id}.wav")))?;
        tx.commit().map_err(in_db)?;
        self.get(id)?.context("the song just added is missing")
    }

    /// Adds the song in `file`, a WAV or FLAC written by Songloom (its recipe in the comment, its
    /// score, if it has one, beside it), as the library's float WAV, titled `title` or as the file
    /// says. A file without a recipe is refused; one without a score is added, but cannot be
    /// edited.
    pub fn import(&mut self, file: &Path, title: Option<&str>) -> Result<Imported> {
        let cannot = || format!("cannot import {}", file.display());
        let kind = song_file_kind(file).with_context(cannot)?;
        let info = match kind {
            SongFileKind::Wav => crate::wav::read_info(file)?,
            SongFileKind::Flac => crate::flac::read_info(file)?,
        };
        // Refused before its audio is decoded.
        let recipe = recipe_in(&info).with_context(cannot)?;
        let ((samples, sample_rate), score) = match kind {
            SongFileKind::Wav => (crate::wav::read_song(file)?, crate::wav::read_score(file)?),
            SongFileKind::Flac => (crate::flac::read_song(file)?, crate::flac::read_score(file)?),
        };
        let title = match title {
            Some(title) => title.to_string(),
            None => info.title.filter(|t| !t.is_empty()).unwrap_or_else(|| title_of(&recipe)),
        };
        let mut wav = WavFile::create_in(&self.songs_dir, "import.wav", sample_rate, WavFormat::F32)?;
        wav.write(&samples)?;
        let complete = wav.finish(&title, &serde_json::to_string(&recipe)?)?;
        let seconds = samples.len() as f64 / 2.0 / sample_rate.max(1) as f64;
        let song = self.add(&title, &recipe, seconds, &Timings::default(), complete, score.as_ref())?;
        Ok(Imported { song, editable: score.is_some() })
    }

    /// The score kept in song `id`'s file; `None` for a song without one (made before scores were
    /// kept, or imported from a file without one), which cannot be edited.
    pub fn score(&self, id: i64) -> Result<Option<Score>> {
        let song = self.get(id)?.with_context(|| format!("no song {id} in the library"))?;
        crate::wav::read_score(&song.wav)
    }

    /// Whether `song` can be edited: `Err` says why not (no score in its file).
    pub fn editable(song: &Song) -> std::result::Result<(), String> {
        match crate::wav::has_score(&song.wav) {
            Ok(true) => Ok(()),
            Ok(false) => {
                Err("its file holds no codes (it was made before Songloom kept them, or imported without them)".into())
            }
            Err(e) => Err(format!("{e:#}")),
        }
    }

    /// Every version of song `id`: the songs that share its first ancestor (that one included),
    /// oldest first. Versions whose parent was deleted stay together, as they share its id.
    pub fn versions(&self, id: i64) -> Result<Vec<Song>> {
        let songs = self.list("")?;
        let parents: HashMap<i64, Option<i64>> = songs.iter().map(|s| (s.id, s.parent)).collect();
        if !parents.contains_key(&id) {
            bail!("no song {id} in the library");
        }
        // A parent is older than its child (a smaller id); a link that is not, from a database edited
        // by hand, is not followed, so the walk always ends.
        let first_ancestor = |mut id: i64| {
            while let Some(&Some(parent)) = parents.get(&id)
                && parent < id
            {
                id = parent;
            }
            id
        };
        let first = first_ancestor(id);
        let mut versions: Vec<Song> = songs.into_iter().filter(|s| first_ancestor(s.id) == first).collect();
        versions.sort_by_key(|s| s.id);
        Ok(versions)
    }

    pub fn get(&self, id: i64) -> Result<Option<Song>> {
        self.conn
            .query_row(&format!("{SELECT} WHERE id = ?1"), [id], |r| self.row(r))
            .optional()
            .map_err(|e| self.error(e))
    }

    /// Songs whose title, description or lyrics contain `search` (all with an empty search),
    /// newest first.
    pub fn list(&self, search: &str) -> Result<Vec<Song>> {
        let pattern = format!("%{}%", search.replace('%', "\\%").replace('_', "\\_"));
        let mut stmt = self
            .conn
            .prepare(&format!(
                "{SELECT} WHERE title LIKE ?1 ESCAPE '\\' OR json_extract(recipe, '$.description') LIKE ?1 ESCAPE '\\'
                 OR json_extract(recipe, '$.lyrics') LIKE ?1 ESCAPE '\\' ORDER BY id DESC"
            ))
            .map_err(|e| self.error(e))?;
        let songs = stmt.query_map([pattern], |r| self.row(r)).and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
        songs.map_err(|e| self.error(e))
    }

    pub fn rename(&self, id: i64, title: &str) -> Result<()> {
        let changed = self
            .conn
            .execute("UPDATE songs SET title = ?1 WHERE id = ?2", params![title, id])
            .map_err(|e| self.error(e))?;
        if changed == 0 {
            bail!("no song {id} in the library");
        }
        Ok(())
    }

    /// Removes the song and its file.
    pub fn delete(&self, id: i64) -> Result<()> {
        if self.conn.execute("DELETE FROM songs WHERE id = ?1", [id]).map_err(|e| self.error(e))? == 0 {
            bail!("no song {id} in the library");
        }
        let wav = self.wav_path(id);
        match std::fs::remove_file(&wav) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", wav.display()))
            }
            _ => Ok(()),
        }
    }

    fn row(&self, r: &rusqlite::Row) -> rusqlite::Result<Song> {
        let id: i64 = r.get(0)?;
        let recipe: Recipe = serde_json::from_str(&r.get::<_, String>(2)?).unwrap_or_default();
        let timings: String = r.get(4)?;
        Ok(Song {
            id,
            title: r.get(1)?,
            parent: recipe.edit.as_ref().map(|edit| edit.parent),
            recipe,
            seconds: r.get(3)?,
            timings: timings_from_json(&timings),
            engine_version: r.get(5)?,
            created_unix: r.get(6)?,
            wav: self.wav_path(id),
        })
    }
}

/// The title a song gets from its recipe: the description's first 60 characters.
pub fn title_of(recipe: &Recipe) -> String {
    recipe.description.chars().take(60).collect()
}

/// The recipe a Songloom file carries in its comment.
fn recipe_in(info: &WavInfo) -> Result<Recipe> {
    let comment = info.comment.as_deref().context("the file carries no recipe (it was not written by Songloom)")?;
    serde_json::from_str(comment).context("the file's recipe is not readable")
}

/// The two kinds of file Songloom writes, told apart by their first bytes.
#[derive(Clone, Copy)]
enum SongFileKind {
    Wav,
    Flac,
}

fn song_file_kind(file: &Path) -> Result<SongFileKind> {
    let mut magic = [0u8; 4];
    let mut opened = std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    match std::io::Read::read_exact(&mut opened, &mut magic).map(|_| &magic) {
        Ok(b"RIFF") => Ok(SongFileKind::Wav),
        Ok(b"fLaC") => Ok(SongFileKind::Flac),
        _ => bail!("it is neither a WAV nor a FLAC file"),
    }
}

/// The song files in `songs/`: `<id>.wav` with their ids.
fn song_files(songs_dir: &Path) -> Result<Vec<(i64, PathBuf)>> {
    let entries = std::fs::read_dir(songs_dir).with_context(|| format!("reading {}", songs_dir.display()))?;
    Ok(entries
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let id =
                path.extension().filter(|x| *x == "wav")?.to_str().and(path.file_stem())?.to_str()?.parse().ok()?;
            Some((id, path))
        })
        .collect())
}

const SELECT: &str = "SELECT id, title, recipe, seconds, timings, engine_version, created_unix FROM songs";

fn timings_json(t: &Timings) -> String {
    serde_json::json!({
        "total_s": t.total_s, "time_to_first_audio_s": t.time_to_first_audio_s, "ar_s": t.ar_s,
        "acoustic_s": t.acoustic_s, "frames": t.frames, "windows": t.windows,
    })
    .to_string()
}

fn timings_from_json(text: &str) -> Timings {
    let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    Timings {
        total_s: v["total_s"].as_f64().unwrap_or(0.0),
        time_to_first_audio_s: v["time_to_first_audio_s"].as_f64(),
        ar_s: v["ar_s"].as_f64().unwrap_or(0.0),
        acoustic_s: v["acoustic_s"].as_f64().unwrap_or(0.0),
        frames: v["frames"].as_u64().unwrap_or(0) as usize,
        windows: v["windows"].as_u64().unwrap_or(0) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wav::tests::{assert_same_score, made_up_score};
    use songloom_wire::{Edit, EditOf};

    fn recipe(description: &str) -> Recipe {
        Recipe { description: description.into(), lyrics: "[verse]\nla".into(), seed: 4, ..Recipe::default() }
    }

    #[test]
    fn songs_are_added_found_renamed_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let mut lib = Library::open(dir.path()).unwrap();
        let wav = dir.path().join("take.wav");
        std::fs::write(&wav, b"RIFF").unwrap();
        let timings = Timings { total_s: 3.0, time_to_first_audio_s: Some(1.0), frames: 25, ..Timings::default() };
        let song = lib.add_copy("First take", &recipe("warm lo-fi piano"), 1.0, &timings, &wav, None).unwrap();
        assert!(wav.exists() && song.wav.exists(), "a copy is added, the source stays");
        assert_eq!(std::fs::read(&song.wav).unwrap(), b"RIFF");
        assert_eq!(song.recipe, recipe("warm lo-fi piano"));
        assert_eq!(song.timings, timings);

        let other = dir.path().join("other.wav");
        std::fs::write(&other, b"RIFF").unwrap();
        lib.add_copy("Second", &recipe("dark techno 50%"), 2.0, &Timings::default(), &other, None).unwrap();
        assert_eq!(lib.list("").unwrap().len(), 2);
        assert_eq!(lib.list("piano").unwrap()[0].id, song.id);
        assert_eq!(lib.list("50%").unwrap().len(), 1);
        assert_eq!(lib.list("nothing like this").unwrap().len(), 0);

        lib.rename(song.id, "Keeper").unwrap();
        assert_eq!(lib.get(song.id).unwrap().unwrap().title, "Keeper");
        drop(lib);
        let lib = Library::open(dir.path()).unwrap();
        assert_eq!(lib.list("Keeper").unwrap().len(), 1, "the library persists");
        lib.delete(song.id).unwrap();
        assert!(!song.wav.exists());
        assert!(lib.get(song.id).unwrap().is_none());
        assert!(lib.rename(song.id, "gone").is_err());
    }

    #[test]
    fn a_failed_move_leaves_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut lib = Library::open(dir.path()).unwrap();
        let missing = dir.path().join("never-written.wav");
        assert!(lib.add_copy("ghost", &recipe("x"), 1.0, &Timings::default(), &missing, None).is_err());
        assert!(lib.list("").unwrap().is_empty());
        // A copy that fails part way (a folder for a file) leaves no staged file.
        assert!(lib.add_copy("folder", &recipe("x"), 1.0, &Timings::default(), dir.path(), None).is_err());
        let staged: Vec<_> = std::fs::read_dir(lib.songs_dir()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert!(staged.is_empty(), "{staged:?}");
        // A file the database does not list (a reset database) is never overwritten: the next
        // song takes the id after it.
        std::fs::write(lib.songs_dir().join("1.wav"), b"older").unwrap();
        let wav = dir.path().join("take.wav");
        std::fs::write(&wav, b"RIFF").unwrap();
        let song = lib.add_copy("next", &recipe("x"), 1.0, &Timings::default(), &wav, None).unwrap();
        assert_eq!(song.id, 2);
        assert_eq!(std::fs::read(lib.songs_dir().join("1.wav")).unwrap(), b"older");
    }

    /// A song WAV at `path` as the song job writes it: float samples, the recipe in its comment.
    fn song_file(path: &Path, title: &str, recipe: &Recipe) -> CompleteWav {
        let mut wav = WavFile::create(path, 44100, WavFormat::F32).unwrap();
        wav.write(&[0.5, -0.5, 0.25, -0.25, 0.125, 0.0]).unwrap();
        wav.finish(title, &serde_json::to_string(recipe).unwrap()).unwrap()
    }

    /// `recipe(description)` made from song `parent` by `edit`.
    fn version_of(parent: i64, edit: Edit, description: &str) -> Recipe {
        let edit = EditOf { parent, edit, changed_from_s: 1.0, changed_to_s: None };
        Recipe { edit: Some(Box::new(edit)), ..recipe(description) }
    }

    /// The library's WAV keeps the whole score, even when it is a copy of a file that carries the
    /// codes alone; a song added without one has none.
    #[test]
    fn the_library_keeps_the_whole_score() {
        let dir = tempfile::tempdir().unwrap();
        let mut lib = Library::open(dir.path()).unwrap();
        let score = made_up_score();
        let complete = song_file(&dir.path().join("a.wav"), "A", &recipe("a"));
        let song = lib.add("A", &recipe("a"), 1.0, &Timings::default(), complete, Some(&score)).unwrap();
        assert_same_score(lib.score(song.id).unwrap(), &score);

        let exported = dir.path().join("exported.wav");
        let complete = song_file(&exported, "B", &recipe("b"));
        complete.set_score(&score.codes_only()).unwrap();
        complete.persist_new(&exported).unwrap();
        let copy = lib.add_copy("B", &recipe("b"), 1.0, &Timings::default(), &exported, Some(&score)).unwrap();
        assert_same_score(lib.score(copy.id).unwrap(), &score);
        assert_same_score(crate::wav::read_score(&exported).unwrap(), &score.codes_only());

        let complete = song_file(&dir.path().join("c.wav"), "C", &recipe("c"));
        let bare = lib.add("C", &recipe("c"), 1.0, &Timings::default(), complete, None).unwrap();
        assert!(lib.score(bare.id).unwrap().is_none());
        assert!(lib.score(99).unwrap_err().to_string().contains("no song 99"));
    }

    #[test]
    fn versions_share_their_first_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let mut lib = Library::open(dir.path()).unwrap();
        let mut add = |recipe: Recipe| {
            let complete = song_file(&dir.path().join("take.wav"), "t", &recipe);
            lib.add("t", &recipe, 1.0, &Timings::default(), complete, None).unwrap()
        };
        let first = add(recipe("first"));
        let longer = add(version_of(first.id, Edit::Extend { seconds: Some(4.0) }, "first"));
        let other = add(recipe("another song"));
        let path = add(version_of(longer.id, Edit::From { at_s: 2.0, description: None }, "first"));
        let rendered = add(version_of(first.id, Edit::Rerender { from_s: 0.5, to_s: 1.0 }, "first"));
        assert_eq!((longer.parent, longer.edit_kind()), (Some(first.id), Some("extend")));
        assert_eq!((first.parent, first.edit_kind()), (None, None));

        let ids = |id| lib.versions(id).unwrap().iter().map(|s| s.id).collect::<Vec<_>>();
        let all = vec![first.id, longer.id, path.id, rendered.id];
        assert_eq!(ids(first.id), all);
        assert_eq!(ids(path.id), all);
        assert_eq!(ids(other.id), vec![other.id]);
        // Without the first, the versions made from it still go together.
        lib.delete(first.id).unwrap();
        assert_eq!(ids(rendered.id), vec![longer.id, path.id, rendered.id]);
        assert!(lib.versions(first.id).unwrap_err().to_string().contains("no song"));
    }

    /// The database rebuilt from the files lists each version with its parent, and the scores are
    /// where they were; a damaged score is said, and its song listed.
    #[test]
    fn repair_restores_parents_and_scores() {
        let dir = tempfile::tempdir().unwrap();
        let mut lib = Library::open(dir.path()).unwrap();
        let score = made_up_score();
        let first = song_file(&dir.path().join("a.wav"), "A", &recipe("a"));
        let first = lib.add("A", &recipe("a"), 1.0, &Timings::default(), first, Some(&score)).unwrap();
        let extended = version_of(first.id, Edit::Extend { seconds: None }, "a");
        let second = song_file(&dir.path().join("b.wav"), "B", &extended);
        let second = lib.add("B", &extended, 1.0, &Timings::default(), second, Some(&score)).unwrap();
        let damaged = song_file(&dir.path().join("c.wav"), "C", &recipe("c"));
        let damaged = lib.add("C", &recipe("c"), 1.0, &Timings::default(), damaged, Some(&score)).unwrap();
        let mut bytes = std::fs::read(&damaged.wav).unwrap();
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&damaged.wav, &bytes).unwrap();
        drop(lib);
        std::fs::write(dir.path().join(DATABASE), b"not a database").unwrap();

        let report = Library::repair(dir.path()).unwrap();
        assert_eq!((report.restored, report.skipped.len()), (3, 0), "{report:?}");
        assert_eq!(report.damaged_scores.len(), 1, "{report:?}");
        assert_eq!(report.damaged_scores[0].0, damaged.wav);
        let lib = Library::open(dir.path()).unwrap();
        let restored = lib.get(second.id).unwrap().unwrap();
        assert_eq!(
            (restored.parent, restored.edit_kind(), restored.title.as_str()),
            (Some(first.id), Some("extend"), "B")
        );
        assert_eq!(restored.recipe, extended);
        assert_same_score(lib.score(second.id).unwrap(), &score);
        assert_same_score(lib.score(first.id).unwrap(), &score);
        assert_eq!(lib.versions(first.id).unwrap().len(), 2);
    }

    /// A Songloom WAV or FLAC comes into the library as a float WAV with its recipe and its score,
    /// bit for bit; a file without a score comes in but cannot be edited; one without a recipe is
    /// refused.
    #[test]
    fn songloom_files_are_imported_with_their_recipe_and_score() {
        let dir = tempfile::tempdir().unwrap();
        let mut lib = Library::open(dir.path().join("library").as_path()).unwrap();
        let score = made_up_score();
        let extended = version_of(7, Edit::Extend { seconds: Some(2.0) }, "imported piano");
        let source = dir.path().join("source.wav");
        song_file(&source, "Made elsewhere", &extended).persist_new(&source).unwrap();
        let json = serde_json::to_string(&extended).unwrap();
        let (samples, rate) = crate::wav::read_song(&source).unwrap();
        let codes = score.codes_only();
        let files = [
            ("export.wav", crate::wav::FileFormat::Pcm16, Some(&codes)),
            ("export.flac", crate::wav::FileFormat::Flac, Some(&codes)),
            ("whole.wav", crate::wav::FileFormat::F32, Some(&score)),
            ("bare.flac", crate::wav::FileFormat::Flac, None),
        ];
        for (name, format, with) in files {
            let file = dir.path().join(name);
            crate::wav::write_as(&samples, rate, &file, format, "Made elsewhere", &json, with).unwrap();
            let imported = lib.import(&file, None).unwrap();
            let song = &imported.song;
            assert_eq!(
                (song.title.as_str(), &song.recipe, song.parent),
                ("Made elsewhere", &extended, Some(7)),
                "{name}"
            );
            assert_eq!(imported.editable, with.is_some(), "{name}");
            match with {
                Some(with) => assert_same_score(lib.score(song.id).unwrap(), with),
                None => assert!(lib.score(song.id).unwrap().is_none()),
            }
            let (back, back_rate) = crate::wav::read_song(&song.wav).unwrap();
            assert_eq!((back.len(), back_rate), (samples.len(), rate), "{name}");
            let spec = hound::WavReader::open(&song.wav).unwrap().spec();
            assert_eq!(spec.sample_format, hound::SampleFormat::Float, "the library keeps a float WAV");
        }
        let renamed = lib.import(&dir.path().join("export.flac"), Some("My title")).unwrap();
        assert_eq!(renamed.song.title, "My title");

        let plain = dir.path().join("plain.wav");
        let mut wav = WavFile::create(&plain, 44100, WavFormat::F32).unwrap();
        wav.write(&[0.1, 0.1]).unwrap();
        wav.finish("plain", "just a comment").unwrap().persist_new(&plain).unwrap();
        let no_comment = dir.path().join("no-comment.wav");
        let mut writer = hound::WavWriter::create(
            &no_comment,
            hound::WavSpec {
                channels: 2,
                sample_rate: 44100,
                bits_per_sample: 16,
                sample_format: hound::SampleFormat::Int,
            },
        )
        .unwrap();
        writer.write_sample(0i16).unwrap();
        writer.write_sample(0i16).unwrap();
        writer.finalize().unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, b"la la la").unwrap();
        let before = lib.list("").unwrap().len();
        for (file, why) in [
            (&no_comment, "carries no recipe"),
            (&plain, "recipe is not readable"),
            (&text, "neither a WAV nor a FLAC"),
        ] {
            let err = format!("{:#}", lib.import(file, None).unwrap_err());
            assert!(err.contains(&file.display().to_string()) && err.contains(why), "{err}");
        }
        assert_eq!(lib.list("").unwrap().len(), before, "nothing is added for a refused file");
        let staged: Vec<_> = std::fs::read_dir(lib.songs_dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(staged.is_empty(), "{staged:?}");
    }
}
