//! The wire format of TVM v0.8's RPC protocol as pure functions over bytes: the connection
//! handshake, packet framing, packed argument sequences and tensors (`rpc_reference.h`,
//! `rpc_endpoint.cc`). Nothing here does I/O, so the decoder can be driven by a fuzzer.
//!
//! Everything is little-endian. A packet is `[u64 nbytes][i32 code][body]`, where `nbytes`
//! counts the code and the body. [`decode_packet`] takes the bytes after the length.
//!
//! Decoding never trusts a length: every count is checked against the bytes that remain before
//! anything is allocated for it, and trailing bytes are an error.

use crate::abi::{DLDataType, DLDevice};
use crate::error::{Error, Result};
use crate::io;
use crate::value::code;
use std::borrow::Cow;

/// Magic of the data plane handshake (`kRPCMagic`).
pub(crate) const RPC_MAGIC: i32 = 0xff271;
/// Magic of the tracker protocol (`kRPCTrackerMagic`).
pub(crate) const RPC_TRACKER_MAGIC: i32 = 0x2f271;
/// Handshake reply: the key matched.
pub const RPC_CODE_SUCCESS: i32 = RPC_MAGIC;
/// Handshake reply: the key is already taken (proxies).
pub(crate) const RPC_CODE_DUPLICATE: i32 = RPC_MAGIC + 1;
/// Handshake reply: the key did not match.
pub(crate) const RPC_CODE_MISMATCH: i32 = RPC_MAGIC + 2;
/// The protocol version exchanged by `kInitServer`.
pub(crate) const PROTOCOL_VERSION: &str = "0.8.0";

/// The RPC codes (`RPCCode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum RpcCode {
    /// `kNone`.
    None = 0,
    /// `kShutdown`.
    Shutdown = 1,
    /// `kInitServer`.
    InitServer = 2,
    /// `kCallFunc`.
    CallFunc = 3,
    /// `kReturn`.
    Return = 4,
    /// `kException`.
    Exception = 5,
    /// `kCopyFromRemote`.
    CopyFromRemote = 6,
    /// `kCopyToRemote`.
    CopyToRemote = 7,
    /// `kCopyAck`.
    CopyAck = 8,
    /// `kGetGlobalFunc` (the first system call).
    GetGlobalFunc = 9,
    /// `kFreeHandle`.
    FreeHandle = 10,
    /// `kDevSetDevice`.
    DevSetDevice = 11,
    /// `kDevGetAttr`.
    DevGetAttr = 12,
    /// `kDevAllocData`.
    DevAllocData = 13,
    /// `kDevFreeData`.
    DevFreeData = 14,
    /// `kDevStreamSync`.
    DevStreamSync = 15,
    /// `kCopyAmongRemote`.
    CopyAmongRemote = 16,
    /// `kDevAllocDataWithScope`.
    DevAllocDataWithScope = 17,
    /// `kDevCreateStream`.
    DevCreateStream = 18,
    /// `kDevFreeStream`.
    DevFreeStream = 19,
    /// `kDevSetStream`.
    DevSetStream = 20,
}

impl RpcCode {
    /// The code with value `v`.
    pub(crate) fn from_i32(v: i32) -> Option<RpcCode> {
        use RpcCode::*;
        const ALL: [RpcCode; 21] = [
            None,
            Shutdown,
            InitServer,
            CallFunc,
            Return,
            Exception,
            CopyFromRemote,
            CopyToRemote,
            CopyAck,
            GetGlobalFunc,
            FreeHandle,
            DevSetDevice,
            DevGetAttr,
            DevAllocData,
            DevFreeData,
            DevStreamSync,
            CopyAmongRemote,
            DevAllocDataWithScope,
            DevCreateStream,
            DevFreeStream,
            DevSetStream,
        ];
        usize::try_from(v).ok().and_then(|i| ALL.get(i).copied())
    }

    /// Whether this is a system call (`>= kSyscallCodeStart`).
    #[cfg(test)]
    pub(crate) fn is_syscall(self) -> bool {
        self as i32 >= RpcCode::GetGlobalFunc as i32
    }
}

