//! `shell`: runs a command with `sh -c` in a working directory, streaming stdout and stderr as
//! output deltas.
//!
//! **Environment.** The command gets a cleared environment: `PATH`, `HOME` and `LANG` from this
//! process, plus the names `[builtins] shell_env` lists. Nothing else passes, so the server's
//! API keys (`WEFT_API_KEYS`), the providers' keys (`OPENAI_API_KEY`, …) and whatever else the
//! server was started with stay out of the model's reach.
//!
//! **Processes.** A call ends when `sh` exits, with its output, and nothing it started outlives
//! it: `cmd &` left running would hold the output pipes open (the call would wait for it) and
//! live on after the run. Under a program that offers the [`reaper`] (`weft` does), the command
//! runs below a reaper process of its own that is a child subreaper: every process the command
//! starts stays below it whatever it does to leave (background jobs, double forks, `setsid`,
//! `nohup`), and is killed when `sh` exits or the call is cancelled (see [`reaper`] for why a
//! process of its own rather than the server). Without a reaper (a library user that offers
//! none), `sh` runs in a process group of its own, killed whole when `sh` exits or the call is
//! cancelled; a process that leaves the group (`setsid`) then escapes, and the call stops
//! reading output two seconds after `sh` exits.

pub mod reaper;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::ChildStdin;
use tokio::sync::mpsc;
use weft_tool_api::{ToolError, ToolOutputSink};

/// The variables every command gets from this process (when set), besides those configured.
pub const PASSED_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// How long output is still read after `sh` exited, when something it started escaped the
/// kill and keeps the pipes open (only without a reaper).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// How commands are run: their environment and working directory, and the reaper.
#[derive(Debug, Clone)]
pub struct ShellSetup {
    /// The working directory.
    pub cwd: PathBuf,
    /// The whole environment a command gets.
    pub env: Vec<(OsString, OsString)>,
    /// The program that runs commands as their reaper ([`reaper::run_if_asked`]); `None` runs
    /// `sh` directly in a process group of its own.
    pub reaper: Option<PathBuf>,
}

impl ShellSetup {
    /// `cwd`, the environment of [`PASSED_ENV`] and `extra` names taken from this process, and
    /// `reaper`.
    pub fn new(cwd: PathBuf, extra: &[String], reaper: Option<PathBuf>) -> Self {
        let env = PASSED_ENV
            .iter()
            .copied()
            .chain(extra.iter().map(String::as_str))
            .filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value)))
            .collect();
        Self { cwd, env, reaper }
    }
}

/// Ends what a call started when dropped (the call ended, was cancelled or its task dropped):
/// closes the reaper's standard input (it kills everything below it), or kills the process
/// group of `sh`.
struct Ending {
    group: Option<i32>,
    reaper_stdin: Option<ChildStdin>,
}

impl Ending {
    fn end(&mut self) {
        drop(self.reaper_stdin.take());
        if let Some(pgid) = self.group.take() {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        self.end();
    }
}

/// Runs `command` as `setup` says; streams its output through `sink`, keeps at most `keep`
/// bytes of it for the result, and ends everything it started when `sh` exits or the call is
/// cancelled.
pub async fn run(
    command: &str,
    setup: &ShellSetup,
    sink: &ToolOutputSink,
    keep: usize,
) -> Result<String, ToolError> {
    let mut cmd = match &setup.reaper {
        Some(program) => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.arg(reaper::ARG).arg(command).stdin(Stdio::piped());
            cmd
        }
        None => {
            let mut cmd = tokio::process::Command::new("sh");
            cmd.arg("-c").arg(command).stdin(Stdio::null());
            cmd
        }
    };
    let mut child = cmd
        .env_clear()
        .envs(setup.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&setup.cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| ToolError::failed(format!("cannot start sh: {e}")))?;
    let mut ending = match child.stdin.take() {
        // The reaper ends the tree itself: killing its group would kill it first.
        Some(stdin) => Ending { group: None, reaper_stdin: Some(stdin) },
        None => {
            Ending { group: child.id().and_then(|id| i32::try_from(id).ok()), reaper_stdin: None }
        }
    };
    let (tx, mut rx) = mpsc::channel::<String>(16);
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        pumps.push(tokio::spawn(pump(out, tx.clone())));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(tokio::spawn(pump(err, tx.clone())));
    }
    drop(tx);
    let _stop_pumps = AbortOnDrop(pumps);
    let cancelled = || ToolError::Cancelled("the command was killed".into());
    let mut output = String::new();
    let mut status = None;
    let drain_deadline = tokio::time::sleep(Duration::MAX);
    tokio::pin!(drain_deadline);
    loop {
        tokio::select! {
            chunk = rx.recv() => match chunk {
                Some(chunk) => {
                    if output.len() < keep {
                        output.push_str(&chunk);
                    }
                    if !sink.send(chunk).await {
                        return Err(cancelled());
                    }
                }
                // Every process holding the pipes is gone.
                None => break,
            },
            exited = child.wait(), if status.is_none() => {
                status = Some(exited.map_err(|e| ToolError::failed(e.to_string()))?);
                // sh is gone; what it left in its group goes too, and the pipes close.
                ending.end();
                drain_deadline.as_mut().reset(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
            }
            () = &mut drain_deadline => break,
            () = sink.cancelled().cancelled() => return Err(cancelled()),
        }
    }
    let status = match status {
        Some(status) => status,
        None => tokio::select! {
            status = child.wait() => status.map_err(|e| ToolError::failed(e.to_string()))?,
            () = sink.cancelled().cancelled() => return Err(cancelled()),
        },
    };
    drop(ending);
    if status.success() {
        Ok(output)
    } else {
        let code = status
            .code()
            .map_or_else(|| "killed by a signal".to_string(), |c| format!("exit status {c}"));
        Err(ToolError::Failed(format!("{output}\n[{code}]")))
    }
}

/// Aborts the output pumps when dropped (a process that escaped may hold a pipe open).
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for pump in &self.0 {
            pump.abort();
        }
    }
}

async fn pump(mut reader: impl AsyncRead + Unpin, tx: mpsc::Sender<String>) {
    let mut buf = vec![0u8; 8192];
    let mut pending = Vec::new();
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                // Send whole characters; keep an incomplete UTF-8 tail for the next read.
                let valid = match std::str::from_utf8(&pending) {
                    Ok(_) => pending.len(),
                    Err(e) if e.error_len().is_none() => e.valid_up_to(),
                    Err(_) => pending.len(),
                };
                let chunk: Vec<u8> = pending.drain(..valid).collect();
                if tx.send(String::from_utf8_lossy(&chunk).into_owned()).await.is_err() {
                    return;
                }
            }
        }
    }
    if !pending.is_empty() {
        let _ = tx.send(String::from_utf8_lossy(&pending).into_owned()).await;
    }
}
