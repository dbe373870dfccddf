//! `weft serve`: the HTTP API of `weft-server`, configured from a file, the environment and
//! flags (in that order of precedence, flags last).
//!
//! The provider is built here as for `weft run` (the faux provider with `--script`, or an HTTP
//! provider whose key and base URL come from the environment); sessions are kept in the store
//! `--store` names (default: the SQLite file `$WEFT_HOME/weft.db`). SIGINT and SIGTERM shut the
//! server down gracefully: no new connections, streams end, runs get the configured grace and
//! are then aborted (saved), and the process exits 0.

use anyhow::{anyhow, bail};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use weft_agent::Agent;
use weft_llm::Provider;
use weft_llm::config;
use weft_llm::faux::{FauxProvider, FauxScript};
use weft_llm::http::HttpClient;
use weft_server::{ServeConfig, Server, Settings};

use crate::Failure;
use crate::store::StoreArgs;

/// The flags of `weft serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Where to listen, HOST:PORT [default: 127.0.0.1:8080; also `addr` in the config file,
    /// WEFT_ADDR]. Without API keys only a loopback address is accepted.
    #[arg(long, value_name = "HOST:PORT")]
    addr: Option<String>,

    #[command(flatten)]
    store: StoreArgs,

    /// The model provider: openai, openai-responses, anthropic, gemini or faux [default: faux
    /// with --script; also `[provider] name`, WEFT_PROVIDER].
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,

    /// The default model of new sessions [also `[provider] model`, WEFT_MODEL].
    #[arg(long, value_name = "ID")]
    model: Option<String>,

    /// The faux provider's script, a JSON file of turns (so the server runs offline).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,

    /// The configuration file [default: ./weft.toml, else $WEFT_HOME/weft.toml, if present].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// A JSON file of models to add or override in the price registry.
    #[arg(long, value_name = "FILE")]
    models: Option<PathBuf>,

    /// The most model calls a run may make [default: 50; also `[limits] max_turns`].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: Option<u32>,

    /// How durably runs are stored when their request names nothing (`options.durability`):
    /// sync, async or exit [default: async; also `durability`, WEFT_DURABILITY].
    #[arg(long, value_name = "MODE")]
    durability: Option<weft_agent::Durability>,
}

impl ServeArgs {
    /// The configuration file it names (`--config`).
    pub(crate) fn config(&self) -> Option<&std::path::Path> {
        self.config.as_deref()
    }
}

/// `weft serve`.
pub(crate) fn command(args: ServeArgs) -> Result<(), Failure> {
    small_pages();
    let env = |name: &str| std::env::var(name).ok();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let file = weft_server::find_file(args.config.as_deref(), &cwd, &env)
        .map_err(|e| Failure::usage(&anyhow!("{e}")))?;
    let config =
        ServeConfig::load(file.as_deref(), &env).map_err(|e| Failure::usage(&anyhow!("{e}")))?;
    config
        .tools
        .check_served(!config.api_keys.is_empty())
        .map_err(|e| Failure::usage(&anyhow!("{e}")))?;
    let plan = plan(&args, &config).map_err(|e| Failure::usage(&e))?;
    let runtime = crate::runtime()?;
    runtime.block_on(async move {
        let store = StoreArgs { store: args.store.store.clone().or(config.store.clone()) };
        let store = store.open().await.map_err(|e| Failure::usage(&e))?;
        let builder = crate::tools::with_tools(plan.builder, &config.tools)
            .await
            .map_err(|e| Failure::usage(&e))?;
        let agent = builder
            .identity(crate::store::identity(&*store))
            .store(store)
            .capture_content(crate::otel::capture_content())
            .build()
            .map_err(|e| Failure::usage(&anyhow!("cannot set up the agent: {e}")))?;
        let listener = tokio::net::TcpListener::bind(&plan.addr)
            .await
            .map_err(|e| Failure::usage(&anyhow!("cannot listen on {}: {e}", plan.addr)))?;
        let local = listener.local_addr().map_err(|e| Failure::run(e.to_string()))?;
        let server = Server::new(agent, plan.settings);
        let failure = |e: weft_server::ServeError| match e {
            weft_server::ServeError::Unprotected(_) => Failure::usage(&anyhow!("{e}")),
            other => Failure::run(other.to_string()),
        };
        // "serving" only once the server will: an address it refuses is said instead.
        server.check_addr(local).map_err(failure)?;
        crate::term::eprint_line(&format!("weft: serving the agent API on http://{local}"));
        server.serve(listener, shutdown_signal()).await.map_err(failure)
    })
}

/// Has the kernel back this process's memory with 4 KiB pages only, before anything is
/// allocated for serving.
///
/// The allocator asks for transparent huge pages on its arenas (`MADV_HUGEPAGE`), which pays off
/// for one large session (`weft run` over a million deltas takes fewer page faults) and not for a
/// server of many small ones: each session's few KiB then make the process grow 2 MiB at a time,
/// memory freed by finished sessions is only returned to the system in whole huge pages, and the
/// kernel may stall on compaction to find them. Measured with the load harness (BENCHMARKS.md):
/// 18–27% less memory per streaming session, at the same CPU per delta.
fn small_pages() {
    #[cfg(target_os = "linux")]
    if let Err(errno) = nix::sys::prctl::set_thp_disable(true) {
        // Only a kernel without the call (before 3.15) refuses: memory is larger, nothing breaks.
        tracing::debug!(%errno, "transparent huge pages stay allowed");
    }
}

