//! Connection threads ([`Settings::connection_threads`]): each a single-threaded Tokio runtime of
//! its own, on which the connections handed to it are served, with everything their requests
//! start: a run and the stream that carries its events live on one thread, and a delta wakes
//! no other thread.
//!
//! On a multi-threaded runtime a delta of a paced stream (a model's token) woke a worker that
//! was parked, and that worker, finding work, woke the other to steal some: at 30–100
//! streaming sessions on two cores a third to a quarter of the server's CPU went to threads
//! parking and waking each other (`BENCHMARKS.md`). With one runtime per thread, a thread
//! sleeps in its own event loop until its next timer or socket, and runs what that wakes.
//!
//! Connections are dealt out in turn. A task never moves to another thread: one session
//! whose tools compute for long slows the other connections of its thread (work stealing
//! would have moved them). A watcher on one thread of a run on another is woken across
//! threads, as before. Tasks a connection's requests spawn end when the server's
//! [`serve`](crate::Server::serve) returns (runs have been drained or aborted by then).
//!
//! [`Settings::connection_threads`]: crate::Settings::connection_threads

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// Threads, each running a single-threaded runtime, that connections are spawned on.
pub(crate) struct Shards {
    handles: Vec<Handle>,
    next: AtomicUsize,
    threads: Vec<(oneshot::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Shards {
    /// Starts `count` threads (none: connections are served on the caller's runtime).
    pub(crate) fn start(count: usize) -> std::io::Result<Self> {
        let mut shards = Self {
            handles: Vec::with_capacity(count),
            next: AtomicUsize::new(0),
            threads: Vec::new(),
        };
        for index in 0..count {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new().name(format!("weft-conn-{index}")).spawn(
                move || {
                    // Spawned tasks run while this waits; those still there at the stop end
                    // as the runtime drops.
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                },
            )?;
            shards.handles.push(handle);
            shards.threads.push((stop, thread));
        }
        Ok(shards)
    }

    /// The runtime the next connection is served on, in turn; `None` without threads.
    pub(crate) fn next(&self) -> Option<&Handle> {
        if self.handles.is_empty() {
            return None;
        }
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        self.handles.get(at)
    }

    /// Stops the threads (dropping the tasks still on them) and waits for them to end.
    pub(crate) async fn stop(self) {
        let threads: Vec<_> = self
            .threads
            .into_iter()
            .map(|(stop, thread)| {
                let _ = stop.send(());
                thread
            })
            .collect();
        if threads.is_empty() {
            return;
        }
        let joined = tokio::task::spawn_blocking(move || {
            for thread in threads {
                if thread.join().is_err() {
                    tracing::error!("a connection thread panicked");
                }
            }
        })
        .await;
        if let Err(error) = joined {
            tracing::error!(%error, "waiting for the connection threads failed");
        }
    }
}
