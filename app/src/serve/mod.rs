//! `songloom serve`: one process holding one engine, making the songs that HTTP clients ask for
//! one at a time (a queue), into the same library as the CLI and the window; see the README's
//! "HTTP API" section and [`api`].

mod access;
mod api;
mod jobs;
mod page;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use songloom_engine::pipeline::Pipeline;
use songloom_engine::plan::WeightsChoice;
use songloom_ui::contract::{DEFAULT_GUIDANCE, Recipe};

use crate::engine_args::{EngineArgs, ModelArg};
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
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    model: ModelArg,
    /// The library the songs are kept in; the user's data directory without it.
    #[arg(long)]
    library: Option<PathBuf>,
}

pub fn run(args: ServeArgs) -> Result<()> {
    let token = access::token_for(args.listen, args.token.clone())?;
    let device = args.engine.open_device()?;
    let model_dir = args.model.dir()?;
    let plan = Pipeline::plan(&model_dir, &device, args.engine.memory_request(), None)?;
    crate::generate::show_plan(&plan, device.kind(), false);
    let pipeline = Pipeline::load_planned(&model_dir, device, &plan, &|_| {})
        .with_context(|| format!("loading the model from {}", model_dir.display()))?;
    let library = args.library.clone().unwrap_or_else(crate::library::default_dir);
    crate::library::Library::open(&library)?;
    let base = Recipe {
        description: String::new(),
        lyrics: String::new(),
        duration_s: 0.0,
        seed: 0,
        steps: 30,
        guidance: DEFAULT_GUIDANCE,
        device: args.engine.device.name().to_string(),
        precision: args.engine.precision.name().to_string(),
        model: args.model.recipe_model(),
        weights: WeightsChoice::of(plan.formats).name().to_string(),
        max_memory_gb: args.engine.max_memory_gb(),
    };
    let model = songloom_wire::ServedModel {
        path: model_dir.to_string_lossy().into_owned(),
        embedded: args.model.model.is_none(),
        plan: plan.describe(),
        sample_rate: pipeline.sample_rate(),
        device: format!("{} ({})", pipeline.device.kind().name(), pipeline.device.description()),
    };
    let server = Arc::new(api::Server {
        jobs: Arc::default(),
        pipeline: Arc::new(pipeline),
        library: library.clone(),
        base,
        precision: args.engine.precision,
        model,
    });
    let worker = {
        let (jobs, pipeline) = (server.jobs.clone(), server.pipeline.clone());
        std::thread::Builder::new().name("songloom-jobs".into()).spawn(move || jobs.work(&pipeline, library))?
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        say!("serving on http://{}", listener.local_addr()?);
        if let Some(token) = &token {
            say!(
                "token: {token} (open http://{}/?token={token}, or send `Authorization: Bearer {token}`)",
                listener.local_addr()?
            );
        }
        if !page::HAS_PAGE {
            say!("(the web page is not built into this binary: run scripts/build-web.sh and build again)");
        }
        let jobs = server.jobs.clone();
        axum::serve(listener, api::router(server.clone(), token.clone()))
            .with_graceful_shutdown(async move {
                let _ = tokio::signal::ctrl_c().await;
                // Songs waiting or being made are cancelled (leaving no file), which ends their
                // streams, so open connections close and the server can stop.
                jobs.close();
            })
            .await
            .context("serving")
    });
    server.jobs.close();
    let _ = worker.join();
    served?;
    eprintln!("stopped; songs in progress were cancelled, finished ones are in the library");
    Ok(())
}
