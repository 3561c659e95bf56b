//! What the model's licence asks a product to say: the model's name in the interface, and that
//! published audio is AI-generated.

use crate::Recipe;

/// The model's name as its licence asks it shown.
pub const MODEL_NAME: &str = "MiniMax-Music3";

/// The small model built into the binary.
pub const EMBEDDED_MODEL_NAME: &str = "Songloom Mini";

/// The lyrics an instrumental song is made with: the structure tag the model knows for music
/// without singing. The CLI's `--instrumental`, the window's checkbox and first draft, the API's
/// `instrumental` and the cloud route's `is_instrumental` all send the model this.
pub const INSTRUMENTAL_LYRICS: &str = "[instrumental]";

/// The name of the model a song is made with: the built-in one, or MiniMax-Music3.
pub fn model_name(embedded: bool) -> &'static str {
    if embedded { EMBEDDED_MODEL_NAME } else { MODEL_NAME }
}

/// The note every file Songloom writes carries beside its recipe (`recipe_json`, as the file's
/// comment holds it). "trainedAlgorithmicMedia" is IPTC's digital source type for media a trained
/// model made, the term provenance tools search for.
pub fn ai_generated_note(recipe_json: &str) -> String {
    let embedded = serde_json::from_str::<Recipe>(recipe_json).is_ok_and(|r| r.model.trim().is_empty());
    format!("AI-generated (trainedAlgorithmicMedia): made by the {} model with Songloom", model_name(embedded))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_names_the_model_of_the_recipe() {
        let embedded = serde_json::to_string(&Recipe::default()).unwrap();
        let real =
            serde_json::to_string(&Recipe { model: "/models/MiniMax-Music3".into(), ..Recipe::default() }).unwrap();
        assert!(ai_generated_note(&embedded).contains("Songloom Mini"));
        assert!(ai_generated_note(&real).contains("MiniMax-Music3"));
        assert!(ai_generated_note("not json").starts_with("AI-generated"));
    }
}
