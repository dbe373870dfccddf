//! OpenTelemetry for the commands that run agents (`weft run`, `weft chat`, `weft serve`): the
//! `[telemetry]` section of the configuration file the command reads and the `OTEL_*`
//! variables ([`weft_telemetry`]). Started before the log subscriber is installed (its layer is
//! part of it), shut down when the command has ended, which sends what is still buffered.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::anyhow;
use weft_telemetry::Telemetry;

use crate::{Command, Failure};

/// Whether the agents' spans carry message content (set once telemetry has started).
static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether an agent built now records message content on its spans.
pub(crate) fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// Telemetry for `command`, as its configuration file and the environment say: `None` when it
/// is off or the command runs no agent. A configuration file that cannot be read is left to the
/// command to report.
pub(crate) fn start(command: &Command) -> Result<Option<Telemetry>, Failure> {
    let explicit = match command {
        Command::Run(args) => args.config.as_deref(),
        Command::Chat(args) => args.config(),
        Command::Serve(args) => args.config(),
        Command::Sessions(_) | Command::Models(_) | Command::Tools(_) => return Ok(None),
    };
    let config = file_config(explicit).unwrap_or_default();
    let telemetry =
        Telemetry::start(&config).map_err(|e| Failure::usage(&anyhow!("telemetry: {e}")))?;
    if let Some(telemetry) = &telemetry {
        CAPTURE_CONTENT.store(telemetry.capture_content(), Ordering::Relaxed);
    }
    Ok(telemetry)
}

/// The `[telemetry]` section of the file the command reads (`--config`, else `./weft.toml`,
/// else `$WEFT_HOME/weft.toml`), when there is one and it can be read.
fn file_config(explicit: Option<&Path>) -> Option<weft_telemetry::TelemetryConfig> {
    let env = |name: &str| std::env::var(name).ok();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let file = weft_server::find_file(explicit, &cwd, &env).ok()?;
    let config = weft_server::ServeConfig::load(file.as_deref(), &env).ok()?;
    Some(config.telemetry)
}
