//! Connections: the client session that forwards requests over a [`Channel`]
//! (`RPCClientSession` + `RPCEndpoint` in client mode), and the server endpoint that decodes
//! requests and serves them with a [`Session`] (`RPCEndpoint` in server mode), as a blocking
//! loop or driven by events (`rpc.CreateEventDrivenServer`).
//!
//! A malformed packet, an unexpected code or a connection that breaks mid-packet ends the
//! connection with an error naming the reason; an error raised while serving a request goes
//! back to the client as an exception and the connection goes on.

use super::channel::{
    io_err, max_packet_from_env, recv_append, recv_exact, send_all, Buffered, CallbackChannel, Channel, Inbox,
    MAX_COPY_CHUNK,
};
use super::codec::{self, Packet, RpcCode, WireTensor, WireValue};
use super::local::LocalSession;
use super::session::Session;
use crate::abi::{DLDataType, DLDevice};
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::registry;
use crate::value::{code, Value};
use parking_lot::Mutex;
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

// ---------------------------------------------------------------------------------------------
// Client

/// What a request waits for.
enum Expect<'a> {
    /// `kReturn`.
    Return,
    /// `kCopyAck` with exactly this many bytes, read straight into the slice.
    CopyAck(&'a mut [u8]),
}

struct ClientIo {
    ch: Option<Box<dyn Channel>>,
    inbox: Inbox,
    out: Vec<u8>,
    buf: Vec<u8>,
    broken: Option<String>,
}

/// A session on the other side of a channel (`RPCClientSession`).
pub struct ClientSession {
    io: Mutex<ClientIo>,
    max_packet: u64,
    chunk: OnceLock<u64>,
    /// The key the server sent in the handshake.
    pub remote_key: String,
}

impl ClientSession {
    /// A session over `ch`; call [`ClientSession::init_remote`] before anything else.
    pub fn new(ch: Box<dyn Channel>, remote_key: String) -> ClientSession {
        ClientSession {
            io: Mutex::new(ClientIo {
                ch: Some(ch),
                inbox: Inbox::default(),
                out: Vec::new(),
                buf: Vec::new(),
                broken: None,
            }),
            max_packet: max_packet_from_env(),
            chunk: OnceLock::new(),
            remote_key,
        }
    }

    /// `kInitServer`: asks the server to serve a local session (no arguments) or the session
    /// that the global `args[0]` makes from the other arguments.
    pub fn init_remote(&self, args: &[WireValue<'_>]) -> Result<()> {
        self.request(|o| codec::encode_init_server(o, args), &[], Expect::Return).map(|_| ())
    }

    fn request(
        &self,
        build: impl FnOnce(&mut Vec<u8>) -> Result<()>,
        tail: &[u8],
        expect: Expect<'_>,
    ) -> Result<Vec<WireValue<'static>>> {
        let mut io = self.io.lock();
        let io = &mut *io;
        if let Some(why) = &io.broken {
            return Err(Error::with_kind("RPCError", format!("the RPC session is closed ({why})")));
        }
        io.out.clear();
        build(&mut io.out)?;
        let max = self.max_packet;
        let res = match io.ch.as_deref_mut() {
            Some(ch) => exchange(&mut Buffered::new(ch, &mut io.inbox), &io.out, tail, &mut io.buf, expect, max),
            None => Err(Exchange::Broken(Error::with_kind("RPCError", "the RPC session is closed"))),
        };
        if io.out.capacity() > (16 << 20) {
            io.out = Vec::new();
        }
        if io.buf.capacity() > (16 << 20) {
            io.buf = Vec::new();
        }
        match res {
            Ok(v) => Ok(v),
            Err(Exchange::Remote(e)) => Err(e),
            Err(Exchange::Broken(e)) => {
                io.broken = Some(e.to_string());
                io.ch = None;
                Err(e)
            }
        }
    }

