//! Tests that need a home of their own (ALSA reads `~/.asoundrc`, the embedded model unpacks into
//! `~/.cache`). nextest runs each test in its own process; under plain `cargo test` they share one,
//! so the home is held for the whole test and set under a lock.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

static HOME: Mutex<()> = Mutex::new(());

/// Makes `dir` the home, with ALSA's `null` device as the default output, until the guard drops.
pub fn null_sound_home(dir: &Path) -> MutexGuard<'static, ()> {
    let guard = HOME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    std::fs::write(dir.join(".asoundrc"), "pcm.!default { type plug slave.pcm \"null\" }\n").unwrap();
    // SAFETY: every test that changes these holds the lock, and no other thread of this process
    // reads them meanwhile except the ones that test starts.
    unsafe {
        std::env::set_var("HOME", dir);
        std::env::remove_var("XDG_CACHE_HOME");
    }
    guard
}
