//! The agent a local `weft run` (and `weft chat`) builds from its flags: provider, model,
//! system prompt, limits and tools, every mistake in the flags found before anything runs, and
//! the flags of a continued session checked against the stored session.

use std::sync::Arc;

use anyhow::{anyhow, bail};
use weft_agent::{Agent, AgentBuilder};
use weft_core::SessionStore;
use weft_core::store::SessionHead;
use weft_llm::config;
use weft_llm::faux::{FauxProvider, FauxScript};
use weft_llm::http::HttpClient;
use weft_llm::models::ModelRegistry;

use crate::args::RunArgs;
use crate::models::registry;
use crate::{sanitize, tools};

/// The providers that call a model over HTTP, with a model to suggest when none is given.
const HTTP_PROVIDERS: [(&str, &str); 4] = [
    ("openai", "gpt-4.1-mini"),
    ("openai-responses", "gpt-5-mini"),
    ("anthropic", "claude-sonnet-4-20250514"),
    ("gemini", "gemini-2.5-flash"),
];

/// What `weft run` set up: the agent, and what the summary line needs.
pub(crate) struct Setup {
    pub(crate) agent: Agent,
    /// The provider's name, as `--provider` spells it.
    pub(crate) provider: String,
    /// The model asked for.
    pub(crate) model: String,
    /// The registry costs come from.
    pub(crate) registry: Arc<ModelRegistry>,
}

/// The agent `weft run` is about to build: everything but its store.
pub(crate) struct Planned {
    pub(crate) builder: AgentBuilder,
    /// The configured tools, started when the agent is built.
    pub(crate) tools: weft_tools::ToolsConfig,
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) registry: Arc<ModelRegistry>,
}

impl Planned {
    /// Builds the agent on `store`, with its tools (MCP servers started).
    pub(crate) async fn build(self, store: Arc<dyn SessionStore>) -> anyhow::Result<Setup> {
        let builder = tools::with_tools(self.builder, &self.tools).await?;
        let identity = crate::store::identity(&*store);
        let agent = builder
            .identity(identity)
            .store(store)
            .capture_content(crate::otel::capture_content())
            .build()
            .map_err(|e| anyhow!("cannot set up the agent: {e}"))?;
        Ok(Setup { agent, provider: self.provider, model: self.model, registry: self.registry })
    }
}

/// The agent `args` describe: provider, model, system prompt, limits and the built-in tools.
/// Every mistake in them (contradictory flags, a bad file or environment variable) is found
/// here, before anything runs. `head` is the session `--session` continues: its provider and
/// model are the defaults, and flags that contradict it (another provider, model or system
/// prompt) are refused, since a stored session keeps its own.
pub(crate) fn build_agent(args: &RunArgs, head: Option<&SessionHead>) -> anyhow::Result<Planned> {
    let provider = match (args.provider.as_deref(), &args.script, head) {
        (Some(name), _, _) => name,
        (None, Some(_), _) => "faux",
        (None, None, Some(head)) => head.provider.as_str(),
        (None, None, None) => bail!(
            "no provider: use --provider openai|openai-responses|anthropic|gemini --model ID, \
             or --provider faux --script FILE"
        ),
    };
    if let Some(head) = head {
        check_continuation(args, provider, head)?;
    }
    let http = HTTP_PROVIDERS.iter().find(|(n, _)| *n == provider);
    if provider != "faux" && http.is_none() {
        bail!(
            "unknown provider {provider:?}: expected one of {}",
            config::PROVIDER_NAMES.join(", ")
        );
    }
    // The models file applies to every provider, so its mistakes are every provider's.
    let registry = registry(args.models.as_deref())?;
    let (builder, model) = match http {
        None => {
            if let Some((flag, _, _)) = args.http_flags().into_iter().find(|(_, _, set)| *set) {
                bail!("{flag} is for HTTP providers: the faux provider makes no HTTP calls");
            }
            let Some(path) = &args.script else {
                if let Some(head) = head {
                    bail!(
                        "session {} was run by the faux provider: continue it with --script FILE",
                        sanitize::visible(&head.id)
                    );
                }
                bail!("--provider faux needs --script FILE (a JSON script of the model's turns)");
            };
            let script = FauxScript::from_file(path)?;
            let model = match head {
                Some(head) => head.model.clone(),
                None => args.model.clone().unwrap_or_else(|| "faux".to_string()),
            };
            let faux = FauxProvider::new(script).with_registry(registry.clone());
            (Agent::builder(faux), model)
        }
        Some((name, example)) => {
            if args.script.is_some() {
                bail!(
                    "--script is for the faux provider, not {name} (drop --script, or use \
                     --provider faux)"
                );
            }
            let Some(model) = args.model.clone().or_else(|| head.map(|h| h.model.clone())) else {
                bail!("--provider {name} needs --model ID (for example --model {example})");
            };
            let mut settings = config::settings_from_process_env(name)?;
            settings.models = registry.clone();
            let provider = config::provider_from_settings(name, settings, http_client(args)?)?;
            (Agent::builder_shared(provider), model)
        }
    };
    let tools = tools::load_config(args.config.as_deref())?;
    let mut builder = builder.model(model.clone()).max_turns(args.max_turns);
    if let Some(system) = &args.system {
        builder = builder.system_prompt(system.clone());
    }
    Ok(Planned { builder, tools, provider: provider.to_string(), model, registry })
}

