//! `songloom model download` against a hub of our own on loopback (`HF_ENDPOINT`), serving the
//! tiny checkpoint in the hub's URL layout: a full download that loads and verifies, a transfer
//! cut off then resumed with a range, a corrupted file refused and fetched again, a missing file,
//! a stalled server, a disk too small; `model list` and `model verify`. Nothing talks to the real
//! hub.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

use serde_json::json;
use sha1::Digest as _;

const REPO: &str = "MiniMaxAI/MiniMax-Music3";

/// What the hub does wrong, once or always.
#[derive(Default, Clone)]
struct Faults {
    /// Sends this file's first n bytes and closes the connection, once.
    cut: Option<(String, usize)>,
    /// Serves this file with a byte flipped, once.
    corrupt: Option<String>,
    /// Answers 404 for this file.
    missing: Option<String>,
    /// Sends this file's headers and no byte of its body.
    stall: Option<String>,
}

/// Every request's path and Range header, in order.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

struct Hub {
    addr: String,
    seen: Seen,
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-music3")
}

fn files(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
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
    fn start(faults: Faults) -> Hub {
        let mut repo = BTreeMap::new();
        files(&fixture(), &fixture(), &mut repo);
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

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
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
    if path == format!("/api/models/{REPO}/tree/main?recursive=true") {
        let list: Vec<_> = repo
            .iter()
            .map(|(name, bytes)| {
                let mut git = sha1::Sha1::new();
                git.update(format!("blob {}\0", bytes.len()).as_bytes());
                git.update(bytes);
                let mut entry = json!({"type": "file", "path": name, "size": bytes.len(), "oid": hex(&git.finalize())});
                if name.ends_with(".safetensors") {
                    entry["lfs"] = json!({"oid": hex(&sha2::Sha256::digest(bytes)), "size": bytes.len()});
                }
                entry
            })
            .collect();
        return send(&mut stream, "200 OK", json!(list).to_string().as_bytes(), "");
    }
    let Some(name) = path.strip_prefix(&format!("/{REPO}/resolve/main/")) else {
        return send(&mut stream, "404 Not Found", b"{}", "");
    };
    let Some(bytes) = repo.get(name) else { return send(&mut stream, "404 Not Found", b"{}", "") };
    let mut faults = faults.lock().unwrap();
    if faults.missing.as_deref() == Some(name) {
        return send(&mut stream, "404 Not Found", b"{}", "");
    }
    let from: usize = range.and_then(|r| r.parse().ok()).unwrap_or(0);
    let mut body = bytes[from..].to_vec();
    if faults.corrupt.as_deref() == Some(name) {
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

/// `songloom model ARGS` against `hub`, with its data folder in `home`.
fn model(hub: &Hub, home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_songloom"))
        .arg("model")
        .args(args)
        .env("HF_ENDPOINT", hub.endpoint())
        .env("XDG_DATA_HOME", home)
        .env("SONGLOOM_DOWNLOAD_STALL_S", "2")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

const BIG: &str = "language_model/model-00003-of-00005.safetensors";

#[test]
fn a_full_download_loads_verifies_and_is_listed() {
    let (hub, home) = (Hub::start(Faults::default()), tempfile::tempdir().unwrap());
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let dir = home.path().join("songloom/models/MiniMax-Music3");
    assert!(text(&out).contains("each verified"), "{}", text(&out));
    let mut want = BTreeMap::new();
    files(&fixture(), &fixture(), &mut want);
    for (name, bytes) in &want {
        assert_eq!(&std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
    }
    songloom_engine::model_dir::ModelDir::open(&dir).expect("the download is a model");
    let verified = model(&hub, home.path(), &["verify", dir.to_str().unwrap()], &[]);
    assert!(verified.status.success(), "{}", text(&verified));
    let listed = model(&hub, home.path(), &["list"], &[]);
    assert!(text(&listed).contains("complete"), "{}", text(&listed));
    // A file damaged afterwards is named by verify, and the next download fetches only it.
    std::fs::write(dir.join(BIG), b"damaged").unwrap();
    let verified = model(&hub, home.path(), &["verify", dir.to_str().unwrap()], &[]);
    assert!(!verified.status.success() && text(&verified).contains(BIG), "{}", text(&verified));
    hub.seen.lock().unwrap().clear();
    assert!(model(&hub, home.path(), &["download"], &[]).status.success());
    let fetched: Vec<String> =
        hub.seen.lock().unwrap().iter().map(|(p, _)| p.clone()).filter(|p| p.contains("/resolve/")).collect();
    assert_eq!(fetched, vec![format!("/{REPO}/resolve/main/{BIG}")]);
}

#[test]
fn a_transfer_cut_off_resumes_where_it_stopped() {
    let (hub, home) =
        (Hub::start(Faults { cut: Some((BIG.into(), 1000)), ..Faults::default() }), tempfile::tempdir().unwrap());
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(BIG) && text(&out).contains("run the command again"), "{}", text(&out));
    let dir = home.path().join("songloom/models/MiniMax-Music3");
    assert!(!dir.join("songloom-download.json").exists(), "an unfinished download never looks complete");
    assert!(model(&hub, home.path(), &["list"], &[]).stdout.windows(10).any(|w| w == b"incomplete"));
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let ranges: Vec<_> =
        hub.seen.lock().unwrap().iter().filter(|(p, _)| p.ends_with(BIG)).map(|(_, r)| r.clone()).collect();
    assert_eq!(ranges, vec![None, Some("1000".to_string())], "the second run asked for the rest only");
    assert!(model(&hub, home.path(), &["verify", dir.to_str().unwrap()], &[]).status.success());
}

#[test]
fn a_corrupted_file_is_refused_and_fetched_again() {
    let (hub, home) =
        (Hub::start(Faults { corrupt: Some(BIG.into()), ..Faults::default() }), tempfile::tempdir().unwrap());
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("fetching it again") && text(&out).contains("checksum"), "{}", text(&out));
    let dir = home.path().join("songloom/models/MiniMax-Music3");
    assert!(model(&hub, home.path(), &["verify", dir.to_str().unwrap()], &[]).status.success());
}

#[test]
fn a_missing_file_a_stalled_server_and_a_small_disk_are_clear_errors() {
    let missing = "vocoder/config.json";
    let (hub, home) =
        (Hub::start(Faults { missing: Some(missing.into()), ..Faults::default() }), tempfile::tempdir().unwrap());
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(!out.status.success() && text(&out).contains(missing) && text(&out).contains("404"), "{}", text(&out));

    let (hub, home) =
        (Hub::start(Faults { stall: Some(BIG.into()), ..Faults::default() }), tempfile::tempdir().unwrap());
    let start = std::time::Instant::now();
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(!out.status.success() && text(&out).contains(BIG), "{}", text(&out));
    assert!(start.elapsed() < std::time::Duration::from_secs(25), "the stall was given up after its timeout");

    let (hub, home) = (Hub::start(Faults::default()), tempfile::tempdir().unwrap());
    let out = model(&hub, home.path(), &["download"], &[("SONGLOOM_FREE_BYTES", "100000")]);
    assert!(!out.status.success() && text(&out).contains("GB free"), "{}", text(&out));
    let fetched = hub.seen.lock().unwrap().iter().filter(|(p, _)| p.contains("/resolve/")).count();
    assert_eq!(fetched, 0, "refused before any file was fetched");
}
