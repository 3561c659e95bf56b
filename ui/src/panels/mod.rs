//! The window's panels, each a type with its own state and a `ui` function; the app lays them
//! out and routes what they ask for to the engine.

pub mod compose;
pub mod library;
pub mod model;
pub mod parameters;
pub mod player;
pub mod progress;

pub use compose::ComposePanel;
pub use library::LibraryPanel;
pub use model::ModelPanel;
pub use parameters::ParametersPanel;
pub use player::PlayerPanel;
pub use progress::ProgressPanel;

/// A drop-down of `options` for `value`, named by the label `label`.
pub(crate) fn choice_ui<T: PartialEq + Clone>(
    ui: &mut egui::Ui,
    label: egui::Id,
    id: &str,
    value: &mut T,
    options: &[(T, &str)],
) -> egui::Response {
    let selected = options.iter().find(|(v, _)| v == value).map_or("", |(_, name)| *name);
    egui::ComboBox::from_id_salt(id)
        .selected_text(selected)
        .show_ui(ui, |ui| {
            for (option, name) in options {
                ui.selectable_value(value, option.clone(), *name);
            }
        })
        .response
        .labelled_by(label)
}
