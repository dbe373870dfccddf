//! `read_file`, `list_dir`, `write_file`: confined to a root directory.
//!
//! A path is taken relative to the root (an absolute path only when it lies inside the root);
//! a `..` component is refused outright; the path is then resolved with symlinks followed and
//! must still lie inside the root (a symlink that leads out is refused); only regular files are
//! read or written (devices, FIFOs and sockets are refused), and `write_file` never writes
//! through a symlink.
//!
//! **Hard links.** A regular file with more than one link is refused, for reading and for
//! writing alike. A hard link is a second name for the same file, and nothing about the name
//! inside the root tells whether the other name lies outside it: a link `root/notes.txt` to
//! `/home/me/.ssh/id_ed25519` (or to a file of another project) would otherwise be read, and
//! overwritten, through the root. So a file is used only while the root holds its one name; a
//! file created by `write_file` has one link. (Trees built with hard links, such as some package
//! stores, are therefore not readable through these tools: copy the files instead.)
//!
//! The check and the use are one: a file is opened without following a final symlink and
//! without blocking (a FIFO swapped in cannot hang the call), then the opened file itself is
//! checked (its type and size with `fstat`, and on Linux the path the kernel gives for the open
//! descriptor must still lie inside the root). So a path component swapped for a symlink after
//! the path was resolved is caught; `write_file` truncates only after those checks.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use weft_tool_api::ToolError;

/// The largest file `read_file` reads.
pub const MAX_READ: u64 = 1024 * 1024;

/// A root the file tools are confined to.
#[derive(Debug, Clone)]
pub struct Root {
    root: PathBuf,
}

impl Root {
    /// The root at `dir` (which must exist).
    pub fn new(dir: &Path) -> Result<Self, String> {
        let root =
            dir.canonicalize().map_err(|e| format!("builtins.root {}: {e}", dir.display()))?;
        if !root.is_dir() {
            return Err(format!("builtins.root {} is not a directory", dir.display()));
        }
        Ok(Self { root })
    }

