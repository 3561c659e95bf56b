//! The page's entry point: the window's app on the canvas `#songloom`.

use songloom_ui::app::SongloomApp;
use songloom_ui::contract::Recipe;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::remote::RemoteEngine;

struct WebApp {
    inner: SongloomApp<RemoteEngine>,
}

impl eframe::App for WebApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        egui::CentralPanel::default().show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| self.inner.ui(ui));
        });
        publish_landmarks(&self.inner);
    }
}

/// Where the fields a user starts with are on the page (CSS pixels), for the browser test, which
/// clicks and types there as a person would.
fn publish_landmarks(app: &SongloomApp<RemoteEngine>) {
    let landmarks = js_sys::Object::new();
    for (name, rect) in app.landmarks.all() {
        let r = js_sys::Array::of4(&rect.min.x.into(), &rect.min.y.into(), &rect.width().into(), &rect.height().into());
        let _ = js_sys::Reflect::set(&landmarks, &name.into(), &r);
    }
    if let Some(window) = web_sys::window() {
        let _ = js_sys::Reflect::set(&window, &"songloomLandmarks".into(), &landmarks);
    }
}

#[wasm_bindgen(start)]
pub fn start() {
    let canvas = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("songloom"))
        .and_then(|c| c.dyn_into::<web_sys::HtmlCanvasElement>().ok());
    let Some(canvas) = canvas else {
        web_sys::console::error_1(&"the page has no canvas #songloom to draw Songloom on".into());
        return;
    };
    wasm_bindgen_futures::spawn_local(async move {
        let started = eframe::WebRunner::new()
            .start(
                canvas,
                eframe::WebOptions::default(),
                Box::new(|cc| {
                    let engine = RemoteEngine::new();
                    engine.repaint_with(cc.egui_ctx.clone());
                    let draft = Recipe { duration_s: 10.0, ..Recipe::default() };
                    Ok(Box::new(WebApp { inner: SongloomApp::new(engine, draft) }))
                }),
            )
            .await;
        if let Err(e) = started {
            web_sys::console::error_1(&e);
        }
    });
}
