//! `songloom serve` against what a web page of another site, a stopping service manager and a
//! slow or hostile client do: changes only from the server's own page and in JSON, answers only
//! under its own names, SIGTERM and SIGHUP stopping it like Ctrl-C, half-sent requests cut off,
//! and a flood of half-open connections under a 1,024-file limit not starving a song.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;

use common::{Server, request};

fn song(description: &str, seconds: f64) -> String {
    json!({"description": description, "lyrics": "[verse]\nla la la", "duration": seconds, "seed": 3, "steps": 2})
        .to_string()
}

/// Sends `head` (its lines, without the blank line that ends it) and `body` as they are; the
/// status, the head (lower case) and the body, read to the end.
fn send(addr: &str, head: &[String], body: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut text = head.join("\r\n");
    text.push_str(&format!("\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()));
    stream.write_all(text.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head, raw[split + 4..].to_vec())
}

/// The one-line JSON error of a refused request.
fn error_of(status: u16, head: &str, body: &[u8]) -> String {
    assert!(head.contains("content-type: application/json"), "{status}: {head}");
    let error: Value = serde_json::from_slice(body).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(body)));
    let error = error["error"].as_str().expect("an error").to_string();
    assert!(!error.is_empty() && !error.contains('\n'), "{error}");
    error
}

/// Whether the server holds song `id` (a refused request must not have queued one).
fn has_song(server: &Server, id: u64) -> bool {
    server.call("GET", &format!("/api/songs/{id}"), None).0 == 200
}

#[test]
fn a_page_of_another_site_cannot_queue_or_change_anything() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let addr = server.addr.clone();
    let host = format!("Host: {addr}");
    let body = song("from elsewhere", 1.0);
    // What a page can send without the browser asking first: a `text/plain` form or fetch.
    let cases: [(&[&str], u16); 6] = [
        (&["Content-Type: text/plain", "Origin: https://evil.example"], 403),
        (&["Content-Type: text/plain;charset=UTF-8"], 415),
        (&["Content-Type: application/x-www-form-urlencoded"], 415),
        (&["Content-Type: application/json", "Origin: https://evil.example"], 403),
        (&["Content-Type: application/json", "Origin: null"], 403),
        (&["Content-Type: application/json", "Sec-Fetch-Site: cross-site"], 403),
    ];
    for (headers, expected) in cases {
        let mut head = vec!["POST /api/songs HTTP/1.1".to_string(), host.clone()];
        head.extend(headers.iter().map(|h| h.to_string()));
        let (status, response_head, response) = send(&addr, &head, &body);
        assert_eq!(status, expected, "{headers:?}: {}", String::from_utf8_lossy(&response));
        error_of(status, &response_head, &response);
    }
    assert!(!has_song(&server, 1), "a refused request queued a song");
    // A change without a body from another site's page.
    let head = ["DELETE /api/library/1 HTTP/1.1".to_string(), host.clone(), "Origin: http://evil.example".into()];
    assert_eq!(send(&addr, &head, "").0, 403);
    // The server's own page, as the browser sends it.
    let own = [
        "POST /api/songs HTTP/1.1".to_string(),
        host.clone(),
        format!("Origin: http://{addr}"),
        "Sec-Fetch-Site: same-origin".into(),
        "Content-Type: application/json".into(),
    ];
    let (status, _, created) = send(&addr, &own, &body);
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&created));
    let created: Value = serde_json::from_slice(&created).unwrap();
    assert_eq!(created["id"], 1, "{created}");
    // Another site's page may link to the page, and make no other request, not even a read.
    let navigate = ["Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate"];
    assert_ne!(request(&addr, "GET", "/", &navigate, None).0, 403);
    let (status, head, body) =
        request(&addr, "GET", "/api/library", &["Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: no-cors"], None);
    assert_eq!(status, 403);
    error_of(status, &head, &body);
    // Reading needs no origin: another site's page cannot read the answer (no CORS headers).
    let (status, head, _) = request(&addr, "GET", "/api/library", &["Origin: https://evil.example"], None);
    assert_eq!(status, 200);
    assert!(!head.contains("access-control-allow-origin"), "{head}");
}

