//! What the browser makes of the server's answers: the wire's bodies as the window's contract
//! types, and the window's recipe as the wire's request. Plain functions on every target, so a
//! test holds them against a real server's answers (app/tests/wire_agreement.rs).

use songloom_ui::contract::{DeviceStatus, EngineEvent, JobId, Recipe, SongEntry, Timings};
use songloom_wire::{DeviceProbe, Event, LibrarySong, ServedModel, SongCreated, SongLength, SongRequest};

/// The request that makes `recipe`'s song on the server (its device, precision, weights and model
/// are the server's).
pub fn song_request(recipe: &Recipe) -> SongRequest {
    SongRequest {
        description: recipe.description.clone(),
        lyrics: recipe.lyrics.clone(),
        instrumental: false,
        duration: Some(SongLength::Seconds(recipe.duration_s)),
        seed: Some(recipe.seed),
        steps: Some(recipe.steps),
        guidance: Some(recipe.guidance),
        precision: None,
        takes: None,
    }
}

/// The request that makes `takes` takes of `recipe` together (seeds `recipe.seed`, + 1, ...);
/// one take is [`song_request`]'s song.
pub fn takes_request(recipe: &Recipe, takes: usize) -> SongRequest {
    SongRequest { takes: (takes != 1).then_some(takes), ..song_request(recipe) }
}

/// The server's ids of the songs a request made, in order: every take's, or the one song's.
pub fn song_ids(created: &SongCreated) -> Vec<u64> {
    if created.takes.is_empty() { vec![created.id] } else { created.takes.clone() }
}

/// A backend of the server as the window lists it.
pub fn device_status(probe: &DeviceProbe) -> DeviceStatus {
    DeviceStatus { name: probe.name.clone(), available: probe.status(), advice: None }
}

/// A library song as the window lists it (the API gives no timings).
pub fn song_entry(song: LibrarySong) -> SongEntry {
    SongEntry {
        id: song.id,
        title: song.title,
        recipe: song.recipe,
        seconds: song.seconds,
        created_unix: song.created_unix,
        timings: Timings::default(),
        editable: song.not_editable.map_or(Ok(()), Err),
    }
}

/// The server's model in a line, for the window's model panel.
pub fn model_summary(model: &ServedModel) -> String {
    let which =
        if model.embedded { "the built-in model, Songloom Mini (instrumental, no vocals)" } else { "the model" };
    format!("on the server: {}; {which} ({}); {}", model.device, model.path, model.plan)
}

/// A song's event as the window's progress, for the events that are progress (the rest end the
/// song, or are the CLI's).
pub fn progress_event(job: JobId, event: &Event) -> Option<EngineEvent> {
    match event {
        Event::Stage { stage, done, total } => {
            Some(EngineEvent::Stage { job, stage: *stage, done: *done, total: *total })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use songloom_wire::SongState;

    #[test]
    fn takes_ask_the_server_for_that_many_songs_and_follow_each_id() {
        let recipe = Recipe { description: "x".into(), seed: 7, ..Recipe::default() };
        assert_eq!(takes_request(&recipe, 3), SongRequest { takes: Some(3), ..song_request(&recipe) });
        assert_eq!(takes_request(&recipe, 1), song_request(&recipe), "one take is a song as before");
        let body = serde_json::to_value(takes_request(&recipe, 3)).unwrap();
        assert_eq!((body["takes"].as_u64(), body["seed"].as_u64()), (Some(3), Some(7)));
        let created =
            |id, takes| SongCreated { id, state: SongState::Queued { place: Some(1) }, warnings: Vec::new(), takes };
        assert_eq!(song_ids(&created(4, vec![4, 5, 6])), [4, 5, 6]);
        assert_eq!(song_ids(&created(4, Vec::new())), [4]);
    }
}
