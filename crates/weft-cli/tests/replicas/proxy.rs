//! An in-test TCP proxy between two peers on 127.0.0.1 (a client and a replica, a replica and
//! Postgres) that can delay what it forwards, cut every connection, and partition: cut them
//! and refuse new ones until healed. Its upstream can be moved (a replica restarted on another
//! port keeps its address for clients).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Control {
    upstream: Mutex<String>,
    partitioned: AtomicBool,
    delay_ms: AtomicU64,
    /// Both ends of every connection forwarded, to cut them.
    open: Mutex<Vec<TcpStream>>,
}

pub(crate) struct Proxy {
    pub(crate) addr: String,
    control: Arc<Control>,
}

impl Proxy {
    pub(crate) fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let control = Arc::new(Control::default());
        *control.upstream.lock().unwrap() = upstream.to_owned();
        let shared = Arc::clone(&control);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if shared.partitioned.load(Ordering::SeqCst) {
                    // Refused: the peer sees its connection reset at once.
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let upstream = shared.upstream.lock().unwrap().clone();
                let Ok(server) = TcpStream::connect(&upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
                    client.try_clone(),
                    server.try_clone(),
                    client.try_clone(),
                    server.try_clone(),
                ) else {
                    continue;
                };
                shared.open.lock().unwrap().extend([c3, s3]);
                pump(client, server, Arc::clone(&shared));
                pump(s2, c2, Arc::clone(&shared));
            }
        });
        Proxy { addr, control }
    }

    /// Forwards new connections to `upstream` from now on.
    pub(crate) fn set_upstream(&self, upstream: &str) {
        *self.control.upstream.lock().unwrap() = upstream.to_owned();
    }

    /// Delays every chunk forwarded by `delay` (zero: none).
    pub(crate) fn delay(&self, delay: Duration) {
        self.control.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Cuts every open connection (both peers see it closed).
    pub(crate) fn cut(&self) {
        for stream in self.control.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Partitions (cuts everything and refuses new connections) or heals.
    pub(crate) fn partition(&self, on: bool) {
        self.control.partitioned.store(on, Ordering::SeqCst);
        if on {
            self.cut();
        }
    }
}

/// Copies `from` to `to` until either side closes, delaying each chunk as the control says.
fn pump(mut from: TcpStream, mut to: TcpStream, control: Arc<Control>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let delay = control.delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                std::thread::sleep(Duration::from_millis(delay));
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
