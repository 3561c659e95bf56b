//! `NoticePanel`: one line under the player for the last notice or problem outside a job, which
//! goes after a while.

use egui::Color32;

use super::{Panel, PanelContext};

/// The notice line; the notice is the app's.
#[derive(Default)]
pub struct NoticePanel;

impl Panel for NoticePanel {
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        // One line always, so a notice never moves what is below it.
        match ctx.notice.filter(|notice| notice.left_s(ctx.now_s) > 0.0) {
            Some(notice) => {
                let color = if notice.problem { Color32::LIGHT_RED } else { ui.visuals().text_color() };
                ui.colored_label(color, &notice.message);
            }
            None => {
                ui.label(" ");
            }
        }
    }
}
