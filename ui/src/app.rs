//! `SongloomApp`: the window's contents, laid out from the panels of [`crate::panels`]: on the
//! left what the song is (the built-in model's banner, compose, Generate with its Takes, Cancel,
//! the progress and queue, each take's row, the parameters, the model), on the right what there
//! is to hear (the player, one notice line, the library). It owns no thread, file or audio
//! device: everything goes through an [`Engine`].

use crate::closing::{self, CloseAnswer, Closing};
use crate::contract::{DeviceStatus, EditRequest, Engine, EngineEvent, JobId, MAX_TAKES, Recipe, Request, SongEntry};
use crate::edits::{Changed, edit_name, version_length_s};
use crate::panels::{
    AdaptersPanel, Command, ComposePanel, LibraryPanel, ModelPanel, NoticePanel, Panel, PanelContext, ParametersPanel,
    PlayerPanel, ProgressPanel, TakesPanel,
};
use crate::progress::Progress;
use crate::state::{Job, Landmarks, Notice, Queued, Settings, Take, Track};

pub struct SongloomApp<E: Engine> {
    engine: E,
    pub landmarks: Landmarks,
    /// The recipe being written; the shell persists it.
    pub draft: Recipe,
    pub settings: Settings,
    pub job: Option<Job>,
    /// Songs waiting their turn, in order.
    pub queue: Vec<Queued>,
    pub track: Option<Track>,
    /// The takes in their rows, while they are made and until each is kept or discarded, oldest
    /// first. The first take of a batch is also the [`job`](Self::job) and the track.
    pub takes: Vec<Take>,
    pub library: LibraryPanel,
    pub notice: Option<Notice>,
    /// A close of the window held while songs are being made, and what became of it.
    pub closing: Option<Closing>,
    compose: ComposePanel,
    progress: ProgressPanel,
    takes_panel: TakesPanel,
    parameters: ParametersPanel,
    model: ModelPanel,
    adapters: AdaptersPanel,
    player: PlayerPanel,
    notice_line: NoticePanel,
    next_job: JobId,
    library_requested: bool,
    /// How much less often than [`PLAYING_REDRAW`] and [`MAKING_REDRAW`] the window redraws by
    /// itself: more than 1 where it is drawn in software, on the cores that make the song.
    pub redraw_slowdown: u32,
    /// The song being made that starts playing by itself once the rest can play through (until
    /// then, or until the user plays or pauses).
    autoplay: Option<JobId>,
}

impl<E: Engine> SongloomApp<E> {
    pub fn new(engine: E, draft: Recipe) -> Self {
        SongloomApp {
            engine,
            landmarks: Landmarks::default(),
            draft,
            settings: Settings::default(),
            job: None,
            queue: Vec::new(),
            track: None,
            takes: Vec::new(),
            library: LibraryPanel::default(),
            notice: None,
            closing: None,
            compose: ComposePanel::default(),
            progress: ProgressPanel,
            takes_panel: TakesPanel,
            parameters: ParametersPanel::default(),
            model: ModelPanel::default(),
            adapters: AdaptersPanel::default(),
            player: PlayerPanel::default(),
            notice_line: NoticePanel,
            next_job: 1,
            library_requested: false,
            autoplay: None,
            redraw_slowdown: 1,
        }
    }

    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// The device choices the engine has offered (none until it has said).
    pub fn devices(&self) -> &[DeviceStatus] {
        &self.parameters.devices
    }

    /// Whether a song is being made now: the job's, or a take's.
    pub fn is_running(&self) -> bool {
        self.job.as_ref().is_some_and(|j| !j.progress.is_done()) || self.takes.iter().any(|t| !t.progress.is_done())
    }

    /// Whether closing the window now would lose songs: one being made or waiting its turn.
    pub fn work_at_risk(&self) -> bool {
        self.is_running() || !self.queue.is_empty()
    }

    /// Why Generate cannot make the draft now: the engine said its model cannot be used. A remote
    /// engine's server checks its own model, so only a local one holds Generate back.
    pub fn generate_blocked(&self) -> Option<String> {
        if self.engine.is_remote() {
            return None;
        }
        self.model.unusable(&self.draft.model).map(|why| format!("The model cannot be used: {why}"))
    }

