//! Temporaries a killed run left behind. Every temporary Songloom writes is named after its
//! process (`songloom_engine::partial`); one whose process no longer runs can only be the leftover
//! of a run that was killed (SIGKILL, a power cut), and the next run that looks in that folder
//! removes it and says so.

use std::io::Write;
use std::path::{Path, PathBuf};

use songloom_engine::partial::owner;

fn alive(pid: u32) -> bool {
    pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes the temporaries in `dir` whose process is gone, and says which; returns them.
pub fn sweep(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner(&name).filter(|&pid| !alive(pid)) else { continue };
        let path = entry.path();
        let gone = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        if gone.is_ok() {
            // Standard error may be gone (a server whose terminal closed): a lost line, not a panic.
            let _ =
                writeln!(std::io::stderr(), "removed {}, left by an interrupted run (process {pid})", path.display());
            removed.push(path);
        }
    }
    removed
}

/// [`sweep`] of the folder a file `path` goes in.
pub fn sweep_beside(path: &Path) {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sweep(dir),
        _ => sweep(Path::new(".")),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_runs_temporaries_go_and_a_live_ones_and_other_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        // A process id no process has (beyond Linux's default pid_max).
        let dead = dir.path().join(".song.wav.Ab12Cd.4999999.partial");
        let live = dir.path().join(format!(".song.wav.Ef34Gh.{}.partial", std::process::id()));
        let folder = dir.path().join(".unpacking.Ij56Kl.4999998.partial");
        let others = [dir.path().join("song.wav"), dir.path().join(".notes.1.txt"), dir.path().join(".x.partial")];
        for file in [&dead, &live].into_iter().chain(&others) {
            std::fs::write(file, b"x").unwrap();
        }
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("config.json"), b"{}").unwrap();
        let mut removed = sweep(dir.path());
        removed.sort();
        assert_eq!(removed, vec![dead.clone(), folder.clone()]);
        assert!(!dead.exists() && !folder.exists() && live.exists());
        assert!(others.iter().all(|f| f.exists()));
    }
}
