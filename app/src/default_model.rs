//! The default model embedded in the binary: a tiny MiniMax-Music3 checkpoint in the real layout
//! with made-up weights. It makes sound, not music; it lets `songloom generate` run anywhere with
//! no download. Real songs need the real checkpoint (`--model DIR`).

use std::path::PathBuf;

use anyhow::{Context, Result};

mod files {
    include!(concat!(env!("OUT_DIR"), "/default_model_files.rs"));
}

/// A name that changes whenever the embedded files do.
fn fingerprint() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (path, bytes) in files::FILES {
        for b in path.bytes().chain(bytes.iter().copied()) {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

fn cache_root() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("songloom")
}

/// The embedded model as a directory, unpacked once into the user's cache (a temporary directory
/// renamed into place, so a half-written copy is never used).
pub fn path() -> Result<PathBuf> {
    // Threads of one process share the staging folder's name: one unpacks, the others wait.
    static UNPACKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = UNPACKING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let root = cache_root();
    let dir = root.join(format!("default-model-{}", fingerprint()));
    if dir.is_dir() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let staging = root.join(format!(".unpacking-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    for (rel, bytes) in files::FILES {
        let target = staging.join(rel);
        std::fs::create_dir_all(target.parent().expect("files sit in folders"))?;
        std::fs::write(&target, bytes).with_context(|| format!("writing {}", target.display()))?;
    }
    if let Err(e) = std::fs::rename(&staging, &dir) {
        let _ = std::fs::remove_dir_all(&staging);
        // Another process may have unpacked it meanwhile.
        if !dir.is_dir() {
            return Err(e).with_context(|| format!("unpacking the default model into {}", dir.display()));
        }
    }
    Ok(dir)
}
