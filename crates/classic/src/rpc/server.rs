//! The standalone RPC server (the equivalent of TVM's `apps/cpp_rpc`): listens on a port in a
//! range, checks each client's handshake (key, optional token), serves each connection as its
//! own session in its own work directory, registers with a tracker and keeps its slot updated.
//!
//! Sessions run in a thread each ([`Isolation::Thread`]) or in a forked child process each
//! ([`Isolation::Process`], as TVM's servers do: a crash in uploaded code then ends only that
//! session, and `-timeout=` kills it). Several sessions run at once, up to `max_sessions`; with a
//! tracker the default is one, so a tuner that the tracker hands this server has it to itself.
//!
//! Safe defaults beyond TVM: the server binds 127.0.0.1 unless told otherwise, a handshake
//! must arrive within `handshake_timeout`, packets are bounded, file names stay inside the
//! session's work directory (see [`super::env`]), and an optional token must be presented.

use super::channel;
use super::codec::{self, ClientKey, RPC_CODE_MISMATCH, RPC_CODE_SUCCESS, RPC_MAGIC};
use super::endpoint::{self, ServerEndpoint};
use super::env::{self, SessionEnv};
use super::tracker::{self, TrackerConn};
use crate::error::{Error, Result};
use crate::registry;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest key accepted in a handshake (bytes).
pub(crate) const MAX_KEY: usize = 4096;

/// How sessions are kept apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// A thread per session, in the server's process.
    Thread,
    /// A forked child process per session (needs a single-threaded server process; falls back
    /// to threads otherwise).
    Process,
}

/// Everything the server needs; [`ServerConfig::default`] gives TVM's defaults except the host.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to bind (default `127.0.0.1`; `0.0.0.0` for every interface).
    pub host: String,
    /// First port to try (0: any free port).
    pub port: u16,
    /// End of the port range (exclusive); ports `port..port_end` are tried in turn.
    pub port_end: u16,
    /// The key clients (and the tracker) know this server by.
    pub key: String,
    /// A tracker to register with, `host:port`.
    pub tracker: Option<String>,
    /// The address to report to the tracker (default: what the tracker sees).
    pub custom_addr: Option<String>,
    /// Where session work directories go (default: a new directory under the system's temp dir).
    pub work_dir: Option<PathBuf>,
    /// A secret clients must present as `-token=<secret>` in their key.
    pub token: Option<String>,
    /// Most sessions at once (default: 1 with a tracker, else 16).
    pub max_sessions: Option<usize>,
    /// How sessions are kept apart.
    pub isolation: Isolation,
    /// Print nothing but errors.
    pub silent: bool,
    /// Largest packet accepted.
    pub max_packet: u64,
    /// Time a client has to send its handshake.
    pub handshake_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            host: "127.0.0.1".into(),
            port: 9090,
            port_end: 9099,
            key: String::new(),
            tracker: None,
            custom_addr: None,
            work_dir: None,
            token: None,
            max_sessions: None,
            isolation: Isolation::Thread,
            silent: false,
            max_packet: channel::max_packet_from_env(),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Stops a running server from another thread.
#[derive(Clone)]
pub struct Stopper(Arc<AtomicBool>);

impl Stopper {
    /// Asks the server to stop; `run` returns within about half a second, after ending the
    /// sessions in progress.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A bound server, ready to [`Server::run`].
pub struct Server {
    cfg: ServerConfig,
    listener: TcpListener,
    port: u16,
    stop: Arc<AtomicBool>,
    base: PathBuf,
    owns_base: bool,
}

fn log(silent: bool, msg: &str) {
    if !silent {
        eprintln!("[tvm-rpc] {msg}");
    }
}

fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>> {
    let v: Vec<_> =
        (host, port).to_socket_addrs().map_err(|e| Error::value(format!("cannot resolve {host}: {e}")))?.collect();
    if v.is_empty() {
        return Err(Error::value(format!("{host} resolves to no address")));
    }
    Ok(v)
}

impl Server {
    /// Binds the first free port of the range and prepares the work directory.
    pub fn bind(cfg: ServerConfig) -> Result<Server> {
        let ports: Vec<u16> =
            if cfg.port == 0 || cfg.port_end <= cfg.port { vec![cfg.port] } else { (cfg.port..cfg.port_end).collect() };
        let mut last = None;
        let mut bound = None;
        'ports: for p in ports {
            for a in resolve(&cfg.host, p)? {
                match TcpListener::bind(a) {
                    Ok(l) => {
                        bound = Some(l);
                        break 'ports;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
                    Err(e) => return Err(Error::tvm(format!("cannot bind {a}: {e}"))),
                }
            }
        }
        let listener = bound.ok_or_else(|| {
            Error::value(format!(
                "cannot bind to any port in [{}, {}) ({})",
                cfg.port,
                cfg.port_end,
                last.map_or_else(String::new, |e| e.to_string())
            ))
        })?;
        let port = listener.local_addr().map_err(|e| Error::tvm(e.to_string()))?.port();
        listener.set_nonblocking(true).map_err(|e| Error::tvm(e.to_string()))?;
        let (base, owns_base) = match &cfg.work_dir {
            Some(d) => (d.clone(), false),
            None => (std::env::temp_dir().join(format!("tvm-rpc-{}-{port}", std::process::id())), true),
        };
        std::fs::create_dir_all(&base).map_err(|e| Error::tvm(format!("work dir {}: {e}", base.display())))?;
        let base = base.canonicalize().map_err(|e| Error::tvm(format!("work dir {}: {e}", base.display())))?;
        log(cfg.silent, &format!("bind to {}:{port}", cfg.host));
        Ok(Server { cfg, listener, port, stop: Arc::new(AtomicBool::new(false)), base, owns_base })
    }

