//! What the tests of `songloom serve` share: the server on a free port, and a minimal HTTP/1.1
//! client (the API's and a WebDriver's).
#![allow(dead_code)] // Each test crate uses its own part.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct Server {
    pub child: Child,
    pub addr: String,
}

/// The songloom under test: this build's, or SONGLOOM_BIN's (to show what an older one got wrong).
pub fn binary() -> String {
    std::env::var("SONGLOOM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_songloom").to_string())
}

/// The tiny test model, which the servers of the tests use as their default (SONGLOOM_MODEL).
pub fn tiny_model() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-music3")
}

impl Server {
    /// The server making one song at a time, as the tests of its queue expect.
    pub fn start(dir: &Path) -> Server {
        Server::start_with(dir, &["--listen", "127.0.0.1:0", "--batch", "1"]).0
    }

    /// The server with `args`; the line after the address (the token's, when it prints one).
    pub fn start_with(dir: &Path, args: &[&str]) -> (Server, Option<String>) {
        Server::start_configured(dir, args, |_| {})
    }

    /// The server with `args`, its command changed by `configure` before it starts.
    pub fn start_configured(
        dir: &Path,
        args: &[&str],
        configure: impl FnOnce(&mut Command),
    ) -> (Server, Option<String>) {
        let mut command = Command::new(binary());
        command
            .arg("serve")
            .args(args)
            .args(["--device", "cpu", "--library"])
            .arg(dir.join("library"))
            .env("XDG_CACHE_HOME", dir)
            .env("SONGLOOM_MODEL", tiny_model())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        configure(&mut command);
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("a line").unwrap();
        let url = first.strip_prefix("serving on http://").unwrap_or_else(|| panic!("{first}"));
        let addr = url.split(' ').next().unwrap_or_default().to_string();
        let token = args.iter().any(|a| a.starts_with("--token") || a.starts_with("0.0.0.0")).then(|| {
            let line = lines.next().expect("the token's line").unwrap();
            line.strip_prefix("token: ")
                .and_then(|t| t.split(' ').next())
                .unwrap_or_else(|| panic!("{line}"))
                .to_string()
        });
        // The rest of its output is read to the end: a closed pipe would change how it exits.
        std::thread::spawn(move || lines.for_each(drop));
        (Server { child, addr }, token)
    }

    /// One request; the status and the body.
    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Vec<u8>) {
        call(&self.addr, method, path, body)
    }

    pub fn json(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        json_call(&self.addr, method, path, body)
    }

    /// Polls a song until it is over.
    pub fn wait(&self, id: u64) -> Value {
        let start = Instant::now();
        loop {
            let (_, song) = self.json("GET", &format!("/api/songs/{id}"), None);
            if !matches!(song["state"].as_str(), Some("queued" | "running")) {
                return song;
            }
            assert!(start.elapsed() < Duration::from_secs(120), "song {id} never ended: {song}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

pub fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&body[..line_end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[line_end + 2..line_end + 2 + size]);
        body = &body[line_end + 2 + size + 2..];
    }
}

/// One HTTP/1.1 request to `addr`; the status and the body.
pub fn call(addr: &str, method: &str, path: &str, body: Option<&str>) -> (u16, Vec<u8>) {
    let (status, _, body) = request(addr, method, path, &[], body);
    (status, body)
}

/// One HTTP/1.1 request with extra header lines; the status, the head (lower case) and the body.
pub fn request(addr: &str, method: &str, path: &str, headers: &[&str], body: Option<&str>) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let body = body.unwrap_or("");
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read the head, then as much body as it announces (a server may keep the connection open),
    // or to the end.
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    let split = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the connection closed before a response head");
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let mut body = raw[split + 4..].to_vec();
    let length =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).map(|v| v.trim().parse::<usize>().unwrap());
    match length {
        Some(length) => {
            while body.len() < length {
                let n = stream.read(&mut buf).unwrap();
                assert!(n > 0, "the connection closed inside a body");
                body.extend_from_slice(&buf[..n]);
            }
        }
        None => {
            stream.read_to_end(&mut body).unwrap();
        }
    }
    if head.contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    (status, head, body)
}

/// A request with a JSON body (or none) whose answer is JSON.
pub fn json_call(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let (status, bytes) = call(addr, method, path, body.map(|b| b.to_string()).as_deref());
    let text = String::from_utf8_lossy(&bytes);
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}")))
}

/// One request whose answer has no body however long its head says it is (a HEAD's); the status
/// and the head (lower case).
pub fn request_head_only(addr: &str, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(stream, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the connection closed before a response head");
        raw.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head)
}
