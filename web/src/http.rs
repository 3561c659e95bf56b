//! `fetch` from Rust: requests and answers of the wire's types, whole bodies, and bodies read as
//! they arrive.

use js_sys::{Reflect, Uint8Array};
use serde::Serialize;
use serde::de::DeserializeOwned;
use songloom_wire::ErrorBody;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{ReadableStreamDefaultReader, RequestInit, Response};

/// What a request gave: the status and the body, or why it could not be made.
pub type Answer<T> = Result<(u16, T), String>;

fn js_error(e: JsValue) -> String {
    e.as_string()
        .or_else(|| Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string()))
        .unwrap_or_else(|| format!("{e:?}"))
}

async fn respond(method: &str, url: &str, body: Option<&str>) -> Result<Response, String> {
    let window = web_sys::window().ok_or("no window")?;
    let init = RequestInit::new();
    init.set_method(method);
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(body));
        let headers = js_sys::Object::new();
        Reflect::set(&headers, &"content-type".into(), &"application/json".into()).map_err(js_error)?;
        init.set_headers(&headers);
    }
    let response = JsFuture::from(window.fetch_with_str_and_init(url, &init))
        .await
        .map_err(|e| format!("the server could not be reached: {}", js_error(e)))?;
    response.dyn_into::<Response>().map_err(js_error)
}

/// A request with `body` (a wire type) or none; a successful answer read as `T`, any other as its
/// error line.
pub async fn call<T: DeserializeOwned>(method: &str, url: &str, body: Option<&impl Serialize>) -> Result<T, String> {
    let body = body.map(|b| serde_json::to_string(b).map_err(|e| e.to_string())).transpose()?;
    let response = respond(method, url, body.as_deref()).await?;
    let text = JsFuture::from(response.text().map_err(js_error)?).await.map_err(js_error)?;
    let text = text.as_string().unwrap_or_default();
    let status = response.status();
    if (200..300).contains(&status) {
        serde_json::from_str(&text).map_err(|e| format!("the server's answer to {url} was not understood: {e}"))
    } else {
        Err(serde_json::from_str::<ErrorBody>(&text)
            .map(|body| body.error)
            .unwrap_or_else(|_| format!("the server answered {status}")))
    }
}

/// A request without a body.
pub async fn request<T: DeserializeOwned>(method: &str, url: &str) -> Result<T, String> {
    call(method, url, None::<&()>).await
}

/// A whole body as bytes.
pub async fn bytes(url: &str) -> Answer<Vec<u8>> {
    let response = respond("GET", url, None).await?;
    let buffer = JsFuture::from(response.array_buffer().map_err(js_error)?).await.map_err(js_error)?;
    Ok((response.status(), Uint8Array::new(&buffer).to_vec()))
}

/// Reads a body as it arrives, handing each piece to `piece`; returns the status once it ends.
pub async fn stream(url: &str, mut piece: impl FnMut(&[u8])) -> Result<u16, String> {
    let response = respond("GET", url, None).await?;
    let status = response.status();
    let Some(body) = response.body() else { return Ok(status) };
    let reader: ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    loop {
        let chunk = JsFuture::from(reader.read()).await.map_err(js_error)?;
        if Reflect::get(&chunk, &"done".into()).map_err(js_error)?.as_bool().unwrap_or(true) {
            return Ok(status);
        }
        let value = Reflect::get(&chunk, &"value".into()).map_err(js_error)?;
        piece(&Uint8Array::new(&value).to_vec());
    }
}
