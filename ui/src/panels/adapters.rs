//! `AdaptersPanel`: the LoRA adapters merged into the model's weights when it loads, each with its
//! scale. It edits the draft's `adapters`; the engine reads each one (and checks it against the
//! model) when a song is made, and records its checksum in the song's recipe. On a remote engine
//! the server's own adapters (`serve --lora`) apply, so there is nothing to choose here.

use super::{Panel, PanelContext};
use crate::contract::AdapterRecipe;

/// The range a scale can be dragged over (typed values are taken as they are).
const SCALE_RANGE: std::ops::RangeInclusive<f32> = -4.0..=4.0;

#[derive(Default)]
pub struct AdaptersPanel {
    /// The path being typed for the next adapter.
    new_path: String,
}

impl AdaptersPanel {
    /// One adapter's row: its name (the path on hover), its scale, and Remove; true when removed.
    fn adapter_ui(ui: &mut egui::Ui, adapter: &mut AdapterRecipe) -> bool {
        ui.horizontal(|ui| {
            ui.label(&adapter.name).on_hover_text(&adapter.path);
            let label = ui.label("Scale");
            ui.add(egui::DragValue::new(&mut adapter.scale).speed(0.01).range(SCALE_RANGE).max_decimals(3))
                .labelled_by(label.id)
                .on_hover_text("0 leaves the model as it is; 1 is the adapter as trained");
            ui.small_button("Remove").clicked()
        })
        .inner
    }
}

impl Panel for AdaptersPanel {
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        if ctx.remote {
            return;
        }
        let count = ctx.draft.adapters.len();
        let title = if count == 0 { "LoRA adapters".to_string() } else { format!("LoRA adapters ({count})") };
        egui::CollapsingHeader::new(title).id_salt("lora-adapters").show(ui, |ui| {
            let mut removed = None;
            for (i, adapter) in ctx.draft.adapters.iter_mut().enumerate() {
                if Self::adapter_ui(ui, adapter) {
                    removed = Some(i);
                }
            }
            if let Some(i) = removed {
                ctx.draft.adapters.remove(i);
            }
            ui.horizontal(|ui| {
                let label = ui.label("Adapter");
                let field = egui::TextEdit::singleline(&mut self.new_path)
                    .hint_text("PEFT folder or .safetensors file")
                    .desired_width(220.0);
                ui.add(field).labelled_by(label.id);
                let path = self.new_path.trim().to_string();
                if ui.add_enabled(!path.is_empty(), egui::Button::new("Add")).clicked() {
                    ctx.draft.adapters.push(AdapterRecipe {
                        name: file_name(&path),
                        path,
                        sha256: String::new(),
                        scale: 1.0,
                    });
                    self.new_path.clear();
                }
            });
            ui.small("Merged into the language model's, depth decoder's or DiT's weights when the model loads.");
        });
    }
}

/// The last part of a path, as the recipe names an adapter.
fn file_name(path: &str) -> String {
    let trimmed = path.trim_end_matches(['/', '\\']);
    trimmed.rsplit(['/', '\\']).next().unwrap_or(trimmed).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_adapter_is_named_by_its_file_or_folder() {
        assert_eq!(super::file_name("/loras/vinyl/"), "vinyl");
        assert_eq!(super::file_name("C:\\loras\\a.safetensors"), "a.safetensors");
        assert_eq!(super::file_name("b.safetensors"), "b.safetensors");
    }
}
