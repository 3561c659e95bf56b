//! The edits of a song already made, as the window names and plans them: each edit's name, the
//! part of the song it changes and the length of the version it makes (what the window expects
//! while the version is made; the engine's record replaces it once the version is saved), and the
//! library's songs ordered so that the versions of a song stand under it.

use std::collections::HashMap;

use crate::contract::{Edit, SongEntry, SongId};
use crate::progress::{clock, in_words};

/// The part of a version that is new, in seconds: from `from_s` to `to_s` (to the song's end
/// without it); the rest is its parent's audio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Changed {
    pub from_s: f64,
    pub to_s: Option<f64>,
}

impl Changed {
    /// The part a version's recorded edit changed.
    pub fn of(edit: &songloom_wire::EditOf) -> Self {
        Changed { from_s: edit.changed_from_s, to_s: edit.changed_to_s }
    }

    /// The part `edit` of `song` is expected to change: the engine may begin a little earlier (at
    /// the window boundary before it), and places a re-sung line itself when no time is given.
    pub fn expected(edit: &Edit, song: &SongEntry) -> Self {
        match edit {
            Edit::Extend { .. } => Changed { from_s: song.seconds, to_s: None },
            Edit::From { at_s, .. } => Changed { from_s: *at_s, to_s: None },
            Edit::Resing { line, at_s, .. } => Changed {
                from_s: at_s.unwrap_or_else(|| line_start_s(&song.recipe.lyrics, *line, song.seconds)),
                to_s: None,
            },
            Edit::Rerender { from_s, to_s } => Changed { from_s: *from_s, to_s: Some(*to_s) },
        }
    }

    /// The stereo frames at `sample_rate` of the new part (to `usize::MAX` for a part that runs
    /// to the song's end).
    pub fn frames(&self, sample_rate: u32) -> std::ops::Range<usize> {
        let at = |s: f64| (s.max(0.0) * f64::from(sample_rate)).ceil() as usize;
        at(self.from_s)..self.to_s.map_or(usize::MAX, at)
    }
}

/// An edit as the library names a version: "extend +30 s", "re-render 0:12–0:20".
pub fn edit_name(edit: &Edit) -> String {
    match edit {
        Edit::Extend { seconds: Some(s) } => format!("extend +{}", in_words(*s)),
        Edit::Extend { seconds: None } => "extend".into(),
        Edit::From { at_s, .. } => format!("another path from {}", clock(*at_s)),
        Edit::Resing { line, .. } => format!("re-sing from line {}", line + 1),
        Edit::Rerender { from_s, to_s } => format!("re-render {}–{}", clock(*from_s), clock(*to_s)),
    }
}

/// Seconds the version `edit` makes of `song` is expected to last.
pub fn version_length_s(edit: &Edit, song: &SongEntry) -> f64 {
    match edit {
        Edit::Extend { seconds } => song.seconds + seconds.unwrap_or(0.0),
        Edit::From { .. } | Edit::Resing { .. } | Edit::Rerender { .. } => song.seconds,
    }
}

/// Where line `line` (from 0, every line of `lyrics` counted) starts in a song of `seconds`,
/// guessed from its place among the lines.
fn line_start_s(lyrics: &str, line: usize, seconds: f64) -> f64 {
    let lines = lyrics.split('\n').count().max(1);
    seconds * line.min(lines) as f64 / lines as f64
}

/// A row of the library: the song at `index` of the list, `depth` versions below the song it was
/// first made as (0 for that song).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub index: usize,
    pub depth: usize,
}

