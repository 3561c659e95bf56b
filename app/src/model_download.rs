//! `songloom model download`, `list` and `verify`: the real checkpoint from the Hugging Face hub,
//! or from a mirror (`HF_ENDPOINT`, the hub clients' convention; `HF_TOKEN` for an account's
//! access), through the hub's documented file API: `/api/models/REPO/tree/REV?recursive=true`
//! lists every file with its size and checksum (the sha256 of a large-file-storage file, the git
//! blob sha1 of the others), in pages read to the last, and `/REPO/resolve/REV/PATH` (each segment
//! percent-encoded) serves it, with ranges. Each file arrives as `PATH.part` and takes its name
//! only once its size and checksum hold; an interrupted file resumes where it stopped; the free
//! space is checked before anything is fetched; and the directory is marked complete (its file
//! list, written last) only when every file is.
//! `SONGLOOM_DOWNLOAD_STALL_S` (seconds without a byte before a transfer is given up, 60 by
//! default) and `SONGLOOM_FREE_BYTES` (the free space to assume) let the tests stand in for a
//! stalled server and a small disk.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha1::Digest as _;

use crate::output::say;

pub const REPO: &str = "MiniMaxAI/MiniMax-Music3";
/// Written last: the directory holds every file of the list, each verified.
const MARKER: &str = "songloom-download.json";
/// Room kept free beyond the files.
const MARGIN: u64 = 256 << 20;

/// One file of the repository as the hub lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HubFile {
    pub path: String,
    pub size: u64,
    /// The sha256 of a large-file-storage file.
    pub sha256: Option<String>,
    /// The git blob sha1 of the others.
    pub git_sha1: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Marker {
    repo: String,
    revision: String,
    files: Vec<HubFile>,
}

/// How a download reports: the bytes there are of all, the file being fetched; and whether to stop
/// (a pause: the next download resumes from the pieces already there).
pub struct Progress<'a> {
    pub report: &'a dyn Fn(u64, u64, &str),
    pub stop: &'a std::sync::atomic::AtomicBool,
}

/// The byte count of a download as it goes, passed to its [`Progress`].
struct Counter<'a> {
    done: std::cell::Cell<u64>,
    total: u64,
    file: std::cell::RefCell<String>,
    progress: &'a Progress<'a>,
}

