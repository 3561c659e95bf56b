//! The default model embedded in the binary: Songloom Mini (`models/songloom-mini`, its model card
//! beside it), a small MiniMax-Music3 in the real layout that the project trained on synthesized
//! public-domain scores. It makes instrumental music, no singing; it lets `songloom generate` run
//! anywhere with no download. Songs with vocals need the real checkpoint (`--model DIR`).
//! SONGLOOM_MODEL, where set, names another folder to use by default (the tests name the tiny
//! test model with it).

use std::path::PathBuf;

use anyhow::{Context, Result};

mod files {
    include!(concat!(env!("OUT_DIR"), "/default_model_files.rs"));
}

/// A name that changes whenever the embedded files do.
fn fingerprint() -> String {
    let bytes = files::FILES.iter().flat_map(|(path, bytes)| path.bytes().chain(bytes.iter().copied()));
    format!("{:016x}", songloom_engine::hash::fnv1a(bytes))
}

/// The user's cache directory's `songloom` folder (`~/.cache/songloom` on Linux).
fn cache_root() -> PathBuf {
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("songloom")
}

/// The default model's directory: the folder SONGLOOM_MODEL names, else the embedded model.
pub fn path() -> Result<PathBuf> {
    match std::env::var_os("SONGLOOM_MODEL") {
        Some(dir) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        _ => unpacked(),
    }
}

/// The embedded model as a directory, unpacked once into the user's cache (a temporary directory
/// renamed into place, so a half-written copy is never used).
fn unpacked() -> Result<PathBuf> {
    // Threads of one process share the staging folder's name: one unpacks, the others wait.
    static UNPACKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = UNPACKING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let root = cache_root();
    let dir = root.join(format!("default-model-{}", fingerprint()));
    if dir.is_dir() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    // Removed on every path but the successful rename.
    crate::stale::sweep(&root);
    let (prefix, suffix) = songloom_engine::partial::affixes("unpacking");
    let staging = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(&suffix)
        .tempdir_in(&root)
        .with_context(|| format!("creating a folder in {}", root.display()))?;
    for (rel, bytes) in files::FILES {
        let target = staging.path().join(rel);
        let parent = target.parent().expect("files sit in folders");
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        std::fs::write(&target, bytes).with_context(|| format!("writing {}", target.display()))?;
    }
    match std::fs::rename(staging.path(), &dir) {
        // The folder lives on under its new name.
        Ok(()) => drop(staging.keep()),
        // Another process may have unpacked it meanwhile.
        Err(_) if dir.is_dir() => {}
        Err(e) => return Err(e).with_context(|| format!("unpacking the default model into {}", dir.display())),
    }
    Ok(dir)
}
