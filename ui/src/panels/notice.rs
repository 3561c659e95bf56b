//! `NoticePanel`: one line under the player for the last notice or problem outside a job: a notice
//! goes after a while, a problem stays until dismissed.

use egui::Color32;

use super::{Command, Panel, PanelContext};

/// The notice line; the notice is the app's.
#[derive(Default)]
pub struct NoticePanel;

impl Panel for NoticePanel {
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        // One line always, so a notice never moves what is below it.
        match ctx.notice.filter(|notice| notice.left_s(ctx.now_s) > 0.0) {
            Some(notice) if notice.problem => {
                // A problem stays until it is read and dismissed.
                ui.horizontal_wrapped(|ui| {
                    ui.colored_label(Color32::LIGHT_RED, &notice.message);
                    if ui.small_button("Dismiss").clicked() {
                        ctx.send(Command::DismissNotice);
                    }
                });
            }
            Some(notice) => {
                ui.label(&notice.message);
            }
            None => {
                ui.label(" ");
            }
        }
    }
}