impl Counter<'_> {
    fn set(&self, done: u64) {
        self.done.set(done);
        (self.progress.report)(done, self.total, &self.file.borrow());
    }

    fn add(&self, n: u64) {
        self.set(self.done.get() + n);
    }

    fn sub(&self, n: u64) {
        self.set(self.done.get().saturating_sub(n));
    }

    fn stopped(&self) -> bool {
        self.progress.stop.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Where downloaded models go by default.
pub fn models_dir() -> PathBuf {
    crate::library::default_dir().join("models")
}

/// Where a download goes unless told otherwise.
pub fn default_dir() -> PathBuf {
    models_dir().join("MiniMax-Music3")
}

/// Removes what an unfinished download into `dir` fetched; a complete model (its marker there)
/// is kept and said so.
pub fn discard_partial(dir: &Path) -> Result<()> {
    if dir.join(MARKER).exists() {
        bail!("{} is a complete model: delete it yourself if you mean to", dir.display());
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(anyhow!("removing {}: {e}", dir.display())),
        _ => Ok(()),
    }
}

struct Hub {
    endpoint: String,
    token: Option<String>,
    agent: ureq::Agent,
}

impl Hub {
    fn from_env() -> Hub {
        let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| "https://huggingface.co".into());
        let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty());
        let stall = std::env::var("SONGLOOM_DOWNLOAD_STALL_S").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(60.0);
        let stall = Some(Duration::from_secs_f64(stall));
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(stall)
            .timeout_per_read(stall)
            .http_status_as_error(false)
            .build()
            .into();
        Hub { endpoint: endpoint.trim_end_matches('/').to_string(), token, agent }
    }

    fn get(&self, url: &str, range_from: u64) -> Result<ureq::http::Response<ureq::Body>> {
        let mut request = self.agent.get(url);
        // The account's token goes to the endpoint only, never to a host a listing's page names.
        if let Some(token) = &self.token
            && origin(url) == origin(&self.endpoint)
        {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        if range_from > 0 {
            request = request.header("Range", format!("bytes={range_from}-"));
        }
        request.call().map_err(|e| anyhow!("{url}: {e} (is the network up, and HF_ENDPOINT right if set?)"))
    }

    /// Every file of the repository at `revision`, from every page of the listing: the hub answers
    /// a long listing a page at a time, each naming the next in a `Link: <URL>; rel="next"` header
    /// (with a cursor in its query), and the last naming none.
    fn tree(&self, revision: &str) -> Result<Vec<HubFile>> {
        let first = format!("{}/api/models/{REPO}/tree/{}?recursive=true", self.endpoint, encode_segment(revision));
        let mut files = Vec::new();
        let mut url = first.clone();
        let mut seen = std::collections::HashSet::new();
        loop {
            if !seen.insert(url.clone()) {
                bail!("listing {REPO}: the hub's pages lead back to {url}; try again later, or check HF_ENDPOINT");
            }
            let response = self.get(&url, 0).with_context(|| format!("listing {REPO}"))?;
            let status = response.status().as_u16();
            let next = next_page(response.headers())
                .with_context(|| format!("listing {REPO} at {url}"))?
                .map(|next| resolve(&self.endpoint, &next));
            let text = response.into_body().read_to_string().with_context(|| format!("listing {REPO} at {url}"))?;
            if status != 200 {
                bail!("listing {REPO}: the hub answered {status} at {url}{}", hint(status));
            }
            let entries: Vec<Value> = serde_json::from_str(&text)
                .with_context(|| format!("{url} did not answer with the hub's file list"))?;
            files.extend(entries.iter().filter(|e| e["type"] == "file").map(|e| {
                let lfs = &e["lfs"];
                HubFile {
                    path: e["path"].as_str().unwrap_or_default().to_string(),
                    size: lfs["size"].as_u64().or_else(|| e["size"].as_u64()).unwrap_or(0),
                    sha256: lfs["oid"].as_str().map(str::to_string),
                    git_sha1: if lfs.is_null() { e["oid"].as_str().map(str::to_string) } else { None },
                }
            }));
            match next {
                Some(next) => url = next,
                None => break,
            }
        }
        if files.is_empty() {
            bail!("{first} lists no files for {REPO}");
        }
        for f in &files {
            let p = Path::new(&f.path);
            if f.path.is_empty()
                || p.is_absolute()
                || p.components().any(|c| matches!(c, std::path::Component::ParentDir))
            {
                bail!("the hub lists a file outside the model's folder: `{}`", f.path);
            }
        }
        Ok(files)
    }

    /// Fetches `file` into `part`, from where an earlier attempt stopped; `progress` counts bytes.
    fn fetch(&self, revision: &str, file: &HubFile, part: &Path, progress: &Counter) -> Result<()> {
        let have = part.metadata().map(|m| m.len()).unwrap_or(0);
        // An empty file is fetched too: its part must exist to be verified and named.
        if have >= file.size && part.exists() {
            return Ok(());
        }
        let url = format!("{}/{REPO}/resolve/{}/{}", self.endpoint, encode_segment(revision), encode_path(&file.path));
        let response = self.get(&url, have).with_context(|| format!("fetching {}", file.path))?;
        let opened = match response.status().as_u16() {
            206 => OpenOptions::new().append(true).open(part),
            200 => {
                // The whole file, from the start.
                progress.sub(have);
                File::create(part)
            }
            404 => bail!("{} is missing on the hub ({url} answered 404)", file.path),
            status => bail!("fetching {}: the hub answered {status} at {url}{}", file.path, hint(status)),
        };
        let mut out = opened.with_context(|| format!("writing {}", part.display()))?;
        let mut body = response.into_body().into_reader();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let n = body.read(&mut buffer).map_err(|e| {
                anyhow!(
                    "the transfer of {} stopped ({e}); run the command again to resume it where it stopped",
                    file.path
                )
            })?;
            if n == 0 {
                break;
            }
            out.write_all(&buffer[..n]).with_context(|| format!("writing {}", part.display()))?;
            progress.add(n as u64);
            if progress.stopped() {
                out.sync_all().with_context(|| format!("writing {}", part.display()))?;
                bail!("paused; downloading again resumes where it stopped");
            }
        }
        out.sync_all().with_context(|| format!("writing {}", part.display()))
    }
}

