//! A loopback server on a thread of its own, with a runtime of its own, so
//! that the client under test never shares a scheduler with it: bound to
//! 127.0.0.1 on a free port, stopped and joined when dropped. Each test
//! server gives it the function that serves a listener until told to stop.

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

/// The runtime a server thread runs.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code, reason = "each includer uses the one it needs")]
pub(crate) enum Runtime {
    /// One thread, the server's own.
    CurrentThread,
    /// One worker thread beside it.
    OneWorker,
}

/// A server running on its own thread. Stops when dropped.
pub(crate) struct ServerThread {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ServerThread {
    /// Bind 127.0.0.1 on a free port and run `serve(listener, stopped)` on
    /// a thread of its own, in a `runtime`; `stopped` resolves when the
    /// server is dropped.
    pub(crate) fn start<F, Fut>(runtime: Runtime, serve: F) -> std::io::Result<ServerThread>
    where
        F: FnOnce(TcpListener, oneshot::Receiver<()>) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (shutdown, stopped) = oneshot::channel();
        let thread = std::thread::spawn(move || {
            let mut builder = match runtime {
                Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread(),
                Runtime::OneWorker => {
                    let mut builder = tokio::runtime::Builder::new_multi_thread();
                    builder.worker_threads(1);
                    builder
                }
            };
            let runtime = builder
                .enable_all()
                .build()
                .expect("a runtime for the server");
            runtime.block_on(serve(listener, stopped));
        });
        Ok(ServerThread {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The `n`th draw of a test server seeded with `seed`, uniform in [0, 1)
/// (SplitMix64): the same requests draw the same in every run with the same
/// seed.
#[allow(dead_code, reason = "each includer uses what it needs")]
pub(crate) fn draw(seed: u64, n: u64) -> f64 {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    #[allow(clippy::cast_precision_loss, reason = "53 bits, exactly")]
    let unit = (z >> 11) as f64 / (1u64 << 53) as f64;
    unit
}
