//! `songloom model download` against a hub of our own on loopback (`HF_ENDPOINT`), serving the
//! tiny checkpoint in the hub's URL layout: a full download that loads and verifies, a transfer
//! cut off then resumed with a range, a corrupted file refused and fetched again, a missing file,
//! a stalled server, a disk too small; a listing in pages read to its end, an empty file, names
//! that must be percent-encoded; `model list` and `model verify`. Nothing talks to the real hub.

mod hub;

use std::path::Path;
use std::process::Output;

use std::collections::BTreeMap;

use hub::{Faults, Hub, PAGE_ENTRIES, REPO, files, fixture};

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

fn default_dir(home: &Path) -> std::path::PathBuf {
    home.join("songloom/models/MiniMax-Music3")
}

#[test]
fn a_listing_in_pages_is_read_to_its_end() {
    let mut want = BTreeMap::new();
    files(&fixture(), &fixture(), &mut want);
    assert!(want.len() > 2 * PAGE_ENTRIES, "the fixture's {} files fill three pages", want.len());
    let (hub, home) = (Hub::start(Faults::default()), tempfile::tempdir().unwrap());
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("{} files", want.len())), "{}", text(&out));
    assert!(hub.listing_requests().len() > 2, "every page was asked for: {:?}", hub.listing_requests());
    let dir = default_dir(home.path());
    for (name, bytes) in &want {
        assert_eq!(&std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
    }
    let verified = model(&hub, home.path(), &["verify", dir.to_str().unwrap()], &[]);
    assert!(verified.status.success(), "{}", text(&verified));
    assert!(text(&verified).contains(&format!("{} files", want.len())), "{}", text(&verified));

    // A listing that stops before its last page fetches nothing and marks nothing complete.
    let faults = Faults { listing_fails_at_page: Some(1), ..Faults::default() };
    let (hub, home) = (Hub::start(faults), tempfile::tempdir().unwrap());
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("listing") && text(&out).contains("500"), "{}", text(&out));
    assert!(!default_dir(home.path()).join("songloom-download.json").exists(), "a cut listing is never complete");
    assert!(!text(&model(&hub, home.path(), &["list"], &[])).contains(", complete"));
}

#[test]
fn an_empty_file_downloads() {
    let (hub, home) = (Hub::start_with(Faults::default(), &[("empty/nothing.txt", b"")]), tempfile::tempdir().unwrap());
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let dir = default_dir(home.path());
    assert_eq!(std::fs::read(dir.join("empty/nothing.txt")).unwrap(), b"");
    assert!(!dir.join("empty/nothing.txt.part").exists());
    let verified = model(&hub, home.path(), &["verify", dir.to_str().unwrap()], &[]);
    assert!(verified.status.success(), "{}", text(&verified));
    // And again over the finished download, which keeps it.
    assert!(model(&hub, home.path(), &["download"], &[]).status.success());
}

#[test]
fn names_that_need_encoding_download_with_their_own_bytes() {
    // Each name read unencoded would be another request: an invalid URI, `c` (the rest taken for
    // a fragment), or `e%f.bin` once the server decodes it. `e%f.bin` exists too, to be mistaken.
    let odd: [(&str, &[u8]); 5] = [
        ("a b.txt", b"a space"),
        ("c#d.json", b"{\"hash\": true}"),
        ("e%25f.bin", b"percent two five"),
        ("e%f.bin", b"percent alone"),
        ("odd dir/g?h+i.txt", b"a question"),
    ];
    let (hub, home) = (Hub::start_with(Faults::default(), &odd), tempfile::tempdir().unwrap());
    let out = model(&hub, home.path(), &["download"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let dir = default_dir(home.path());
    for (name, bytes) in odd {
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
    }
    assert!(model(&hub, home.path(), &["verify", dir.to_str().unwrap()], &[]).status.success());
    let fetched: Vec<String> = hub.seen.lock().unwrap().iter().map(|(p, _)| p.clone()).collect();
    assert!(fetched.contains(&format!("/{REPO}/resolve/main/e%2525f.bin")), "{fetched:?}");
    assert!(fetched.contains(&format!("/{REPO}/resolve/main/odd%20dir/g%3Fh%2Bi.txt")), "{fetched:?}");
}

#[test]
fn model_list_names_a_file_gone_or_resized_since_the_download() {
    let (hub, home) = (Hub::start(Faults::default()), tempfile::tempdir().unwrap());
    assert!(model(&hub, home.path(), &["download"], &[]).status.success());
    let dir = default_dir(home.path());
    let listed = text(&model(&hub, home.path(), &["list"], &[]));
    assert!(listed.contains(", complete"), "{listed}");

    let gone = "vocoder/config.json";
    std::fs::remove_file(dir.join(gone)).unwrap();
    let listed = text(&model(&hub, home.path(), &["list"], &[]));
    assert!(!listed.contains(", complete"), "{listed}");
    assert!(listed.contains(&format!("{gone} is missing")), "{listed}");
    assert!(listed.contains("songloom model download --dir"), "{listed}");

    std::fs::write(dir.join(BIG), b"resized").unwrap();
    let listed = text(&model(&hub, home.path(), &["list"], &[]));
    assert!(listed.contains(&format!("{BIG} is 7 bytes")), "{listed}");

    // The next download fetches both and the folder is complete again.
    assert!(model(&hub, home.path(), &["download"], &[]).status.success());
    assert!(text(&model(&hub, home.path(), &["list"], &[])).contains(", complete"));
}
