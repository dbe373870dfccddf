//! The reaper `shell` runs its commands under: a small process between the server and `sh`
//! that outlives nothing it started.
//!
//! It is the program that offers `shell` (`weft` itself), started as
//! `PROGRAM --weft-shell-reaper COMMAND`; the program calls [`run_if_asked`] first in `main`.
//! The reaper makes itself a *child subreaper* (`prctl(PR_SET_CHILD_SUBREAPER)`), so every
//! process of the command that loses its parent (`cmd &` after `sh` exits, a double fork, a
//! daemon, `setsid`, `nohup`) is handed to the reaper rather than to init. It runs `sh -c
//! COMMAND` with the environment and directory it was given, and when `sh` exits, or when its
//! standard input closes (the call was cancelled or timed out, or the server died), it kills
//! every process below it, reaps them, and exits with `sh`'s status. `sh`'s output goes straight
//! to the caller's pipes, which close once the last process holding them is gone.
//!
//! Why a process of its own: the subreaper attribute is per process, and on the server it would
//! hand every orphan of every child (MCP servers' too) to a process that must then reap them
//! without stealing the exit statuses the async runtime waits for. In a reaper per call, every
//! process below it belongs to the call. What it does not stop is a command that attacks the
//! reaper itself (`kill -9 $PPID`): the command runs as the server's user and could as well kill
//! the server; it is a guard against what commands leave behind, not a sandbox.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The first argument that makes a program the reaper: `PROGRAM --weft-shell-reaper COMMAND`.
pub const ARG: &str = "--weft-shell-reaper";

/// When this process was started as a reaper (`PROGRAM --weft-shell-reaper COMMAND`), runs
/// the command and exits with its status; otherwise returns at once. A program that offers
/// `shell` with a reaper calls this first in `main`, and names itself in
/// `BuiltinsConfig::shell_reaper`.
pub fn run_if_asked() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(ARG)) {
        return;
    }
    let code = match args.next() {
        Some(command) => reap(&command),
        None => {
            eprintln!("{ARG}: no command");
            2
        }
    };
    std::process::exit(code);
}

/// Runs `sh -c command`, then ends every process below this one; `sh`'s exit code (128 +
/// the signal's number when a signal ended it).
fn reap(command: &OsString) -> i32 {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        // Still reaps what stays below it (the command's own process tree).
        eprintln!("weft shell reaper: cannot become a subreaper: {e}");
    }
    let sh = match Command::new("sh").arg("-c").arg(command).stdin(Stdio::null()).spawn() {
        Ok(sh) => sh,
        Err(e) => {
            eprintln!("cannot start sh: {e}");
            return 127;
        }
    };
    let Ok(sh) = i32::try_from(sh.id()).map(Pid::from_raw) else { return 127 };
    // The caller closes our standard input to cancel (or dies): end everything, which ends sh.
    std::thread::spawn(|| {
        let mut stdin = std::io::stdin();
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        kill_all_below();
    });
    let code = loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == sh => break code,
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == sh => break 128 + signal as i32,
            // An orphan handed to us and reaped, or an interruption.
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => break 127,
        }
    };
    // sh is gone: nothing it started outlives it.
    for _ in 0..1000 {
        let alive = kill_all_below();
        while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        if alive == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    code
}

/// Sends SIGKILL to every live process below this one (read from `/proc`); how many there were.
fn kill_all_below() -> usize {
    let me = std::process::id();
    let mut children: HashMap<u32, Vec<(u32, bool)>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let mut fields = rest.split_whitespace();
        let zombie = fields.next() == Some("Z");
        if let Some(ppid) = fields.next().and_then(|p| p.parse::<u32>().ok()) {
            children.entry(ppid).or_default().push((pid, zombie));
        }
    }
    let mut alive = 0;
    let mut pending = vec![me];
    while let Some(parent) = pending.pop() {
        for &(pid, zombie) in children.get(&parent).map(Vec::as_slice).unwrap_or_default() {
            pending.push(pid);
            if !zombie {
                alive += 1;
                if let Ok(pid) = i32::try_from(pid) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
        }
    }
    alive
}