    /// `path` joined to the root, lexically checked (no `..`, absolute only inside the root).
    fn join(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.contains('\0') {
            return Err(ToolError::denied("the path contains a NUL byte"));
        }
        let given = Path::new(path);
        if given.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(ToolError::denied(format!("{path:?}: \"..\" is not allowed in paths")));
        }
        if given.is_absolute() {
            if !given.starts_with(&self.root) {
                return Err(ToolError::denied(format!(
                    "{path:?} is outside the tool's root directory"
                )));
            }
            return Ok(given.to_path_buf());
        }
        Ok(self.root.join(given))
    }

    /// `path` resolved (symlinks followed) and checked to lie inside the root.
    pub fn existing(&self, path: &str) -> Result<PathBuf, ToolError> {
        let joined = self.join(path)?;
        let real = joined.canonicalize().map_err(|e| ToolError::failed(format!("{path}: {e}")))?;
        if !real.starts_with(&self.root) {
            return Err(ToolError::denied(format!(
                "{path:?} leads outside the tool's root directory (a symlink)"
            )));
        }
        Ok(real)
    }

    /// Reads a regular file as text (lossy UTF-8), at most [`MAX_READ`] bytes.
    pub async fn read(&self, path: &str) -> Result<String, ToolError> {
        let real = self.existing(path)?;
        let root = self.root.clone();
        let path = path.to_string();
        blocking(move || {
            let mut file = open_confined(&root, &real, &path, Access::Read)?;
            let len = file.metadata().map_err(|e| ToolError::failed(format!("{path}: {e}")))?.len();
            if len > MAX_READ {
                return Err(ToolError::failed(format!(
                    "{path}: the file is larger than {MAX_READ} bytes"
                )));
            }
            let mut bytes = Vec::with_capacity(len as usize);
            (&mut file)
                .take(MAX_READ)
                .read_to_end(&mut bytes)
                .map_err(|e| ToolError::failed(format!("{path}: {e}")))?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        })
        .await
    }

    /// Lists a directory: one entry a line, directories with a trailing `/`, sorted.
    pub async fn list(&self, path: &str) -> Result<String, ToolError> {
        let real = self.existing(if path.is_empty() { "." } else { path })?;
        if !real.is_dir() {
            return Err(ToolError::denied(format!("{path:?} is not a directory")));
        }
        let mut entries = tokio::fs::read_dir(&real)
            .await
            .map_err(|e| ToolError::failed(format!("{path}: {e}")))?;
        let mut names = Vec::new();
        while let Some(entry) =
            entries.next_entry().await.map_err(|e| ToolError::failed(e.to_string()))?
        {
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().await.is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            names.push(name);
        }
        names.sort();
        Ok(names.join("\n"))
    }

    /// Writes `content` to a regular file (created when missing) whose directory exists inside
    /// the root; an existing symlink or special file is refused.
    pub async fn write(&self, path: &str, content: &str) -> Result<usize, ToolError> {
        let joined = self.join(path)?;
        let (Some(parent), Some(file_name)) = (joined.parent(), joined.file_name()) else {
            return Err(ToolError::invalid(format!("{path:?} names no file")));
        };
        let parent = parent
            .canonicalize()
            .map_err(|e| ToolError::failed(format!("{path}: its directory: {e}")))?;
        if !parent.starts_with(&self.root) {
            return Err(ToolError::denied(format!(
                "{path:?} leads outside the tool's root directory (a symlink)"
            )));
        }
        let target = parent.join(file_name);
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(ToolError::denied(format!(
                    "{path:?} is a symlink; write_file does not write through symlinks"
                )));
            }
            Ok(meta) if !meta.is_file() => {
                return Err(ToolError::denied(format!("{path:?} is not a regular file")));
            }
            _ => {}
        }
        let root = self.root.clone();
        let path = path.to_string();
        let written = content.len();
        let content = content.to_string();
        blocking(move || {
            // Created when missing, never truncated before the opened file is checked.
            let mut file = open_confined(&root, &target, &path, Access::WriteCreate)?;
            let failed = |e: std::io::Error| ToolError::failed(format!("{path}: {e}"));
            file.set_len(0).map_err(failed)?;
            file.write_all(content.as_bytes()).map_err(failed)?;
            file.flush().map_err(failed)?;
            Ok(())
        })
        .await?;
        Ok(written)
    }
}

/// What a file is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Reading.
    Read,
    /// Writing, created when missing (never truncated by the open).
    WriteCreate,
}

/// Opens `real` (a path already resolved inside `root`) for `access`, not following a final
/// symlink and not blocking on a FIFO, and checks the opened file: a regular file, and (on
/// Linux) still inside `root` by the path of the open descriptor. `path` is the caller's, for
/// errors.
///
/// On Linux the open itself is confined: `openat2(2)` relative to the root with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, so a directory swapped for a symlink between the
/// check and the open is refused by the kernel before anything is created or opened (a plain
/// open with `O_CREAT` would create the file outside the root, and only the check after it
/// would notice). Kernels before 5.6 have no `openat2`: there the plain open is used.
fn open_confined(root: &Path, real: &Path, path: &str, access: Access) -> Result<File, ToolError> {
    let open_error = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::ELOOP) => ToolError::denied(format!(
            "{path:?} is or leads through a symlink (it became one while opening); the file \
             tools do not follow it"
        )),
        Some(libc::EXDEV) => ToolError::denied(format!(
            "{path:?} leads outside the tool's root directory (changed while opening)"
        )),
        _ => ToolError::failed(format!("{path}: {e}")),
    };
    #[cfg(target_os = "linux")]
    let beneath = open_beneath(root, real, access).map_err(open_error)?;
    #[cfg(not(target_os = "linux"))]
    let beneath = None;
    let file = match beneath {
        Some(file) => file,
        None => {
            let mut options = OpenOptions::new();
            match access {
                Access::Read => options.read(true),
                Access::WriteCreate => options.write(true).create(true),
            };
            options
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(real)
                .map_err(open_error)?
        }
    };
    let meta = file.metadata().map_err(|e| ToolError::failed(format!("{path}: {e}")))?;
    if !meta.is_file() {
        return Err(ToolError::denied(format!("{path:?} is not a regular file")));
    }
    if meta.nlink() > 1 {
        // Checked on the opened file, before anything is read or truncated.
        return Err(ToolError::denied(format!(
            "{path:?} has {} hard links; the file tools only use a file whose one name is \
             inside the root (another name may lie outside it)",
            meta.nlink()
        )));
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(|e| ToolError::failed(format!("{path}: {e}")))?;
        if !opened.starts_with(root) {
            return Err(ToolError::denied(format!(
                "{path:?} leads outside the tool's root directory (changed while opening)"
            )));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = root;
    Ok(file)
}

/// `real` opened with `openat2(2)` beneath `root` (no component may leave it or be a
/// symlink); `None` when the kernel has no `openat2`.
#[cfg(target_os = "linux")]
fn open_beneath(root: &Path, real: &Path, access: Access) -> std::io::Result<Option<File>> {
    use nix::errno::Errno;
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    use nix::sys::stat::Mode;
    let Ok(relative) = real.strip_prefix(root) else {
        return Err(std::io::Error::from_raw_os_error(libc::EXDEV));
    };
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(root)?;
    let (flags, mode) = match access {
        Access::Read => (OFlag::O_RDONLY, Mode::empty()),
        Access::WriteCreate => (OFlag::O_WRONLY | OFlag::O_CREAT, Mode::from_bits_truncate(0o666)),
    };
    let how = OpenHow::new()
        .flags(flags | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)
        .mode(mode)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    match openat2(&dir, relative, how) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(Errno::ENOSYS) => Ok(None),
        Err(errno) => Err(std::io::Error::from(errno)),
    }
}

