//! `songloom mcp` driven as an agent's client drives it: the Model Context Protocol's handshake,
//! the tool list, then every tool called, a song's progress as notifications, a song cancelled
//! mid-way leaving no file, and the protocol's errors.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

mod common;

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl Client {
    fn start(dir: &Path) -> Client {
        let mut child = Command::new(common::binary())
            .args(["mcp", "--device", "cpu", "--library"])
            .arg(dir.join("library"))
            .env("XDG_CACHE_HOME", dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("SONGLOOM_MODEL", common::tiny_model())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        Client { stdin: child.stdin.take(), child, lines, next_id: 0 }
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send_line(&json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string());
    }

    /// Sends a request; its id.
    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send_line(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string());
        id
    }

    /// Every message up to the answer to `id`: the notifications before it, and it.
    fn answer(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut notifications = Vec::new();
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(300)).expect("an answer within 5 minutes");
            let message: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout: {line}: {e}"));
            assert_eq!(message["jsonrpc"], "2.0", "{message}");
            if message["id"] == json!(id) {
                return (notifications, message);
            }
            assert!(message.get("id").is_none(), "an answer to another request: {message}");
            notifications.push(message);
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.answer(id).1
    }

    /// A tool's result (its structured content), asserting it did not fail.
    fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        let result = &answer["result"];
        assert_eq!(result["isError"], false, "{name}: {answer}");
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, result["structuredContent"], "the text and the structured content say the same");
        result["structuredContent"].clone()
    }

    /// A tool's failure message, asserting it failed.
    fn tool_error(&mut self, name: &str, arguments: Value) -> String {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        assert_eq!(answer["result"]["isError"], true, "{name}: {answer}");
        answer["result"]["content"][0]["text"].as_str().unwrap().to_string()
    }
}

fn handshake(client: &mut Client) {
    let init = client.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
    );
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], "2025-06-18", "{init}");
    assert_eq!(result["serverInfo"]["name"], "songloom");
    assert!(result["capabilities"]["tools"].is_object(), "{init}");
    client.notify("notifications/initialized", json!({}));
}

