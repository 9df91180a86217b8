//! A loopback TCP proxy between the store and the test server that can
//! misbehave on demand: lose the reply to a COMMIT (the server commits,
//! the client never hears of it and sees its connection drop), or turn
//! into a black hole (nothing is forwarded either way, every socket stays
//! open) until it is healed.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// The frontend message of a simple-query `COMMIT`: `Q`, its length
/// (4 + 7), the text and its NUL.
const COMMIT: &[u8] = b"Q\0\0\0\x0bCOMMIT\0";

/// How often a pump that waits looks at the proxy's state again.
const POLL: Duration = Duration::from_millis(5);

#[derive(Default)]
struct State {
    stop: AtomicBool,
    hole: AtomicBool,
    lose_commit: AtomicBool,
    commits_lost: AtomicUsize,
    accepted: AtomicUsize,
}

/// A running proxy; dropped, it stops forwarding and closes everything.
pub struct Proxy {
    addr: SocketAddr,
    state: Arc<State>,
}

impl Proxy {
    /// A proxy on 127.0.0.1 (a free port) to the server of `url`.
    pub fn start(url: &str) -> Proxy {
        let (_, authority, _) = split(url);
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let server = if host_port.contains(':') {
            host_port.to_string()
        } else {
            format!("{host_port}:5432")
        };
        let server: SocketAddr = server
            .to_socket_addrs()
            .expect("resolve the test server")
            .next()
            .expect("an address of the test server");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let st = state.clone();
        thread::spawn(move || accept(listener, server, st));
        Proxy { addr, state }
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url(&self, url: &str) -> String {
        let (scheme, authority, rest) = split(url);
        let user = authority.rsplit_once('@').map(|(u, _)| format!("{u}@"));
        format!("{scheme}://{}{}{rest}", user.unwrap_or_default(), self.addr)
    }

    /// Stop forwarding in both directions (keeping every socket open), or
    /// forward again what waited.
    pub fn hole(&self, on: bool) {
        self.state.hole.store(on, Ordering::SeqCst);
    }

    /// The next `COMMIT` a client sends reaches the server; its reply
    /// never reaches the client, whose connection is closed instead.
    pub fn lose_next_commit_reply(&self) {
        self.state.lose_commit.store(true, Ordering::SeqCst);
    }

    /// How many COMMIT replies were lost.
    pub fn commits_lost(&self) -> usize {
        self.state.commits_lost.load(Ordering::SeqCst)
    }

    /// How many connections the proxy accepted.
    pub fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
    }
}

/// `scheme`, the authority (user and host) and the rest of `url`.
fn split(url: &str) -> (&str, &str, &str) {
    let (scheme, after) = url.split_once("://").expect("a URL with a scheme");
    let end = after.find(['/', '?']).unwrap_or(after.len());
    (scheme, &after[..end], &after[end..])
}

fn accept(listener: TcpListener, server: SocketAddr, state: Arc<State>) {
    while !state.stop.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                thread::sleep(POLL);
                continue;
            }
            Err(_) => return,
        };
        state.accepted.fetch_add(1, Ordering::SeqCst);
        let Ok(upstream) = TcpStream::connect(server) else {
            continue;
        };
        client.set_nonblocking(false).unwrap();
        for s in [&client, &upstream] {
            s.set_read_timeout(Some(POLL)).unwrap();
            s.set_nodelay(true).unwrap();
        }
        // Set by the client-to-server pump when it forwarded the COMMIT
        // whose reply is to be lost.
        let cut = Arc::new(AtomicBool::new(false));
        let pair = |a: &TcpStream, b: &TcpStream| (a.try_clone().unwrap(), b.try_clone().unwrap());
        let (c1, u1) = pair(&client, &upstream);
        let (st, cut1) = (state.clone(), cut.clone());
        thread::spawn(move || pump(c1, u1, Direction::ToServer, &st, &cut1));
        let st = state.clone();
        thread::spawn(move || pump(upstream, client, Direction::ToClient, &st, &cut));
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    ToServer,
    ToClient,
}

/// Forward `from` to `to` until either end closes or the proxy stops.
fn pump(mut from: TcpStream, mut to: TcpStream, dir: Direction, st: &State, cut: &AtomicBool) {
    let mut buf = vec![0u8; 64 * 1024];
    let close = |a: &TcpStream, b: &TcpStream| {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
    };
    loop {
        if st.stop.load(Ordering::SeqCst) {
            return close(&from, &to);
        }
        if st.hole.load(Ordering::SeqCst) {
            // Read nothing: what is sent waits in the sockets' buffers.
            thread::sleep(POLL);
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return close(&from, &to),
        };
        let chunk = &buf[..n];
        while st.hole.load(Ordering::SeqCst) && !st.stop.load(Ordering::SeqCst) {
            thread::sleep(POLL);
        }
        match dir {
            Direction::ToServer => {
                if chunk.windows(COMMIT.len()).any(|w| w == COMMIT)
                    && st.lose_commit.swap(false, Ordering::SeqCst)
                {
                    cut.store(true, Ordering::SeqCst);
                }
            }
            Direction::ToClient if cut.load(Ordering::SeqCst) => {
                // The server answered the COMMIT: it committed. The client
                // never hears of it.
                st.commits_lost.fetch_add(1, Ordering::SeqCst);
                return close(&from, &to);
            }
            Direction::ToClient => {}
        }
        if to.write_all(chunk).is_err() {
            return close(&from, &to);
        }
    }
}