    /// Starts a song from the draft, or queues it while another is made; with Takes above one,
    /// that many songs of it made together, seeds the draft's, the draft's + 1, ...
    pub fn generate(&mut self, now_s: f64) {
        if !self.parameters.draft_is_valid() || self.generate_blocked().is_some() {
            return;
        }
        if !self.settings.keep_seed {
            self.draft.seed = fresh_seed(now_s, self.next_job);
        }
        let title = self.draft.description.clone();
        let id = self.new_job_id();
        let mut job = Queued { id, title, duration_s: self.draft.duration_s, changed: None, takes: Vec::new() };
        let takes = self.settings.takes.clamp(1, MAX_TAKES);
        if takes == 1 {
            return self.start_or_queue(job, Request::Generate { job: id, recipe: self.draft.clone() }, now_s);
        }
        let jobs: Vec<JobId> = std::iter::once(id).chain((1..takes).map(|_| self.new_job_id())).collect();
        job.takes = jobs
            .iter()
            .enumerate()
            .map(|(k, &job)| Take {
                job,
                number: k + 1,
                seed: self.draft.seed.wrapping_add(k as u64),
                duration_s: self.draft.duration_s,
                progress: Progress::new(now_s),
                song: None,
            })
            .collect();
        self.start_or_queue(job, Request::Takes { jobs, recipe: self.draft.clone() }, now_s);
    }

    /// Makes a new version of library song `song` by `edit` (queued while another song is made);
    /// it plays from where it changes once that can play through.
    pub fn edit(&mut self, song: &SongEntry, edit: EditRequest, now_s: f64) {
        let id = self.new_job_id();
        let job = Queued {
            id,
            title: format!("{} ({})", song.title, edit_name(&edit.edit)),
            duration_s: version_length_s(&edit.edit, song),
            changed: Some(Changed::expected(&edit.edit, song)),
            takes: Vec::new(),
        };
        self.start_or_queue(job, Request::Edit { job: id, song: song.id, edit }, now_s);
    }

    fn new_job_id(&mut self) -> JobId {
        self.next_job += 1;
        self.next_job - 1
    }

    /// Sends `request`, which starts `job`: the one being made now, or one waiting its turn.
    fn start_or_queue(&mut self, job: Queued, request: Request, now_s: f64) {
        if self.is_running() || !self.queue.is_empty() {
            self.queue.push(job);
        } else {
            self.begin(job, now_s);
        }
        self.engine.send(request);
    }

    /// `job` is the one being made now: its progress and its track (the first take's, of takes),
    /// and each take's row.
    fn begin(&mut self, job: Queued, now_s: f64) {
        let Queued { id, title, duration_s, changed, takes } = job;
        self.takes.extend(takes.into_iter().map(|take| Take { progress: Progress::new(now_s), ..take }));
        let progress = changed.map_or(Progress::new(now_s), |changed| Progress::of_version(now_s, changed));
        self.job = Some(Job { id, progress, duration_s });
        self.autoplay = Some(id);
        self.track = Some(Track { title, job: Some(id), expected_s: Some(duration_s), changed, ..Track::default() });
    }

    /// Takes a waiting song (or takes) out of the queue; the engine never starts it.
    pub fn unqueue(&mut self, id: JobId) {
        let Some(at) = self.queue.iter().position(|q| q.id == id) else {
            return self.engine.send(Request::Cancel { job: id });
        };
        let waiting = self.queue.remove(at);
        if waiting.takes.is_empty() {
            self.engine.send(Request::Cancel { job: id });
        }
        for take in waiting.takes {
            self.engine.send(Request::Cancel { job: take.job });
        }
    }

    /// Cancels the song being made and every song waiting: the engine keeps nothing of them.
    pub fn discard_all(&mut self) {
        for id in self.queue.iter().map(|q| q.id).collect::<Vec<_>>() {
            self.unqueue(id);
        }
        self.cancel();
    }

    /// Cancels the song being made: the job, and every take still being made.
    pub fn cancel(&mut self) {
        let job = self.job.as_ref().filter(|j| !j.progress.is_done()).map(|j| j.id);
        let takes = self.takes.iter().filter(|t| !t.progress.is_done() && Some(t.job) != job).map(|t| t.job);
        for id in job.into_iter().chain(takes).collect::<Vec<_>>() {
            self.engine.send(Request::Cancel { job: id });
        }
    }

    /// Cancels take `job` alone; the others go on.
    pub fn cancel_take(&mut self, job: JobId) {
        if self.takes.iter().any(|t| t.job == job && !t.progress.is_done()) {
            self.engine.send(Request::Cancel { job });
        }
    }

