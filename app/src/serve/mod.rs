//! `songloom serve`: one process holding one engine, making the songs that HTTP clients ask for
//! one at a time (a queue), into the same library as the CLI and the window; see the README's
//! "HTTP API" section and [`api`].

mod access;
mod api;
mod connections;
mod jobs;
mod origin;
mod page;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use songloom_engine::pipeline::Pipeline;
use songloom_ui::contract::Recipe;

use crate::engine_args::{AdapterArgs, EngineArgs, ModelArg, adapter_recipes};
use crate::output::say;

#[derive(Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port, printed at start). Beyond loopback every
    /// request must carry the server's token.
    #[arg(long, default_value = "127.0.0.1:7878")]
    listen: SocketAddr,
    /// The token requests must carry (at least 16 letters and digits); without it one is made up
    /// and printed when listening beyond loopback. Given on loopback, it is checked there too.
    #[arg(long)]
    token: Option<String>,
    /// A host name the server also answers to (repeatable), e.g. the machine's name on the local
    /// network or a proxy's: requests for any other name but this machine's addresses (and
    /// `localhost` on loopback) are refused, so no web page can reach the server by rebinding a
    /// DNS name to its address.
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
    /// Seconds a client has to send a request's head, and then its body; a client that stops
    /// halfway is disconnected (408 for a body).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    request_timeout_s: f64,
    /// The length of the songs asked through MiniMax's cloud API shape (`POST
    /// /v1/music_generation`, which names none), as `generate --duration` takes it: the longest a
    /// song may be, which the model may end earlier. Without it, the longest the model makes.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    cloud_duration: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    model: ModelArg,
    #[command(flatten)]
    adapters: AdapterArgs,
    /// The library the songs are kept in; the user's data directory without it.
    #[arg(long)]
    library: Option<PathBuf>,
    /// Songs made at once (1 to 8): queued songs start together, and one queued while others run
    /// joins them at their next frame. Without it, as many of the longest songs as the plan's
    /// memory holds, at most 8.
    #[arg(long, value_name = "SONGS")]
    batch: Option<usize>,
}

