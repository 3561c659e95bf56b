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
