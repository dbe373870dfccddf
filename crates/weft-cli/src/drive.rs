//! [`drive`]: a run's events shown as they come, Ctrl-C and SIGTERM handled on the way
//! (`weft run`, `weft chat`, local or through a server).

use std::io;
use std::sync::Arc;

use futures::{FutureExt, Stream, StreamExt};
use weft_core::EventRecord;

use crate::render::Sink;
use crate::signals::{Signal, Signals};
use crate::term::{self, Spinner};

/// How the stream of a run ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Driven {
    /// It ran to its end (after a signal had aborted it, if one came).
    Ended(Option<Signal>),
    /// A second signal: stop waiting for the aborted run.
    Abandoned(Signal),
}

/// What woke [`drive`] up while the run had nothing to say.
enum Wake {
    Event(Option<Arc<EventRecord>>),
    Signal(Signal),
    Tick,
}

/// Shows the run as it happens; a first signal (Ctrl-C, SIGTERM) calls `abort` (what streamed
/// until then is kept and the run's end still shown), a second one stops waiting. However the
/// events end (the run's end, a panicked run task, a second signal), the sink is finished, so
/// JSON output always ends with its format's closing frames.
pub(crate) async fn drive<S>(
    stream: &mut S,
    abort: impl Fn(),
    sink: &mut dyn Sink,
    signals: &mut Signals,
    spinner: &mut Spinner,
) -> io::Result<Driven>
where
    S: Stream<Item = Arc<EventRecord>> + Unpin,
{
    let mut signalled = None;
    let driven = loop {
        let event = match stream.next().now_or_never() {
            Some(event) => event,
            None => {
                // The run has nothing more for now: show what it said before waiting.
                sink.flush()?;
                let ticking = spinner.waiting();
                let wake = tokio::select! {
                    event = stream.next() => Wake::Event(event),
                    signal = signals.next() => Wake::Signal(signal),
                    () = tokio::time::sleep(term::TICK), if ticking => Wake::Tick,
                };
                match wake {
                    Wake::Event(event) => event,
                    Wake::Tick => {
                        spinner.tick(sink.mid_line());
                        continue;
                    }
                    Wake::Signal(signal) => match signalled {
                        Some(first) => break Driven::Abandoned(first),
                        None => {
                            signalled = Some(signal);
                            spinner.erase();
                            abort();
                            continue;
                        }
                    },
                }
            }
        };
        let Some(record) = event else { break Driven::Ended(signalled) };
        spinner.observe(&record.event);
        sink.node(record.node_id.as_ref());
        sink.event(record.seq, &record.event)?;
    };
    spinner.erase();
    sink.finish()?;
    sink.flush()?;
    Ok(driven)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use weft_core::AgentEvent;

    use super::*;

    /// A sink that records what it was asked to do.
    #[derive(Default)]
    struct Recorder {
        events: Vec<&'static str>,
        finished: bool,
    }

    impl Sink for Recorder {
        fn event(&mut self, _seq: u64, event: &AgentEvent) -> io::Result<()> {
            self.events.push(event.kind());
            Ok(())
        }

        fn finish(&mut self) -> io::Result<()> {
            self.finished = true;
            Ok(())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_output_is_finished_however_the_events_end() {
        // A run task that died without its closing events: the events just stop.
        let events = vec![
            AgentEvent::SessionStart {
                session_id: "s".into(),
                run_id: "r".into(),
                agent: "react".into(),
                recovers: None,
            },
            AgentEvent::TextStart { index: 0 },
        ];
        let mut stream = futures::stream::iter((1..).zip(events).map(|(seq, event)| {
            Arc::new(EventRecord {
                session_id: "s".into(),
                run_id: "r".into(),
                seq,
                node_id: None,
                at: 0,
                event,
                messages: None,
            })
        }));
        let mut sink = Recorder::default();
        let mut signals = Signals::new();
        let driven =
            drive(&mut stream, || {}, &mut sink, &mut signals, &mut Spinner::new(false)).await;
        assert_eq!(driven.unwrap(), Driven::Ended(None));
        assert_eq!(sink.events, ["session_start", "text_start"]);
        assert!(sink.finished, "the encoder's closing frames were not written");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_second_signal_abandons_the_run_and_still_finishes_the_output() {
        let mut signals = Signals::new();
        // A run that never ends, even aborted.
        let mut stream = futures::stream::pending::<Arc<EventRecord>>();
        let mut sink = Recorder::default();
        let aborts = std::sync::atomic::AtomicUsize::new(0);
        let abort = || {
            aborts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        };
        let pid = std::process::id().to_string();
        let kill = || {
            std::process::Command::new("kill").args(["-TERM", &pid]).status().map(|s| s.success())
        };
        let signalling = async {
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert!(kill().unwrap());
            }
        };
        let mut spinner = Spinner::new(false);
        let (driven, ()) = tokio::join!(
            drive(&mut stream, abort, &mut sink, &mut signals, &mut spinner),
            signalling
        );
        assert_eq!(driven.unwrap(), Driven::Abandoned(Signal::Terminate));
        assert_eq!(aborts.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(sink.finished);
    }
}