    /// The port bound.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A handle to stop [`Server::run`].
    pub fn stopper(&self) -> Stopper {
        Stopper(self.stop.clone())
    }

    /// Serves until stopped.
    pub fn run(self) -> Result<()> {
        let mut isolation = self.cfg.isolation;
        if isolation == Isolation::Process && thread_count() != Some(1) {
            log(false, "warning: process isolation needs a single-threaded server process; using threads");
            isolation = Isolation::Thread;
        }
        let max = self.cfg.max_sessions.unwrap_or(if self.cfg.tracker.is_some() { 1 } else { 16 }).max(1);
        let mut st = RunState {
            sessions: Vec::new(),
            tracker: None,
            tracker_retry: Instant::now(),
            matchkey: None,
            old_keys: HashSet::new(),
            last_ping: Instant::now(),
            unmatched: 0,
            counter: 0,
        };
        while !self.stop.load(Ordering::SeqCst) {
            st.reap(&self);
            self.tracker_step(&mut st, max);
            let free = st.sessions.len() < max;
            if free && poll_readable(self.listener.as_raw_fd(), 500) {
                match self.listener.accept() {
                    Ok((conn, addr)) => {
                        if let Err(e) = self.accept(conn, addr, &mut st, isolation) {
                            log(self.cfg.silent, &format!("connection from {addr} refused: {e}"));
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => log(false, &format!("accept failed: {e}")),
                }
            } else if !free {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        st.end_all(&self);
        if self.owns_base {
            let _ = std::fs::remove_dir_all(&self.base);
        }
        Ok(())
    }

    fn expected_header(&self, st: &RunState) -> String {
        format!("client:{}", st.matchkey.as_deref().unwrap_or(&self.cfg.key))
    }

    /// Reads and checks a client's handshake, then starts its session.
    fn accept(&self, mut conn: TcpStream, addr: SocketAddr, st: &mut RunState, isolation: Isolation) -> Result<()> {
        let e = |e: std::io::Error| Error::tvm(e.to_string());
        conn.set_nonblocking(false).map_err(e)?;
        conn.set_read_timeout(Some(self.cfg.handshake_timeout)).map_err(e)?;
        conn.set_nodelay(true).map_err(e)?;
        let mut b4 = [0u8; 4];
        conn.read_exact(&mut b4).map_err(e)?;
        if i32::from_le_bytes(b4) != RPC_MAGIC {
            return Err(Error::value("the client is not a TVM RPC client (wrong magic)"));
        }
        conn.read_exact(&mut b4).map_err(e)?;
        let keylen = usize::try_from(i32::from_le_bytes(b4))
            .ok()
            .filter(|&n| n <= MAX_KEY)
            .ok_or_else(|| Error::value("invalid key length in the handshake"))?;
        let mut key = vec![0u8; keylen];
        conn.read_exact(&mut key).map_err(e)?;
        let key = String::from_utf8_lossy(&key).into_owned();
        let ck = ClientKey::parse(&key);
        let header_ok = ck.header == self.expected_header(st);
        let token_ok = match &self.cfg.token {
            None => true,
            Some(t) => ck.token().is_some_and(|c| codec::token_eq(c.as_bytes(), t.as_bytes())),
        };
        if !header_ok || !token_ok {
            let _ = conn.write_all(&codec::encode_server_reply(RPC_CODE_MISMATCH, ""));
            return Err(Error::value(if header_ok { "missing or wrong token" } else { "mismatch key" }));
        }
        let server_key = format!("server:{}", self.cfg.key);
        conn.write_all(&codec::encode_server_reply(RPC_CODE_SUCCESS, &server_key)).map_err(e)?;
        conn.set_read_timeout(None).map_err(e)?;
        log(self.cfg.silent, &format!("connection from {addr}"));
        // The tracker's key was used: offer a new one once a slot is free.
        if st.matchkey.is_some() {
            st.matchkey = None;
        }
        st.counter += 1;
        let dir = self.base.join(format!("session-{}-{}", std::process::id(), st.counter));
        std::fs::create_dir_all(&dir).map_err(|err| Error::tvm(format!("work dir {}: {err}", dir.display())))?;
        let deadline = ck.timeout().map(|t| Instant::now() + Duration::from_secs_f64(t.min(1e9)));
        let env = SessionEnv { work_dir: dir.clone(), verbose: !self.cfg.silent };
        let sess = match isolation {
            Isolation::Thread => {
                let shut = conn.try_clone().map_err(e)?;
                let (silent, max_packet) = (self.cfg.silent, self.cfg.max_packet);
                let h = std::thread::Builder::new()
                    .name(format!("rpc-session-{}", st.counter))
                    .spawn(move || serve_session(conn, addr, env, silent, max_packet))
                    .map_err(e)?;
                Running { kind: Kind::Thread(Some(h), shut), deadline, dir }
            }
            Isolation::Process => {
                let tracker_fd = st.tracker.as_ref().map(|t| t.socket().as_raw_fd());
                // SAFETY: the server process is single-threaded (checked in `run`), so the child
                // starts in a consistent state; it serves and leaves with `_exit`.
                let pid = unsafe { libc::fork() };
                if pid < 0 {
                    return Err(Error::tvm(format!("fork failed: {}", std::io::Error::last_os_error())));
                }
                if pid == 0 {
                    // SAFETY: closing the child's copies of the parent's listening and tracker
                    // sockets; nothing in the child uses them.
                    unsafe {
                        libc::close(self.listener.as_raw_fd());
                        if let Some(fd) = tracker_fd {
                            libc::close(fd);
                        }
                    }
                    serve_session(conn, addr, env, self.cfg.silent, self.cfg.max_packet);
                    // SAFETY: ends the child without running the parent's destructors.
                    unsafe { libc::_exit(0) };
                }
                Running { kind: Kind::Process(pid), deadline, dir }
            }
        };
        st.sessions.push(sess);
        Ok(())
    }

    /// Keeps the tracker informed: connect and report, offer a match key while a session slot
    /// is free, and replace a key that a client took but never used (TVM's logic).
    fn tracker_step(&self, st: &mut RunState, max: usize) {
        let Some(addr) = &self.cfg.tracker else { return };
        let silent = self.cfg.silent;
        if st.tracker.is_none() {
            if Instant::now() < st.tracker_retry {
                return;
            }
            match TrackerConn::connect(addr, Duration::from_secs(5)).and_then(|mut t| {
                t.update_info(&self.cfg.key, self.cfg.custom_addr.as_deref(), self.port)?;
                Ok(t)
            }) {
                Ok(t) => {
                    log(silent, &format!("registered with tracker {addr}"));
                    st.tracker = Some(t);
                    st.matchkey = None;
                }
                Err(e) => {
                    log(silent, &format!("cannot reach tracker {addr}, retry in 5 s: {e}"));
                    st.tracker_retry = Instant::now() + Duration::from_secs(5);
                    return;
                }
            }
        }
        let r = (|| -> Result<()> {
            let Some(t) = st.tracker.as_mut() else { return Ok(()) };
            if st.matchkey.is_none() && st.sessions.len() < max {
                let k = tracker::random_key(&format!("{}:", self.cfg.key), &st.old_keys);
                t.put(&self.cfg.key, self.port, &k, self.cfg.custom_addr.as_deref())?;
                st.matchkey = Some(k);
                st.last_ping = Instant::now();
                st.unmatched = 0;
            } else if let Some(k) = st.matchkey.clone() {
                if st.last_ping.elapsed() >= Duration::from_secs(2) {
                    st.last_ping = Instant::now();
                    let pending = t.pending_match_keys()?;
                    st.old_keys.insert(k.clone());
                    st.unmatched = if pending.contains(&k) { 0 } else { st.unmatched + 1 };
                    if st.unmatched * 2 > 4 + 2 {
                        log(silent, "no incoming connections, regenerate key ...");
                        let nk = tracker::random_key(&format!("{}:", self.cfg.key), &st.old_keys);
                        t.put(&self.cfg.key, self.port, &nk, self.cfg.custom_addr.as_deref())?;
                        st.matchkey = Some(nk);
                        st.unmatched = 0;
                    }
                }
            }
            Ok(())
        })();
        if let Err(e) = r {
            log(silent, &format!("lost the tracker: {e}"));
            st.tracker = None;
            st.matchkey = None;
            st.tracker_retry = Instant::now() + Duration::from_secs(1);
        }
    }
}

enum Kind {
    Thread(Option<std::thread::JoinHandle<()>>, TcpStream),
    Process(libc::pid_t),
}

struct Running {
    kind: Kind,
    deadline: Option<Instant>,
    dir: PathBuf,
}

struct RunState {
    sessions: Vec<Running>,
    tracker: Option<TrackerConn>,
    tracker_retry: Instant,
    matchkey: Option<String>,
    old_keys: HashSet<String>,
    last_ping: Instant,
    unmatched: u32,
    counter: u64,
}

impl Running {
    fn finished(&mut self) -> bool {
        match &mut self.kind {
            Kind::Thread(h, _) => h.as_ref().map_or(true, |h| h.is_finished()),
            Kind::Process(pid) => {
                let mut status = 0;
                // SAFETY: waits without blocking for our own child.
                let r = unsafe { libc::waitpid(*pid, &mut status, libc::WNOHANG) };
                r == *pid || r < 0
            }
        }
    }

    fn kill(&mut self) {
        match &mut self.kind {
            Kind::Thread(_, s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            Kind::Process(pid) => {
                // SAFETY: signals our own child.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
        }
    }

    fn join(&mut self) {
        match &mut self.kind {
            Kind::Thread(h, _) => {
                if let Some(h) = h.take() {
                    let _ = h.join();
                }
            }
            Kind::Process(pid) => {
                let mut status = 0;
                // SAFETY: reaps our own child.
                unsafe { libc::waitpid(*pid, &mut status, 0) };
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl RunState {
    fn reap(&mut self, server: &Server) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.sessions.len() {
            let s = &mut self.sessions[i];
            if s.deadline.is_some_and(|d| now >= d) {
                log(server.cfg.silent, "Timeout in RPC session, kill..");
                s.kill();
                s.deadline = None;
            }
            if s.finished() {
                let mut s = self.sessions.swap_remove(i);
                s.join();
            } else {
                i += 1;
            }
        }
    }

    fn end_all(&mut self, _server: &Server) {
        for s in &mut self.sessions {
            s.kill();
        }
        for mut s in self.sessions.drain(..) {
            s.join();
        }
    }
}

/// Serves one accepted connection in the calling thread, with `env` as its environment; the
/// session's objects are released before this returns.
pub(crate) fn serve_session(conn: TcpStream, addr: SocketAddr, env: SessionEnv, silent: bool, max_packet: u64) {
    let _guard = env::enter(env);
    // A panic ends this session only (and, in a forked child, never unwinds into the parent's
    // accept loop).
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve_stream(conn, max_packet)));
    match r {
        Ok(Ok(())) => log(silent, &format!("Finish serving {addr}")),
        Ok(Err(e)) => log(false, &format!("session with {addr} ended: {e}")),
        Err(p) => {
            log(false, &format!("session with {addr} ended by a panic: {}", crate::error::panic_payload_text(&*p)))
        }
    }
}

/// `RPCServerLoop` over a socket: the start/shutdown hooks around the serving loop.
pub(crate) fn serve_stream(mut conn: TcpStream, max_packet: u64) -> Result<()> {
    if let Some(f) = registry::get("tvm.rpc.server.start") {
        f.call(&[])?;
    }
    let mut ep = ServerEndpoint::new("SockServerLoop");
    let r = endpoint::serve(&mut conn, &mut ep, max_packet);
    drop(ep);
    let _ = conn.shutdown(std::net::Shutdown::Both);
    if let Some(f) = registry::get("tvm.rpc.server.shutdown") {
        f.call(&[])?;
    }
    r
}

/// Waits up to `ms` for a file descriptor to become readable.
fn poll_readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    r > 0 && (p.revents & libc::POLLIN) != 0
}

/// The number of threads of this process (Linux), if known.
fn thread_count() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok())
}
