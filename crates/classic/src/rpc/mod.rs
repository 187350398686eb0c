//! TVM v0.8's RPC, both sides, byte-compatible with TVM's own (protocol `0.8.0`).
//!
//! - [`codec`]: the wire format as pure functions over bytes (handshake, packets, sequences).
//! - [`session`]: the session interface; [`local`]: serving with this process's runtime;
//!   [`channel`]: sockets, pipes and callback channels; [`endpoint`]: the client session over a
//!   channel, the server endpoint (blocking loop and event-driven).
//! - [`client`]: the session table, the `rpc` module, remote functions and arrays, the device
//!   API of remote devices (type + 128 x (session index + 1)).
//! - [`server`]: the standalone server (port range, key, tracker, work directories, tokens);
//!   [`tracker`]: the tracker protocol; [`env`]: the `tvm.rpc.server.*` file globals.
//!
//! Everything is reached through globals (`rpc.Connect`, `rpc.LocalSession`, `rpc.ServerLoop`,
//! `rpc.CreateEventDrivenServer`, ...), registered by [`register`] like a user's own.

pub mod channel;
pub mod client;
pub mod codec;
pub mod endpoint;
pub mod env;
pub mod local;
pub mod server;
pub mod session;
pub mod tracker;

use crate::abi::DLDevice;
use crate::device;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::Module;
use crate::registry::Registrar;
use crate::value::{code, Args, Value};
use channel::CallbackChannel;
use codec::WireValue;
use endpoint::{ClientSession, EventServer, ServerEndpoint};
use parking_lot::Mutex;
use std::borrow::Cow;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use client::RPC_DEVICE_API;
pub use client::{create_session_module, remote_time_evaluator};
pub use server::{Isolation, Server, ServerConfig};

/// The device API behind every RPC device type (`device_api.rpc`).
pub fn device_api() -> &'static dyn device::DeviceApi {
    &RPC_DEVICE_API
}

/// The token a client presents when `TVM_RPC_TOKEN` is set: appended to the key as
/// `-token=<secret>` unless the key carries one.
fn key_with_token(key: &str) -> String {
    match std::env::var("TVM_RPC_TOKEN") {
        Ok(t) if !t.is_empty() && !key.contains("-token=") => format!("{key} -token={t}"),
        _ => key.to_owned(),
    }
}