/// What the server will run with.
struct Plan {
    addr: String,
    builder: weft_agent::AgentBuilder,
    settings: Settings,
}

fn plan(args: &ServeArgs, config: &ServeConfig) -> anyhow::Result<Plan> {
    let script = args.script.clone().or(config.script.clone());
    let provider = match (args.provider.clone().or(config.provider.clone()), &script) {
        (Some(name), _) => name,
        (None, Some(_)) => "faux".to_string(),
        (None, None) => bail!(
            "no provider: use --provider openai|openai-responses|anthropic|gemini --model ID, \
             or --provider faux --script FILE (or [provider] in weft.toml)"
        ),
    };
    if !config::PROVIDER_NAMES.contains(&provider.as_str()) {
        bail!(
            "unknown provider {provider:?}: expected one of {}",
            config::PROVIDER_NAMES.join(", ")
        );
    }
    let models = args.models.clone().or(config.models.clone());
    let registry = crate::models::registry(models.as_deref())?;
    let model = args.model.clone().or(config.model.clone());
    let (default, model) =
        build_provider(&provider, model, script.as_deref(), &registry, "--model ID")?;
    let mut builder = Agent::builder_shared(default);
    // More providers sessions may pick by name (`options.provider`).
    for (name, entry) in &config.providers {
        if *name == provider {
            continue;
        }
        if !config::PROVIDER_NAMES.contains(&name.as_str()) {
            bail!(
                "unknown provider {name:?} in [providers]: expected one of {}",
                config::PROVIDER_NAMES.join(", ")
            );
        }
        let (extra, model) = build_provider(
            name,
            entry.model.clone(),
            entry.script.as_deref(),
            &registry,
            "a model ([providers] model in weft.toml, or WEFT_PROVIDERS=NAME=MODEL)",
        )?;
        builder = builder.with_provider(name.clone(), extra, model);
    }
    let max_turns = args.max_turns.or(config.max_turns).unwrap_or(weft_agent::DEFAULT_MAX_TURNS);
    let mut builder = builder.model(model).max_turns(max_turns);
    if let Some(timeout) = config.remote_tool_timeout {
        builder = builder.remote_tool_timeout(timeout);
    }
    if let Some(ttl) = config.lease_ttl {
        builder = builder.lease_ttl(ttl);
    }
    if let Some(timeout) = config.end_commit_timeout {
        builder = builder.end_commit_timeout(timeout);
    }
    let mut settings = Settings::new(provider);
    settings.models = registry;
    settings.api_keys = config.api_keys.clone();
    settings.max_turns = max_turns;
    if let Some(bytes) = config.body_bytes {
        settings.body_bytes = bytes;
    }
    if let Some(rate) = config.requests_per_minute {
        settings.requests_per_minute = rate;
    }
    if let Some(burst) = config.burst {
        settings.burst = burst;
    }
    if let Some(failed) = config.failed_keys_per_minute {
        settings.failed_keys_per_minute = failed;
    }
    settings.metrics_public = config.metrics_public;
    if let Some(grace) = config.shutdown_grace {
        settings.shutdown_grace = grace;
    }
    settings.cors_origins = config.cors_origins.clone();
    if let Some(multitask) = config.frontend_multitask {
        settings.frontend_multitask = multitask;
    }
    if let Some(durability) = args.durability.or(config.durability) {
        settings.durability = durability;
    }
    config.connections.apply(&mut settings);
    // One event loop per core: a session's run and its stream on one thread (`shards.rs`).
    settings.connection_threads = config
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let addr = args
        .addr
        .clone()
        .or(config.addr.clone())
        .unwrap_or_else(|| weft_server::DEFAULT_ADDR.to_string());
    Ok(Plan { addr, builder, settings })
}

/// The provider `name` (faux with `script`, otherwise an HTTP provider whose key and base URL
/// come from the environment) and the model of its sessions.
fn build_provider(
    name: &str,
    model: Option<String>,
    script: Option<&std::path::Path>,
    registry: &Arc<weft_llm::models::ModelRegistry>,
    model_hint: &str,
) -> anyhow::Result<(Arc<dyn Provider>, String)> {
    if name == "faux" {
        let Some(path) = script else {
            bail!("the faux provider needs --script FILE (a JSON script of the model's turns)");
        };
        let script = FauxScript::from_file(path)?;
        let faux = FauxProvider::new(script).with_registry(registry.clone());
        return Ok((Arc::new(faux), model.unwrap_or_else(|| "faux".to_string())));
    }
    if script.is_some() {
        bail!("--script is for the faux provider, not {name}");
    }
    let Some(model) = model else {
        bail!("--provider {name} needs {model_hint}");
    };
    let mut settings = config::settings_from_process_env(name)?;
    settings.models = registry.clone();
    let (timeouts, retry) = config::http_from_env(|name| std::env::var(name).ok())?;
    let client = HttpClient::new(timeouts, retry)
        .map_err(|e| anyhow!("cannot set up the HTTP client: {e}"))?;
    Ok((config::provider_from_settings(name, settings, client)?, model))
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
