//! A hub of our own on loopback, serving the tiny checkpoint in the Hugging Face hub's URL layout
//! (`/api/models/REPO/tree/REV`, `/REPO/resolve/REV/PATH` with ranges), with faults on demand.
//! Like the real hub it answers the listing in pages (folders listed too, 8 entries a page, each
//! page naming the next in a `Link: <URL>; rel="next"` header with an opaque cursor), and it
//! percent-decodes request paths as a server does, so a path sent unencoded gets the wrong file.
//! Shared by the CLI's download tests and the window's (included there by path).
#![allow(dead_code)] // Each test crate uses its own part.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;
use sha1::Digest as _;

pub const REPO: &str = "MiniMaxAI/MiniMax-Music3";

/// What the hub does wrong, once or always.
#[derive(Default, Clone)]
pub struct Faults {
    /// Sends this file's first n bytes and closes the connection, once.
    pub cut: Option<(String, usize)>,
    /// Serves this file with a byte flipped, once.
    pub corrupt: Option<String>,
    /// Answers 404 for this file.
    pub missing: Option<String>,
    /// Sends this file's headers and no byte of its body.
    pub stall: Option<String>,
    /// Answers 500 for the listing's page of this index (0: the first).
    pub listing_fails_at_page: Option<usize>,
}

/// Entries of the listing a page.
pub const PAGE_ENTRIES: usize = 8;

/// Every request's path and Range header, in order.
pub type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

pub struct Hub {
    pub addr: String,
    pub seen: Seen,
}

pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-music3")
}

pub fn files(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, root, out);
        } else {
            let name = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.insert(name, std::fs::read(&path).unwrap());
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Hub {
    pub fn start(faults: Faults) -> Hub {
        Hub::start_with(faults, &[])
    }

    /// The hub with `extra` files (path, bytes) beside the fixture's.
    pub fn start_with(faults: Faults, extra: &[(&str, &[u8])]) -> Hub {
        let mut repo = BTreeMap::new();
        files(&fixture(), &fixture(), &mut repo);
        repo.extend(extra.iter().map(|(name, bytes)| (name.to_string(), bytes.to_vec())));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (faults, seen) = (Arc::new(Mutex::new(faults)), Arc::new(Mutex::new(Vec::new())));
        let (f, s, repo) = (faults, seen.clone(), Arc::new(repo));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (f, s, repo) = (f.clone(), s.clone(), repo.clone());
                std::thread::spawn(move || serve(stream, &repo, &f, &s));
            }
        });
        Hub { addr, seen }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The paths (as sent) of the requests for the listing's pages.
    pub fn listing_requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().iter().map(|(p, _)| p.clone()).filter(|p| p.starts_with("/api/")).collect()
    }
}

/// `text` with each `%XX` decoded, as a server reads a request's path; None when it is not valid.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The listing's entries in the hub's order: each folder before what it holds, then its files.
fn entries(repo: &BTreeMap<String, Vec<u8>>) -> Vec<serde_json::Value> {
    let mut folders = std::collections::BTreeSet::new();
    let mut list = Vec::new();
    for (name, bytes) in repo {
        let mut folder = String::new();
        for segment in name.split('/').rev().skip(1).collect::<Vec<_>>().into_iter().rev() {
            folder = if folder.is_empty() { segment.to_string() } else { format!("{folder}/{segment}") };
            if folders.insert(folder.clone()) {
                list.push(json!({"type": "directory", "path": folder, "size": 0, "oid": hex(folder.as_bytes())}));
            }
        }
        let mut git = sha1::Sha1::new();
        git.update(format!("blob {}\0", bytes.len()).as_bytes());
        git.update(bytes);
        let mut entry = json!({"type": "file", "path": name, "size": bytes.len(), "oid": hex(&git.finalize())});
        if name.ends_with(".safetensors") {
            entry["lfs"] = json!({"oid": hex(&sha2::Sha256::digest(bytes)), "size": bytes.len()});
        }
        list.push(entry);
    }
    list
}

