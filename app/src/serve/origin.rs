//! What a web page of another site could make a browser send, refused before the token is checked
//! and on loopback too: a `Host` that is not this server (a DNS name rebound to its address), a
//! change (POST, PATCH, PUT, DELETE) from another origin, and a body that is not declared JSON
//! (a "simple" cross-site request, which browsers send without asking first). Browsers ask before
//! sending a cross-site JSON body or a DELETE, and no CORS answer ever allows it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Version, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};
use songloom_wire::ErrorBody;

/// Which `Host` names this server answers to.
pub struct Hosts {
    listen: SocketAddr,
    /// Names given with `--allow-host` (lower case, without a port).
    allowed: Vec<String>,
}

impl Hosts {
    pub fn new(listen: SocketAddr, allowed: &[String]) -> anyhow::Result<Hosts> {
        let allowed = allowed
            .iter()
            .map(|name| {
                let name = name.trim().to_ascii_lowercase();
                anyhow::ensure!(
                    is_host_name(&name),
                    "--allow-host takes a host name such as `songs.lan` (letters, digits, `-` and `.`, no port), \
                     not `{name}`"
                );
                Ok(name)
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Hosts { listen, allowed })
    }

    /// Whether a `Host` header's name (its port is not checked: a forwarded port changes it) is
    /// this server's: `localhost` or the loopback address when listening there, an address of this
    /// machine's when listening on every interface (no DNS name can rebind to an address literal),
    /// the address listened on, or a name allowed by a flag.
    fn answers_to(&self, host: &str) -> bool {
        let name = host_name(host).to_ascii_lowercase();
        if self.allowed.contains(&name) {
            return true;
        }
        let ip = match name.strip_prefix('[') {
            Some(v6) => v6.strip_suffix(']').and_then(|v6| v6.parse::<IpAddr>().ok()),
            None => name.parse::<IpAddr>().ok(),
        };
        let listen = self.listen.ip();
        if listen.is_unspecified() {
            return ip.is_some() || name == "localhost";
        }
        ip == Some(listen) || (listen.is_loopback() && (name == "localhost" || ip.is_some_and(|ip| ip.is_loopback())))
    }
}

/// The name part of a `Host` value (`name`, `name:port`, `[v6]:port`); the whole value when it
/// has another shape, which then matches no name.
fn host_name(host: &str) -> &str {
    let is_port = |port: &str| port.bytes().all(|b| b.is_ascii_digit());
    if host.starts_with('[') {
        return match host.split_once(']') {
            Some((v6, rest)) if rest.is_empty() || rest.strip_prefix(':').is_some_and(is_port) => &host[..v6.len() + 1],
            _ => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if is_port(port) && !name.contains(':') => name,
        _ => host,
    }
}

fn is_host_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b))
}

fn refuse(status: StatusCode, error: String) -> Response {
    (status, Json(ErrorBody { error })).into_response()
}

fn changes_something(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).map(|v| v.to_str().unwrap_or("(not text)"))
}

