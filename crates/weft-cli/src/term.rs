//! stderr: the waiting indicator, log lines (`tracing`) and the summary share it.
//!
//! While `weft run` waits for a model's first token, and stderr is a terminal, a spinner with the
//! time waited so far is drawn on stderr's last line (`⠙ waiting for the model… 4.2s`); it is
//! erased when the model's first event arrives, before anything else is written. Log lines go
//! through [`LogWriter`], which erases it first too, so nothing is written over it. When stderr
//! is not a terminal (a pipe, a file, the tests) nothing of this is drawn.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use weft_core::AgentEvent;

/// Whether a spinner is on stderr's current line right now.
static SPINNER_SHOWN: AtomicBool = AtomicBool::new(false);

/// Erases the spinner if it is shown. `err` must be the locked stderr, so that no other writer
/// comes in between.
fn erase(err: &mut impl Write) -> io::Result<()> {
    if SPINNER_SHOWN.swap(false, Ordering::SeqCst) {
        // Back to the line's start, and clear it.
        err.write_all(b"\r\x1b[2K")?;
    }
    Ok(())
}

/// Writes `line` and a newline on stderr, erasing the spinner first.
pub(crate) fn eprint_line(line: &str) {
    let mut err = io::stderr().lock();
    let _ = erase(&mut err);
    let _ = writeln!(err, "{line}");
}

/// stderr for `tracing`'s formatter: erases the spinner before each write.
pub(crate) struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut err = io::stderr().lock();
        erase(&mut err)?;
        err.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter
    }
}

/// Installs the log subscriber: warnings and errors on stderr by default; `RUST_LOG` (an
/// `env_logger`-style filter such as `info` or `weft_llm=debug`) changes that, and `-v` (info),
/// `-vv` (debug), `-vvv` (trace) override both. Compact lines without timestamps, coloured only
/// when stderr is a terminal and `NO_COLOR` is unset.
///
/// `telemetry` (OpenTelemetry's export, [`crate::otel`]) sits beside the log lines with its own
/// filter: what is logged and what is exported do not limit each other.
pub(crate) fn init_logging(verbosity: u8, telemetry: Option<TelemetryLayer>) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = log_filter(verbosity, rust_log.as_deref());
    // Not an `Option` layer: a `None` one beside per-layer filters makes the subscriber's level
    // hint OFF, which would disable every span. Nor an always-interested stand-in when there is
    // no exporter: then every span of every level would be recorded (and entered on every poll
    // of a run) for nobody; without one, the log filter alone says which spans exist.
    match telemetry {
        Some(telemetry) => {
            let _ = tracing_subscriber::registry().with(telemetry).with(logs(filter)).try_init();
        }
        None => {
            let _ = tracing_subscriber::registry().with(logs(filter)).try_init();
        }
    }
}

/// The log lines on stderr, as `filter` says, over any subscriber that keeps spans.
fn logs<S>(filter: tracing_subscriber::EnvFilter) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer;

    tracing_subscriber::fmt::layer()
        .with_writer(LogWriter)
        .with_ansi(color_on_stderr())
        .without_time()
        .compact()
        .with_filter(filter)
}

/// The exporting layer [`init_logging`] installs beside the logs.
pub(crate) type TelemetryLayer =
    Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// What is logged: `-v`s first, then `RUST_LOG` (invalid directives in it are skipped), then
