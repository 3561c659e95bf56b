//! Standard output that ends quietly when the reader goes away (`songloom model info | head`):
//! the first write to a closed pipe cancels what is running and marks the output closed, later
//! writes do nothing, and the process exits with the conventional 141 (128 + SIGPIPE) instead of
//! panicking.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use songloom_engine::pipeline::Cancel;

static CLOSED: AtomicBool = AtomicBool::new(false);
static ON_CLOSE: Mutex<Option<Cancel>> = Mutex::new(None);

/// Prints one line to standard output, like `println!`.
macro_rules! say {
    ($($arg:tt)*) => { $crate::output::line(format_args!($($arg)*)) };
}
pub(crate) use say;

pub fn line(text: std::fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(text).and_then(|()| out.write_all(b"\n"))
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        CLOSED.store(true, Ordering::Relaxed);
        if let Some(cancel) = ON_CLOSE.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            cancel.cancel();
        }
    }
}

/// Cancels `cancel` if the output closes (a song whose reader left stops, and leaves nothing).
pub fn cancel_on_close(cancel: &Cancel) {
    *ON_CLOSE.lock().unwrap_or_else(|p| p.into_inner()) = Some(cancel.clone());
}

/// Whether a write found the output closed.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// A bar of bytes on standard error with the speed and the time left (hidden where standard error
/// is not a terminal).
pub fn bytes_bar(total: u64) -> indicatif::ProgressBar {
    let style = indicatif::ProgressStyle::with_template(
        "[{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg:.dim}",
    )
    .expect("a valid template")
    .progress_chars("=> ");
    indicatif::ProgressBar::new(total).with_style(style)
}