/// Runs blocking file work off the async runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::failed(format!("the file operation did not finish: {e}")))?
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The race the open-time check closes: a path resolved inside the root whose directory is
    /// swapped for a symlink leading out before the file is opened.
    #[tokio::test]
    async fn a_directory_swapped_for_a_symlink_after_resolution_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let root_dir = base.path().join("root");
        let outside = base.path().join("outside");
        std::fs::create_dir_all(root_dir.join("docs")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root_dir.join("docs/a.txt"), "inside").unwrap();
        std::fs::write(outside.join("a.txt"), "secret").unwrap();
        let root = Root::new(&root_dir).unwrap();

        let resolved = root.existing("docs/a.txt").unwrap();
        // The swap, between the check and the use.
        std::fs::rename(root_dir.join("docs"), base.path().join("old-docs")).unwrap();
        std::os::unix::fs::symlink(&outside, root_dir.join("docs")).unwrap();

        let err = open_confined(&root.root, &resolved, "docs/a.txt", Access::Read).unwrap_err();
        assert!(matches!(err, ToolError::Denied(_)), "{err:?}");
        assert!(err.to_string().contains("while opening"), "{err}");
        // Writing through the swapped path neither truncates nor writes the outside file.
        let err =
            open_confined(&root.root, &resolved, "docs/a.txt", Access::WriteCreate).unwrap_err();
        assert!(matches!(err, ToolError::Denied(_)), "{err:?}");
        assert_eq!(std::fs::read_to_string(outside.join("a.txt")).unwrap(), "secret");
        // Nor creates a file there: the open itself is confined (openat2 beneath the root).
        let missing = root_dir.join("docs/new.txt");
        let err =
            open_confined(&root.root, &missing, "docs/new.txt", Access::WriteCreate).unwrap_err();
        assert!(matches!(err, ToolError::Denied(_)), "{err:?}");
        assert!(!outside.join("new.txt").exists(), "a file was created outside the root");

        // A final component swapped for a symlink is not followed at all.
        std::fs::remove_file(root_dir.join("docs")).unwrap();
        std::fs::create_dir(root_dir.join("docs")).unwrap();
        std::os::unix::fs::symlink(outside.join("a.txt"), root_dir.join("docs/a.txt")).unwrap();
        let err = open_confined(&root.root, &resolved, "docs/a.txt", Access::Read).unwrap_err();
        assert!(err.to_string().contains("became one"), "{err}");
    }
}