/// A tensor as it travels: the remote data handle, the meta-data, no strides.
#[derive(Clone, Debug, PartialEq)]
pub struct WireTensor<'a> {
    /// The data handle on the side that owns the memory.
    pub data: u64,
    /// The device (without a session mask).
    pub device: DLDevice,
    /// The element type.
    pub dtype: DLDataType,
    /// The extents.
    pub shape: Cow<'a, [i64]>,
    /// The byte offset into `data`.
    pub byte_offset: u64,
}

impl WireTensor<'_> {
    /// `prod(shape) * element bytes`, checked.
    pub fn nbytes(&self) -> Result<u64> {
        let bytes = crate::device::shape_bytes(&self.shape, self.dtype)?;
        Ok(bytes as u64)
    }

    /// A copy that owns its shape.
    pub fn into_owned(self) -> WireTensor<'static> {
        WireTensor { shape: Cow::Owned(self.shape.into_owned()), ..self }
    }
}

/// One value of a packed sequence as it travels.
#[derive(Clone, Debug, PartialEq)]
pub enum WireValue<'a> {
    /// `kDLInt`.
    Int(i64),
    /// `kDLUInt`.
    UInt(i64),
    /// `kDLFloat`.
    Float(f64),
    /// `kTVMOpaqueHandle`: 64 bits.
    Handle(u64),
    /// `kTVMNullptr`.
    Null,
    /// `kTVMDataType`.
    DataType(DLDataType),
    /// `kDLDevice`.
    Device(DLDevice),
    /// `kTVMModuleHandle`: a handle on the server (client-to-server only).
    Module(u64),
    /// `kTVMPackedFuncHandle`: a handle on the server (client-to-server only).
    Func(u64),
    /// `kTVMStr`.
    Str(Cow<'a, [u8]>),
    /// `kTVMBytes`.
    Bytes(Cow<'a, [u8]>),
    /// `kTVMDLTensorHandle`.
    Tensor(WireTensor<'a>),
}

impl WireValue<'_> {
    /// The type code on the wire.
    pub fn type_code(&self) -> i32 {
        match self {
            WireValue::Int(_) => code::INT,
            WireValue::UInt(_) => code::UINT,
            WireValue::Float(_) => code::FLOAT,
            WireValue::Handle(_) => code::HANDLE,
            WireValue::Null => code::NULL,
            WireValue::DataType(_) => code::DATA_TYPE,
            WireValue::Device(_) => code::DEVICE,
            WireValue::Module(_) => code::MODULE,
            WireValue::Func(_) => code::FUNC,
            WireValue::Str(_) => code::STR,
            WireValue::Bytes(_) => code::BYTES,
            WireValue::Tensor(_) => code::DLTENSOR,
        }
    }

    /// A copy that owns everything.
    pub fn into_owned(self) -> WireValue<'static> {
        match self {
            WireValue::Int(v) => WireValue::Int(v),
            WireValue::UInt(v) => WireValue::UInt(v),
            WireValue::Float(v) => WireValue::Float(v),
            WireValue::Handle(v) => WireValue::Handle(v),
            WireValue::Null => WireValue::Null,
            WireValue::DataType(v) => WireValue::DataType(v),
            WireValue::Device(v) => WireValue::Device(v),
            WireValue::Module(v) => WireValue::Module(v),
            WireValue::Func(v) => WireValue::Func(v),
            WireValue::Str(s) => WireValue::Str(Cow::Owned(s.into_owned())),
            WireValue::Bytes(b) => WireValue::Bytes(Cow::Owned(b.into_owned())),
            WireValue::Tensor(t) => WireValue::Tensor(t.into_owned()),
        }
    }

    /// The integer of an `Int` value.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            WireValue::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The handle of a `Handle` value (`Null` is 0).
    pub fn as_handle(&self) -> Option<u64> {
        match self {
            WireValue::Handle(h) => Some(*h),
            WireValue::Null => Some(0),
            _ => None,
        }
    }
}