fn serve(
    mut stream: TcpStream,
    repo: &BTreeMap<String, Vec<u8>>,
    faults: &Mutex<Faults>,
    seen: &Mutex<Vec<(String, Option<String>)>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let path = line.split(' ').nth(1).unwrap_or("").to_string();
    let mut range = None;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        if header.trim().is_empty() {
            break;
        }
        if let Some(v) = header.to_ascii_lowercase().strip_prefix("range: bytes=") {
            range = Some(v.trim().trim_end_matches('-').to_string());
        }
    }
    seen.lock().unwrap().push((path.clone(), range.clone()));
    let send = |stream: &mut TcpStream, status: &str, body: &[u8], extra: &str| {
        let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n", body.len());
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(body);
    };
    let (raw_path, query) = path.split_once('?').unwrap_or((&path, ""));
    let Some(decoded) = percent_decode(raw_path) else {
        return send(&mut stream, "400 Bad Request", b"{}", "");
    };
    let listing = format!("/api/models/{REPO}/tree/main");
    if decoded == listing {
        let params: Vec<&str> = query.split('&').collect();
        if !params.contains(&"recursive=true") {
            return send(&mut stream, "400 Bad Request", b"{}", "");
        }
        let list = entries(repo);
        // The cursor is the hex of the last path of the page before, opaque to the client.
        let start = match params.iter().find_map(|p| p.strip_prefix("cursor=")) {
            None => 0,
            Some(cursor) => match list.iter().position(|e| hex(e["path"].as_str().unwrap().as_bytes()) == cursor) {
                Some(i) => i + 1,
                None => return send(&mut stream, "400 Bad Request", b"{}", ""),
            },
        };
        if faults.lock().unwrap().listing_fails_at_page == Some(start / PAGE_ENTRIES) {
            return send(&mut stream, "500 Internal Server Error", b"{}", "");
        }
        let page = &list[start..(start + PAGE_ENTRIES).min(list.len())];
        let link = if start + PAGE_ENTRIES < list.len() {
            let cursor = hex(page.last().unwrap()["path"].as_str().unwrap().as_bytes());
            format!(
                "Link: <http://{host}{listing}?recursive=true&cursor={cursor}>; rel=\"next\"\r\n",
                host = addr(&stream)
            )
        } else {
            String::new()
        };
        return send(&mut stream, "200 OK", json!(page).to_string().as_bytes(), &link);
    }
    let Some(name) = decoded.strip_prefix(&format!("/{REPO}/resolve/main/")) else {
        return send(&mut stream, "404 Not Found", b"{}", "");
    };
    let Some(bytes) = repo.get(name) else { return send(&mut stream, "404 Not Found", b"{}", "") };
    let mut faults = faults.lock().unwrap();
    if faults.missing.as_deref() == Some(name) {
        return send(&mut stream, "404 Not Found", b"{}", "");
    }
    let from: usize = range.and_then(|r| r.parse().ok()).unwrap_or(0);
    let mut body = bytes[from..].to_vec();
    if faults.corrupt.as_deref() == Some(name) && !body.is_empty() {
        faults.corrupt = None;
        body[0] ^= 0xff;
    }
    let status = if from > 0 { "206 Partial Content" } else { "200 OK" };
    let extra = if from > 0 {
        format!("Content-Range: bytes {from}-{}/{}\r\n", bytes.len() - 1, bytes.len())
    } else {
        String::new()
    };
    if faults.stall.as_deref() == Some(name) {
        let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n{extra}\r\n", body.len());
        let _ = stream.write_all(head.as_bytes());
        std::thread::sleep(std::time::Duration::from_secs(30));
        return;
    }
    if let Some((file, n)) = faults.cut.clone()
        && file == name
    {
        faults.cut = None;
        let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n{extra}\r\n", body.len());
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&body[..n]);
        return;
    }
    send(&mut stream, status, &body, &extra);
}

fn addr(stream: &TcpStream) -> String {
    stream.local_addr().unwrap().to_string()
}
