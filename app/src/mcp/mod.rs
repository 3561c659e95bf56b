//! `songloom mcp`: the engine and the library as Model Context Protocol tools, for agents. JSON-RPC
//! 2.0 over stdio, one message a line (the protocol's stdio transport); standard output carries
//! nothing else. Written here rather than through an SDK: the protocol's part Songloom needs is
//! the handshake, `tools/list`, `tools/call`, progress and cancellation, and an SDK would bring a
//! schema generator and its macros into every build.
//!
//! Songs are made one at a time on a worker thread, so the client can list the library, ping or
//! cancel while one is made; the model loads with the first song. A closed input or a signal
//! cancels what is waiting or running (a cancelled song leaves no file) and ends the server.

mod protocol;
pub mod tools;

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};

use anyhow::Result;
use clap::Args;
use serde_json::{Value, json};
use songloom_engine::pipeline::Cancel;

use crate::engine_args::{AdapterArgs, EngineArgs, ModelArg};
use protocol::{Incoming, RpcError};
use tools::{SongAsk, Tools};

#[derive(Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub model: ModelArg,
    #[command(flatten)]
    pub adapters: AdapterArgs,
    /// The library the songs are kept in; the user's data directory without it.
    #[arg(long)]
    pub library: Option<PathBuf>,
}

/// The protocol versions this server speaks, newest first.
const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// Where answers and notifications go: standard output, a whole line at a time.
#[derive(Clone)]
pub struct Outbox(Arc<Mutex<std::io::Stdout>>);

impl Outbox {
    fn send(&self, message: &Value) {
        let mut out = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A client that went away is seen as the end of the input.
        let _ = writeln!(out, "{message}").and_then(|_| out.flush());
    }

    fn answer(&self, id: &Value, result: Result<Value, RpcError>) {
        self.send(&protocol::response(id, result));
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }
}

/// A song asked for and not yet answered.
pub struct SongCall {
    pub id: Value,
    pub ask: SongAsk,
    pub progress_token: Option<Value>,
    pub cancel: Cancel,
}

pub fn run(args: McpArgs) -> Result<()> {
    let library = args.library.clone().unwrap_or_else(crate::library::default_dir);
    crate::library::Library::open(&library)?;
    // Adapters that cannot be read are refused before the handshake, not at the first song.
    args.adapters.open()?;
    let outbox = Outbox(Arc::new(Mutex::new(std::io::stdout())));
    let tools = Arc::new(Tools::new(args, library));
    let cancels: Arc<Mutex<HashMap<String, Cancel>>> = Arc::default();
    {
        let cancels = cancels.clone();
        let _ = ctrlc::set_handler(move || {
            cancels.lock().unwrap_or_else(|p| p.into_inner()).values().for_each(Cancel::cancel);
            std::process::exit(130);
        });
    }
    let (songs, queue) = mpsc::channel::<SongCall>();
    let worker = {
        let (tools, outbox, cancels) = (tools.clone(), outbox.clone(), cancels.clone());
        std::thread::Builder::new().name("songloom-mcp-songs".into()).spawn(move || {
            for call in queue {
                let result = if call.cancel.is_cancelled() {
                    Err(RpcError::request_cancelled())
                } else {
                    Ok(tools.generate(&call, &outbox))
                };
                cancels.lock().unwrap_or_else(|p| p.into_inner()).remove(&call.id.to_string());
                outbox.answer(&call.id, result);
            }
        })?
    };
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        for message in protocol::parse(&line) {
            match message {
                Incoming::Bad { id, error } => outbox.answer(&id, Err(error)),
                Incoming::Notification { method, params } => {
                    if method == "notifications/cancelled"
                        && let Some(id) = params.get("requestId")
                        && let Some(cancel) = cancels.lock().unwrap_or_else(|p| p.into_inner()).get(&id.to_string())
                    {
                        cancel.cancel();
                    }
                }
                Incoming::Request { id, method, params } => match handle(&tools, &method, &params) {
                    Handled::Now(result) => outbox.answer(&id, result),
                    Handled::Song(ask) => {
                        let cancel = Cancel::default();
                        cancels.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string(), cancel.clone());
                        let progress_token = params.pointer("/_meta/progressToken").cloned();
                        let _ = songs.send(SongCall { id, ask, progress_token, cancel });
                    }
                },
            }
        }
    }
    // The client is gone: nobody will take the songs' answers.
    cancels.lock().unwrap_or_else(|p| p.into_inner()).values().for_each(Cancel::cancel);
    drop(songs);
    let _ = worker.join();
    Ok(())
}

/// What a request gets: its answer now, or a song to make on the worker.
enum Handled {
    Now(Result<Value, RpcError>),
    Song(SongAsk),
}

fn handle(tools: &Tools, method: &str, params: &Value) -> Handled {
    match method {
        "initialize" => Handled::Now(Ok(initialize(params))),
        "ping" => Handled::Now(Ok(json!({}))),
        "tools/list" => Handled::Now(Ok(json!({"tools": tools::list()}))),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
            match tools.call(name, &arguments) {
                Ok(tools::Called::Done(result)) => Handled::Now(Ok(result)),
                Ok(tools::Called::Song(ask)) => Handled::Song(ask),
                Err(error) => Handled::Now(Err(error)),
            }
        }
        other => Handled::Now(Err(RpcError::method_not_found(other))),
    }
}

/// The handshake's answer: the client's protocol version if this server speaks it, else its own
/// newest, and what it offers.
fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
    let version = PROTOCOL_VERSIONS.iter().find(|v| **v == asked).unwrap_or(&PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "songloom", "title": "Songloom", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Songloom makes songs on this machine with MiniMax-Music3 (or the built-in Songloom Mini): \
            generate_song takes a description and lyrics with [verse]/[chorus] tags (or instrumental: true) and \
            keeps the song in the library, which the other tools list, search, export and delete; edit_song makes \
            a new version of one (extend it, another path from a time, re-sing from a line, re-render a range). \
            Every song is AI-generated.",
    })
}
