//! [`ProcessIdentity`]: the name a process holds its runs' leases under.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The most slots [`ProcessIdentity::claim`] tries: as many live processes on one directory.
const MAX_SLOTS: usize = 1024;

/// The name a process holds its runs' leases under.
///
/// A run holds its session's lease as `PROCESS/RUN`. When a process dies, its leases stay in
/// the store until they expire (the lease ttl, 15 s by default), and until then nobody may
/// recover its runs or resume its suspended sessions: another process cannot tell a dead holder
/// from a slow one.
///
/// A process that restarts can. [`ProcessIdentity::claim`] gives each process a stable name
/// per directory (`$WEFT_HOME/processes`): slot `N` is the file `N.lock`, which holds the name
/// and is locked exclusively (`flock`) for as long as the process lives. The kernel releases
/// the lock when the process dies, however it dies (`kill -9` included), so a later process
/// that takes the lock knows that every lease held under that name belongs to a dead process:
/// the agent takes them over on its first use of the store
/// ([`SessionStore::take_over_process_leases`]) and recovers those runs at once. A second live
/// process on the same directory finds slot 0 locked and takes the next free slot: a name of
/// its own. Other processes (other directories, other machines sharing a Postgres store) still
/// wait for the leases to expire.
///
/// A slot also records the machine it was named on (host name and machine id): a copy of the
/// directory on another machine (a backup restored, an image baked with it, a network share
/// whose locks are local only) names its slots anew, so two live machines never share a name
/// and never take over each other's live runs.
///
/// [`SessionStore::take_over_process_leases`]: weft_core::SessionStore::take_over_process_leases
#[derive(Clone)]
pub struct ProcessIdentity {
    name: Arc<str>,
    /// The locked slot, for a stable identity: held for the identity's life.
    slot: Option<Arc<Slot>>,
}

struct Slot {
    path: PathBuf,
    /// Locked exclusively; the lock goes with the file (or with the process).
    _file: File,
}

impl std::fmt::Debug for ProcessIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessIdentity")
            .field("name", &self.name)
            .field("slot", &self.slot.as_ref().map(|s| &s.path))
            .finish()
    }
}

impl ProcessIdentity {
    /// A name of this process's own, never held before and by nobody after: the identity of an
    /// agent that was given none. Its leases, should it die, expire by themselves.
    pub fn ephemeral() -> Self {
        let name = format!("weft-{}-{}", std::process::id(), uuid::Uuid::new_v4());
        Self { name: Arc::from(name), slot: None }
    }

    /// The first free slot of `dir` (created if missing): a stable name, held by this process
    /// until the identity (every clone of it) is dropped or the process ends. Fails only when
    /// the directory cannot be used (not writable, or 1,024 live processes on it).
    pub fn claim(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        for slot in 0..MAX_SLOTS {
            let path = dir.join(format!("{slot}.lock"));
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Error(error)) => return Err(error),
            }
            let name = Self::name_in(&mut file)?;
            return Ok(Self {
                name: Arc::from(name),
                slot: Some(Arc::new(Slot { path, _file: file })),
            });
        }
        Err(std::io::Error::other(format!(
            "{} processes hold an identity in {} already",
            MAX_SLOTS,
            dir.display()
        )))
    }

    /// The name kept in a locked slot file, written there first if it has none (a new slot, or
    /// one whose writer died before it finished) or was named on another machine.
    fn name_in(file: &mut File) -> std::io::Result<String> {
        Self::name_for(file, &machine())
    }

    /// [`name_in`](Self::name_in) on the machine `here`.
    fn name_for(file: &mut File, here: &str) -> std::io::Result<String> {
        let mut text = String::new();
        // A file that is not text (damaged) is given a new name, as an empty one is.
        let _ = file.read_to_string(&mut text);
        let mut lines = text.lines().map(str::trim);
        let (name, made_on) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
        if valid_name(name) && made_on == here {
            return Ok(name.to_string());
        }
        let name = format!("weft-{}", uuid::Uuid::new_v4());
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(format!("{name}\n{here}\n").as_bytes())?;
        file.sync_all()?;
        Ok(name)
    }

    /// The name leases are held under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the name is stable (claimed in a directory): leases held under it by a process
    /// that died before this one took it may be freed at once.
    pub fn is_stable(&self) -> bool {
        self.slot.is_some()
    }

    /// The slot file held, for a stable identity.
    pub fn slot_path(&self) -> Option<&Path> {
        self.slot.as_ref().map(|s| s.path.as_path())
    }

    pub(crate) fn shared_name(&self) -> Arc<str> {
        Arc::clone(&self.name)
    }
}

/// This machine, as a slot records it: `machine HOST ID` (the host name and the machine id,
/// each `-` where the system does not say).
fn machine() -> String {
    let read = |paths: &[&str]| {
        paths
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .map(|t| t.trim().replace(char::is_whitespace, "_"))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "-".to_string())
    };
    let host = read(&["/proc/sys/kernel/hostname", "/etc/hostname"]);
    let id = read(&["/etc/machine-id", "/var/lib/dbus/machine-id"]);
    format!("machine {host} {id}")
}

/// A name this module wrote: `weft-` and a UUID (nothing a lease holder's `/` could confuse).
fn valid_name(name: &str) -> bool {
    name.strip_prefix("weft-").is_some_and(|rest| {
        !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_slot_keeps_its_name_and_a_live_holder_keeps_it_to_itself() {
        let dir = tempfile::tempdir().unwrap();
        let first = ProcessIdentity::claim(dir.path()).unwrap();
        assert!(first.is_stable());
        assert!(first.slot_path().unwrap().ends_with("0.lock"));
        // Held (here by this process, through another open file): the next slot, another name.
        let second = ProcessIdentity::claim(dir.path()).unwrap();
        assert!(second.slot_path().unwrap().ends_with("1.lock"));
        assert_ne!(first.name(), second.name());
        let name = first.name().to_string();
        drop(first);
        // Released: the next claim takes slot 0 and its name again.
        let again = ProcessIdentity::claim(dir.path()).unwrap();
        assert_eq!(again.name(), name);
        assert!(again.slot_path().unwrap().ends_with("0.lock"));
    }

    #[test]
    fn a_damaged_slot_gets_a_new_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("0.lock"), b"weft-zz/evil\n").unwrap();
        let identity = ProcessIdentity::claim(dir.path()).unwrap();
        assert!(valid_name(identity.name()), "{}", identity.name());
        let kept = std::fs::read_to_string(dir.path().join("0.lock")).unwrap();
        assert_eq!(kept.lines().next(), Some(identity.name()));
    }

    #[test]
    fn a_slot_named_on_another_machine_is_named_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        let first = ProcessIdentity::name_for(&mut file, "machine a 1").unwrap();
        file.seek(SeekFrom::Start(0)).unwrap();
        assert_eq!(ProcessIdentity::name_for(&mut file, "machine a 1").unwrap(), first);
        file.seek(SeekFrom::Start(0)).unwrap();
        let copied = ProcessIdentity::name_for(&mut file, "machine b 2").unwrap();
        assert_ne!(copied, first, "a copy on another machine never shares the name");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{copied}\nmachine b 2\n"));
    }

    #[test]
    fn ephemeral_names_are_never_stable_or_shared() {
        let (a, b) = (ProcessIdentity::ephemeral(), ProcessIdentity::ephemeral());
        assert!(!a.is_stable());
        assert_ne!(a.name(), b.name());
    }
}
