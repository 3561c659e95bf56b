//! Closing the window while songs are being made: the close is held and the user asked whether to
//! wait for the songs, discard them, or keep working. A discarded song's cancel is waited for (at
//! most [`DISCARD_WAIT_S`]), so the engine removes its temporary file before the process ends.

/// The longest a close waits for the engine to confirm a discarded song's cancel.
pub const DISCARD_WAIT_S: f64 = 10.0;

/// Where a close of the window stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Closing {
    /// The close is held; the user is asked what to do with the songs in progress.
    Asking,
    /// The window closes once the song being made and those waiting are done.
    WhenDone,
    /// The songs were cancelled at `since_s`; the window closes once the engine confirms it.
    Discarding { since_s: f64 },
    /// Nothing is left to lose: the next close request goes through.
    Ready,
}

/// What the user answered when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseAnswer {
    WaitForSongs,
    Discard,
    KeepWorking,
}

/// The question, as a modal over the window: `title` is the song being made, `waiting` how many
/// wait their turn. Returns the answer once given.
pub fn ask_ui(ctx: &egui::Context, title: Option<&str>, waiting: usize) -> Option<CloseAnswer> {
    let mut answer = None;
    let modal = egui::Modal::new(egui::Id::unique("close-with-songs")).show(ctx, |ui| {
        ui.set_max_width(420.0);
        ui.heading("Songs are still being made");
        let making = title.map(|t| format!("\u{201c}{t}\u{201d} is being made")).unwrap_or_default();
        let queued = match waiting {
            0 => String::new(),
            1 => "1 more song waits its turn".into(),
            n => format!("{n} more songs wait their turn"),
        };
        let what = [making, queued].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("; ");
        ui.label(format!("{what}. Quitting now discards them: nothing of them is kept."));
        ui.add_space(8.0);
        ui.horizontal(|ui| {
            if ui.button("Quit when done").clicked() {
                answer = Some(CloseAnswer::WaitForSongs);
            }
            if ui.button("Discard and quit").clicked() {
                answer = Some(CloseAnswer::Discard);
            }
            if ui.button("Keep working").clicked() {
                answer = Some(CloseAnswer::KeepWorking);
            }
        });
    });
    if answer.is_none() && modal.should_close() {
        // Escape or a click beside the question: as if nothing was asked.
        answer = Some(CloseAnswer::KeepWorking);
    }
    answer
}