/// Connects to a server: handshake with `client:<key>`, then `kInitServer` with `init_seq`
/// (`RPCClientConnect`). Returns the session module.
pub fn connect(url: &str, port: u16, key: &str, init_seq: &[WireValue<'_>]) -> Result<Module> {
    let full_key = key_with_token(&format!("client:{key}"));
    let mut sock = tracker::connect(url, port, Duration::from_secs(60))
        .map_err(|e| Error::tvm(format!("Connect to {url}:{port} failed: {e}")))?;
    let ioe = |e: std::io::Error| Error::tvm(format!("RPC handshake with {url}:{port}: {e}"));
    sock.set_nodelay(true).map_err(ioe)?;
    sock.set_read_timeout(Some(Duration::from_secs(60))).map_err(ioe)?;
    sock.write_all(&codec::encode_client_hello(&full_key)?).map_err(ioe)?;
    let mut b4 = [0u8; 4];
    sock.read_exact(&mut b4).map_err(ioe)?;
    match i32::from_le_bytes(b4) {
        codec::RPC_CODE_SUCCESS => {}
        codec::RPC_CODE_MISMATCH => {
            return Err(Error::tvm(format!("URL {url}:{port} cannot find server that matches key={full_key}")))
        }
        codec::RPC_CODE_DUPLICATE => {
            return Err(Error::tvm(format!("URL {url}:{port} server already have key={full_key}")))
        }
        _ => return Err(Error::tvm(format!("URL {url}:{port} is not TVM RPC server"))),
    }
    sock.read_exact(&mut b4).map_err(ioe)?;
    let n = usize::try_from(i32::from_le_bytes(b4))
        .ok()
        .filter(|&n| n <= server::MAX_KEY)
        .ok_or_else(|| Error::tvm(format!("URL {url}:{port}: invalid server key length")))?;
    let mut rk = vec![0u8; n];
    sock.read_exact(&mut rk).map_err(ioe)?;
    sock.set_read_timeout(None).map_err(ioe)?;
    let sess = ClientSession::new(Box::new(sock), String::from_utf8_lossy(&rk).into_owned());
    sess.init_remote(init_seq)?;
    create_session_module(Arc::new(sess))
}

fn pipe() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(Error::tvm(format!("pipe: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: pipe(2) just opened both descriptors; each is owned once.
    Ok(unsafe { (std::os::fd::OwnedFd::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1])) })
}

fn set_cloexec(fd: &std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: sets a flag on a descriptor we own.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
}

/// `rpc.CreatePipeClient(*cmd)`: starts `cmd` with two more arguments, the descriptors of the
/// pipe it reads requests from and of the pipe it writes replies to (TVM's popen convention,
/// e.g. a minrpc server or `tvmrt rpc-server --pipe`), and returns the session over them.
pub(crate) fn create_pipe_client(cmd: &[String]) -> Result<Module> {
    use std::os::fd::AsRawFd;
    let prog = cmd.first().ok_or_else(|| Error::value("rpc.CreatePipeClient needs a command"))?;
    let (child_read, parent_write) = pipe()?;
    let (parent_read, child_write) = pipe()?;
    set_cloexec(&parent_read);
    set_cloexec(&parent_write);
    let child = std::process::Command::new(prog)
        .args(&cmd[1..])
        .arg(child_read.as_raw_fd().to_string())
        .arg(child_write.as_raw_fd().to_string())
        .spawn()
        .map_err(|e| Error::tvm(format!("cannot start {prog}: {e}")))?;
    drop((child_read, child_write));
    let ch = channel::PipeChannel {
        read: std::fs::File::from(parent_read),
        write: std::fs::File::from(parent_write),
        child: Some(child),
    };
    let sess = ClientSession::new(Box::new(ch), "pipe".into());
    sess.init_remote(&[])?;
    create_session_module(Arc::new(sess))
}

/// Serves one session over two inherited descriptors (the other end of
/// [`create_pipe_client`]), with a fresh work directory that is removed afterwards.
pub fn serve_pipe(read_fd: i32, write_fd: i32, silent: bool) -> Result<()> {
    use std::os::fd::FromRawFd;
    for fd in [read_fd, write_fd] {
        // SAFETY: F_GETFD only queries the descriptor.
        if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(Error::value(format!("{fd} is not an open file descriptor")));
        }
    }
    // SAFETY: the caller hands over two open descriptors, owned from here on.
    let (read, write) = unsafe { (std::fs::File::from_raw_fd(read_fd), std::fs::File::from_raw_fd(write_fd)) };
    let dir = std::env::temp_dir().join(format!("tvm-rpc-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Error::tvm(format!("work dir {}: {e}", dir.display())))?;
    let dir = dir.canonicalize().map_err(|e| Error::tvm(e.to_string()))?;
    let r = {
        let _env = env::enter(env::SessionEnv { work_dir: dir.clone(), verbose: !silent });
        let mut ch = channel::PipeChannel { read, write, child: None };
        let mut ep = ServerEndpoint::new("PipeServer");
        endpoint::serve(&mut ch, &mut ep, channel::max_packet_from_env())
    };
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// Plain arguments (session constructor sequences) in wire form.
fn plain_wire<'a>(a: &Args<'a>, from: usize) -> Result<Vec<WireValue<'static>>> {
    (from..a.len())
        .map(|i| {
            Ok(match a.get(i)? {
                Value::Int(x) => WireValue::Int(x),
                Value::UInt(x) => WireValue::UInt(x),
                Value::Float(x) => WireValue::Float(x),
                Value::Null => WireValue::Null,
                Value::DataType(t) => WireValue::DataType(t),
                Value::Handle(h) => WireValue::Handle(h as u64),
                Value::Bytes(b) => WireValue::Bytes(Cow::Owned(*b)),
                v => match v.as_str() {
                    Some(s) => WireValue::Str(Cow::Owned(s.into_bytes())),
                    None => {
                        return Err(Error::value(format!(
                            "argument {i}: a session constructor argument must be a plain value, not {}",
                            crate::value::code_name(v.type_code())
                        )))
                    }
                },
            })
        })
        .collect()
}

fn module_arg(a: &Args<'_>, i: usize) -> Result<Module> {
    a.module(i)?.ok_or_else(|| Error::value(format!("argument {i}: expected a module, got None")))
}

/// `rpc.ServerLoop(sockfd)`: serves a connected socket, which it takes over (and closes).
fn server_loop_fd(fd: i64) -> Result<()> {
    let fd = i32::try_from(fd).map_err(|_| Error::value(format!("invalid socket {fd}")))?;
    // SAFETY: F_GETFD only queries the descriptor.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(Error::value(format!("rpc.ServerLoop: {fd} is not an open file descriptor")));
    }
    // SAFETY: the caller hands over an open socket (TVM's contract: the loop owns and closes it).
    let sock = unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let _ = sock.set_nodelay(true);
    if let Err(e) = server::serve_stream(sock, channel::max_packet_from_env()) {
        eprintln!("[tvm-rpc] session ended: {e}");
    }
    Ok(())
}