    /// Take `job` is done with: its row goes, its song (if it was made) stays in the library.
    pub fn keep_take(&mut self, job: JobId) {
        self.takes.retain(|t| t.job != job || !t.progress.is_done());
    }

    /// Take `job` is not wanted: its row goes and its song is deleted from the library, with an
    /// Undo in the library's row as its Delete gives.
    pub fn discard_take(&mut self, job: JobId, now_s: f64) {
        let Some(at) = self.takes.iter().position(|t| t.job == job && t.progress.is_done()) else { return };
        let take = self.takes.remove(at);
        if let Some(song) = take.song
            && let Some(earlier) = self.library.delete_with_undo(&song, now_s)
        {
            self.engine.send(Request::DeleteSong { id: earlier });
        }
    }

    /// While the song being made is held: the seconds until the rest can play through (none
    /// while there is no rate to tell).
    pub fn pending_start(&self, now_s: f64) -> Option<Option<f64>> {
        let id = self.autoplay?;
        let job = self.job.as_ref().filter(|j| j.id == id && j.progress.error.is_none())?;
        Some(job.progress.playback_wait_s(job.duration_s, now_s))
    }

    /// Starts the song being made once the rest can play through at the rate it is made; a user
    /// who played, paused or chose another song first has taken over, as has a player already
    /// playing this song's audio. (Another song still playing when this one starts is the
    /// engine's to stop: it holds the new one.)
    fn start_when_it_can_play_through(&mut self, playback: &crate::contract::PlaybackState, now_s: f64) {
        if self.autoplay.is_none() {
            return;
        }
        match self.pending_start(now_s) {
            None => self.autoplay = None,
            Some(_) if playback.unavailable.is_some() => self.autoplay = None,
            // The player plays this song's audio already (started another way): nothing to hold.
            Some(_) if playback.playing && playback.frames > 0 && playback.frames == self.track_frames() => {
                self.autoplay = None
            }
            Some(Some(wait_s)) if wait_s <= 0.0 => {
                self.autoplay = None;
                self.engine.send(Request::Play);
            }
            Some(_) => {}
        }
    }

    /// Stereo frames of the track in the player panel.
    fn track_frames(&self) -> usize {
        self.track.as_ref().map_or(0, |t| t.audio.len() / 2)
    }

    /// Takes the engine's events.
    pub fn pump(&mut self, now_s: f64) {
        for event in self.engine.poll() {
            match event {
                EngineEvent::Library { songs } => self.library.songs = songs,
                EngineEvent::Loaded { song, samples, sample_rate } => {
                    self.track = Some(Track {
                        title: song.title.clone(),
                        audio: samples,
                        sample_rate,
                        job: None,
                        changed: song.recipe.edit.as_deref().map(Changed::of),
                        song: Some(song),
                        ..Track::default()
                    });
                }
                EngineEvent::Devices { devices } => self.parameters.devices = devices,
                event @ (EngineEvent::ModelInfo { .. }
                | EngineEvent::ModelFolderChosen { .. }
                | EngineEvent::Folder { .. }
                | EngineEvent::Models { .. }
                | EngineEvent::Download { .. }
                | EngineEvent::DownloadEnded { .. }) => {
                    self.model.apply(&event);
                    match event {
                        EngineEvent::DownloadEnded { result } => self.download_ended(result, now_s),
                        EngineEvent::ModelFolderChosen { path } => self.draft.model = path,
                        _ => {}
                    }
                }
                EngineEvent::Notice { message } => self.notice = Some(Notice::info(message, now_s)),
                EngineEvent::Problem { message } => self.notice = Some(Notice::problem(message, now_s)),
                event => self.job_event(event, now_s),
            }
        }
    }

    /// A download ended: the model it fetched becomes the Model; either way the notice line says
    /// what happened and the models folder is listed again.
    fn download_ended(&mut self, result: Result<String, String>, now_s: f64) {
        self.notice = Some(match result {
            Ok(path) => {
                let notice = Notice::info(format!("The model is in {path}; it is now the Model"), now_s);
                self.draft.model = path;
                notice
            }
            Err(why) => Notice::problem(format!("The download stopped: {why}"), now_s),
        });
        self.engine.send(Request::ListModels);
    }