#[test]
fn a_name_rebound_to_the_server_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = Server::start_with(dir.path(), &["--listen", "127.0.0.1:0", "--allow-host", "songs.lan"]);
    let port = server.addr.rsplit_once(':').unwrap().1.to_string();
    for (name, expected) in [
        ("evil.example", 421),
        ("evil.example:{port}", 421),
        ("localhost.evil.example:{port}", 421),
        ("192.168.7.7:{port}", 421),
        ("localhost:{port}", 200),
        ("127.0.0.1:{port}", 200),
        ("[::1]:{port}", 200),
        ("songs.lan:{port}", 200),
        ("SONGS.LAN", 200),
    ] {
        let host = name.replace("{port}", &port);
        for path in ["/api/library", "/api/model", "/"] {
            let head = [format!("GET {path} HTTP/1.1"), format!("Host: {host}")];
            let (status, response_head, body) = send(&server.addr, &head, "");
            if path == "/" && expected == 200 {
                // The page, or the JSON 404 of a binary built without it.
                assert!(status == 200 || status == 404, "{host} {path}: {status}");
                continue;
            }
            assert_eq!(status, expected, "{host} {path}: {}", String::from_utf8_lossy(&body));
            if expected == 421 {
                let error = error_of(status, &response_head, &body);
                assert!(error.contains("--allow-host"), "{error}");
            }
        }
    }
    // The rules of HTTP on names: one Host, an absolute target naming the same server.
    let addr = server.addr.clone();
    for (head, expected) in [
        (vec!["GET /api/library HTTP/1.1".to_string(), format!("Host: {addr}"), "Host: evil.example".into()], 400),
        (vec!["GET /api/library HTTP/1.1".to_string()], 400),
        (vec!["GET http://evil.example/api/library HTTP/1.1".to_string(), format!("Host: {addr}")], 421),
        (vec![format!("GET http://{addr}/api/library HTTP/1.1"), format!("Host: {addr}")], 200),
        (vec!["GET /api/library HTTP/1.1".to_string(), "Host: [::1]evil.example".into()], 421),
    ] {
        let (status, response_head, body) = send(&addr, &head, "");
        assert_eq!(status, expected, "{head:?}: {}", String::from_utf8_lossy(&body));
        if expected != 200 {
            error_of(status, &response_head, &body);
        }
    }
    // A name that is not a host name is refused at start.
    let bad = std::process::Command::new(common::binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--allow-host", "evil.example/x"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--allow-host"), "{}", String::from_utf8_lossy(&bad.stderr));
}