/// `text` fit for one segment of a URL's path: every byte but the unreserved ones (RFC 3986)
/// percent-encoded, so a space, `#`, `?`, `%` or `/` is taken literally.
fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A file's path in the repository as a URL's path: each segment encoded, `/` kept between.
fn encode_path(path: &str) -> String {
    path.split('/').map(encode_segment).collect::<Vec<_>>().join("/")
}

/// The `rel="next"` URL of a response's `Link` headers (RFC 8288), if any. A header that cannot
/// be read is an error: taking it for "no next page" would cut the listing short.
fn next_page(headers: &ureq::http::HeaderMap) -> Result<Option<String>> {
    for value in headers.get_all("link") {
        let unreadable =
            || anyhow!("the hub's Link header `{}` cannot be read", String::from_utf8_lossy(value.as_bytes()));
        let mut rest = value.to_str().map_err(|_| unreadable())?;
        // Each link is `<URL>; param; param`, links separated by commas.
        while let Some(open) = rest.find('<') {
            let close = open + rest[open..].find('>').ok_or_else(unreadable)?;
            let url = &rest[open + 1..close];
            rest = &rest[close + 1..];
            let params = &rest[..rest.find('<').unwrap_or(rest.len())];
            let is_next = params.split(';').any(|param| {
                let Some((name, value)) = param.split_once('=') else { return false };
                name.trim().eq_ignore_ascii_case("rel")
                    && value
                        .trim()
                        .trim_end_matches(',')
                        .trim_matches('"')
                        .split_whitespace()
                        .any(|rel| rel.eq_ignore_ascii_case("next"))
            });
            if is_next {
                return Ok(Some(url.to_string()));
            }
        }
    }
    Ok(None)
}

/// `link` as a whole URL: as given when it names its host, else on the endpoint's.
fn resolve(endpoint: &str, link: &str) -> String {
    if link.contains("://") {
        link.to_string()
    } else if link.starts_with('/') {
        format!("{}{link}", origin(endpoint))
    } else {
        format!("{endpoint}/{link}")
    }
}

/// The scheme and host of `url`: `https://huggingface.co` of `https://huggingface.co/api/...`.
fn origin(url: &str) -> &str {
    let host_from = url.find("://").map_or(0, |i| i + 3);
    let host_to = url[host_from..].find('/').map_or(url.len(), |i| host_from + i);
    &url[..host_to]
}

/// A word on what a status usually means.
fn hint(status: u16) -> &'static str {
    match status {
        401 | 403 => " (set HF_TOKEN to an access token of an account that accepted the model's terms)",
        404 => " (is the revision right?)",
        429 => " (the hub limits how fast it is asked: run the command again in a minute)",
        _ => "",
    }
}

/// Whether `path` holds `file`: its size, then its checksum.
fn verify(path: &Path, file: &HubFile) -> Result<(), String> {
    let size = path.metadata().map_err(|e| format!("cannot be read: {e}"))?.len();
    if size != file.size {
        return Err(format!("is {size} bytes, not the {} the hub lists", file.size));
    }
    let mut reader = File::open(path).map_err(|e| format!("cannot be read: {e}"))?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut sha256 = sha2::Sha256::new();
    let mut sha1 = sha1::Sha1::new();
    sha1.update(format!("blob {size}\0").as_bytes());
    loop {
        let n = reader.read(&mut buffer).map_err(|e| format!("cannot be read: {e}"))?;
        if n == 0 {
            break;
        }
        if file.sha256.is_some() {
            sha256.update(&buffer[..n]);
        } else {
            sha1.update(&buffer[..n]);
        }
    }
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let (got, want) = match (&file.sha256, &file.git_sha1) {
        (Some(want), _) => (hex(&sha256.finalize()), want),
        (None, Some(want)) => (hex(&sha1.finalize()), want),
        (None, None) => return Ok(()),
    };
    if got != want.to_lowercase() {
        return Err(format!("has checksum {got}, not the {want} the hub lists"));
    }
    Ok(())
}