    fn job_event(&mut self, event: EngineEvent, now_s: f64) {
        // A queued song's first event (any take's, of takes): it is the one being made now.
        let of = |q: &Queued| Some(q.id) == event.job() || q.takes.iter().any(|t| Some(t.job) == event.job());
        if let Some(at) = self.queue.iter().position(of) {
            let next = self.queue.remove(at);
            self.begin(next, now_s);
        }
        if let Some(take) = self.takes.iter_mut().find(|t| Some(t.job) == event.job()) {
            take.progress.apply(&event, now_s);
            if let EngineEvent::Saved { song, .. } = &event {
                take.song = Some(song.clone());
            }
        }
        let Some(job) = self.job.as_mut().filter(|j| Some(j.id) == event.job()) else { return };
        job.progress.apply(&event, now_s);
        let Some(track) = self.track.as_mut().filter(|t| t.job == Some(job.id)) else { return };
        // A version held until it can play through waits where it changes, so the player starts
        // there, the kept part before it there to seek back to; a user who played or paused has
        // taken over.
        let held = self.autoplay == Some(job.id);
        let change_frame = |track: &Track| track.changed.map(|c| c.frames(track.sample_rate).start);
        match event {
            EngineEvent::Audio { first_sample, samples, sample_rate, .. } => {
                // A local engine sends a song's audio a part (an acoustic window) at a time; a
                // remote one as the network delivers it, which marks nothing.
                if first_sample > 0 && !self.engine.is_remote() {
                    track.sections.push(first_sample);
                }
                track.audio.extend_from_slice(&samples);
                track.sample_rate = sample_rate;
                let arrived = first_sample..first_sample + samples.len() / 2;
                if let Some(frame) = change_frame(track).filter(|f| held && arrived.contains(f)) {
                    self.engine.send(Request::Seek { frame });
                }
            }
            EngineEvent::Saved { song, .. } => {
                // The engine's record of the change replaces the window's expectation.
                let expected = change_frame(track);
                if let Some(edit) = &song.recipe.edit {
                    track.changed = Some(Changed::of(edit));
                }
                track.title = song.title.clone();
                track.song = Some(song);
                if let Some(frame) = change_frame(track).filter(|f| held && Some(*f) != expected) {
                    self.engine.send(Request::Seek { frame });
                }
            }
            EngineEvent::Finished { .. } | EngineEvent::Failed { .. } | EngineEvent::Cancelled { .. } => {
                track.job = None;
                track.expected_s = None;
            }
            _ => {}
        }
    }

    /// Loads a library song's recipe into the composer; a draft with text of its own that would
    /// be lost is asked about first.
    pub fn use_recipe(&mut self, song: &SongEntry) {
        self.library.use_recipe(song, &mut self.draft, &mut self.settings.keep_seed);
    }

    /// Makes a library song's recipe again with a new seed, leaving the draft as it is (queued
    /// while another song is made).
    pub fn variation(&mut self, song: &SongEntry, now_s: f64) {
        let recipe = Recipe { seed: variation_seed(song.recipe.seed, self.next_job), ..song.recipe.clone() };
        let title = format!("{} (variation, seed {})", song.title, recipe.seed);
        let id = self.new_job_id();
        let job = Queued { id, title, duration_s: recipe.duration_s, changed: None, takes: Vec::new() };
        self.start_or_queue(job, Request::Generate { job: id, recipe }, now_s);
    }

    /// Carries out what a panel asked for.
    fn route(&mut self, command: Command, now_s: f64) {
        match command {
            Command::Send(request) => {
                if matches!(request, Request::TogglePlayback | Request::PlaySong { .. }) {
                    self.autoplay = None;
                }
                self.engine.send(request)
            }
            Command::Generate => self.generate(now_s),
            Command::Cancel => self.cancel(),
            Command::CancelTake(job) => self.cancel_take(job),
            Command::KeepTake(job) => self.keep_take(job),
            Command::DiscardTake(job) => self.discard_take(job, now_s),
            Command::Unqueue(id) => self.unqueue(id),
            Command::Variation(song) => self.variation(&song, now_s),
            Command::Edit { song, edit } => self.edit(&song, edit, now_s),
            Command::DismissNotice => self.notice = None,
        }
    }