    fn syscall(&self, c: RpcCode, args: &[WireValue<'_>]) -> Result<WireValue<'static>> {
        let mut v = self.request(|o| codec::encode_syscall(o, c, args), &[], Expect::Return)?;
        if v.len() != 1 {
            return Err(codec::malformed(format!("{c:?} returned {} values", v.len())));
        }
        Ok(v.remove(0))
    }

    fn handle_of(v: WireValue<'_>, what: &str) -> Result<u64> {
        v.as_handle().ok_or_else(|| codec::malformed(format!("{what} did not return a handle")))
    }

    /// The largest copy payload per packet (`GetRPCMaxTransferSize`).
    fn max_transfer(&self) -> Result<u64> {
        if let Some(&n) = self.chunk.get() {
            return Ok(n);
        }
        let f = self.get_function("tvm.rpc.server.GetCRTMaxPacketSize")?;
        let n = if f == 0 {
            u64::MAX
        } else {
            let r = self.call_func(f, &[]);
            let _ = self.free_handle(f, code::FUNC);
            match r?.get(1) {
                Some(WireValue::Int(n)) if *n > 0 => *n as u64,
                other => return Err(Error::value(format!("RPC max transfer size is invalid ({other:?})"))),
            }
        };
        Ok(*self.chunk.get_or_init(|| n))
    }

    fn block_size(&self, t: &WireTensor<'_>) -> Result<u64> {
        let overhead = 48 + 8 * t.shape.len() as u64;
        let max = self.max_transfer()?;
        if max <= overhead {
            return Err(Error::value("CopyToRemote: Invalid block size!"));
        }
        Ok((max - overhead).min(MAX_COPY_CHUNK))
    }

    fn check_range(t: &WireTensor<'_>, nbytes: u64, what: &str) -> Result<()> {
        let total = t.nbytes()?;
        if nbytes > total {
            return Err(Error::value(format!(
                "{what}: overflow in tensor size: (byte_offset={}, nbytes={nbytes}, tensor_total_size={total})",
                t.byte_offset
            )));
        }
        Ok(())
    }
}

/// How an exchange failed.
enum Exchange {
    /// The remote raised an error; the connection is fine.
    Remote(Error),
    /// The connection is unusable.
    Broken(Error),
}

fn exchange(
    ch: &mut dyn Channel,
    packet: &[u8],
    tail: &[u8],
    buf: &mut Vec<u8>,
    expect: Expect<'_>,
    max: u64,
) -> std::result::Result<Vec<WireValue<'static>>, Exchange> {
    let broken = Exchange::Broken;
    send_all(ch, packet).map_err(broken)?;
    if !tail.is_empty() {
        send_all(ch, tail).map_err(broken)?;
    }
    loop {
        let mut head = [0u8; 8];
        if !recv_exact(ch, &mut head).map_err(broken)? {
            return Err(broken(Error::with_kind("RPCError", "the server closed the connection")));
        }
        let n = codec::packet_len(head, max).map_err(broken)?;
        if n == 0 {
            continue;
        }
        if n < 4 {
            return Err(broken(codec::malformed(format!("packet of {n} bytes"))));
        }
        let mut cbytes = [0u8; 4];
        if !recv_exact(ch, &mut cbytes).map_err(broken)? {
            return Err(broken(Error::with_kind("RPCError", "connection closed in the middle of a packet")));
        }
        if i32::from_le_bytes(cbytes) == RpcCode::CopyAck as i32 {
            let Expect::CopyAck(dst) = expect else {
                return Err(broken(codec::malformed("unexpected kCopyAck")));
            };
            if n - 4 != dst.len() as u64 {
                return Err(broken(codec::malformed(format!("kCopyAck of {} bytes, {} expected", n - 4, dst.len()))));
            }
            if !dst.is_empty() && !recv_exact(ch, dst).map_err(broken)? {
                return Err(broken(Error::with_kind("RPCError", "connection closed in the middle of a packet")));
            }
            return Ok(Vec::new());
        }
        buf.clear();
        buf.extend_from_slice(&cbytes);
        recv_append(ch, buf, n - 4).map_err(broken)?;
        return match codec::decode_packet(buf).map_err(broken)? {
            Packet::Return(vals) if matches!(expect, Expect::Return) => {
                Ok(vals.into_iter().map(WireValue::into_owned).collect())
            }
            Packet::Exception(msg) => {
                Err(Exchange::Remote(Error::with_kind("RPCError", format!("Error caught from RPC call:\n{msg}"))))
            }
            Packet::Shutdown => Err(broken(Error::with_kind("RPCError", "the server shut the session down"))),
            other => Err(broken(codec::malformed(format!("unexpected reply {}", packet_name(&other))))),
        };
    }
}

fn packet_name(p: &Packet<'_>) -> &'static str {
    match p {
        Packet::InitServer { .. } => "kInitServer",
        Packet::CallFunc { .. } => "kCallFunc",
        Packet::Return(_) => "kReturn",
        Packet::Exception(_) => "kException",
        Packet::CopyFromRemote { .. } => "kCopyFromRemote",
        Packet::CopyToRemote { .. } => "kCopyToRemote",
        Packet::CopyAck(_) => "kCopyAck",
        Packet::Shutdown => "kShutdown",
        Packet::Syscall { .. } => "a system call",
    }
}

impl Drop for ClientSession {
    fn drop(&mut self) {
        let io = self.io.get_mut();
        if let Some(ch) = io.ch.as_deref_mut() {
            let mut p = Vec::new();
            codec::encode_shutdown(&mut p);
            let _ = send_all(ch, &p);
        }
    }
}

impl Session for ClientSession {
    fn get_function(&self, name: &str) -> Result<u64> {
        let v = self.syscall(RpcCode::GetGlobalFunc, &[WireValue::Str(Cow::Borrowed(name.as_bytes()))])?;
        Self::handle_of(v, "kGetGlobalFunc")
    }

    fn call_func(&self, func: u64, args: &[WireValue<'_>]) -> Result<Vec<WireValue<'static>>> {
        self.request(|o| codec::encode_call(o, func, args), &[], Expect::Return)
    }

    fn copy_to_remote(&self, from: &[u8], to: &WireTensor<'_>) -> Result<()> {
        Self::check_range(to, from.len() as u64, "CopyToRemote")?;
        let block = self.block_size(to)?;
        let mut t = to.clone();
        let mut off = 0u64;
        for chunk in from.chunks(usize::try_from(block).unwrap_or(usize::MAX)) {
            t.byte_offset = to.byte_offset + off;
            let n = chunk.len() as u64;
            self.request(|o| codec::encode_copy_to_remote_head(o, &t, n), chunk, Expect::Return)?;
            off += n;
        }
        Ok(())
    }

    fn copy_from_remote(&self, from: &WireTensor<'_>, to: &mut [u8]) -> Result<()> {
        Self::check_range(from, to.len() as u64, "CopyFromRemote")?;
        let block = self.block_size(from)?;
        let mut t = from.clone();
        let mut off = 0u64;
        for chunk in to.chunks_mut(usize::try_from(block).unwrap_or(usize::MAX)) {
            t.byte_offset = from.byte_offset + off;
            let n = chunk.len() as u64;
            self.request(|o| codec::encode_copy_from_remote(o, &t, n), &[], Expect::CopyAck(chunk))?;
            off += n;
        }
        Ok(())
    }

    fn free_handle(&self, handle: u64, type_code: i32) -> Result<()> {
        self.syscall(RpcCode::FreeHandle, &[WireValue::Handle(handle), WireValue::Int(i64::from(type_code))])
            .map(|_| ())
    }

    fn set_device(&self, dev: DLDevice) -> Result<()> {
        self.syscall(RpcCode::DevSetDevice, &[WireValue::Device(dev)]).map(|_| ())
    }

    fn get_attr(&self, dev: DLDevice, kind: i32) -> Result<WireValue<'static>> {
        if dev.device_type == crate::device::CPU && kind == 0 {
            return Ok(WireValue::Int(1));
        }
        self.syscall(RpcCode::DevGetAttr, &[WireValue::Device(dev), WireValue::Int(i64::from(kind))])
    }

    fn alloc_data(&self, dev: DLDevice, nbytes: u64, alignment: u64, type_hint: DLDataType) -> Result<u64> {
        let args = [
            WireValue::Device(dev),
            WireValue::Int(nbytes as i64),
            WireValue::Int(alignment as i64),
            WireValue::DataType(type_hint),
        ];
        Self::handle_of(self.syscall(RpcCode::DevAllocData, &args)?, "kDevAllocData")
    }

    fn alloc_data_scoped(&self, t: &WireTensor<'_>, scope: Option<&str>) -> Result<u64> {
        let s = scope.map_or(WireValue::Null, |s| WireValue::Str(Cow::Borrowed(s.as_bytes())));
        let v = self.syscall(RpcCode::DevAllocDataWithScope, &[WireValue::Tensor(t.clone()), s])?;
        Self::handle_of(v, "kDevAllocDataWithScope")
    }

    fn free_data(&self, dev: DLDevice, data: u64) -> Result<()> {
        self.syscall(RpcCode::DevFreeData, &[WireValue::Device(dev), WireValue::Handle(data)]).map(|_| ())
    }

    fn copy_among(&self, from: &WireTensor<'_>, to: &WireTensor<'_>, stream: u64) -> Result<()> {
        let args = [WireValue::Tensor(from.clone()), WireValue::Tensor(to.clone()), WireValue::Handle(stream)];
        self.syscall(RpcCode::CopyAmongRemote, &args).map(|_| ())
    }

    fn create_stream(&self, dev: DLDevice) -> Result<u64> {
        Self::handle_of(self.syscall(RpcCode::DevCreateStream, &[WireValue::Device(dev)])?, "kDevCreateStream")
    }

    fn free_stream(&self, dev: DLDevice, stream: u64) -> Result<()> {
        self.syscall(RpcCode::DevFreeStream, &[WireValue::Device(dev), WireValue::Handle(stream)]).map(|_| ())
    }

    fn stream_sync(&self, dev: DLDevice, stream: u64) -> Result<()> {
        self.syscall(RpcCode::DevStreamSync, &[WireValue::Device(dev), WireValue::Handle(stream)]).map(|_| ())
    }

    fn set_stream(&self, dev: DLDevice, stream: u64) -> Result<()> {
        self.syscall(RpcCode::DevSetStream, &[WireValue::Device(dev), WireValue::Handle(stream)]).map(|_| ())
    }

    fn is_local(&self) -> bool {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Server

/// What the server does after a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// The client shut the session down.
    Shutdown,
}

/// The server side of one connection: decodes requests and serves them.
pub struct ServerEndpoint {
    name: String,
    serving: Option<Arc<dyn Session>>,
}

fn arg<'v, 'a>(args: &'v [WireValue<'a>], i: usize, c: RpcCode) -> Result<&'v WireValue<'a>> {
    args.get(i).ok_or_else(|| codec::malformed(format!("{c:?} expects more than {i} arguments")))
}

fn arg_device(args: &[WireValue<'_>], i: usize, c: RpcCode) -> Result<DLDevice> {
    match arg(args, i, c)? {
        WireValue::Device(d) => Ok(*d),
        other => Err(codec::malformed(format!("{c:?} argument {i}: expected a device, got {other:?}"))),
    }
}

fn arg_handle(args: &[WireValue<'_>], i: usize, c: RpcCode) -> Result<u64> {
    arg(args, i, c)?.as_handle().ok_or_else(|| codec::malformed(format!("{c:?} argument {i}: expected a handle")))
}

fn arg_int(args: &[WireValue<'_>], i: usize, c: RpcCode) -> Result<i64> {
    arg(args, i, c)?.as_int().ok_or_else(|| codec::malformed(format!("{c:?} argument {i}: expected an int")))
}

fn arg_tensor<'v, 'a>(args: &'v [WireValue<'a>], i: usize, c: RpcCode) -> Result<&'v WireTensor<'a>> {
    match arg(args, i, c)? {
        WireValue::Tensor(t) => Ok(t),
        _ => Err(codec::malformed(format!("{c:?} argument {i}: expected a tensor"))),
    }
}

/// A plain value for a session constructor's arguments.
fn plain_value(v: &WireValue<'_>) -> Result<Value> {
    Ok(match v {
        WireValue::Int(x) => Value::Int(*x),
        WireValue::UInt(x) => Value::UInt(*x),
        WireValue::Float(x) => Value::Float(*x),
        WireValue::Handle(h) => Value::Handle(*h as usize as *mut std::ffi::c_void),
        WireValue::Null => Value::Null,
        WireValue::DataType(t) => Value::DataType(*t),
        WireValue::Device(d) => Value::Device(*d),
        WireValue::Str(s) => Value::str(String::from_utf8_lossy(s).into_owned()),
        WireValue::Bytes(b) => Value::bytes(b.to_vec()),
        other => return Err(Error::value(format!("a session constructor cannot take {other:?}"))),
    })
}

impl ServerEndpoint {
    /// An endpoint that waits for `kInitServer`.
    pub fn new(name: impl Into<String>) -> ServerEndpoint {
        ServerEndpoint { name: name.into(), serving: None }
    }

    fn serving(&self) -> Result<&Arc<dyn Session>> {
        self.serving
            .as_ref()
            .ok_or_else(|| Error::tvm("Need to call InitRemoteSession first before any further actions"))
    }

    fn init_server(&mut self, version: &[u8], args: &[WireValue<'_>]) -> Result<()> {
        if self.serving.is_some() {
            return Err(Error::tvm("Server has already been initialized"));
        }
        if version != codec::PROTOCOL_VERSION.as_bytes() {
            return Err(Error::tvm(format!(
                "Server[{}]: Client protocol version mismatch with the server  server protocol={}, client protocol={}",
                self.name,
                codec::PROTOCOL_VERSION,
                String::from_utf8_lossy(version)
            )));
        }
        let Some(first) = args.first() else {
            self.serving = Some(Arc::new(LocalSession::new()));
            return Ok(());
        };
        let name = match first {
            WireValue::Str(s) => String::from_utf8_lossy(s).into_owned(),
            _ => return Err(Error::value("the session constructor name must be a string")),
        };
        let f = registry::get(&name).ok_or_else(|| Error::tvm(format!(" Cannot find session constructor {name}")))?;
        let vals = args[1..].iter().map(plain_value).collect::<Result<Vec<_>>>()?;
        let m = match f.call(&vals) {
            Ok(Value::Module(m)) => m,
            Ok(_) => {
                return Err(Error::tvm(format!(
                    "Server[{}]: Constructor {name} need to return an RPCModule",
                    self.name
                )))
            }
            Err(e) => {
                return Err(Error::tvm(format!(
                    "Server[{}]: Error caught from session constructor {name}:\n{e}",
                    self.name
                )))
            }
        };
        self.serving = Some(super::client::module_session(&m)?);
        Ok(())
    }

    fn syscall(&self, c: RpcCode, args: &[WireValue<'_>]) -> Result<WireValue<'static>> {
        let s = self.serving()?;
        Ok(match c {
            RpcCode::GetGlobalFunc => {
                let name = match arg(args, 0, c)? {
                    WireValue::Str(s) => String::from_utf8_lossy(s).into_owned(),
                    _ => return Err(codec::malformed("kGetGlobalFunc expects a name")),
                };
                match s.get_function(&name)? {
                    0 => WireValue::Null,
                    h => WireValue::Handle(h),
                }
            }
            RpcCode::FreeHandle => {
                let tc = i32::try_from(arg_int(args, 1, c)?).map_err(|_| codec::malformed("type code"))?;
                s.free_handle(arg_handle(args, 0, c)?, tc)?;
                WireValue::Null
            }
            RpcCode::DevSetDevice => {
                s.set_device(arg_device(args, 0, c)?)?;
                WireValue::Null
            }
            RpcCode::DevGetAttr => {
                let kind = i32::try_from(arg_int(args, 1, c)?).map_err(|_| codec::malformed("attribute kind"))?;
                s.get_attr(arg_device(args, 0, c)?, kind)?
            }
            RpcCode::DevAllocData => {
                let hint = match arg(args, 3, c)? {
                    WireValue::DataType(t) => *t,
                    _ => return Err(codec::malformed("kDevAllocData expects a type hint")),
                };
                let dev = arg_device(args, 0, c)?;
                let nbytes = arg_int(args, 1, c)? as u64;
                let align = arg_int(args, 2, c)? as u64;
                handle_value(s.alloc_data(dev, nbytes, align, hint)?)
            }
            RpcCode::DevAllocDataWithScope => {
                let t = arg_tensor(args, 0, c)?;
                let scope = match arg(args, 1, c)? {
                    WireValue::Null => None,
                    WireValue::Str(s) => Some(String::from_utf8_lossy(s).into_owned()),
                    _ => return Err(codec::malformed("kDevAllocDataWithScope expects a scope or NULL")),
                };
                handle_value(s.alloc_data_scoped(t, scope.as_deref())?)
            }
            RpcCode::DevFreeData => {
                s.free_data(arg_device(args, 0, c)?, arg_handle(args, 1, c)?)?;
                WireValue::Null
            }
            RpcCode::DevStreamSync => {
                s.stream_sync(arg_device(args, 0, c)?, arg_handle(args, 1, c)?)?;
                WireValue::Null
            }
            RpcCode::CopyAmongRemote => {
                s.copy_among(arg_tensor(args, 0, c)?, arg_tensor(args, 1, c)?, arg_handle(args, 2, c)?)?;
                WireValue::Null
            }
            RpcCode::DevCreateStream => handle_value(s.create_stream(arg_device(args, 0, c)?)?),
            RpcCode::DevFreeStream => {
                s.free_stream(arg_device(args, 0, c)?, arg_handle(args, 1, c)?)?;
                WireValue::Null
            }
            RpcCode::DevSetStream => {
                s.set_stream(arg_device(args, 0, c)?, arg_handle(args, 1, c)?)?;
                WireValue::Null
            }
            other => return Err(codec::malformed(format!("Unknown event {}", other as i32))),
        })
    }

    /// Serves one packet (`body` excludes the length). Replies go to `out`, except a copy from
    /// CPU memory of a local session, which goes straight to `direct` when given. An error means
    /// the connection must end (the client broke the protocol); errors of the request itself go
    /// back to the client as exceptions.
    pub fn handle_packet(&mut self, body: &[u8], out: &mut Vec<u8>, direct: Option<&mut dyn Channel>) -> Result<Flow> {
        // A panic while serving a request is that request's error, as an exception would be.
        let mark = out.len();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.dispatch(body, out, direct)));
        r.unwrap_or_else(|p| {
            out.truncate(mark);
            let msg = crate::error::panic_payload_text(&*p);
            codec::encode_exception(out, &format!("InternalError: panic inside the TVM runtime: {msg}"));
            Ok(Flow::Continue)
        })
    }

    fn dispatch(&mut self, body: &[u8], out: &mut Vec<u8>, direct: Option<&mut dyn Channel>) -> Result<Flow> {
        let reply = |out: &mut Vec<u8>, r: Result<Vec<WireValue<'static>>>| match r {
            Ok(vals) => {
                let mark = out.len();
                if let Err(e) = codec::encode_return(out, &vals) {
                    out.truncate(mark);
                    codec::encode_exception(out, &e.to_string());
                }
            }
            Err(e) => codec::encode_exception(out, &e.to_string()),
        };
        match codec::decode_packet(body)? {
            Packet::Shutdown => return Ok(Flow::Shutdown),
            Packet::InitServer { version, args } => match self.init_server(version, &args) {
                Ok(()) => codec::encode_return_void(out),
                Err(e) => codec::encode_exception(out, &e.to_string()),
            },
            Packet::CallFunc { handle, args } => {
                let r = self.serving().and_then(|s| s.call_func(handle, &args));
                reply(out, r);
            }
            Packet::CopyToRemote { tensor, data } => {
                match self.serving().and_then(|s| s.copy_to_remote(data, &tensor)) {
                    Ok(()) => codec::encode_return_void(out),
                    Err(e) => codec::encode_exception(out, &e.to_string()),
                }
            }
            Packet::CopyFromRemote { tensor, nbytes } => self.copy_from_remote(&tensor, nbytes, out, direct)?,
            Packet::Syscall { code: c, args } => {
                let r = self.syscall(c, &args).map(|v| vec![v]);
                reply(out, r);
            }
            Packet::Return(_) | Packet::Exception(_) | Packet::CopyAck(_) => {
                return Err(codec::malformed("a client sent a reply packet to the server"));
            }
        }
        Ok(Flow::Continue)
    }

    fn copy_from_remote(
        &self,
        t: &WireTensor<'_>,
        nbytes: u64,
        out: &mut Vec<u8>,
        direct: Option<&mut dyn Channel>,
    ) -> Result<()> {
        let s = match self.serving() {
            Ok(s) => s,
            Err(e) => {
                codec::encode_exception(out, &e.to_string());
                return Ok(());
            }
        };
        // Zero copy: CPU memory of a local session goes from the tensor to the socket.
        if let Some(ch) = direct {
            let mut io_error = None;
            let mut send = |bytes: &[u8]| -> Result<()> {
                let mut head = Vec::with_capacity(12);
                codec::encode_copy_ack_head(&mut head, bytes.len() as u64);
                let r = send_all(ch, &head).and_then(|()| send_all(ch, bytes));
                if let Err(e) = &r {
                    io_error = Some(e.clone());
                }
                r
            };
            match s.with_local_bytes(t, nbytes, &mut send) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    if let Some(ioe) = io_error {
                        return Err(ioe);
                    }
                    codec::encode_exception(out, &e.to_string());
                    return Ok(());
                }
            }
        }
        let n = match usize::try_from(nbytes) {
            Ok(n) if nbytes <= t.nbytes().unwrap_or(0) => n,
            _ => {
                codec::encode_exception(out, &format!("CopyFromRemote: {nbytes} bytes exceed the tensor"));
                return Ok(());
            }
        };
        let start = out.len();
        codec::encode_copy_ack_head(out, nbytes);
        let data_start = out.len();
        out.resize(data_start + n, 0);
        if let Err(e) = s.copy_from_remote(t, &mut out[data_start..]) {
            out.truncate(start);
            codec::encode_exception(out, &e.to_string());
        }
        Ok(())
    }
}

fn handle_value(h: u64) -> WireValue<'static> {
    if h == 0 {
        WireValue::Null
    } else {
        WireValue::Handle(h)
    }
}

/// Packets at least this large that copy into CPU memory of a local session are read straight
/// into the destination instead of a buffer.
const DIRECT_COPY_MIN: u64 = 256 << 10;

/// Serves a connection until the client shuts it down or closes it (`ServerLoop`): `Ok` on a
/// clean end, an error naming why otherwise.
pub fn serve(ch: &mut dyn Channel, ep: &mut ServerEndpoint, max_packet: u64) -> Result<()> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut inbox = Inbox::default();
    loop {
        let mut head = [0u8; 8];
        if !recv_exact(&mut Buffered::new(ch, &mut inbox), &mut head)? {
            return Ok(());
        }
        let n = codec::packet_len(head, max_packet)?;
        if n == 0 {
            continue;
        }
        buf.clear();
        out.clear();
        let flow = if n >= DIRECT_COPY_MIN {
            ep.large_packet(&mut Buffered::new(ch, &mut inbox), n, &mut buf, &mut out)?
        } else {
            recv_append(&mut Buffered::new(ch, &mut inbox), &mut buf, n)?;
            ep.handle_packet(&buf, &mut out, Some(&mut *ch))?
        };
        send_all(ch, &out)?;
        if flow == Flow::Shutdown {
            return Ok(());
        }
        if buf.capacity() > (64 << 20) {
            buf = Vec::new();
        }
        if out.capacity() > (64 << 20) {
            out = Vec::new();
        }
    }
}

impl ServerEndpoint {
    /// A packet of `n` bytes still in the channel: a copy into CPU memory of a local session
    /// goes straight from the socket to its destination; anything else is read whole into
    /// `buf` and handled as usual.
    fn large_packet(&mut self, ch: &mut dyn Channel, n: u64, buf: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<Flow> {
        let fixed = codec::COPY_TO_REMOTE_FIXED as u64;
        recv_append(ch, buf, 4)?;
        if i32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) != RpcCode::CopyToRemote as i32 || n < fixed {
            recv_append(ch, buf, n - 4)?;
            return self.handle_packet(buf, out, Some(ch));
        }
        recv_append(ch, buf, fixed - 4)?;
        let head_len = codec::copy_to_remote_head_len(buf)? as u64;
        if head_len > n {
            return Err(codec::malformed("kCopyToRemote head exceeds the packet"));
        }
        recv_append(ch, buf, head_len - fixed)?;
        let (tensor, nbytes) = codec::decode_copy_to_remote_head(buf)?;
        if head_len + nbytes != n {
            return Err(codec::malformed("kCopyToRemote size does not match the packet"));
        }
        if let Some(s) = self.serving.clone() {
            let mut read = |dst: &mut [u8]| -> Result<()> {
                if recv_exact(ch, dst)? {
                    Ok(())
                } else {
                    Err(Error::with_kind("RPCError", "connection closed in the middle of a packet"))
                }
            };
            if s.with_local_bytes_mut(&tensor, nbytes, &mut read)? {
                codec::encode_return_void(out);
                return Ok(Flow::Continue);
            }
        }
        recv_append(ch, buf, nbytes)?;
        self.handle_packet(buf, out, Some(ch))
    }
}

/// The state of an event-driven server connection.
enum EventState {
    /// Reading `[i32 length][key]` first (remote key `%toinit`).
    InitHeader,
    /// Reading packets.
    Packets,
    /// Shut down or failed.
    Closed,
}

/// A server connection driven by a frontend's event loop (`rpc.CreateEventDrivenServer`):
/// bytes come in through [`EventServer::handle`], replies go out through `fsend`.
pub(crate) struct EventServer {
    ep: ServerEndpoint,
    ch: CallbackChannel,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    state: EventState,
    /// The key read from the init header.
    pub remote_key: String,
    max_packet: u64,
}

impl EventServer {
    /// A server sending through `fsend`; `remote_key == "%toinit"` makes it read the key first.
    pub(crate) fn new(fsend: PackedFunc, name: &str, remote_key: &str) -> EventServer {
        let init = remote_key == "%toinit";
        EventServer {
            ep: ServerEndpoint::new(name),
            ch: CallbackChannel::new(fsend, None),
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            state: if init { EventState::InitHeader } else { EventState::Packets },
            remote_key: if init { String::new() } else { remote_key.to_owned() },
            max_packet: max_packet_from_env(),
        }
    }