/// Why a request is refused, if it is.
fn refusal(hosts: &Hosts, request: &Request) -> Option<Response> {
    let headers = request.headers();
    let mut host_headers = headers.get_all(header::HOST).iter();
    let host = host_headers.next().map(|v| v.to_str().unwrap_or("(not text)"));
    if host_headers.next().is_some() {
        return Some(refuse(StatusCode::BAD_REQUEST, "a request names its host once (two `Host` headers)".into()));
    }
    // HTTP/1.0 clients may leave it out; a browser never does.
    if host.is_none() && request.version() >= Version::HTTP_11 {
        return Some(refuse(StatusCode::BAD_REQUEST, "an HTTP/1.1 request needs a `Host` header".into()));
    }
    // An absolute target (`GET http://name/...`) names the host too.
    let target = request.uri().authority().map(|a| a.as_str());
    if let Some(name) = [host, target].into_iter().flatten().find(|name| !hosts.answers_to(name)) {
        let name = host_name(name);
        let way_out =
            if is_host_name(name) { format!(", or start it with `--allow-host {name}`") } else { String::new() };
        return Some(refuse(
            StatusCode::MISDIRECTED_REQUEST,
            format!("this server does not answer to the name `{name}`: use its address{way_out}"),
        ));
    }
    // Fetch metadata: browsers say where a request comes from. Another site's page may link to the
    // page (a navigation), nothing else: no change, and no read that would make the server work.
    let site = header_text(headers, header::HeaderName::from_static("sec-fetch-site"));
    let mode = header_text(headers, header::HeaderName::from_static("sec-fetch-mode"));
    let navigation = matches!(*request.method(), Method::GET | Method::HEAD) && mode == Some("navigate");
    if site.is_some_and(|site| site == "cross-site" || site == "same-site") && !navigation {
        return Some(refuse(StatusCode::FORBIDDEN, "requests come only from this server's own page".into()));
    }
    if !changes_something(request.method()) {
        return None;
    }
    if let Some(origin) = header_text(headers, header::ORIGIN) {
        // https too: the page may be served through a TLS proxy.
        let own = host.is_some_and(|host| {
            ["http://", "https://"].iter().any(|scheme| origin.eq_ignore_ascii_case(&format!("{scheme}{host}")))
        });
        if !own {
            return Some(refuse(
                StatusCode::FORBIDDEN,
                format!("changes come only from this server's own page, not from `{origin}`"),
            ));
        }
    }
    let has_body = headers.contains_key(header::CONTENT_LENGTH) || headers.contains_key(header::TRANSFER_ENCODING);
    let declared_json = header_text(headers, header::CONTENT_TYPE).is_some_and(|t| {
        t.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    });
    let empty = headers.get(header::CONTENT_LENGTH).is_some_and(|n| n.as_bytes() == b"0");
    if has_body && !empty && !declared_json {
        return Some(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a request body must be sent as `Content-Type: application/json`".into(),
        ));
    }
    None
}

pub async fn check(State(hosts): State<Arc<Hosts>>, request: Request, next: Next) -> Response {
    match refusal(&hosts, &request) {
        Some(refused) => refused,
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(listen: &str, allowed: &[&str]) -> Hosts {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        Hosts::new(listen.parse().unwrap(), &allowed).unwrap()
    }

    #[test]
    fn loopback_answers_to_loopback_names_only() {
        let h = hosts("127.0.0.1:7878", &[]);
        for ok in ["127.0.0.1:7878", "localhost:7878", "LOCALHOST", "127.0.0.1", "[::1]:7878", "localhost:9000"] {
            assert!(h.answers_to(ok), "{ok}");
        }
        for bad in
            ["evil.example", "evil.example:7878", "192.168.1.5:7878", "localhost.evil.example", "[::1", "[::1]evil"]
        {
            assert!(!h.answers_to(bad), "{bad}");
        }
    }

    #[test]
    fn every_interface_answers_to_addresses_and_allowed_names() {
        let h = hosts("0.0.0.0:7878", &["Songs.lan"]);
        for ok in ["192.168.1.5:7878", "[fe80::1]:7878", "localhost", "songs.lan:7878", "SONGS.LAN"] {
            assert!(h.answers_to(ok), "{ok}");
        }
        for bad in ["evil.example:7878", "songs.lan.evil.example", "192.168.1.5.nip.io"] {
            assert!(!h.answers_to(bad), "{bad}");
        }
    }

    #[test]
    fn an_allowed_host_is_a_name() {
        let err = Hosts::new("127.0.0.1:0".parse().unwrap(), &["a b".into()]).err().unwrap();
        assert!(err.to_string().contains("--allow-host"), "{err}");
        assert!(Hosts::new("127.0.0.1:0".parse().unwrap(), &["songs.lan:80".into()]).is_err());
    }
}