    /// One frame: the engine's events, the keys, the panels, then what they asked for.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let now = ui.input(|i| i.time);
        if !self.library_requested {
            self.library_requested = true;
            self.engine.send(Request::ListSongs { search: String::new() });
            self.engine.send(Request::SetVolume { volume: self.settings.volume });
            if !self.engine.is_remote() {
                self.engine.send(Request::ListModels);
            }
        }
        // A pass drawn again after a panel's command takes no new events: one poll a frame.
        if ui.ctx().current_pass_index() == 0 {
            self.pump(now);
        }
        if ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::Enter)) {
            self.generate(now);
        }
        if !ui.ctx().egui_wants_keyboard_input()
            && self.closing != Some(Closing::Asking)
            && ui.input_mut(|i| i.consume_key(egui::Modifiers::NONE, egui::Key::Space))
        {
            self.route(Command::Send(Request::TogglePlayback), now);
        }
        self.close_ui(ui, now);
        let playback = self.engine.playback();
        self.start_when_it_can_play_through(&playback, now);
        let pending_start = self.pending_start(now);
        let running = self.is_running();
        let generate_blocked = self.generate_blocked();
        let mut ctx = PanelContext {
            draft: &mut self.draft,
            settings: &mut self.settings,
            landmarks: &mut self.landmarks,
            job: self.job.as_ref(),
            queue: &self.queue,
            takes: &self.takes,
            track: self.track.as_ref(),
            playback: &playback,
            notice: self.notice.as_ref(),
            running,
            draft_is_valid: self.parameters.draft_is_valid(),
            generate_blocked,
            remote: self.engine.is_remote(),
            now_s: now,
            utc_offset_s: self.engine.utc_offset_s(self.library.songs.first().map_or(0, |s| s.created_unix)),
            pending_start,
            commands: Vec::new(),
        };
        // What the song is: the banner, the composer, Generate and the progress, the takes' rows,
        // the parameters, the model and its adapters.
        let mut compose_column = |ui: &mut egui::Ui, ctx: &mut PanelContext<'_>| {
            ui.horizontal_wrapped(|ui| {
                ui.heading("Songloom");
                if let Some(name) = self.model.name_in_use(&ctx.draft.model, ctx.remote) {
                    ui.label(format!("Model: {name}"));
                }
            });
            self.model.banner_ui(ui, ctx);
            self.compose.ui(ui, ctx);
            self.progress.ui(ui, ctx);
            self.takes_panel.ui(ui, ctx);
            ui.separator();
            self.parameters.ui(ui, ctx);
            self.model.ui(ui, ctx);
            self.adapters.ui(ui, ctx);
        };
        // What there is to hear: the player, a notice line, the library.
        let mut listen_column = |ui: &mut egui::Ui, ctx: &mut PanelContext<'_>| {
            self.player.ui(ui, ctx);
            self.notice_line.ui(ui, ctx);
            ui.separator();
            self.library.ui(ui, ctx);
        };
        // Two columns from 720 points on (compose on the left, listen on the right), so at 800x600
        // Generate and the player are both in view; one scrolling column below that.
        if ui.available_width() >= 720.0 {
            // Columns lay out justified, which spreads a wrapped paragraph's words apart.
            let unjustified = egui::Layout::top_down(egui::Align::Min);
            ui.columns(2, |columns| {
                egui::ScrollArea::vertical().id_salt("compose").show(&mut columns[0], |ui| {
                    ui.with_layout(unjustified, |ui| compose_column(ui, &mut ctx));
                });
                columns[1].with_layout(unjustified, |ui| listen_column(ui, &mut ctx));
            });
        } else {
            egui::ScrollArea::vertical().id_salt("window").show(ui, |ui| {
                compose_column(ui, &mut ctx);
                ui.separator();
                listen_column(ui, &mut ctx);
            });
        }
        // A command that changes the window's state (a song started or queued, one taken out of
        // the queue) shows in this frame: the panels drawn before it are drawn again.
        if ctx.commands.iter().any(|command| !matches!(command, Command::Send(_))) {
            ui.ctx().request_discard("a panel's command changed what the window shows");
        }
        for command in ctx.commands {
            self.route(command, now);
        }
        // Between events and input, the window redraws only to move what moves by itself: the
        // playhead and the level while playing, the elapsed time and the time left while a song
        // is made. Each redraw costs the engine CPU time on a machine that draws in software.
        if playback.playing || playback.level > 0.0 {
            ui.ctx().request_repaint_after(PLAYING_REDRAW * self.redraw_slowdown);
        } else if self.is_running() || self.autoplay.is_some() {
            ui.ctx().request_repaint_after(MAKING_REDRAW * self.redraw_slowdown);
        }
        if let Some(left) = self.library.undo_left_s(now) {
            ui.ctx().request_repaint_after(std::time::Duration::from_secs_f64(left.max(0.0)));
        }
        if let Some(notice) = &self.notice {
            let left = notice.left_s(now);
            if left > 0.0 && left.is_finite() {
                ui.ctx().request_repaint_after(std::time::Duration::from_secs_f64(left));
            }
        }
    }
}