/// The error for a malformed packet.
pub fn malformed(msg: impl std::fmt::Display) -> Error {
    Error::with_kind("RPCError", format!("malformed RPC packet: {msg}"))
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// Appends little-endian primitives to a byte buffer.
pub(crate) trait Put {
    /// An `i32`.
    fn put_i32(&mut self, v: i32);
    /// A `u64`.
    fn put_u64(&mut self, v: u64);
    /// A length-prefixed byte string (`u64` length).
    fn put_blob(&mut self, b: &[u8]);
}

impl Put for Vec<u8> {
    fn put_i32(&mut self, v: i32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_blob(&mut self, b: &[u8]) {
        self.put_u64(b.len() as u64);
        self.extend_from_slice(b);
    }
}

fn put_device(out: &mut Vec<u8>, d: DLDevice) {
    out.put_i32(d.device_type);
    out.put_i32(d.device_id);
}

fn put_dtype(out: &mut Vec<u8>, t: DLDataType) {
    out.push(t.code);
    out.push(t.bits);
    out.extend_from_slice(&t.lanes.to_le_bytes());
}

/// Appends a tensor (`SendDLTensor`).
pub(crate) fn encode_tensor(out: &mut Vec<u8>, t: &WireTensor<'_>) -> Result<()> {
    let ndim = i32::try_from(t.shape.len()).map_err(|_| Error::value("tensor has too many dimensions"))?;
    out.put_u64(t.data);
    put_device(out, t.device);
    out.put_i32(ndim);
    put_dtype(out, t.dtype);
    for &d in t.shape.iter() {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.put_u64(t.byte_offset);
    Ok(())
}

/// Appends a packed sequence (`SendPackedSeq`). Module and function handles may only travel
/// from a client (`client_mode`).
pub(crate) fn encode_seq(out: &mut Vec<u8>, vals: &[WireValue<'_>], client_mode: bool) -> Result<()> {
    let n = i32::try_from(vals.len()).map_err(|_| Error::value("too many RPC arguments"))?;
    out.put_i32(n);
    for v in vals {
        out.put_i32(v.type_code());
    }
    for v in vals {
        match v {
            WireValue::Int(x) | WireValue::UInt(x) => out.extend_from_slice(&x.to_le_bytes()),
            WireValue::Float(x) => out.extend_from_slice(&x.to_bits().to_le_bytes()),
            WireValue::DataType(t) => {
                put_dtype(out, *t);
                out.put_i32(0);
            }
            WireValue::Device(d) => put_device(out, *d),
            WireValue::Module(h) | WireValue::Func(h) => {
                if !client_mode {
                    return Err(Error::with_kind("RPCServerError", "kInvalidTypeCodeObject"));
                }
                out.put_u64(*h);
            }
            WireValue::Handle(h) => out.put_u64(*h),
            WireValue::Null => {}
            WireValue::Str(s) | WireValue::Bytes(s) => out.put_blob(s),
            WireValue::Tensor(t) => encode_tensor(out, t)?,
        }
    }
    Ok(())
}

/// Starts a packet: a length placeholder and the code. Finish with [`end_packet`].
pub(crate) fn begin_packet(out: &mut Vec<u8>, code: RpcCode) -> usize {
    let start = out.len();
    out.put_u64(0);
    out.put_i32(code as i32);
    start
}

/// Writes the length of the packet begun at `start`, plus `extra` bytes that the caller sends
/// separately right after (a copy's payload).
pub(crate) fn end_packet(out: &mut [u8], start: usize, extra: u64) {
    let n = (out.len() - start - 8) as u64 + extra;
    out[start..start + 8].copy_from_slice(&n.to_le_bytes());
}

/// `kInitServer`: protocol version and the session constructor arguments.
pub fn encode_init_server(out: &mut Vec<u8>, args: &[WireValue<'_>]) -> Result<()> {
    let s = begin_packet(out, RpcCode::InitServer);
    out.put_blob(PROTOCOL_VERSION.as_bytes());
    encode_seq(out, args, true)?;
    end_packet(out, s, 0);
    Ok(())
}

/// `kCallFunc`.
pub fn encode_call(out: &mut Vec<u8>, handle: u64, args: &[WireValue<'_>]) -> Result<()> {
    let s = begin_packet(out, RpcCode::CallFunc);
    out.put_u64(handle);
    encode_seq(out, args, true)?;
    end_packet(out, s, 0);
    Ok(())
}

/// A system call (`kGetGlobalFunc`, `kFreeHandle`, `kDev*`, `kCopyAmongRemote`).
pub fn encode_syscall(out: &mut Vec<u8>, code: RpcCode, args: &[WireValue<'_>]) -> Result<()> {
    let s = begin_packet(out, code);
    encode_seq(out, args, true)?;
    end_packet(out, s, 0);
    Ok(())
}

/// `kReturn` with a packed sequence (server side).
pub fn encode_return(out: &mut Vec<u8>, vals: &[WireValue<'_>]) -> Result<()> {
    let s = begin_packet(out, RpcCode::Return);
    if let Err(e) = encode_seq(out, vals, false) {
        out.truncate(s);
        return Err(e);
    }
    end_packet(out, s, 0);
    Ok(())
}

/// `kReturn` of nothing (`ReturnVoid`: one `kTVMNullptr`).
pub(crate) fn encode_return_void(out: &mut Vec<u8>) {
    let s = begin_packet(out, RpcCode::Return);
    out.put_i32(1);
    out.put_i32(code::NULL);
    end_packet(out, s, 0);
}

/// `kException` with a message.
pub fn encode_exception(out: &mut Vec<u8>, msg: &str) {
    let s = begin_packet(out, RpcCode::Exception);
    out.put_i32(1);
    out.put_i32(code::STR);
    out.put_blob(msg.as_bytes());
    end_packet(out, s, 0);
}

/// `kCopyFromRemote`: the tensor and the byte count.
pub fn encode_copy_from_remote(out: &mut Vec<u8>, t: &WireTensor<'_>, nbytes: u64) -> Result<()> {
    let s = begin_packet(out, RpcCode::CopyFromRemote);
    encode_tensor(out, t)?;
    out.put_u64(nbytes);
    end_packet(out, s, 0);
    Ok(())
}

/// The head of `kCopyToRemote`; the `nbytes` of payload follow it on the wire.
pub fn encode_copy_to_remote_head(out: &mut Vec<u8>, t: &WireTensor<'_>, nbytes: u64) -> Result<()> {
    let s = begin_packet(out, RpcCode::CopyToRemote);
    encode_tensor(out, t)?;
    out.put_u64(nbytes);
    end_packet(out, s, nbytes);
    Ok(())
}

/// The head of `kCopyAck`; the `nbytes` of data follow it on the wire.
pub(crate) fn encode_copy_ack_head(out: &mut Vec<u8>, nbytes: u64) {
    let s = begin_packet(out, RpcCode::CopyAck);
    end_packet(out, s, nbytes);
}

/// `kShutdown`.
pub(crate) fn encode_shutdown(out: &mut Vec<u8>) {
    let s = begin_packet(out, RpcCode::Shutdown);
    end_packet(out, s, 0);
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// A reader of RPC packets: the core's bounds-checked little-endian reader ([`io::Reader`]),
/// its errors named after the field read and turned into RPC errors ([`malformed`]).
pub struct Reader<'a>(io::Reader<'a>);

impl<'a> Reader<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader(io::Reader::new(buf, "RPC packet"))
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.0.remaining()
    }

    /// `read`, with a short read reported as the packet being malformed at `what`.
    fn field<T>(&mut self, what: &str, n: usize, read: impl FnOnce(&mut io::Reader<'a>) -> Result<T>) -> Result<T> {
        let left = self.0.remaining();
        read(&mut self.0).map_err(|_| malformed(format!("{what} needs {n} bytes but {left} remain")))
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        self.field(what, n, |r| r.bytes(n))
    }

    /// An `i32`.
    pub fn i32(&mut self, what: &str) -> Result<i32> {
        self.field(what, 4, io::Reader::i32)
    }

    /// A `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        self.field(what, 8, io::Reader::u64)
    }

    /// An `i64`.
    pub fn i64(&mut self, what: &str) -> Result<i64> {
        self.field(what, 8, io::Reader::i64)
    }

    /// A `u64`-length-prefixed byte string, bounded by what remains.
    pub fn blob(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = self.u64(what)?;
        let n = usize::try_from(n).map_err(|_| malformed(format!("{what} length {n}")))?;
        self.take(n, what)
    }

    fn device(&mut self) -> Result<DLDevice> {
        self.field("device", 8, io::Reader::device)
    }

    fn dtype(&mut self) -> Result<DLDataType> {
        self.field("data type", 4, io::Reader::dtype)
    }

    /// A tensor (`ReceiveDLTensor`).
    pub fn tensor(&mut self) -> Result<WireTensor<'a>> {
        let data = self.u64("tensor data")?;
        let device = self.device()?;
        let ndim = self.i32("tensor ndim")?;
        let dtype = self.dtype()?;
        let ndim = usize::try_from(ndim).map_err(|_| malformed(format!("negative ndim {ndim}")))?;
        if ndim > self.remaining() / 8 {
            return Err(malformed(format!("ndim {ndim} exceeds the packet")));
        }
        let raw = self.take(ndim * 8, "tensor shape")?;
        let shape: Vec<i64> = raw.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
        let byte_offset = self.u64("tensor byte_offset")?;
        Ok(WireTensor { data, device, dtype, shape: Cow::Owned(shape), byte_offset })
    }

    /// A packed sequence (`RecvPackedSeq`).
    pub fn seq(&mut self) -> Result<Vec<WireValue<'a>>> {
        let n = self.i32("argument count")?;
        let n = usize::try_from(n).map_err(|_| malformed(format!("negative argument count {n}")))?;
        if n > self.remaining() / 4 {
            return Err(malformed(format!("argument count {n} exceeds the packet")));
        }
        let codes = self.take(n * 4, "type codes")?;
        let mut vals = Vec::with_capacity(n);
        for c in codes.chunks_exact(4) {
            let tc = i32::from_le_bytes(c.try_into().unwrap_or([0; 4]));
            let v = match tc {
                code::INT => WireValue::Int(self.i64("int")?),
                code::UINT => WireValue::UInt(self.i64("uint")?),
                code::FLOAT => WireValue::Float(f64::from_bits(self.u64("float")?)),
                code::DATA_TYPE => {
                    let t = self.dtype()?;
                    self.i32("data type padding")?;
                    WireValue::DataType(t)
                }
                code::DEVICE => WireValue::Device(self.device()?),
                code::FUNC => WireValue::Func(self.u64("function handle")?),
                code::MODULE => WireValue::Module(self.u64("module handle")?),
                code::HANDLE => WireValue::Handle(self.u64("handle")?),
                code::NULL => WireValue::Null,
                code::STR => WireValue::Str(Cow::Borrowed(self.blob("string")?)),
                code::BYTES => WireValue::Bytes(Cow::Borrowed(self.blob("bytes")?)),
                code::DLTENSOR => WireValue::Tensor(self.tensor()?),
                other => return Err(malformed(format!("unknown type code {other} (kUnknownTypeCode)"))),
            };
            vals.push(v);
        }
        Ok(vals)
    }

    /// Fails unless everything was read.
    pub fn finish(&self, what: &str) -> Result<()> {
        if self.remaining() != 0 {
            return Err(malformed(format!("{} trailing bytes after {what}", self.remaining())));
        }
        Ok(())
    }
}

/// A decoded packet, borrowing from the packet's bytes.
#[derive(Debug, PartialEq)]
pub enum Packet<'a> {
    /// `kInitServer`.
    InitServer {
        /// The client's protocol version.
        version: &'a [u8],
        /// Session constructor arguments (empty: a local session).
        args: Vec<WireValue<'a>>,
    },
    /// `kCallFunc`.
    CallFunc {
        /// The function handle.
        handle: u64,
        /// The arguments.
        args: Vec<WireValue<'a>>,
    },
    /// `kReturn`.
    Return(Vec<WireValue<'a>>),
    /// `kException` with its message.
    Exception(String),
    /// `kCopyFromRemote`.
    CopyFromRemote {
        /// The source tensor.
        tensor: WireTensor<'a>,
        /// Bytes wanted.
        nbytes: u64,
    },
    /// `kCopyToRemote`.
    CopyToRemote {
        /// The destination tensor.
        tensor: WireTensor<'a>,
        /// The payload.
        data: &'a [u8],
    },
    /// `kCopyAck` with its data.
    CopyAck(&'a [u8]),
    /// `kShutdown`.
    Shutdown,
    /// A system call with its arguments.
    Syscall {
        /// Which call.
        code: RpcCode,
        /// The arguments.
        args: Vec<WireValue<'a>>,
    },
}

/// Decodes one packet: `body` is everything after the `u64` length (code included).
pub fn decode_packet(body: &[u8]) -> Result<Packet<'_>> {
    let mut r = Reader::new(body);
    let raw = r.i32("RPC code")?;
    let code = RpcCode::from_i32(raw).ok_or_else(|| malformed(format!("unknown RPC code {raw}")))?;
    let p = match code {
        RpcCode::None => return Err(malformed("RPC code kNone")),
        RpcCode::Shutdown => Packet::Shutdown,
        RpcCode::InitServer => {
            let version = r.blob("protocol version")?;
            Packet::InitServer { version, args: r.seq()? }
        }
        RpcCode::CallFunc => {
            let handle = r.u64("function handle")?;
            Packet::CallFunc { handle, args: r.seq()? }
        }
        RpcCode::Return => Packet::Return(r.seq()?),
        RpcCode::Exception => {
            let vals = r.seq()?;
            let msg = match vals.first() {
                Some(WireValue::Str(s)) if vals.len() == 1 => String::from_utf8_lossy(s).into_owned(),
                _ => return Err(malformed("an exception must carry one string")),
            };
            Packet::Exception(msg)
        }
        RpcCode::CopyFromRemote => {
            let tensor = r.tensor()?;
            let nbytes = r.u64("copy size")?;
            Packet::CopyFromRemote { tensor, nbytes }
        }
        RpcCode::CopyToRemote => {
            let tensor = r.tensor()?;
            let n = r.u64("copy size")?;
            let n = usize::try_from(n).map_err(|_| malformed(format!("copy size {n}")))?;
            let data = r.take(n, "copy payload")?;
            Packet::CopyToRemote { tensor, data }
        }
        RpcCode::CopyAck => {
            let data = r.take(r.remaining(), "copy data")?;
            Packet::CopyAck(data)
        }
        c => Packet::Syscall { code: c, args: r.seq()? },
    };
    r.finish(&format!("{code:?}"))?;
    Ok(p)
}

/// Bytes of a `kCopyToRemote` head (code, tensor, size) before its shape: the shape's length
/// is read from them by [`copy_to_remote_head_len`].
pub(crate) const COPY_TO_REMOTE_FIXED: usize = 4 + 8 + 8 + 4 + 4;

/// The whole head's length, given its first [`COPY_TO_REMOTE_FIXED`] bytes (the rest of the
/// head being the shape, the byte offset and the size).
pub fn copy_to_remote_head_len(fixed: &[u8]) -> Result<usize> {
    if fixed.len() < COPY_TO_REMOTE_FIXED {
        return Err(malformed("short kCopyToRemote head"));
    }
    let ndim = i32::from_le_bytes([fixed[20], fixed[21], fixed[22], fixed[23]]);
    let ndim = usize::try_from(ndim).ok().filter(|&n| n <= 1 << 20).ok_or_else(|| malformed(format!("ndim {ndim}")))?;
    Ok(COPY_TO_REMOTE_FIXED + ndim * 8 + 16)
}

/// Decodes a `kCopyToRemote` head (code included, payload excluded): the tensor and the size.
pub fn decode_copy_to_remote_head(head: &[u8]) -> Result<(WireTensor<'static>, u64)> {
    let mut r = Reader::new(head);
    if r.i32("RPC code")? != RpcCode::CopyToRemote as i32 {
        return Err(malformed("not a kCopyToRemote head"));
    }
    let t = r.tensor()?.into_owned();
    let n = r.u64("copy size")?;
    r.finish("kCopyToRemote head")?;
    Ok((t, n))
}

/// Reads the packet length in front of a packet, checking it against `max`.
pub fn packet_len(head: [u8; 8], max: u64) -> Result<u64> {
    let n = u64::from_le_bytes(head);
    if n > max {
        return Err(malformed(format!("packet of {n} bytes exceeds the limit of {max} bytes")));
    }
    Ok(n)
}

// ---------------------------------------------------------------------------------------------
// Handshake

/// The handshake a client sends: magic, key length, key.
pub fn encode_client_hello(key: &str) -> Result<Vec<u8>> {
    let n = i32::try_from(key.len()).map_err(|_| Error::value("RPC key is too long"))?;
    let mut out = Vec::with_capacity(8 + key.len());
    out.put_i32(RPC_MAGIC);
    out.put_i32(n);
    out.extend_from_slice(key.as_bytes());
    Ok(out)
}

/// Parses a client handshake from the bytes received so far: `Ok(None)` while incomplete,
/// else the key and the number of bytes it took. Keys longer than `max_key` are refused.
pub fn parse_client_hello(buf: &[u8], max_key: usize) -> Result<Option<(String, usize)>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let magic = i32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if magic != RPC_MAGIC {
        return Err(malformed(format!("not a TVM RPC client (magic {magic:#x})")));
    }
    if buf.len() < 8 {
        return Ok(None);
    }
    let n = i32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    let n = usize::try_from(n).map_err(|_| malformed(format!("negative key length {n}")))?;
    if n > max_key {
        return Err(malformed(format!("key of {n} bytes exceeds the limit of {max_key}")));
    }
    if buf.len() < 8 + n {
        return Ok(None);
    }
    Ok(Some((String::from_utf8_lossy(&buf[8..8 + n]).into_owned(), 8 + n)))
}

/// The server's handshake reply: a code, then (on success) its key.
pub(crate) fn encode_server_reply(code: i32, server_key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + server_key.len());
    out.put_i32(code);
    if code == RPC_CODE_SUCCESS {
        out.put_i32(server_key.len() as i32);
        out.extend_from_slice(server_key.as_bytes());
    }
    out
}

/// A client key as a server reads it: `client:<matchkey> [-timeout=N] [-token=T] ...`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientKey {
    /// The first word (`client:<matchkey>`).
    pub header: String,
    /// The options after it.
    pub opts: Vec<String>,
}

impl ClientKey {
    /// Splits a key at whitespace.
    pub fn parse(key: &str) -> ClientKey {
        let mut words = key.split_whitespace();
        let header = words.next().unwrap_or("").to_owned();
        ClientKey { header, opts: words.map(str::to_owned).collect() }
    }

    fn opt(&self, name: &str) -> Option<&str> {
        self.opts.iter().rev().find_map(|o| o.strip_prefix(name))
    }

    /// `-timeout=<seconds>`.
    pub fn timeout(&self) -> Option<f64> {
        self.opt("-timeout=").and_then(|s| s.parse::<f64>().ok()).filter(|t| t.is_finite() && *t > 0.0)
    }

    /// `-token=<secret>`.
    pub fn token(&self) -> Option<&str> {
        self.opt("-token=")
    }
}

/// Compares two secrets in time that depends only on their lengths.
pub(crate) fn token_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