/// Refuses flags that contradict the session `--session` continues: a stored session keeps the
/// provider, model and system prompt it was created with.
fn check_continuation(args: &RunArgs, provider: &str, head: &SessionHead) -> anyhow::Result<()> {
    let id = sanitize::visible(&head.id);
    let shown = |text: &str| sanitize::visible(text);
    if provider != head.provider {
        bail!(
            "session {id} was run by provider {}: continue it with --provider {} (or without \
             --provider); a session cannot change provider",
            shown(&head.provider),
            shown(&head.provider)
        );
    }
    if let Some(model) = args.model.as_deref()
        && model != head.model
    {
        bail!(
            "session {id} uses model {}: continue it with that model (or without --model); a \
             session cannot change model",
            shown(&head.model)
        );
    }
    if let Some(mode) = args.modes.mode()?
        && mode != weft_agent::Mode::of_options(&head.options)
    {
        let kept = weft_agent::Mode::of_options(&head.options);
        bail!(
            "session {id} runs in mode {} with the parameters it was created with: continue it \
             without mode flags (--mode, --breadth, …); a session cannot change mode",
            kept.name()
        );
    }
    if let Some(system) = args.system.as_deref()
        && Some(system) != head.system_prompt.as_deref()
    {
        bail!(
            "session {id} keeps the system prompt it was created with: continue it without \
             --system"
        );
    }
    Ok(())
}

/// The HTTP client of a run: timeouts and retries from the WEFT_* variables, each overridden by
/// its flag (a variable whose flag is given is not read at all).
fn http_client(args: &RunArgs) -> anyhow::Result<HttpClient> {
    let flags = args.http_flags();
    let overridden = |name: &str| flags.iter().any(|(_, var, set)| *set && *var == name);
    let (mut timeouts, mut retry) =
        config::http_from_env(|name| (!overridden(name)).then(|| std::env::var(name).ok())?)?;
    if let Some(d) = args.connect_timeout {
        timeouts.connect = d;
    }
    if let Some(d) = args.first_byte_timeout {
        timeouts.first_byte = d;
    }
    if let Some(d) = args.idle_timeout {
        timeouts.idle = d;
    }
    if let Some(n) = args.max_retries {
        retry.max_retries = n;
    }
    HttpClient::new(timeouts, retry).map_err(|e| anyhow!("cannot set up the HTTP client: {e}"))
}
