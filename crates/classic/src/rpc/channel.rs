//! Byte channels between the two sides of a connection: sockets, pipes, a frontend's send and
//! receive functions (`CallbackChannel`), with the helpers that read and write whole packets.
//! Nothing here trusts a length: packet bytes are read only as they arrive.

use super::codec;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::value::{code, Value};
use std::io::{self, Read, Write};

/// Largest packet accepted by default (bytes): `TVM_RPC_MAX_PACKET_BYTES` overrides it.
pub(crate) const DEFAULT_MAX_PACKET: u64 = 4 << 30;

/// Largest copy a client sends in one packet; larger copies are split.
pub(crate) const MAX_COPY_CHUNK: u64 = 1 << 30;

/// The packet size limit: `TVM_RPC_MAX_PACKET_BYTES` if set, else [`DEFAULT_MAX_PACKET`].
pub(crate) fn max_packet_from_env() -> u64 {
    std::env::var("TVM_RPC_MAX_PACKET_BYTES").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(DEFAULT_MAX_PACKET)
}

/// A byte stream between the two sides.
pub trait Channel: Send {
    /// Sends some of `data`; returns how many bytes went.
    fn send(&mut self, data: &[u8]) -> io::Result<usize>;
    /// Receives up to `buf.len()` bytes; 0 means the peer closed.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
}

impl Channel for std::net::TcpStream {
    fn send(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write(data)
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read(buf)
    }
}

/// A channel over a pair of files (pipes to a child process).
pub(crate) struct PipeChannel {
    /// Read end.
    pub read: std::fs::File,
    /// Write end.
    pub write: std::fs::File,
    /// The child at the other end, killed when the channel goes.
    pub child: Option<std::process::Child>,
}

impl Channel for PipeChannel {
    fn send(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write.write(data)
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read.read(buf)
    }
}

impl Drop for PipeChannel {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A channel through a frontend's functions (`CallbackChannel`): `fsend(bytes) -> int` sends
/// and returns the count sent (-1: error); `frecv(size) -> bytes` receives.
pub(crate) struct CallbackChannel {
    fsend: PackedFunc,
    frecv: Option<PackedFunc>,
}

impl CallbackChannel {
    /// A channel over the two functions (`frecv` absent: receiving is an error).
    pub(crate) fn new(fsend: PackedFunc, frecv: Option<PackedFunc>) -> CallbackChannel {
        CallbackChannel { fsend, frecv }
    }
}

fn to_io(e: Error) -> io::Error {
    io::Error::other(e.to_string())
}

impl Channel for CallbackChannel {
    fn send(&mut self, data: &[u8]) -> io::Result<usize> {
        let ba = crate::abi::TVMByteArray { data: data.as_ptr().cast(), size: data.len() };
        let v = [crate::abi::TVMValue { v_handle: (&ba as *const crate::abi::TVMByteArray).cast_mut().cast() }];
        let c = [code::BYTES];
        // SAFETY: the byte array and the data it points to live for the call.
        let args = unsafe { crate::value::Args::new(&v, &c) };
        let mut ret = Value::Null;
        self.fsend.call_args(&args, &mut ret).map_err(to_io)?;
        match ret {
            Value::Int(n) if n >= 0 && (n as u64) <= data.len() as u64 => Ok(n as usize),
            _ => Err(io::Error::other("CallbackChannel::Send")),
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let f = self.frecv.as_ref().ok_or_else(|| io::Error::other("Do not allow explicit receive"))?;
        let v = f.call(&[Value::Int(buf.len() as i64)]).map_err(to_io)?;
        let b = match v {
            Value::Bytes(b) => *b,
            Value::Str(s) => (*s).into_bytes(),
            _ => return Err(io::Error::other("CallbackChannel::Recv")),
        };
        if b.len() > buf.len() {
            return Err(io::Error::other("CallbackChannel::Recv returned more bytes than asked"));
        }
        buf[..b.len()].copy_from_slice(&b);
        Ok(b.len())
    }
}

/// Bytes received but not yet consumed, so that a small packet costs one `recv` instead of
/// one per field. Reads of 64 KiB or more bypass it.
#[derive(Default)]
pub(crate) struct Inbox {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

const INBOX: usize = 64 << 10;

/// A channel read through an [`Inbox`].
pub(crate) struct Buffered<'a> {
    ch: &'a mut dyn Channel,
    inbox: &'a mut Inbox,
}

impl<'a> Buffered<'a> {
    /// Reads `ch` through `inbox`.
    pub(crate) fn new(ch: &'a mut dyn Channel, inbox: &'a mut Inbox) -> Buffered<'a> {
        Buffered { ch, inbox }
    }
}

impl Channel for Buffered<'_> {
    fn send(&mut self, data: &[u8]) -> io::Result<usize> {
        self.ch.send(data)
    }

    fn recv(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let ib = &mut *self.inbox;
        if ib.start == ib.end {
            if out.len() >= INBOX {
                return self.ch.recv(out);
            }
            if ib.buf.len() < INBOX {
                ib.buf.resize(INBOX, 0);
            }
            let n = self.ch.recv(&mut ib.buf)?;
            ib.start = 0;
            ib.end = n;
            if n == 0 {
                return Ok(0);
            }
        }
        let n = out.len().min(ib.end - ib.start);
        out[..n].copy_from_slice(&ib.buf[ib.start..ib.start + n]);
        ib.start += n;
        Ok(n)
    }
}

pub(crate) fn io_err(what: &str, e: io::Error) -> Error {
    Error::with_kind("RPCError", format!("{what}: {e}"))
}

/// Sends all of `data`.
pub(crate) fn send_all(ch: &mut dyn Channel, mut data: &[u8]) -> Result<()> {
    while !data.is_empty() {
        match ch.send(data) {
            Ok(0) => return Err(io_err("RPC send", io::ErrorKind::WriteZero.into())),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err("RPC send", e)),
        }
    }
    Ok(())
}

/// Fills `buf`; `Ok(false)` when the peer closed before the first byte.
pub(crate) fn recv_exact(ch: &mut dyn Channel, buf: &mut [u8]) -> Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match ch.recv(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(Error::with_kind("RPCError", "connection closed in the middle of a packet")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err("RPC receive", e)),
        }
    }
    Ok(true)
}

/// Receives `n` more bytes onto the end of `buf`, growing it only as bytes arrive.
pub(crate) fn recv_append(ch: &mut dyn Channel, buf: &mut Vec<u8>, n: u64) -> Result<()> {
    let n = usize::try_from(n).map_err(|_| codec::malformed(format!("packet of {n} bytes")))?;
    let end = buf.len() + n;
    while buf.len() < end {
        let want = (end - buf.len()).min(buf.len().max(1 << 20));
        let start = buf.len();
        buf.resize(start + want, 0);
        let ok = recv_exact(ch, &mut buf[start..])?;
        if !ok {
            return Err(Error::with_kind("RPCError", "connection closed in the middle of a packet"));
        }
    }
    Ok(())
}