/// The library's rows: each song with its versions under it (and theirs under them), the
/// families in the order of their newest member, so a new version brings its song up; within a
/// family, the list's order. A version whose song is not in the list stands on its own.
pub fn library_rows(songs: &[SongEntry]) -> Vec<Row> {
    let at: HashMap<SongId, usize> = songs.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
    let parent = |i: usize| songs[i].parent().and_then(|p| at.get(&p).copied());
    // A loop of parents (never written by the engine) is broken: a song on one stands alone.
    let on_loop = |i: usize| {
        let mut p = parent(i);
        for _ in 0..songs.len() {
            match p {
                Some(j) if j == i => return true,
                Some(j) => p = parent(j),
                None => return false,
            }
        }
        false
    };
    let attached: Vec<Option<usize>> = (0..songs.len()).map(|i| parent(i).filter(|_| !on_loop(i))).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); songs.len()];
    for (i, p) in attached.iter().enumerate() {
        if let Some(p) = p {
            children[*p].push(i);
        }
    }
    let mut rows = Vec::with_capacity(songs.len());
    let mut placed = vec![false; songs.len()];
    for i in 0..songs.len() {
        let mut top = i;
        while let Some(p) = attached[top] {
            top = p;
        }
        if placed[top] {
            continue;
        }
        let mut stack = vec![Row { index: top, depth: 0 }];
        while let Some(row) = stack.pop() {
            placed[row.index] = true;
            rows.push(row);
            stack.extend(children[row.index].iter().rev().map(|&index| Row { index, depth: row.depth + 1 }));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{EditOf, Recipe, Timings};

    fn song(id: SongId, parent: Option<SongId>) -> SongEntry {
        let edit = parent.map(|parent| EditOf {
            parent,
            edit: Edit::Extend { seconds: Some(30.0) },
            changed_from_s: 30.0,
            changed_to_s: None,
        });
        SongEntry {
            id,
            title: format!("song {id}"),
            recipe: Recipe { edit: edit.map(Box::new), ..Recipe::default() },
            seconds: 30.0,
            created_unix: 0,
            timings: Timings::default(),
            editable: Ok(()),
        }
    }

    fn ids(songs: &[SongEntry]) -> Vec<(SongId, usize)> {
        library_rows(songs).iter().map(|r| (songs[r.index].id, r.depth)).collect()
    }

    #[test]
    fn versions_stand_under_their_song_and_bring_it_up() {
        // Newest first: 5 is a version of 2's version 3; 4 stands alone; 1 is the oldest.
        let songs = [song(5, Some(3)), song(4, None), song(3, Some(2)), song(2, None), song(1, None)];
        assert_eq!(ids(&songs), [(2, 0), (3, 1), (5, 2), (4, 0), (1, 0)]);
        // Two versions of one song: the newer first, as the list has them.
        let songs = [song(9, Some(1)), song(8, Some(1)), song(1, None)];
        assert_eq!(ids(&songs), [(1, 0), (9, 1), (8, 1)]);
        // Its song deleted or not found by the search: the version stands on its own.
        assert_eq!(ids(&[song(9, Some(1)), song(2, None)]), [(9, 0), (2, 0)]);
        // A loop of parents loses no song.
        let mut looped = vec![song(1, Some(2)), song(2, Some(1))];
        assert_eq!(library_rows(&looped).len(), 2);
        looped.push(song(3, Some(3)));
        assert_eq!(library_rows(&looped).len(), 3);
    }

    #[test]
    fn edits_are_named_as_the_library_shows_them() {
        assert_eq!(edit_name(&Edit::Extend { seconds: Some(30.0) }), "extend +30 s");
        assert_eq!(edit_name(&Edit::Rerender { from_s: 12.0, to_s: 20.0 }), "re-render 0:12–0:20");
        assert_eq!(edit_name(&Edit::From { at_s: 75.0, description: None }), "another path from 1:15");
        assert_eq!(edit_name(&Edit::Resing { line: 3, lyrics: "la".into(), at_s: None }), "re-sing from line 4");
    }

    #[test]
    fn each_edit_expects_its_change_where_it_asks() {
        let mut s = song(1, None);
        s.recipe.lyrics = "[verse]\none\ntwo\n[chorus]".into();
        s.seconds = 40.0;
        let expect = |edit: Edit| (Changed::expected(&edit, &s), version_length_s(&edit, &s));
        assert_eq!(expect(Edit::Extend { seconds: Some(20.0) }), (Changed { from_s: 40.0, to_s: None }, 60.0));
        assert_eq!(expect(Edit::Rerender { from_s: 5.0, to_s: 9.0 }), (Changed { from_s: 5.0, to_s: Some(9.0) }, 40.0));
        assert_eq!(expect(Edit::From { at_s: 12.0, description: None }).0.from_s, 12.0);
        // A line without a time: its place among the four lines.
        assert_eq!(expect(Edit::Resing { line: 2, lyrics: String::new(), at_s: None }).0.from_s, 20.0);
        assert_eq!(expect(Edit::Resing { line: 2, lyrics: String::new(), at_s: Some(7.5) }).0.from_s, 7.5);
        let rerender = Changed { from_s: 1.0, to_s: Some(2.0) };
        assert_eq!(rerender.frames(100), 100..200);
    }
}