impl<E: Engine> SongloomApp<E> {
    /// A close of the window: let through when nothing would be lost; otherwise held, the user
    /// asked, and carried out as answered (the window closes itself once the songs are done or
    /// their cancel confirmed).
    fn close_ui(&mut self, ui: &mut egui::Ui, now: f64) {
        let ctx = ui.ctx().clone();
        if ctx.input(|i| i.viewport().close_requested()) && self.closing != Some(Closing::Ready) {
            if self.work_at_risk() {
                ctx.send_viewport_cmd(egui::ViewportCommand::CancelClose);
                if !matches!(self.closing, Some(Closing::Discarding { .. })) {
                    self.closing = Some(Closing::Asking);
                }
            } else {
                self.closing = Some(Closing::Ready);
                self.delete_for_good();
            }
        }
        let close_now = match self.closing {
            Some(Closing::Asking) if self.work_at_risk() => {
                let title = self.track.as_ref().filter(|t| t.job.is_some()).map(|t| t.title.as_str());
                match closing::ask_ui(&ctx, title, self.queue.len()) {
                    Some(CloseAnswer::WaitForSongs) => self.closing = Some(Closing::WhenDone),
                    Some(CloseAnswer::Discard) => {
                        self.discard_all();
                        self.closing = Some(Closing::Discarding { since_s: now });
                    }
                    Some(CloseAnswer::KeepWorking) => self.closing = None,
                    None => {}
                }
                false
            }
            Some(Closing::Asking | Closing::WhenDone) => !self.work_at_risk(),
            Some(Closing::Discarding { since_s }) => {
                ctx.request_repaint_after(std::time::Duration::from_millis(200));
                !self.work_at_risk() || now - since_s > closing::DISCARD_WAIT_S
            }
            Some(Closing::Ready) | None => false,
        };
        if self.closing == Some(Closing::WhenDone) {
            ui.horizontal(|ui| {
                ui.label("The window closes when the songs are done.");
                if ui.button("Stay open").clicked() {
                    self.closing = None;
                }
            });
        }
        if close_now {
            self.closing = Some(Closing::Ready);
            self.delete_for_good();
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    /// The window closes: a deleted song waiting for its Undo is deleted now.
    fn delete_for_good(&mut self) {
        if let Some(id) = self.library.take_pending_delete() {
            self.engine.send(Request::DeleteSong { id });
        }
    }
}

/// How often the window redraws while a song plays (the playhead, the level meter).
pub const PLAYING_REDRAW: std::time::Duration = std::time::Duration::from_millis(100);
/// How often the window redraws while a song is made and nothing plays (the clocks).
pub const MAKING_REDRAW: std::time::Duration = std::time::Duration::from_millis(500);
/// The soonest the window redraws after an engine event: events (an AR frame each) come far more
/// often than a person can read them.
pub const EVENT_REDRAW: std::time::Duration = std::time::Duration::from_millis(500);
/// How much less often a window drawn in software (no GPU: every frame rasterized on the cores
/// that make the song) redraws by itself: a 1280x800 frame took about 100 ms of lavapipe's time.
pub const SOFTWARE_REDRAW_SLOWDOWN: u32 = 4;

/// A new seed drawn at `now_s`, mixed with `salt` (the job it is for, or the seed it replaces), so
/// each press and each session draws another.
pub(crate) fn fresh_seed(now_s: f64, salt: u64) -> u64 {
    let mut h = now_s.to_bits() ^ salt.wrapping_mul(0xd1b5_4a32_d192_ed03);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    // Six digits at most, as a person would type a seed.
    (h ^ (h >> 31)) % 1_000_000
}

/// A seed for a variation of a song made with `seed`: different from it and from the other
/// variations of this session (`job` counts them).
fn variation_seed(seed: u64, job: JobId) -> u64 {
    let mut h = seed ^ job.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    // Six digits at most, as a person would type a seed.
    let h = (h ^ (h >> 27)) % 1_000_000;
    if h == seed { (h + 1) % 1_000_000 } else { h }
}