/// Registers the RPC globals.
pub fn register(r: &mut Registrar<'_>) {
    env::register(r);
    r.func("device_api.rpc", |_| Ok(device::api_token(device::RPC_SESS_MASK)));
    r.func("rpc.LocalSession", |_| Ok(Value::Module(create_session_module(Arc::new(local::LocalSession::new()))?)));
    r.func("rpc.Connect", |a| {
        a.expect_at_least("rpc.Connect", 3)?;
        let port = u16::try_from(a.i64(1)?).map_err(|_| Error::value("rpc.Connect: invalid port"))?;
        // v0.9+: (url, port, key, enable_logging, constructor...); v0.8: (url, port, key,
        // constructor...), whose constructor name is a string. Logging of the session is not
        // offered: the flag is accepted and ignored.
        let first_ctor = if a.len() > 3 && matches!(a.code(3)?, code::INT | code::BOOL) { 4 } else { 3 };
        let init = plain_wire(a, first_ctor)?;
        Ok(Value::Module(connect(&a.string(0)?, port, &a.string(2)?, &init)?))
    });
    r.func("rpc.CreatePipeClient", |a| {
        let cmd = (0..a.len()).map(|i| a.string(i)).collect::<Result<Vec<_>>>()?;
        Ok(Value::Module(create_pipe_client(&cmd)?))
    });
    r.func("rpc.ServerLoop", |a| {
        a.expect_at_least("rpc.ServerLoop", 1)?;
        if a.code(0)? == code::INT {
            server_loop_fd(a.i64(0)?)?;
            return Ok(Value::Null);
        }
        a.expect_len("rpc.ServerLoop", 2)?;
        let fsend = a.func(0)?.ok_or_else(|| Error::value("rpc.ServerLoop: fsend is None"))?;
        let frecv = a.func(1)?.ok_or_else(|| Error::value("rpc.ServerLoop: frecv is None"))?;
        let mut ch = CallbackChannel::new(fsend, Some(frecv));
        let mut ep = ServerEndpoint::new("SockServerLoop");
        endpoint::serve(&mut ch, &mut ep, channel::max_packet_from_env())?;
        Ok(Value::Null)
    });
    r.func("rpc.CreateEventDrivenServer", |a| {
        a.expect_len("rpc.CreateEventDrivenServer", 3)?;
        let fsend = a.func(0)?.ok_or_else(|| Error::value("rpc.CreateEventDrivenServer: fsend is None"))?;
        let srv = Mutex::new(EventServer::new(fsend, &a.string(1)?, &a.string(2)?));
        Ok(Value::func(PackedFunc::from_fn(move |a| {
            a.expect_len("rpc event handler", 2)?;
            let flag = a.i64(1)?;
            let bytes = a.bytes(0)?;
            Ok(Value::Int(srv.lock().handle(&bytes, flag)?))
        })))
    });
    r.func("rpc.LoadRemoteModule", |a| {
        a.expect_len("rpc.LoadRemoteModule", 2)?;
        let m = module_arg(a, 0)?;
        client::rpc_module(&m)?.load_module(&a.string(1)?)
    });
    r.func("rpc.ImportRemoteModule", |a| {
        a.expect_len("rpc.ImportRemoteModule", 2)?;
        let (p, c) = (module_arg(a, 0)?, module_arg(a, 1)?);
        let f = client::rpc_module(&p)?.helper_func("tvm.rpc.server.ImportModule")?;
        f.call(&[Value::Module(p), Value::Module(c)])?;
        Ok(Value::Null)
    });
    r.func("rpc.SessTableIndex", |a| {
        a.expect_len("rpc.SessTableIndex", 1)?;
        Ok(Value::Int(i64::from(client::rpc_module(&module_arg(a, 0)?)?.session().index)))
    });
    r.func("tvm.rpc.NDArrayFromRemoteOpaqueHandle", |a| {
        a.expect_len("tvm.rpc.NDArrayFromRemoteOpaqueHandle", 5)?;
        let m = module_arg(a, 0)?;
        let rs = client::rpc_module(&m)?.session().clone();
        let data = a.handle(1)? as u64;
        let tp = a.dltensor(2)?;
        // SAFETY: argument 2 is a live tensor for the call (the Args contract).
        let t = unsafe { tp.as_ref() }.ok_or_else(|| Error::value("template tensor is NULL"))?;
        let dev: DLDevice = a.device(3)?;
        let nd = a.handle(4)? as u64;
        let shape = device::tensor_shape(t)?;
        Ok(Value::NDArray(client::ndarray_from_remote(&rs, data, shape, t.dtype, dev, 0, nd)?))
    });
    r.func("tvm.rpc.server.ImportModule", |a| {
        a.expect_len("tvm.rpc.server.ImportModule", 2)?;
        let (p, c) = (module_arg(a, 0)?, module_arg(a, 1)?);
        if p.type_key() == "rpc" {
            let f = client::rpc_module(&p)?.helper_func("tvm.rpc.server.ImportModule")?;
            f.call(&[Value::Module(p), Value::Module(c)])?;
        } else {
            p.import(c)?;
        }
        Ok(Value::Null)
    });
    r.func("tvm.rpc.server.ModuleGetFunction", |a| {
        a.expect_len("tvm.rpc.server.ModuleGetFunction", 3)?;
        let m = module_arg(a, 0)?;
        let q = a.i64(2)? != 0;
        Ok(m.get_function(&a.string(1)?, q)?.map_or(Value::Null, Value::func))
    });
}