/// warnings and errors.
fn log_filter(verbosity: u8, rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::filter::LevelFilter;

    let level = match verbosity {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    match rust_log.filter(|v| !v.trim().is_empty()) {
        Some(directives) if verbosity == 0 => {
            EnvFilter::builder().with_default_directive(level.into()).parse_lossy(directives)
        }
        _ => EnvFilter::default().add_directive(level.into()),
    }
}

/// Colour on stderr: only on a terminal, and never when `NO_COLOR` is set to anything.
fn color_on_stderr() -> bool {
    io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// How long a wait goes unmarked: a model that answers quickly shows no spinner at all.
const QUIET_WAIT: Duration = Duration::from_millis(300);
/// How often the spinner moves.
pub(crate) const TICK: Duration = Duration::from_millis(100);
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// The "waiting for the model" indicator (see the [module docs](self)).
pub(crate) struct Spinner {
    enabled: bool,
    /// Since when the run has been waiting for the model's first event of a call.
    waiting_since: Option<Instant>,
    frame: usize,
}

impl Spinner {
    /// A spinner that draws only if `enabled` (stderr is a terminal).
    pub(crate) fn new(enabled: bool) -> Self {
        Self { enabled, waiting_since: None, frame: 0 }
    }

    /// Enabled when stderr is a terminal.
    pub(crate) fn for_stderr() -> Self {
        Self::new(io::stderr().is_terminal())
    }

    /// Follows the run: a model call starts the wait, its first event (or anything after the
    /// call's opening events) ends it and erases the spinner. Any event erases it before it is
    /// written out, so that stdout and stderr never interleave on one line.
    pub(crate) fn observe(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::StepStart { .. } => {
                self.waiting_since.get_or_insert_with(Instant::now);
            }
            AgentEvent::NodeEnter { .. } | AgentEvent::MessageStart { .. } => {}
            _ => self.waiting_since = None,
        }
        self.erase();
    }

    /// Whether ticks are wanted (the run waits for the model and the spinner can draw).
    pub(crate) fn waiting(&self) -> bool {
        self.enabled && self.waiting_since.is_some()
    }

    /// Draws the next frame, unless the wait is still short or `mid_line` (stdout, on the same
    /// terminal perhaps, has an unfinished line the spinner would overwrite).
    pub(crate) fn tick(&mut self, mid_line: bool) {
        let Some(since) = self.waiting_since.filter(|_| self.enabled) else { return };
        let waited = since.elapsed();
        if waited < QUIET_WAIT || mid_line {
            return;
        }
        self.frame = (self.frame + 1) % FRAMES.len();
        let mut err = io::stderr().lock();
        let frame = FRAMES[self.frame];
        let text = match waited.as_secs() {
            0..60 => format!("{:.1}s", waited.as_secs_f64()),
            _ => crate::summary::elapsed_text(waited),
        };
        let drawn = write!(err, "\r\x1b[2K{frame} waiting for the model… {text}")
            .and_then(|()| err.flush());
        SPINNER_SHOWN.store(drawn.is_ok(), Ordering::SeqCst);
    }

    /// Erases the spinner if it is shown.
    pub(crate) fn erase(&mut self) {
        if SPINNER_SHOWN.load(Ordering::SeqCst) {
            let mut err = io::stderr().lock();
            let _ = erase(&mut err).and_then(|()| err.flush());
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.erase();
    }
}

#[cfg(test)]
mod tests {
    use weft_core::Role;

    use super::*;

    #[test]
    fn verbosity_and_rust_log_choose_what_is_logged() {
        use tracing_subscriber::filter::LevelFilter;
        let max = |v, env| log_filter(v, env).max_level_hint();
        assert_eq!(max(0, None), Some(LevelFilter::WARN));
        assert_eq!(max(0, Some(" ")), Some(LevelFilter::WARN));
        assert_eq!(max(1, None), Some(LevelFilter::INFO));
        assert_eq!(max(2, Some("error")), Some(LevelFilter::DEBUG), "-v wins over RUST_LOG");
        assert_eq!(max(3, None), Some(LevelFilter::TRACE));
        assert_eq!(max(0, Some("error")), Some(LevelFilter::ERROR));
        assert_eq!(max(0, Some("weft_llm=debug")), Some(LevelFilter::DEBUG));
        assert_eq!(max(0, Some("info,nonsense=[")), Some(LevelFilter::INFO));
    }

    #[test]
    fn a_model_call_is_waited_for_until_its_first_event() {
        let mut s = Spinner::new(true);
        assert!(!s.waiting());
        s.observe(&AgentEvent::NodeEnter { name: "think".into(), node_id: "t".into() });
        assert!(!s.waiting());
        s.observe(&AgentEvent::StepStart { step_id: "x".into(), step_index: 0 });
        s.observe(&AgentEvent::MessageStart { role: Role::Assistant });
        assert!(s.waiting());
        s.observe(&AgentEvent::TextStart { index: 0 });
        assert!(!s.waiting());
        // Disabled (stderr is not a terminal): never.
        let mut s = Spinner::new(false);
        s.observe(&AgentEvent::StepStart { step_id: "x".into(), step_index: 0 });
        assert!(!s.waiting());
        s.tick(false);
        assert!(!SPINNER_SHOWN.load(Ordering::SeqCst));
    }
}
