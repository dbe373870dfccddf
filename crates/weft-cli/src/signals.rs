//! The signals that stop a run: SIGINT (Ctrl-C) and, on Unix, SIGTERM (what `kill`, systemd,
//! Docker and CI runners send). The first one aborts the run, so the model call ends `aborted`
//! with its partial kept and every output format still gets its closing frame; a second one
//! stops waiting for the aborted run. `weft` then exits 128 + the signal's number, as shells do.

use std::future::pending;

/// Which signal arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Signal {
    /// The exit status after it: 128 + the signal number.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }

    /// What happened, for the line on stderr.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Signal::Interrupt => "interrupted",
            Signal::Terminate => "terminated",
        }
    }
}

/// The signals a run listens to. The handlers are installed when this is made (inside the async
/// runtime), so an early signal is caught too rather than killing the process with the run's
/// output half written. A handler that cannot be installed means the default for that signal
/// (the process ends).
pub(crate) struct Signals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(not(unix))]
    ctrl_c:
        Option<std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>>,
}

impl Signals {
    /// Installs the handlers. Must be called within the Tokio runtime.
    pub(crate) fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            Self { ctrl_c: Self::listen_ctrl_c() }
        }
    }

    #[cfg(not(unix))]
    fn listen_ctrl_c()
    -> Option<std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>>
    {
        use futures::FutureExt;
        let mut signal: std::pin::Pin<
            Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>,
        > = Box::pin(tokio::signal::ctrl_c());
        // The first poll installs the handler.
        signal.as_mut().now_or_never().is_none().then_some(signal)
    }

    /// The next signal (never, when none can be caught).
    pub(crate) async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) {
                if let Some(s) = signal
                    && s.recv().await.is_some()
                {
                    return;
                }
                // No more signals can come this way.
                *signal = None;
                pending::<()>().await;
            }
            tokio::select! {
                () = recv(&mut self.interrupt) => Signal::Interrupt,
                () = recv(&mut self.terminate) => Signal::Terminate,
            }
        }
        #[cfg(not(unix))]
        {
            let Some(signal) = self.ctrl_c.as_mut() else { return pending().await };
            if signal.await.is_err() {
                self.ctrl_c = None;
                return pending().await;
            }
            self.ctrl_c = Self::listen_ctrl_c();
            Signal::Interrupt
        }
    }
}
