//! The Songloom user interface (egui). It talks to an engine only through requests and events,
//! so it also builds for the browser. The panels arrive with the desktop-app issue.