    /// Takes bytes (and an event: 1 readable, 2 writable); returns 0 when the session is over,
    /// 2 when replies wait to be written, 1 otherwise.
    pub(crate) fn handle(&mut self, in_bytes: &[u8], event_flag: i64) -> Result<i64> {
        if matches!(self.state, EventState::Closed) {
            return Ok(0);
        }
        let r = self.step(in_bytes, event_flag);
        if r.is_err() {
            self.state = EventState::Closed;
            self.inbuf = Vec::new();
        }
        r
    }

    fn step(&mut self, in_bytes: &[u8], event_flag: i64) -> Result<i64> {
        let mut shutdown = false;
        if !in_bytes.is_empty() {
            self.inbuf.extend_from_slice(in_bytes);
            let mut pos = 0;
            loop {
                let avail = &self.inbuf[pos..];
                match self.state {
                    EventState::InitHeader => {
                        if avail.len() < 4 {
                            break;
                        }
                        let n = i32::from_le_bytes([avail[0], avail[1], avail[2], avail[3]]);
                        let n = usize::try_from(n)
                            .ok()
                            .filter(|&n| n <= 4096)
                            .ok_or_else(|| codec::malformed(format!("key length {n}")))?;
                        if avail.len() < 4 + n {
                            break;
                        }
                        self.remote_key = String::from_utf8_lossy(&avail[4..4 + n]).into_owned();
                        pos += 4 + n;
                        self.state = EventState::Packets;
                    }
                    EventState::Packets => {
                        if avail.len() < 8 {
                            break;
                        }
                        let head: [u8; 8] = avail[..8].try_into().unwrap_or([0; 8]);
                        let n = codec::packet_len(head, self.max_packet)?;
                        let n = usize::try_from(n).map_err(|_| codec::malformed("packet length"))?;
                        if avail.len() - 8 < n {
                            break;
                        }
                        pos += 8 + n;
                        if n == 0 {
                            continue;
                        }
                        let body = &avail[8..8 + n];
                        if self.ep.handle_packet(body, &mut self.outbuf, None)? == Flow::Shutdown {
                            shutdown = true;
                            break;
                        }
                    }
                    EventState::Closed => break,
                }
            }
            self.inbuf.drain(..pos);
        }
        if event_flag & 2 != 0 && !self.outbuf.is_empty() {
            let n = self.ch.send(&self.outbuf).map_err(|e| io_err("RPC send", e))?;
            self.outbuf.drain(..n);
        }
        if shutdown {
            self.state = EventState::Closed;
            return Ok(0);
        }
        Ok(if self.outbuf.is_empty() { 1 } else { 2 })
    }
}