#[test]
fn an_agent_calls_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    handshake(&mut client);
    assert_eq!(client.request("ping", json!({}))["result"], json!({}));

    let list = client.request("tools/list", json!({}));
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    let all = [
        "generate_song",
        "edit_song",
        "list_songs",
        "search_songs",
        "get_song",
        "export_song",
        "delete_song",
        "list_devices",
        "list_models",
    ];
    assert_eq!(names, all);
    for tool in list["result"]["tools"].as_array().unwrap() {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert!(!tool["description"].as_str().unwrap().is_empty());
    }

    // A song, its progress as notifications carrying the call's token, rising to the end.
    let id = client.send(
        "tools/call",
        json!({"name": "generate_song", "_meta": {"progressToken": "song-1"},
               "arguments": {"description": "warm lo-fi piano", "lyrics": "[verse]\nla la la", "duration_s": 2, "steps": 2, "seed": 5}}),
    );
    let (notifications, answer) = client.answer(id);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let progress: Vec<f64> = notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .map(|n| {
            assert_eq!(n["params"]["progressToken"], "song-1");
            n["params"]["progress"].as_f64().unwrap()
        })
        .collect();
    assert!(!progress.is_empty(), "no progress notifications");
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]) && progress.iter().all(|p| (0.0..=1.0).contains(p)),
        "{progress:?}"
    );
    let song = &answer["result"]["structuredContent"];
    assert_eq!(song["seed"], 5);
    let first_id = song["song"]["id"].as_i64().unwrap();
    assert!(Path::new(song["wav"].as_str().unwrap()).is_file(), "{song}");

    let instrumental = client.tool(
        "generate_song",
        json!({"description": "calm ambient pads", "instrumental": true, "duration_s": 1, "steps": 1}),
    );
    assert_eq!(instrumental["song"]["recipe"]["lyrics"], "[instrumental]");
    let second_id = instrumental["song"]["id"].as_i64().unwrap();

    let songs = client.tool("list_songs", json!({}));
    assert_eq!(songs["songs"].as_array().unwrap().len(), 2, "{songs}");
    let found = client.tool("search_songs", json!({"query": "lo-fi"}));
    let found: Vec<i64> = found["songs"].as_array().unwrap().iter().map(|s| s["id"].as_i64().unwrap()).collect();
    assert_eq!(found, [first_id]);
    let got = client.tool("get_song", json!({"id": first_id}));
    assert_eq!(got["song"]["recipe"]["description"], "warm lo-fi piano");
    assert!(Path::new(got["wav"].as_str().unwrap()).is_file());

    let flac = dir.path().join("out.flac");
    let exported = client.tool("export_song", json!({"id": first_id, "path": flac}));
    assert_eq!(exported["format"], "flac");
    let bytes = std::fs::read(&flac).unwrap();
    assert!(bytes.starts_with(b"fLaC") && String::from_utf8_lossy(&bytes).contains("AI-generated"));
    let again = client.tool_error("export_song", json!({"id": first_id, "path": flac}));
    assert!(again.contains("exists"), "{again}");
    assert_eq!(std::fs::read(&flac).unwrap(), bytes, "an export never replaces a file");

    // A new version: the song extended by a second, the original's audio kept before the splice.
    let extended = client.tool("edit_song", json!({"id": first_id, "kind": "extend", "seconds": 1}));
    assert_eq!(extended["song"]["parent"], first_id, "{extended}");
    assert_eq!(extended["seed"], 5, "an extension keeps the song's seed");
    assert!(extended["song"]["seconds"].as_f64().unwrap() > song["song"]["seconds"].as_f64().unwrap(), "{extended}");
    assert!(extended["changed_from_s"].as_f64().is_some(), "{extended}");
    let outside = client.tool_error("edit_song", json!({"id": first_id, "kind": "rerender", "from_s": 1, "to_s": 99}));
    assert!(outside.contains("within the song"), "{outside}");
    let bad =
        client.request("tools/call", json!({"name": "edit_song", "arguments": {"id": first_id, "kind": "remix"}}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    assert_eq!(client.tool("delete_song", json!({"id": second_id}))["deleted"], true);
    let gone = client.tool_error("get_song", json!({"id": second_id}));
    assert!(gone.contains(&format!("no song {second_id}")), "{gone}");

    let devices = client.tool("list_devices", json!({}));
    let cpu = devices["devices"].as_array().unwrap().iter().find(|d| d["name"] == "cpu").cloned().unwrap();
    assert_eq!(cpu["available"], true, "{devices}");
    let models = client.tool("list_models", json!({}));
    assert_eq!(models["in_use"]["name"], "Songloom Mini", "{models}");
    assert!(models["installed"].is_array());

    // Mistakes: the agent is told what to fix.
    let empty = client.tool_error("generate_song", json!({"description": "  "}));
    assert!(empty.contains("description"), "{empty}");
    let both =
        client.tool_error("generate_song", json!({"description": "x", "lyrics": "[verse]\nla", "instrumental": true}));
    assert!(both.contains("not both"), "{both}");
    let unknown_tool = client.request("tools/call", json!({"name": "make_coffee", "arguments": {}}));
    assert_eq!(unknown_tool["error"]["code"], -32602, "{unknown_tool}");
    let missing = client.request("tools/call", json!({"name": "get_song", "arguments": {}}));
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert_eq!(client.request("resources/list", json!({}))["error"]["code"], -32601);
    client.send_line("{not json");
    let (_, parse_error) = client.answer_null();
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");

    drop(client.stdin.take());
    let status = client.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn a_cancelled_song_answers_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    handshake(&mut client);
    let id = client.send(
        "tools/call",
        json!({"name": "generate_song", "_meta": {"progressToken": 1},
               "arguments": {"description": "a long piano piece", "instrumental": true, "duration_s": 120, "steps": 30}}),
    );
    // Cancelled once it has started.
    loop {
        let line = client.lines.recv_timeout(Duration::from_secs(300)).unwrap();
        if serde_json::from_str::<Value>(&line).unwrap()["method"] == "notifications/progress" {
            break;
        }
    }
    client.notify("notifications/cancelled", json!({"requestId": id, "reason": "changed my mind"}));
    let (_, answer) = client.answer(id);
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("cancel"), "{answer}");
    let songs = dir.path().join("library/songs");
    let left: Vec<_> = std::fs::read_dir(&songs).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(client.tool("list_songs", json!({}))["songs"], json!([]));
    drop(client.stdin.take());
    assert!(client.child.wait().unwrap().success());
}

impl Client {
    /// The answer to a message whose id could not be read (null).
    fn answer_null(&mut self) -> (Vec<Value>, Value) {
        let line = self.lines.recv_timeout(Duration::from_secs(60)).unwrap();
        (Vec::new(), serde_json::from_str(&line).unwrap())
    }
}