/// Waits for the child to exit, at most `limit`; its status.
fn exit_within(server: &mut Server, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < limit, "the server did not stop within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_running(server: &Server, id: u64) {
    let start = Instant::now();
    while server.json("GET", &format!("/api/songs/{id}"), None).1["state"] != "running" {
        assert!(start.elapsed() < Duration::from_secs(60), "song {id} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_and_sighup_stop_the_server_like_ctrl_c() {
    // SIGHUP as a closed terminal sends it: standard error is gone too.
    for (signal, name, stderr_open) in [(libc::SIGTERM, "SIGTERM", true), (libc::SIGHUP, "SIGHUP", false)] {
        let dir = tempfile::tempdir().unwrap();
        let library = dir.path().join("library");
        let mut server = Server::start(dir.path());
        // One song kept, one being made when the signal comes, one waiting.
        let (_, kept) = server.json("POST", "/api/songs", Some(serde_json::from_str(&song("kept", 1.0)).unwrap()));
        assert_eq!(server.wait(kept["id"].as_u64().unwrap())["state"], "finished");
        let long = serde_json::from_str(&song("long", 60.0)).unwrap();
        let (_, running) = server.json("POST", "/api/songs", Some(long));
        let (_, waiting) = server.json("POST", "/api/songs", Some(serde_json::from_str(&song("next", 1.0)).unwrap()));
        let running = running["id"].as_u64().unwrap();
        wait_running(&server, running);
        let events = {
            let addr = server.addr.clone();
            std::thread::spawn(move || request(&addr, "GET", &format!("/api/songs/{running}/events"), &[], None))
        };
        let waiting_events = {
            let (addr, id) = (server.addr.clone(), waiting["id"].as_u64().unwrap());
            std::thread::spawn(move || request(&addr, "GET", &format!("/api/songs/{id}/events"), &[], None))
        };
        std::thread::sleep(Duration::from_millis(300));
        if !stderr_open {
            drop(server.child.stderr.take());
        }
        // SAFETY: the child's pid.
        unsafe { libc::kill(server.child.id() as i32, signal) };
        let status = exit_within(&mut server, Duration::from_secs(60));
        assert!(status.success(), "{name}: {status:?}");
        if stderr_open {
            let mut stderr = String::new();
            server.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
            assert!(stderr.contains(name) && stderr.contains("cancelled"), "{name}: {stderr}");
        }
        for (what, stream) in [("running", events), ("waiting", waiting_events)] {
            let (status, _, body) = stream.join().unwrap();
            let body = String::from_utf8_lossy(&body);
            assert_eq!(status, 200, "{body}");
            assert!(body.contains("event: cancelled"), "{name}: the {what} song's events end with no cancel: {body}");
        }
        // No temporary left beside the kept song, which the library still lists.
        let files: Vec<String> = std::fs::read_dir(library.join("songs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files.len(), 1, "{name}: {files:?}");
        assert!(files[0].ends_with(".wav"), "{files:?}");
        let list = std::process::Command::new(common::binary())
            .args(["library", "list", "--json", "--library"])
            .arg(&library)
            .output()
            .unwrap();
        assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
        assert_eq!(String::from_utf8_lossy(&list.stdout).lines().count(), 1, "{name}");
    }
}

#[test]
fn a_half_sent_request_is_cut_off_and_does_not_hold_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, _) = Server::start_with(dir.path(), &["--listen", "127.0.0.1:0", "--request-timeout-s", "1"]);
    // A head that never ends: the connection is closed.
    let mut head_only = TcpStream::connect(&server.addr).unwrap();
    head_only.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    head_only.write_all(b"GET /api/library HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = head_only.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).contains(" 200 "), "{}", String::from_utf8_lossy(&rest));
    // A body that stops halfway: a 408 with the one-line JSON error.
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream
        .write_all(
            b"POST /api/songs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"desc",
        )
        .unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw);
    assert!(raw.starts_with("HTTP/1.1 408"), "{raw}");
    assert!(raw.contains("did not arrive"), "{raw}");
    assert!(!has_song(&server, 1));
    // A kept-alive connection that goes quiet is closed too.
    let mut idle = TcpStream::connect(&server.addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    idle.write_all(b"GET /api/model HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut all = Vec::new();
    let _ = idle.read_to_end(&mut all);
    assert!(String::from_utf8_lossy(&all).starts_with("HTTP/1.1 200"));
    // Held half-sent requests do not keep Ctrl-C from stopping the server.
    let held: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            s.write_all(b"POST /api/songs HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
            s
        })
        .collect();
    // SAFETY: the child's pid; SIGINT is what Ctrl-C sends.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGINT) };
    assert!(exit_within(&mut server, Duration::from_secs(30)).success());
    drop(held);
}

/// Lets this process open at least `wanted` files, as far as its hard limit allows.
fn raise_own_file_limit(wanted: u64) -> bool {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write the one struct given.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        if limit.rlim_cur < wanted && limit.rlim_max >= wanted {
            limit.rlim_cur = limit.rlim_max.min(wanted * 2);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur >= wanted
}

/// The server run under `ulimit -n files` (soft and hard), as a default user session has it.
fn start_with_file_limit(dir: &std::path::Path, files: u64, args: &[&str]) -> Server {
    Server::start_configured(dir, args, move |command| {
        // SAFETY: setrlimit is async-signal-safe, as pre_exec needs.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit { rlim_cur: files, rlim_max: files };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
    .0
}

fn half_open(addr: &str) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.write_all(b"GET /api/library HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").ok()?;
    Some(stream)
}

#[test]
fn a_flood_of_half_open_connections_does_not_starve_a_song() {
    if !raise_own_file_limit(1400) {
        eprintln!("skipped: this test process may not open 1,400 files (its hard limit is lower)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Timeouts far longer than the test: only the connection cap protects the server here.
    let mut server =
        start_with_file_limit(dir.path(), 1024, &["--listen", "127.0.0.1:0", "--request-timeout-s", "600"]);
    let (status, created) =
        server.json("POST", "/api/songs", Some(serde_json::from_str(&song("flooded", 3.0)).unwrap()));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    let events = {
        let addr = server.addr.clone();
        std::thread::spawn(move || request(&addr, "GET", &format!("/api/songs/{id}/events"), &[], None))
    };
    let flood: Vec<TcpStream> = (0..1100).filter_map(|_| half_open(&server.addr)).collect();
    assert_eq!(flood.len(), 1100, "connections were refused at the socket");
    // Another client is answered at once, the song is made and kept, its stream goes on.
    let (status, library) = server.json("GET", "/api/library", None);
    assert_eq!(status, 200, "{library}");
    let finished = server.wait(id);
    assert_eq!(finished["state"], "finished", "{finished}");
    let (status, _, body) = events.join().unwrap();
    let body = String::from_utf8_lossy(&body);
    assert!(status == 200 && body.contains("event: saved"), "{body}");
    let (status, wav) = server.call("GET", &format!("/api/songs/{id}/audio.wav"), None);
    assert!(status == 200 && wav.len() > 44 * 1000, "{status}");
    // And Ctrl-C stops it while the flood is still held.
    // SAFETY: the child's pid.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGINT) };
    assert!(exit_within(&mut server, Duration::from_secs(30)).success());
    drop(flood);
}

#[test]
fn past_the_cap_with_every_connection_busy_a_new_one_is_refused_with_json() {
    let dir = tempfile::tempdir().unwrap();
    // 160 files: 32 connections after the descriptors kept for the engine and the library.
    let server = start_with_file_limit(dir.path(), 160, &["--listen", "127.0.0.1:0"]);
    let (_, created) = server.json("POST", "/api/songs", Some(serde_json::from_str(&song("busy", 60.0)).unwrap()));
    let id = created["id"].as_u64().unwrap();
    // Each events stream keeps its connection busy while the song is made.
    let busy: Vec<TcpStream> = (0..32)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            write!(s, "GET /api/songs/{id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
            let mut first = [0u8; 12];
            s.read_exact(&mut first).unwrap();
            assert_eq!(&first, b"HTTP/1.1 200");
            s
        })
        .collect();
    let mut refused = TcpStream::connect(&server.addr).unwrap();
    refused.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    // Its request sent: the answer must arrive, not a reset for the unread request.
    refused.write_all(b"GET /api/model HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    refused.read_to_end(&mut raw).expect("the answer, not a reset");
    let raw = String::from_utf8_lossy(&raw);
    assert!(raw.starts_with("HTTP/1.1 503"), "{raw}");
    let (_, body) = raw.split_once("\r\n\r\n").unwrap();
    let error: Value = serde_json::from_str(body).unwrap();
    assert!(error["error"].as_str().unwrap().contains("connections"), "{error}");
    // Once one is let go, a new client is served.
    drop(busy);
    let start = Instant::now();
    while server.call("GET", "/api/model", None).0 != 200 {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_slow_download_outlasts_a_flood_and_a_reader_that_stops_is_let_go() {
    let dir = tempfile::tempdir().unwrap();
    // 160 files: 32 connections; a client that takes nothing for 6 x 0.5 s is let go.
    let server = start_with_file_limit(dir.path(), 160, &["--listen", "127.0.0.1:0", "--request-timeout-s", "0.5"]);
    // A song larger than the sockets' buffers hold.
    let (_, created) = server.json("POST", "/api/songs", Some(serde_json::from_str(&song("large", 30.0)).unwrap()));
    let id = created["id"].as_u64().unwrap();
    assert_eq!(server.wait(id)["state"], "finished");
    let (_, whole) = server.call("GET", &format!("/api/songs/{id}/audio.wav"), None);
    assert!(whole.len() > 8_000_000, "{} bytes", whole.len());
    let fetch = |addr: &str| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        write!(s, "GET /api/songs/{id}/audio.wav HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        s
    };
    // A slow reader: it takes a little, pauses while 100 idle connections arrive, takes the rest.
    let mut slow = fetch(&server.addr);
    let mut got = vec![0u8; 65536];
    slow.read_exact(&mut got).unwrap();
    let flood: Vec<TcpStream> = (0..100).filter_map(|_| half_open(&server.addr)).collect();
    std::thread::sleep(Duration::from_millis(1000));
    slow.read_to_end(&mut got).unwrap();
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(got.len() - head_end, whole.len(), "the slow download was cut off");
    drop(flood);
    // A reader that takes nothing is let go: what it gets later ends short. Its receive buffer is
    // kept small, so the song cannot all wait in the sockets' buffers.
    let mut stopped = TcpStream::connect(&server.addr).unwrap();
    let small: libc::c_int = 16 * 1024;
    // SAFETY: the socket is this stream's, the option's value an int as SO_RCVBUF takes.
    unsafe {
        use std::os::fd::AsRawFd;
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        libc::setsockopt(stopped.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, (&raw const small).cast(), size);
    }
    stopped.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(stopped, "GET /api/songs/{id}/audio.wav HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_secs(6));
    let mut all = Vec::new();
    let _ = stopped.read_to_end(&mut all);
    assert!(all.len() < whole.len(), "{} of {} bytes", all.len(), whole.len());
}

#[test]
fn a_client_without_the_token_is_refused_before_its_body_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let token = "a-long-enough-token-1234";
    let (server, _) = Server::start_with(dir.path(), &["--listen", "127.0.0.1:0", "--token", token]);
    // A body that never comes: the answer is the token's 401, not a 408 after the timeout.
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream
        .write_all(
            b"POST /api/songs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
        )
        .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 401");
}
