//! `shell`: runs a command with `sh -c` in a working directory, in a process group of its own,
//! streaming stdout and stderr as output deltas. When the call is cancelled (the run aborted,
//! or the call timed out) the whole group is killed, so nothing it started lives on.

use std::path::PathBuf;
use std::process::Stdio;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use weft_agent::{ToolError, ToolOutputSink};

/// Kills the process group when dropped (the call ended, was cancelled or its task dropped).
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

/// Runs `command` in `cwd`; streams its output through `sink`, keeps at most `keep` bytes of it
/// for the result, and kills the process group on cancellation.
pub async fn run(
    command: &str,
    cwd: &PathBuf,
    sink: &ToolOutputSink,
    keep: usize,
) -> Result<String, ToolError> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ToolError::failed(format!("cannot start sh: {e}")))?;
    let mut guard = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));
    let (tx, mut rx) = mpsc::channel::<String>(16);
    if let Some(out) = child.stdout.take() {
        tokio::spawn(pump(out, tx.clone()));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(pump(err, tx.clone()));
    }
    drop(tx);
    let mut output = String::new();
    loop {
        tokio::select! {
            chunk = rx.recv() => match chunk {
                Some(chunk) => {
                    if output.len() < keep {
                        output.push_str(&chunk);
                    }
                    if !sink.send(chunk).await {
                        break;
                    }
                }
                None => break,
            },
            () = sink.cancelled().cancelled() => {
                drop(guard);
                return Err(ToolError::Cancelled("the command was killed".into()));
            }
        }
    }
    let status = tokio::select! {
        status = child.wait() => status.map_err(|e| ToolError::failed(e.to_string()))?,
        () = sink.cancelled().cancelled() => {
            drop(guard);
            return Err(ToolError::Cancelled("the command was killed".into()));
        }
    };
    // The shell is gone; anything it left in the background goes with its group.
    drop(std::mem::replace(&mut guard, GroupGuard(None)));
    if status.success() {
        Ok(output)
    } else {
        let code = status
            .code()
            .map_or_else(|| "killed by a signal".to_string(), |c| format!("exit status {c}"));
        Err(ToolError::Failed(format!("{output}\n[{code}]")))
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
