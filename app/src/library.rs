//! The library of finished songs: a SQLite database in the user's data directory, each song's WAV
//! beside it, and its recipe (description, lyrics, parameters, seed, model, engine version,
//! timings) so it can be played again, generated again, renamed, exported or deleted.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OptionalExtension, params};
use songloom_ui::contract::{Recipe, Timings};

use crate::wav::CompleteWav;

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
}

/// What a repair did.
#[derive(Debug, Default)]
pub struct Repair {
    /// Where the old database was moved, if there was one.
    pub old_database: Option<PathBuf>,
    pub restored: usize,
    /// Files in `songs/` that could not be listed again, and why.
    pub skipped: Vec<(PathBuf, String)>,
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
                Err(e) => report.skipped.push((wav, format!("{e:#}"))),
            }
        }
        Ok(report)
    }

    /// Lists `songs/<id>.wav` under `id` from what the file says of itself.
    fn restore(&mut self, id: i64, wav: &Path) -> Result<()> {
        let info = crate::wav::read_info(wav)?;
        let comment = info.comment.context("the file carries no recipe (it was not written by Songloom)")?;
        let recipe: Recipe = serde_json::from_str(&comment).context("the file's recipe is not readable")?;
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

    /// Adds a copy of the finished WAV at `source`.
    pub fn add_copy(
        &mut self,
        title: &str,
        recipe: &Recipe,
        seconds: f64,
        timings: &Timings,
        source: &Path,
    ) -> Result<Song> {
        let copy = CompleteWav::copy_of(source, &self.songs_dir)?;
        self.add(title, recipe, seconds, timings, copy)
    }

    /// Adds a finished song: records it and moves its WAV into the library. If the move fails the
    /// record is rolled back, so the library never lists a song without its file. The id is past
    /// every song the database lists and every file in `songs/`, so a song file is never
    /// overwritten, even when the database was reset or edited by hand.
    pub fn add(
        &mut self,
        title: &str,
        recipe: &Recipe,
        seconds: f64,
        timings: &Timings,
        wav: CompleteWav,
    ) -> Result<Song> {
        let created_unix =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let on_disk = song_files(&self.songs_dir)?.into_iter().map(|(id, _)| id).max().unwrap_or(0);
        let path = self.path.clone();
        let in_db = |e| anyhow::anyhow!("the library database {}: {e}", path.display());
        let tx = self.conn.transaction().map_err(in_db)?;
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
        let recipe: String = r.get(2)?;
        let timings: String = r.get(4)?;
        Ok(Song {
            id,
            title: r.get(1)?,
            recipe: serde_json::from_str(&recipe).unwrap_or_default(),
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
        let song = lib.add_copy("First take", &recipe("warm lo-fi piano"), 1.0, &timings, &wav).unwrap();
        assert!(wav.exists() && song.wav.exists(), "a copy is added, the source stays");
        assert_eq!(std::fs::read(&song.wav).unwrap(), b"RIFF");
        assert_eq!(song.recipe, recipe("warm lo-fi piano"));
        assert_eq!(song.timings, timings);

        let other = dir.path().join("other.wav");
        std::fs::write(&other, b"RIFF").unwrap();
        lib.add_copy("Second", &recipe("dark techno 50%"), 2.0, &Timings::default(), &other).unwrap();
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
        assert!(lib.add_copy("ghost", &recipe("x"), 1.0, &Timings::default(), &missing).is_err());
        assert!(lib.list("").unwrap().is_empty());
        // A copy that fails part way (a folder for a file) leaves no staged file.
        assert!(lib.add_copy("folder", &recipe("x"), 1.0, &Timings::default(), dir.path()).is_err());
        let staged: Vec<_> = std::fs::read_dir(lib.songs_dir()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert!(staged.is_empty(), "{staged:?}");
        // A file the database does not list (a reset database) is never overwritten: the next
        // song takes the id after it.
        std::fs::write(lib.songs_dir().join("1.wav"), b"older").unwrap();
        let wav = dir.path().join("take.wav");
        std::fs::write(&wav, b"RIFF").unwrap();
        let song = lib.add_copy("next", &recipe("x"), 1.0, &Timings::default(), &wav).unwrap();
        assert_eq!(song.id, 2);
        assert_eq!(std::fs::read(lib.songs_dir().join("1.wav")).unwrap(), b"older");
    }
}
