//! The socket and the response body of a connection, as its [`Conn`] sees them: reads say that
//! a request began, writes whether the client takes data, a body's end that its request is over.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::Conn;

/// A connection's socket: reads tell its [`Conn`] that a request began, writes whether its
/// client takes data; dropping it frees the slot (after an upgrade too: the WebSocket owns it
/// then).
pub(super) struct TrackedIo {
    pub(super) stream: TcpStream,
    pub(super) conn: Arc<Conn>,
    /// The last write found the socket full, and none has made progress since.
    pub(super) stalled: bool,
}

impl TrackedIo {
    /// Tells the connection when its writes stall (the socket is full) and when they move again.
    fn wrote(&mut self, polled: &Poll<std::io::Result<usize>>) {
        match polled {
            Poll::Pending if !self.stalled => {
                self.stalled = true;
                self.conn.write_stalled();
            }
            Poll::Ready(Ok(n)) if *n > 0 && self.stalled => {
                self.stalled = false;
                self.conn.write_progressed();
            }
            _ => {}
        }
    }
}

impl Drop for TrackedIo {
    fn drop(&mut self) {
        self.conn.release();
    }
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.wrote(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A request's connection, in its extensions: what an upgraded protocol (the WebSocket) tells
/// the cap, and how it learns that it was replaced there. Absent when the router is driven
/// without [`crate::Server::serve`].
#[derive(Clone)]
pub(crate) struct ConnHandle(pub(super) Arc<Conn>);

impl ConnHandle {
    /// The upgraded connection holds nothing (`true`: a WebSocket with no stream open), so a
    /// new connection may take its place at the cap; or it holds something again (`false`).
    /// `false`: it was replaced already, and must close.
    pub(crate) fn set_idle(&self, idle: bool) -> bool {
        self.0.set_upgrade_idle(idle)
    }

    /// Completes once a new connection took this one's place at the cap.
    pub(crate) async fn evicted(&self) {
        self.0.evicted().await;
    }
}

/// Marks its connection busy while it lives: from a request's head to its response body's end.
pub(super) struct InFlight(pub(super) Arc<Conn>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end_request();
    }
}

/// A response body that keeps its request in flight until it ends.
pub(crate) struct TrackedBody {
    pub(super) body: Body,
    pub(super) _in_flight: InFlight,
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
