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

/// The user's data directory's `songloom` folder (`~/.local/share/songloom` on Linux).
pub fn default_dir() -> PathBuf {
    dirs::data_dir().unwrap_or_else(std::env::temp_dir).join("songloom")
}

impl Library {
    pub fn open(dir: &Path) -> Result<Self> {
        let songs_dir = dir.join("songs");
        std::fs::create_dir_all(&songs_dir).with_context(|| format!("creating {}", songs_dir.display()))?;
        let path = dir.join("library.sqlite3");
        let conn = Connection::open(&path).with_context(|| format!("opening {}", path.display()))?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            bail!("{} was written by a newer Songloom (schema {version})", path.display());
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
        )?;
        Ok(Library { conn, songs_dir })
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
    /// record is rolled back, so the library never lists a song without its file.
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
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO songs (title, recipe, seconds, timings, engine_version, created_unix) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                title,
                serde_json::to_string(recipe)?,
                seconds,
                timings_json(timings),
                env!("CARGO_PKG_VERSION"),
                created_unix
            ],
        )?;
        let id = tx.last_insert_rowid();
        wav.persist_new(&self.songs_dir.join(format!("{id}.wav")))?;
        tx.commit()?;
        self.get(id)?.context("the song just added is missing")
    }

    pub fn get(&self, id: i64) -> Result<Option<Song>> {
        Ok(self.conn.query_row(&format!("{SELECT} WHERE id = ?1"), [id], |r| self.row(r)).optional()?)
    }

    /// Songs whose title, description or lyrics contain `search` (all with an empty search),
    /// newest first.
    pub fn list(&self, search: &str) -> Result<Vec<Song>> {
        let pattern = format!("%{}%", search.replace('%', "\\%").replace('_', "\\_"));
        let mut stmt = self.conn.prepare(&format!(
            "{SELECT} WHERE title LIKE ?1 ESCAPE '\\' OR json_extract(recipe, '$.description') LIKE ?1 ESCAPE '\\'
             OR json_extract(recipe, '$.lyrics') LIKE ?1 ESCAPE '\\' ORDER BY id DESC"
        ))?;
        let songs = stmt.query_map([pattern], |r| self.row(r))?.collect::<Result<Vec<_>, _>>()?;
        Ok(songs)
    }

    pub fn rename(&self, id: i64, title: &str) -> Result<()> {
        if self.conn.execute("UPDATE songs SET title = ?1 WHERE id = ?2", params![title, id])? == 0 {
            bail!("no song {id} in the library");
        }
        Ok(())
    }

    /// Removes the song and its file.
    pub fn delete(&self, id: i64) -> Result<()> {
        if self.conn.execute("DELETE FROM songs WHERE id = ?1", [id])? == 0 {
            bail!("no song {id} in the library");
        }
        match std::fs::remove_file(self.wav_path(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
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

/// The timings a finished run reports, as the library keeps them.
pub fn timings_of(stats: &songloom_engine::pipeline::Stats) -> Timings {
    Timings {
        total_s: stats.total_s,
        time_to_first_audio_s: stats.time_to_first_audio_s,
        ar_s: stats.ar_s,
        acoustic_s: stats.acoustic_s,
        frames: stats.frames,
        windows: stats.windows,
    }
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
        // A file already where the next song's would go is never overwritten: the song is refused.
        std::fs::write(lib.songs_dir().join("1.wav"), b"older").unwrap();
        let wav = dir.path().join("take.wav");
        std::fs::write(&wav, b"RIFF").unwrap();
        assert!(lib.add_copy("clash", &recipe("x"), 1.0, &Timings::default(), &wav).is_err());
        assert_eq!(std::fs::read(lib.songs_dir().join("1.wav")).unwrap(), b"older");
        assert!(lib.list("").unwrap().is_empty());
        let leftovers: Vec<_> = std::fs::read_dir(lib.songs_dir()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(leftovers.len(), 1, "only the older file: {leftovers:?}");
    }
}
