//! The desktop window: eframe (wgpu renderer) around the `ui` crate's `SongloomApp`, with the
//! in-process engine and the draft kept across restarts.

mod engine_host;
#[cfg(test)]
mod tests;

pub use engine_host::InProcessEngine;
use songloom_ui::app::{EVENT_REDRAW, SOFTWARE_REDRAW_SLOWDOWN, SongloomApp};
use songloom_ui::contract::Recipe;
use songloom_ui::state::Settings;

const DRAFT_KEY: &str = "draft";
const SETTINGS_KEY: &str = "settings";

struct DesktopApp {
    inner: SongloomApp<InProcessEngine>,
}

impl eframe::App for DesktopApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        egui::CentralPanel::default().show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| self.inner.ui(ui));
        });
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        persist(storage, &self.inner.draft, &self.inner.settings);
    }
}

/// Keeps the draft and the settings for the next start.
fn persist(storage: &mut dyn eframe::Storage, draft: &Recipe, settings: &Settings) {
    eframe::set_value(storage, DRAFT_KEY, draft);
    eframe::set_value(storage, SETTINGS_KEY, settings);
}

/// The draft and settings of the last session, or a first song's draft and default settings.
fn restore(storage: Option<&dyn eframe::Storage>) -> (Recipe, Settings) {
    let draft = storage.and_then(|s| eframe::get_value::<Recipe>(s, DRAFT_KEY)).unwrap_or_else(first_draft);
    let settings = storage.and_then(|s| eframe::get_value(s, SETTINGS_KEY)).unwrap_or_default();
    (draft, settings)
}

/// A first song for the embedded model, which starts selected: a description in the words it was
/// trained on, and no singing, which it cannot do.
fn first_draft() -> Recipe {
    Recipe {
        description: "a folk song played on piano with bass with drums in D major at 100 BPM".into(),
        lyrics: songloom_ui::lyrics::INSTRUMENTAL.into(),
        duration_s: 30.0,
        ..Recipe::default()
    }
}

/// Opens the window and runs until it is closed.
pub fn run() -> anyhow::Result<()> {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_inner_size([1280.0, 800.0])
            .with_min_inner_size([640.0, 480.0])
            .with_title("Songloom"),
        ..Default::default()
    };
    let shown = eframe::run_native(
        "Songloom",
        options,
        Box::new(|cc| {
            let (draft, settings) = restore(cc.storage);
            let ctx = cc.egui_ctx.clone();
            // Drawn in software (no GPU), every redraw takes the engine's cores.
            let software = cc
                .wgpu_render_state
                .as_ref()
                .is_some_and(|s| s.adapter.get_info().device_type == eframe::wgpu::DeviceType::Cpu);
            let slowdown = if software { SOFTWARE_REDRAW_SLOWDOWN } else { 1 };
            // At most one redraw per EVENT_REDRAW however fast events come: egui keeps the
            // soonest of the redraws asked for.
            let event_redraw = EVENT_REDRAW * slowdown;
            let engine = InProcessEngine::spawn(None, move || ctx.request_repaint_after(event_redraw));
            let mut inner = SongloomApp::new(engine, draft);
            inner.settings = settings;
            inner.redraw_slowdown = slowdown;
            Ok(Box::new(DesktopApp { inner }))
        }),
    )
    .map_err(|e| anyhow::anyhow!("the window could not open: {e}"));
    // A window closed at once leaves the engine's device probe running; it ends first.
    engine_host::wait_for_device_probe(std::time::Duration::from_secs(10));
    shown
}