pub fn run(args: ServeArgs) -> Result<()> {
    let token = access::token_for(args.listen, args.token.clone())?;
    let hosts = origin::Hosts::new(args.listen, &args.allow_host)?;
    anyhow::ensure!(
        args.request_timeout_s.is_finite() && (0.1..=3600.0).contains(&args.request_timeout_s),
        "--request-timeout-s must be 0.1 to 3600 seconds (got {})",
        args.request_timeout_s
    );
    let limits = connections::Limits {
        max_connections: connections::max_connections(raise_file_limit()),
        request_timeout: Duration::from_secs_f64(args.request_timeout_s),
        write_stall: Duration::from_secs_f64(args.request_timeout_s * 6.0),
        shutdown_grace: Duration::from_secs(2),
    };
    let cloud_duration_s = match &args.cloud_duration {
        Some(text) => {
            songloom_ui::duration::parse_duration(text).map_err(|e| anyhow::anyhow!("--cloud-duration: {e}"))?
        }
        None => songloom_engine::pipeline::MAX_DURATION_S,
    };
    let adapters = args.adapters.open()?;
    let device = args.engine.open_device()?;
    let model_dir = args.model.dir()?;
    let plan = Pipeline::plan(&model_dir, &device, args.engine.memory_request(), None)?;
    crate::generate::show_plan(&plan, device.kind(), false);
    let adapter_recipes = adapter_recipes(&adapters);
    let pipeline = Pipeline::load_adapted(&model_dir, adapters, device, &plan, &|_| {})
        .with_context(|| format!("loading the model from {}", model_dir.display()))?;
    for adapter in pipeline.adapters().into_iter().flat_map(|a| a.iter()) {
        eprintln!("LoRA {}", adapter.describe());
    }
    let most = crate::generate::MAX_TAKES;
    let batch = match args.batch {
        Some(n) if (1..=most).contains(&n) => n,
        Some(n) => anyhow::bail!("--batch must be between 1 and {most} songs, got {n}"),
        None => pipeline.batch_capacity(most).max(1),
    };
    eprintln!("making up to {batch} songs at once");
    let library = args.library.clone().unwrap_or_else(crate::library::default_dir);
    pipeline.max_frames(cloud_duration_s).map_err(|e| anyhow::anyhow!("--cloud-duration: {e}"))?;
    crate::library::Library::open(&library)?;
    let base = Recipe {
        duration_s: 0.0,
        ..crate::engine_args::engine_recipe(&args.engine, &args.model, &plan, adapter_recipes.clone())
    };
    let model = songloom_wire::ServedModel {
        path: model_dir.to_string_lossy().into_owned(),
        embedded: args.model.model.is_none(),
        plan: plan.describe(),
        sample_rate: pipeline.sample_rate(),
        device: format!("{} ({})", pipeline.device.kind().name(), pipeline.device.description()),
        adapters: adapter_recipes,
    };
    let server = Arc::new(api::Server {
        jobs: Arc::default(),
        pipeline: Arc::new(pipeline),
        library: library.clone(),
        base,
        precision: args.engine.precision,
        model,
        cloud_duration_s,
    });
    let (worker_done, drained) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (jobs, pipeline) = (server.jobs.clone(), server.pipeline.clone());
        std::thread::Builder::new().name("songloom-jobs".into()).spawn(move || {
            jobs.work(&pipeline, library, batch);
            let _ = worker_done.send(());
        })?
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let (address, also) = reachable_address(listener.local_addr()?);
        say!("serving on http://{address}{also}");
        if let Some(token) = &token {
            say!("token: {token} (open http://{address}/?token={token}, or send `Authorization: Bearer {token}`)");
        }
        if !page::HAS_PAGE {
            say!("(the web page is not built into this binary: run scripts/build-web.sh and build again)");
        }
        let mut signals = Signals::new()?;
        // Outermost first: the names and origins, the token, then the body within its time.
        let app = api::router(server.clone())
            .layer(axum::middleware::from_fn_with_state(
                (limits.request_timeout, api::BODY_LIMIT),
                connections::body_in_time,
            ))
            .layer(axum::middleware::from_fn_with_state(Arc::new(token.clone()), access::check))
            .layer(axum::middleware::from_fn_with_state(Arc::new(hosts), origin::check));
        let jobs = server.jobs.clone();
        let stop = async move {
            let name = signals.next().await;
            note(&format!("{name}: stopping; songs in progress are cancelled (again to stop at once)"));
            // Songs waiting or being made are cancelled (leaving no file), which ends their
            // streams once the worker has sent their `cancelled` events.
            jobs.close();
            // A stage that cannot stop midway could hold the shutdown for long: a second signal
            // ends the process (the next start removes what the song left).
            tokio::spawn(async move {
                let name = signals.next().await;
                note(&format!("{name} again: stopped without waiting for the song in progress"));
                std::process::exit(130);
            });
        };
        connections::serve(listener, app, limits, stop, async {
            let _ = drained.await;
        })
        .await;
        anyhow::Ok(())
    });
    server.jobs.close();
    let _ = worker.join();
    // Connections still open past the grace are dropped with the runtime, without waiting.
    runtime.shutdown_background();
    served?;
    note("stopped; songs in progress were cancelled, finished ones are in the library");
    Ok(())
}

/// A line on standard error that may be gone (the terminal hung up): then it is dropped, not a
/// panic in the middle of the shutdown.
fn note(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// SIGINT (Ctrl-C), SIGTERM (a service manager, `kill`) and SIGHUP (the terminal closed): each
/// stops the server the same way.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("handling SIGINT")?,
            terminate: signal(SignalKind::terminate()).context("handling SIGTERM")?,
            hangup: signal(SignalKind::hangup()).context("handling SIGHUP")?,
        })
    }

    /// The next signal's name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.hangup.recv() => "SIGHUP",
        }
    }
}

/// Raises the soft limit on open files to the hard one (each connection takes one); the limit now.
fn raise_file_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write the one struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

/// An address the server can be opened at, and a note on what else reaches it. Listening on every
/// interface (`0.0.0.0`, `::`), that is this machine's address on its network, which another
/// machine can open, not the unspecified one, which none can.
fn reachable_address(local: SocketAddr) -> (SocketAddr, String) {
    if !local.ip().is_unspecified() {
        return (local, String::new());
    }
    let loopback = SocketAddr::new(
        if local.is_ipv4() { Ipv4Addr::LOCALHOST.into() } else { Ipv6Addr::LOCALHOST.into() },
        local.port(),
    );
    // The address the system would send from towards a documentation-only network (nothing is
    // sent: a UDP "connection" only picks the route).
    let towards = if local.is_ipv4() { "192.0.2.1:9" } else { "[2001:db8::1]:9" };
    let outward = std::net::UdpSocket::bind(SocketAddr::new(local.ip(), 0))
        .and_then(|socket| socket.connect(towards).and_then(|()| socket.local_addr()))
        .ok()
        .filter(|a| !a.ip().is_unspecified() && !a.ip().is_loopback());
    match outward {
        Some(outward) => (
            SocketAddr::new(outward.ip(), local.port()),
            format!(" (every interface; on this machine also http://{loopback})"),
        ),
        None => (loopback, " (every interface: from another machine, use this machine's address)".into()),
    }
}