/// Bytes free for `dir`'s files.
fn free_bytes(dir: &Path) -> Result<u64> {
    if let Some(bytes) = std::env::var("SONGLOOM_FREE_BYTES").ok().and_then(|v| v.parse().ok()) {
        return Ok(bytes);
    }
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())?;
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `stats` a statvfs the call fills.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        bail!("cannot read the free space of {}: {}", dir.display(), std::io::Error::last_os_error());
    }
    Ok(stats.f_bavail as u64 * stats.f_frsize as u64)
}

fn gb(bytes: u64) -> f64 {
    bytes as f64 / 1e9
}

fn part_of(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}

/// `songloom model download`: the model into `dir` (by default the models folder) with a progress
/// bar, resuming what an earlier run left; returns the directory.
pub fn download(dir: Option<PathBuf>, revision: &str) -> Result<PathBuf> {
    let bar = crate::output::bytes_bar(0);
    let report = |done: u64, total: u64, file: &str| {
        bar.set_length(total);
        bar.set_position(done);
        if bar.message() != file {
            bar.set_message(file.to_string());
        }
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    let dir = download_with(dir, revision, &Progress { report: &report, stop: &stop });
    bar.finish_and_clear();
    let dir = dir?;
    let record = read_marker(&dir)?;
    let size: u64 = record.files.iter().map(|f| f.size).sum();
    say!(
        "{REPO} ({revision}) is in {}: {} files, {:.1} GB, each verified",
        dir.display(),
        record.files.len(),
        gb(size)
    );
    Ok(dir)
}

/// [`download`] reporting to `progress` and stopping when it says so.
pub fn download_with(dir: Option<PathBuf>, revision: &str, progress: &Progress) -> Result<PathBuf> {
    let dir = dir.unwrap_or_else(default_dir);
    let hub = Hub::from_env();
    let files = hub.tree(revision)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Not complete until every file is again.
    let marker = dir.join(MARKER);
    if marker.exists() {
        std::fs::remove_file(&marker).with_context(|| format!("removing {}", marker.display()))?;
    }
    let total: u64 = files.iter().map(|f| f.size).sum();
    let present = |f: &HubFile| {
        let target = dir.join(&f.path);
        match target.metadata() {
            Ok(m) if m.len() == f.size => f.size,
            _ => part_of(&target).metadata().map(|m| m.len().min(f.size)).unwrap_or(0),
        }
    };
    let already: u64 = files.iter().map(present).sum();
    let free = free_bytes(&dir)?;
    if total - already + MARGIN > free {
        bail!(
            "{} has {:.1} GB free; {REPO} needs {:.1} GB more ({:.1} GB in all): free some space or give another --dir",
            dir.display(),
            gb(free),
            gb(total - already + MARGIN),
            gb(total)
        );
    }
    let progress = Counter { done: already.into(), total, file: String::new().into(), progress };
    progress.set(already);
    for file in &files {
        let target = dir.join(&file.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        *progress.file.borrow_mut() = file.path.clone();
        if target.exists() {
            if verify(&target, file).is_ok() {
                continue;
            }
            progress.sub(file.size);
            std::fs::remove_file(&target).with_context(|| format!("removing {}", target.display()))?;
        }
        let part = part_of(&target);
        for attempt in 0..2 {
            hub.fetch(revision, file, &part, &progress)?;
            match verify(&part, file) {
                Ok(()) => {
                    std::fs::rename(&part, &target).with_context(|| format!("naming {}", target.display()))?;
                    break;
                }
                Err(why) if attempt == 0 => {
                    eprintln!("\n{} {why}: fetching it again", file.path);
                    progress.sub(file.size);
                    std::fs::remove_file(&part).with_context(|| format!("removing {}", part.display()))?;
                }
                Err(why) => bail!("{} {why}, twice: the hub's copy or the connection is damaged", file.path),
            }
        }
    }
    let record = Marker { repo: REPO.into(), revision: revision.into(), files };
    // Written beside it and moved in whole: a failed write leaves no marker and no temporary.
    let mut temp = tempfile::NamedTempFile::new_in(&dir).with_context(|| format!("writing in {}", dir.display()))?;
    temp.write_all(&serde_json::to_vec_pretty(&record)?)
        .and_then(|_| temp.as_file().sync_all())
        .with_context(|| format!("writing {}", marker.display()))?;
    temp.persist(&marker).map_err(|e| anyhow!("writing {}: {}", marker.display(), e.error))?;
    Ok(dir)
}

fn read_marker(dir: &Path) -> Result<Marker> {
    let path = dir.join(MARKER);
    let text = std::fs::read_to_string(&path).map_err(|_| {
        anyhow!(
            "{} has no complete download (no {MARKER}): run `songloom model download --dir {}` to finish it",
            dir.display(),
            dir.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("{} is damaged", path.display()))
}

/// `songloom model verify DIR`: every file of the download against the hub's sizes and checksums.
pub fn verify_dir(dir: &Path) -> Result<()> {
    let record = read_marker(dir)?;
    let bad: Vec<String> = record
        .files
        .iter()
        .filter_map(|f| verify(&dir.join(&f.path), f).err().map(|why| format!("  {} {why}", f.path)))
        .collect();
    if !bad.is_empty() {
        bail!(
            "{} files of {} do not match the hub's ({}); `songloom model download --dir {}` fetches them again:\n{}",
            bad.len(),
            dir.display(),
            record.revision,
            dir.display(),
            bad.join("\n")
        );
    }
    say!(
        "{}: {} ({}), {} files, each as the hub lists it",
        dir.display(),
        record.repo,
        record.revision,
        record.files.len()
    );
    Ok(())
}

/// A folder of the models folder: where, and what its download record says (none: incomplete).
pub struct Installed {
    pub dir: PathBuf,
    /// The repository, revision and size of a complete download whose files are all there.
    pub complete: Option<(String, String, u64)>,
    /// The files a complete download recorded that are gone or not their size since, in words
    /// ("vocoder/config.json is missing").
    pub damaged: Vec<String>,
}

impl Installed {
    /// A complete download in words: "MiniMaxAI/MiniMax-Music3 (main), 28.5 GB".
    pub fn describe(&self) -> Option<String> {
        self.complete.as_ref().map(|(repo, revision, size)| format!("{repo} ({revision}), {:.1} GB", gb(*size)))
    }
}

/// The files of `record` that are not in `dir` with their recorded size, in words. Cheap (no
/// checksums: `model verify` reads every byte).
fn damaged(dir: &Path, record: &Marker) -> Vec<String> {
    record
        .files
        .iter()
        .filter_map(|f| match dir.join(&f.path).metadata() {
            Ok(m) if m.is_file() && m.len() == f.size => None,
            Ok(m) if m.is_file() => Some(format!("{} is {} bytes, not {}", f.path, m.len(), f.size)),
            Ok(_) => Some(format!("{} is not a file", f.path)),
            Err(_) => Some(format!("{} is missing", f.path)),
        })
        .collect()
}

/// The folders of the models folder, by name.
pub fn installed() -> Vec<Installed> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(models_dir())
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| match read_marker(&dir) {
            Ok(record) => {
                let damaged = damaged(&dir, &record);
                let size = record.files.iter().map(|f| f.size).sum();
                let complete = damaged.is_empty().then_some((record.repo, record.revision, size));
                Installed { dir, complete, damaged }
            }
            Err(_) => Installed { dir, complete: None, damaged: Vec::new() },
        })
        .collect()
}

/// `songloom model list`: the models in the models folder, complete or not. "Complete" means the
/// download finished and each file it recorded is still there with its size.
pub fn list() -> Result<()> {
    let models = installed();
    if models.is_empty() {
        say!("no models in {} yet: `songloom model download` fetches {REPO} (28.5 GB)", models_dir().display());
    }
    for model in models {
        let dir = model.dir.display();
        match model.describe() {
            Some(what) => say!("{dir}  {what}, complete"),
            None if !model.damaged.is_empty() => say!(
                "{dir}  damaged, {} files not as downloaded: {}; `songloom model download --dir {dir}` fetches them again",
                model.damaged.len(),
                model.damaged.join(", ")
            ),
            None => say!("{dir}  incomplete: `songloom model download --dir {dir}` finishes it"),
        }
    }
    Ok(())
}
