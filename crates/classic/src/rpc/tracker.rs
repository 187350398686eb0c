//! The tracker protocol (`python/tvm/rpc/tracker.py`, `base.py`): after the magic `0x2f271`
//! both ways, messages are `[i32 length][JSON]`, each request answered by one reply.
//!
//! A server reports itself with `UPDATE_INFO` and offers a session with `PUT` under a random
//! match key, which the tracker hands to one client that `REQUEST`s the server's key; the
//! server polls `GET_PENDING_MATCHKEYS` to see whether its key was taken.

use super::codec::RPC_TRACKER_MAGIC;
use crate::error::{Error, Result};
use serde_json::{json, Value as Json};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// `TrackerCode`.
pub mod code {
    /// `FAIL`.
    pub const FAIL: i64 = -1;
    /// `SUCCESS`.
    pub const SUCCESS: i64 = 0;
    /// `PING`.
    pub const PING: i64 = 1;
    /// `STOP`.
    pub const STOP: i64 = 2;
    /// `PUT`.
    pub(crate) const PUT: i64 = 3;
    /// `REQUEST`.
    pub const REQUEST: i64 = 4;
    /// `UPDATE_INFO`.
    pub(crate) const UPDATE_INFO: i64 = 5;
    /// `SUMMARY`.
    pub const SUMMARY: i64 = 6;
    /// `GET_PENDING_MATCHKEYS`.
    pub(crate) const GET_PENDING_MATCHKEYS: i64 = 7;
}

/// Largest tracker message accepted (bytes).
pub(crate) const MAX_MESSAGE: usize = 16 << 20;

fn err(msg: impl std::fmt::Display) -> Error {
    Error::with_kind("RPCError", format!("tracker: {msg}"))
}

/// Splits `host:port` (IPv6 hosts in brackets).
pub fn parse_addr(addr: &str) -> Result<(String, u16)> {
    let (host, port) = addr.rsplit_once(':').ok_or_else(|| Error::value(format!("{addr:?} is not host:port")))?;
    let port = port.parse::<u16>().map_err(|_| Error::value(format!("{addr:?}: invalid port")))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(Error::value(format!("{addr:?}: empty host")));
    }
    Ok((host.to_owned(), port))
}

/// Connects to `host:port`, trying each address it resolves to.
pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream> {
    let addrs = (host, port).to_socket_addrs().map_err(|e| err(format!("cannot resolve {host}:{port}: {e}")))?;
    let mut last = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(err(format!("cannot connect to {host}:{port}: {}", last.map_or("no address".into(), |e| e.to_string()))))
}

/// A connection to a tracker.
pub(crate) struct TrackerConn {
    sock: TcpStream,
}

impl TrackerConn {
    /// Connects and exchanges the magic.
    pub(crate) fn connect(addr: &str, timeout: Duration) -> Result<TrackerConn> {
        let (host, port) = parse_addr(addr)?;
        let mut sock = connect(&host, port, timeout)?;
        sock.set_read_timeout(Some(Duration::from_secs(30))).map_err(err)?;
        sock.set_nodelay(true).map_err(err)?;
        sock.write_all(&RPC_TRACKER_MAGIC.to_le_bytes()).map_err(err)?;
        let mut m = [0u8; 4];
        sock.read_exact(&mut m).map_err(err)?;
        if i32::from_le_bytes(m) != RPC_TRACKER_MAGIC {
            return Err(err(format!("{addr} is not RPC Tracker")));
        }
        Ok(TrackerConn { sock })
    }

    /// The socket (to close it in a child process).
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Sends one request and reads its reply.
    pub(crate) fn call(&mut self, msg: &Json) -> Result<Json> {
        let data = msg.to_string();
        let mut out = Vec::with_capacity(4 + data.len());
        out.extend_from_slice(&(data.len() as i32).to_le_bytes());
        out.extend_from_slice(data.as_bytes());
        self.sock.write_all(&out).map_err(err)?;
        let mut n = [0u8; 4];
        self.sock.read_exact(&mut n).map_err(err)?;
        let n = usize::try_from(i32::from_le_bytes(n)).map_err(|_| err("negative message size"))?;
        if n > MAX_MESSAGE {
            return Err(err(format!("message of {n} bytes")));
        }
        let mut buf = vec![0u8; n];
        self.sock.read_exact(&mut buf).map_err(err)?;
        serde_json::from_slice(&buf).map_err(|e| err(format!("bad JSON reply: {e}")))
    }

    fn expect_success(&mut self, msg: &Json) -> Result<()> {
        match self.call(msg)? {
            Json::Number(n) if n.as_i64() == Some(code::SUCCESS) => Ok(()),
            other => Err(err(format!("request {msg} failed: {other}"))),
        }
    }

    /// `UPDATE_INFO`: reports a server (`server:<key>` at `custom_addr` or the tracker's view
    /// of our address, and `port`).
    pub(crate) fn update_info(&mut self, key: &str, custom_addr: Option<&str>, port: u16) -> Result<()> {
        self.expect_success(&json!([code::UPDATE_INFO, {"key": format!("server:{key}"), "addr": [custom_addr, port]}]))
    }

    /// `PUT`: offers one session under `matchkey`.
    pub(crate) fn put(&mut self, key: &str, port: u16, matchkey: &str, custom_addr: Option<&str>) -> Result<()> {
        self.expect_success(&json!([code::PUT, key, [port, matchkey], custom_addr]))
    }

    /// `GET_PENDING_MATCHKEYS`: the match keys of this connection not yet handed out.
    pub(crate) fn pending_match_keys(&mut self) -> Result<Vec<String>> {
        match self.call(&json!([code::GET_PENDING_MATCHKEYS]))? {
            Json::Array(v) => Ok(v.into_iter().filter_map(|k| k.as_str().map(str::to_owned)).collect()),
            other => Err(err(format!("GET_PENDING_MATCHKEYS answered {other}"))),
        }
    }
}

/// A random match key `<prefix><random in [0, 1)>` not in `avoid` (`base.random_key`).
pub(crate) fn random_key(prefix: &str, avoid: &std::collections::HashSet<String>) -> String {
    use rand::{Rng, SeedableRng};
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(nanos ^ (u64::from(std::process::id()) << 32));
    loop {
        let k = format!("{prefix}{}", rng.random::<f64>());
        if !avoid.contains(&k) {
            return k;
        }
    }
}
