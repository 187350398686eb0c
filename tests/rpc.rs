//! RPC over loopback, client and server both this library: remote modules (TVM's add_one.so
//! and mlp.so through the graph executor, compared with TVM's outputs), remote arrays and
//! copies, the remote time evaluator, the local and event-driven sessions, several clients at
//! once, and a hostile client (bad handles, forged pointers, malformed packets, disconnects,
//! path escapes, wrong keys and tokens) that ends only its own session.

mod common;

use common::{fixture, read_npy_f32};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tvm_runtime::abi::{DLDevice, DLTensor};
use tvm_runtime::function::PackedFunc;
use tvm_runtime::module::Module;
use tvm_runtime::ndarray::NDArray;
use tvm_runtime::registry;
use tvm_runtime::rpc::channel::Channel;
use tvm_runtime::rpc::codec::{self, Packet, RpcCode, WireTensor, WireValue};
use tvm_runtime::rpc::endpoint::ClientSession;
use tvm_runtime::rpc::server::Stopper;
use tvm_runtime::rpc::{Server, ServerConfig};
use tvm_runtime::value::dtype::FLOAT32;
use tvm_runtime::value::Value;

fn global(name: &str) -> PackedFunc {
    // Loading libraries through the core API needs the context function table.
    tvm_runtime::classic_api::slots::install().unwrap();
    registry::get(name).unwrap_or_else(|| panic!("{name} is not registered"))
}

struct TestServer {
    port: u16,
    stop: Stopper,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn start(cfg: ServerConfig) -> TestServer {
    let s = Server::bind(ServerConfig { port: 0, silent: true, ..cfg }).unwrap();
    let port = s.port();
    let stop = s.stopper();
    let thread = Some(std::thread::spawn(move || s.run().unwrap()));
    TestServer { port, stop, thread }
}

fn connect(port: u16, key: &str) -> tvm_runtime::error::Result<Module> {
    match global("rpc.Connect").call(&[Value::str("127.0.0.1"), Value::Int(i64::from(port)), Value::str(key)])? {
        Value::Module(m) => Ok(m),
        v => panic!("rpc.Connect returned {v:?}"),
    }
}

fn remote_cpu(sess: &Module) -> DLDevice {
    let idx = match global("rpc.SessTableIndex").call(&[Value::Module(sess.clone())]).unwrap() {
        Value::Int(i) => i as i32,
        v => panic!("{v:?}"),
    };
    DLDevice { device_type: 1 + 128 * (idx + 1), device_id: 0 }
}

fn func(m: &Module, name: &str) -> PackedFunc {
    m.get_function(name, false).unwrap().unwrap_or_else(|| panic!("remote function {name} missing"))
}

fn upload(sess: &Module, name: &str, data: &[u8]) -> tvm_runtime::error::Result<Value> {
    func(sess, "tvm.rpc.server.upload").call(&[Value::str(name), Value::bytes(data.to_vec())])
}

fn load(sess: &Module, name: &str) -> Module {
    match global("rpc.LoadRemoteModule").call(&[Value::Module(sess.clone()), Value::str(name)]).unwrap() {
        Value::Module(m) => m,
        v => panic!("{v:?}"),
    }
}

fn as_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn assert_close(got: &[u8], want: &[u8], rtol: f32, atol: f32) {
    let (g, w) = (as_f32(got), as_f32(want));
    assert_eq!(g.len(), w.len());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= atol + rtol * b.abs(), "element {i}: {a} vs {b}");
    }
}

/// add_one.so remotely: upload, load, run on remote arrays, compare with TVM's output; then the
/// remote time evaluator.
fn check_add_one(sess: &Module) {
    let (Some(so), Some(a_npy), Some(b_npy)) =
        (fixture("add_one.so"), fixture("add_one.A.npy"), fixture("add_one.B.npy"))
    else {
        return;
    };
    upload(sess, "add_one.so", &std::fs::read(so).unwrap()).unwrap();
    let lib = load(sess, "add_one.so");
    assert_eq!(lib.type_key(), "rpc");
    let dev = remote_cpu(sess);
    let (shape, a_bytes) = read_npy_f32(&a_npy);
    let (_, b_want) = read_npy_f32(&b_npy);
    let a = NDArray::empty(&shape, FLOAT32, dev).unwrap();
    let b = NDArray::empty(&shape, FLOAT32, dev).unwrap();
    a.copy_from_bytes(&a_bytes).unwrap();
    assert_eq!(a.to_bytes().unwrap(), a_bytes);
    let f = func(&lib, "add_one");
    f.call(&[Value::NDArray(a.clone()), Value::NDArray(b.clone())]).unwrap();
    assert_eq!(b.to_bytes().unwrap(), b_want);
    assert!(lib.get_function("no_such_function", false).unwrap().is_none());

    let te = global("runtime.RPCTimeEvaluator")
        .call(&[
            Value::Module(lib.clone()),
            Value::str("add_one"),
            Value::Int(i64::from(dev.device_type)),
            Value::Int(0),
            Value::Int(3),
            Value::Int(2),
            Value::Int(0),
            Value::str(""),
        ])
        .unwrap();
    let Value::Func(te) = te else { panic!("{te:?}") };
    let Value::Bytes(blob) = te.call(&[Value::NDArray(a), Value::NDArray(b)]).unwrap() else { panic!() };
    assert_eq!(blob.len(), 16);
    for c in blob.chunks_exact(8) {
        let s = f64::from_ne_bytes(c.try_into().unwrap());
        assert!(s > 0.0 && s < 1.0, "{s}");
    }
    // A device of another session is refused.
    let wrong = DLDevice { device_type: 1 + 128 * 31, device_id: 0 };
    let e = global("runtime.RPCTimeEvaluator")
        .call(&[
            Value::Module(lib),
            Value::str("add_one"),
            Value::Int(i64::from(wrong.device_type)),
            Value::Int(0),
            Value::Int(1),
            Value::Int(1),
            Value::Int(0),
            Value::str(""),
        ])
        .unwrap_err();
    assert!(e.to_string().contains("matched remote device"), "{e}");
}

/// mlp.so remotely through the graph executor: `GraphModule(remote_lib["default"](remote.cpu()))`.
fn check_mlp(sess: &Module) {
    let (Some(so), Some(x), Some(y)) = (fixture("mlp.so"), fixture("mlp.input.data.npy"), fixture("mlp.output.0.npy"))
    else {
        return;
    };
    upload(sess, "mlp.so", &std::fs::read(so).unwrap()).unwrap();
    let lib = load(sess, "mlp.so");
    let dev = remote_cpu(sess);
    let Value::Module(gm) = func(&lib, "default").call(&[Value::Device(dev)]).unwrap() else { panic!() };
    assert_eq!(gm.type_key(), "rpc");
    let (shape, xb) = read_npy_f32(&x);
    let (_, yb) = read_npy_f32(&y);
    let input = NDArray::empty(&shape, FLOAT32, dev).unwrap();
    input.copy_from_bytes(&xb).unwrap();
    func(&gm, "set_input").call(&[Value::str("data"), Value::NDArray(input)]).unwrap();
    func(&gm, "run").call(&[]).unwrap();
    let Value::NDArray(out) = func(&gm, "get_output").call(&[Value::Int(0)]).unwrap() else { panic!() };
    assert_eq!(out.device(), dev);
    assert_close(&out.to_bytes().unwrap(), &yb, 1e-5, 1e-5);
    // The remote output copied into a local array with TVMArrayCopyFromTo.
    let local = NDArray::empty(out.shape(), FLOAT32, DLDevice { device_type: 1, device_id: 0 }).unwrap();
    local.copy_from(out.tensor()).unwrap();
    assert_close(&local.to_bytes().unwrap(), &yb, 1e-5, 1e-5);
    // time_evaluator on the graph module's `run` (what GraphModule.benchmark does).
    let Value::Func(te) = global("runtime.RPCTimeEvaluator")
        .call(&[
            Value::Module(gm),
            Value::str("run"),
            Value::Int(i64::from(dev.device_type)),
            Value::Int(0),
            Value::Int(2),
            Value::Int(3),
            Value::Int(1),
            Value::str(""),
        ])
        .unwrap()
    else {
        panic!()
    };
    let Value::Bytes(blob) = te.call(&[]).unwrap() else { panic!() };
    assert_eq!(blob.len(), 24);
}

/// Arrays, copies, devices and streams on a remote device (`over_network`: errors come back
/// wrapped as RPC errors).
fn check_arrays(sess: &Module, over_network: bool) {
    let dev = remote_cpu(sess);
    let a = NDArray::empty(&[4, 4], FLOAT32, dev).unwrap();
    let src: Vec<u8> = (0..64).collect();
    a.copy_from_bytes(&src).unwrap();
    // remote -> remote
    let b = NDArray::empty(&[16], FLOAT32, dev).unwrap();
    b.copy_from(a.tensor()).unwrap();
    assert_eq!(b.to_bytes().unwrap(), src);
    // size mismatch
    assert!(a.copy_from_bytes(&src[..8]).is_err());
    // Large copies (straight into and out of the server's memory) and a copy at an offset.
    let big = NDArray::empty(&[1 << 18], FLOAT32, dev).unwrap();
    let bsrc: Vec<u8> = (0..1u32 << 20).map(|i| (i * 31 % 256) as u8).collect();
    big.copy_from_bytes(&bsrc).unwrap();
    assert!(big.to_bytes().unwrap() == bsrc);
    let view = big.create_view(&[1 << 17], FLOAT32).unwrap();
    assert!(view.to_bytes().unwrap() == bsrc[..1 << 19]);
    // through the C API
    let mut back = vec![0u8; 64];
    // SAFETY: a live array handle and a 64-byte buffer.
    let rc =
        unsafe { tvm_runtime::classic_api::ndarray::TVMArrayCopyToBytes(b.handle(), back.as_mut_ptr().cast(), 64) };
    assert_eq!(rc, 0);
    assert_eq!(back, src);
    // SAFETY: plain calls with a remote device.
    unsafe {
        assert_eq!(tvm_runtime::classic_api::device::TVMSynchronize(dev.device_type, 0, std::ptr::null_mut()), 0);
        assert_eq!(tvm_runtime::classic_api::device::TVMSetStream(dev.device_type, 0, std::ptr::null_mut()), 0);
        let mut s = std::ptr::null_mut();
        assert_eq!(tvm_runtime::classic_api::device::TVMStreamCreate(dev.device_type, 0, &mut s), 0);
        assert!(s.is_null());
    }
    // device attributes: exists, and a missing device type
    let attr = global("runtime.GetDeviceAttr");
    assert!(matches!(
        attr.call(&[Value::Int(i64::from(dev.device_type)), Value::Int(0), Value::Int(0)]).unwrap(),
        Value::Int(1)
    ));
    let vulkan = dev.device_type - 1 + 7;
    assert!(matches!(
        attr.call(&[Value::Int(i64::from(vulkan)), Value::Int(0), Value::Int(0)]).unwrap(),
        Value::Int(0)
    ));
    // A local array passed to a remote function is refused on the client side.
    let local = NDArray::empty(&[4], FLOAT32, DLDevice { device_type: 1, device_id: 0 }).unwrap();
    let f = func(sess, "runtime.GetDeviceAttr");
    let e = f.call(&[Value::NDArray(local)]).unwrap_err().to_string();
    assert!(e.contains("local device"), "{e}");
    // A local function cannot be passed either.
    let e = f.call(&[Value::func(PackedFunc::from_fn(|_| Ok(Value::Null)))]).unwrap_err().to_string();
    assert!(e.contains("Cannot pass type FunctionHandle"), "{e}");
    // A remote error comes back as an RPCError (a local session's as it is) and the session
    // goes on.
    let e = f.call(&[Value::Int(1)]).unwrap_err().to_string();
    assert!(e.contains("expects 3 arguments"), "{e}");
    assert_eq!(e.starts_with("RPCError: Error caught from RPC call:"), over_network, "{e}");
    assert!(matches!(f.call(&[Value::Int(1), Value::Int(0), Value::Int(0)]).unwrap(), Value::Int(1)));
    // Strings and bytes round trip through a remote echo.
    let ds = func(sess, "runtime.String");
    assert_eq!(ds.call(&[Value::str("héllo")]).unwrap().as_str().unwrap(), "héllo");
}

fn check_files(sess: &Module) {
    // Large enough to take the server's large-packet path.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    upload(sess, "big.bin", &big).unwrap();
    let Value::Bytes(b) = func(sess, "tvm.rpc.server.download").call(&[Value::str("big.bin")]).unwrap() else {
        panic!()
    };
    assert!(*b == big);
    upload(sess, "x.bin", b"hello").unwrap();
    let Value::Bytes(b) = func(sess, "tvm.rpc.server.download").call(&[Value::str("x.bin")]).unwrap() else { panic!() };
    assert_eq!(&b[..], b"hello");
    let Some(list) = func(sess, "tvm.rpc.server.listdir").call(&[Value::str(".")]).unwrap().as_str() else { panic!() };
    assert!(list.split(',').any(|p| p.ends_with("/x.bin")), "{list}");
    func(sess, "tvm.rpc.server.remove").call(&[Value::str("x.bin")]).unwrap();
    assert!(func(sess, "tvm.rpc.server.download").call(&[Value::str("x.bin")]).is_err());
    for bad in ["../escape.bin", "/tmp/escape.bin", "a/../../escape.bin"] {
        let e = upload(sess, bad, b"no").unwrap_err().to_string();
        assert!(e.contains("work directory") || e.contains("absolute"), "{bad}: {e}");
        assert!(func(sess, "tvm.rpc.server.download").call(&[Value::str(bad)]).is_err());
        assert!(func(sess, "tvm.rpc.server.remove").call(&[Value::str(bad)]).is_err());
        assert!(global("rpc.LoadRemoteModule").call(&[Value::Module(sess.clone()), Value::str(bad)]).is_err());
    }
    assert!(!Path::new("/tmp/escape.bin").exists());
}

#[test]
fn loopback_server_and_client() {
    let srv = start(ServerConfig { key: "test".into(), ..Default::default() });
    let sess = connect(srv.port, "test").unwrap();
    assert_eq!(sess.type_key(), "rpc");
    check_arrays(&sess, true);
    check_files(&sess);
    check_add_one(&sess);
    check_mlp(&sess);
    // A wrong key is refused.
    let e = connect(srv.port, "other").unwrap_err().to_string();
    assert!(e.contains("cannot find server that matches key"), "{e}");
    drop(sess);
    // The server goes on.
    let again = connect(srv.port, "test").unwrap();
    check_arrays(&again, true);
}

#[test]
fn several_clients_at_once() {
    let srv = start(ServerConfig::default());
    let port = srv.port;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let sess = connect(port, "").unwrap();
                let data = vec![t as u8; 1000 + t];
                upload(&sess, "mine.bin", &data).unwrap();
                std::thread::sleep(Duration::from_millis(50));
                let Value::Bytes(b) = func(&sess, "tvm.rpc.server.download").call(&[Value::str("mine.bin")]).unwrap()
                else {
                    panic!()
                };
                assert_eq!(*b, data, "each session has its own work directory");
                check_arrays(&sess, true);
                check_add_one(&sess);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn token_and_limits() {
    let srv = start(ServerConfig { token: Some("s3cret".into()), ..Default::default() });
    let e = connect(srv.port, "").unwrap_err().to_string();
    assert!(e.contains("cannot find server"), "{e}");
    assert!(connect(srv.port, " -token=wrong").is_err());
    let sess = connect(srv.port, " -token=s3cret").unwrap();
    check_arrays(&sess, true);
}

// ---------------------------------------------------------------------------------------------
// A raw client speaking the protocol by hand.

struct Raw(TcpStream);

impl Raw {
    fn open(port: u16, key: &str) -> Raw {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(&codec::encode_client_hello(key).unwrap()).unwrap();
        let mut b4 = [0u8; 4];
        s.read_exact(&mut b4).unwrap();
        assert_eq!(i32::from_le_bytes(b4), codec::RPC_CODE_SUCCESS);
        s.read_exact(&mut b4).unwrap();
        let mut k = vec![0u8; i32::from_le_bytes(b4) as usize];
        s.read_exact(&mut k).unwrap();
        assert_eq!(k, b"server:");
        Raw(s)
    }

    fn send(&mut self, p: &[u8]) {
        self.0.write_all(p).unwrap();
    }

    /// The next reply packet's body, or None when the server closed the connection.
    fn reply(&mut self) -> Option<Vec<u8>> {
        let mut h = [0u8; 8];
        self.0.read_exact(&mut h).ok()?;
        let mut b = vec![0u8; u64::from_le_bytes(h) as usize];
        self.0.read_exact(&mut b).ok()?;
        Some(b)
    }

    fn init(&mut self) {
        let mut p = Vec::new();
        codec::encode_init_server(&mut p, &[]).unwrap();
        self.send(&p);
        assert!(matches!(codec::decode_packet(&self.reply().unwrap()).unwrap(), Packet::Return(_)));
    }

    fn exception(&mut self, p: &[u8]) -> String {
        self.send(p);
        match codec::decode_packet(&self.reply().unwrap()).unwrap() {
            Packet::Exception(m) => m,
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn hostile_clients_end_only_their_session() {
    let srv = start(ServerConfig::default());
    let cpu = DLDevice { device_type: 1, device_id: 0 };
    let forged = WireTensor { data: 0x1000, device: cpu, dtype: FLOAT32, shape: vec![4].into(), byte_offset: 0 };
    {
        let mut r = Raw::open(srv.port, "client:");
        // Before kInitServer nothing is served.
        let mut p = Vec::new();
        codec::encode_syscall(&mut p, RpcCode::GetGlobalFunc, &[WireValue::Str(b"runtime.String"[..].into())]).unwrap();
        assert!(r.exception(&p).contains("InitRemoteSession"));
        r.init();
        // Unknown handles and forged pointers are errors, not crashes; the session goes on.
        let mut p = Vec::new();
        codec::encode_call(&mut p, 0x1234, &[]).unwrap();
        assert!(r.exception(&p).contains("unknown function handle"));
        p.clear();
        codec::encode_copy_from_remote(&mut p, &forged, 16).unwrap();
        assert!(r.exception(&p).contains("not memory this session handed out"));
        p.clear();
        codec::encode_copy_to_remote_head(&mut p, &forged, 16).unwrap();
        p.extend([0u8; 16]);
        assert!(r.exception(&p).contains("not memory this session handed out"));
        p.clear();
        codec::encode_syscall(&mut p, RpcCode::DevFreeData, &[WireValue::Device(cpu), WireValue::Handle(0x1000)])
            .unwrap();
        assert!(r.exception(&p).contains("not a data space this session allocated"));
        p.clear();
        codec::encode_syscall(&mut p, RpcCode::FreeHandle, &[WireValue::Handle(0x1000), WireValue::Int(13)]).unwrap();
        assert!(r.exception(&p).contains("unknown"));
        // A real allocation, then a tensor reaching past its end.
        p.clear();
        codec::encode_syscall(
            &mut p,
            RpcCode::DevAllocData,
            &[WireValue::Device(cpu), WireValue::Int(16), WireValue::Int(64), WireValue::DataType(FLOAT32)],
        )
        .unwrap();
        r.send(&p);
        let reply = r.reply().unwrap();
        let Packet::Return(v) = codec::decode_packet(&reply).unwrap() else { panic!() };
        let data = v[0].as_handle().unwrap();
        let inside = WireTensor { data, byte_offset: 0, ..forged.clone() };
        p.clear();
        codec::encode_copy_to_remote_head(&mut p, &inside, 16).unwrap();
        p.extend([7u8; 16]);
        r.send(&p);
        assert!(matches!(codec::decode_packet(&r.reply().unwrap()).unwrap(), Packet::Return(_)));
        let past = WireTensor { byte_offset: 8, ..inside };
        p.clear();
        codec::encode_copy_from_remote(&mut p, &past, 16).unwrap();
        assert!(r.exception(&p).contains("not memory"));
        // A large copy to a forged pointer, and a large one past the end of a real allocation.
        p.clear();
        let forged_big = WireTensor { shape: vec![1 << 18].into(), ..forged.clone() };
        codec::encode_copy_to_remote_head(&mut p, &forged_big, 1 << 20).unwrap();
        p.extend(vec![0u8; 1 << 20]);
        assert!(r.exception(&p).contains("not memory this session handed out"));
        p.clear();
        let past_big = WireTensor { data, shape: vec![1 << 18].into(), ..forged.clone() };
        codec::encode_copy_to_remote_head(&mut p, &past_big, 1 << 20).unwrap();
        p.extend(vec![0u8; 1 << 20]);
        assert!(r.exception(&p).contains("not memory this session handed out"));
        // A malformed packet ends the session: the server closes the connection.
        r.send(&[le(8), 99i32.to_le_bytes().to_vec(), vec![0; 4]].concat());
        assert!(r.reply().is_none());
    }
    {
        // Disconnect in the middle of a packet.
        let mut r = Raw::open(srv.port, "client:");
        r.init();
        r.send(&[le(100), vec![3, 0, 0, 0, 1, 2]].concat());
        drop(r);
    }
    {
        // A large copy whose size disagrees with its packet's length.
        let mut r = Raw::open(srv.port, "client:");
        r.init();
        let big = WireTensor { shape: vec![1 << 18].into(), ..forged.clone() };
        let mut lie = Vec::new();
        codec::encode_copy_to_remote_head(&mut lie, &big, 1 << 20).unwrap();
        let len = (lie.len() - 8 + (1 << 19)) as u64;
        lie[..8].copy_from_slice(&len.to_le_bytes());
        lie.extend(vec![0u8; 1 << 19]);
        // The server may close the connection as soon as it sees the lie, before the client has
        // written all of it (EPIPE / ECONNRESET here): either way the session ends.
        let _ = r.0.write_all(&lie);
        assert!(r.reply().is_none());
    }
    {
        // A packet claiming to be larger than the limit.
        let mut r = Raw::open(srv.port, "client:");
        r.send(&le(u64::MAX));
        assert!(r.reply().is_none());
    }
    {
        // Not a TVM client at all, and a client that sends nothing.
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let _idle = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    }
    // The server still serves.
    let sess = connect(srv.port, "").unwrap();
    check_arrays(&sess, true);
}

fn le(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

// ---------------------------------------------------------------------------------------------
// In-process sessions

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tvm-rpc-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn local_session() {
    let dir = temp_dir("local");
    let _env =
        tvm_runtime::rpc::env::enter(tvm_runtime::rpc::env::SessionEnv { work_dir: dir.clone(), verbose: false });
    let Value::Module(sess) = global("rpc.LocalSession").call(&[]).unwrap() else { panic!() };
    check_arrays(&sess, false);
    check_files(&sess);
    check_add_one(&sess);
    check_mlp(&sess);
    // Symlinks out of the work directory are refused.
    let outside = temp_dir("outside");
    std::os::unix::fs::symlink(&outside, dir.join("out")).unwrap();
    let e = upload(&sess, "out/evil.bin", b"x").unwrap_err().to_string();
    assert!(e.contains("outside the work directory"), "{e}");
    std::fs::write(outside.join("secret"), b"s").unwrap();
    assert!(func(&sess, "tvm.rpc.server.download").call(&[Value::str("out/secret")]).is_err());
    std::os::unix::fs::symlink(outside.join("secret"), dir.join("link")).unwrap();
    assert!(func(&sess, "tvm.rpc.server.download").call(&[Value::str("link")]).is_err());
    assert!(!outside.join("evil.bin").exists());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&outside);
}

/// A channel into an event-driven server made by `rpc.CreateEventDrivenServer`.
struct EventChannel {
    handler: PackedFunc,
    replies: Arc<parking_lot::Mutex<std::collections::VecDeque<u8>>>,
}

impl Channel for EventChannel {
    fn send(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let r = self.handler.call(&[Value::bytes(data.to_vec()), Value::Int(3)]).map_err(std::io::Error::other)?;
        assert!(matches!(r, Value::Int(0..=2)));
        // Flush what is pending.
        while matches!(self.handler.call(&[Value::bytes(Vec::new()), Value::Int(2)]).unwrap(), Value::Int(2)) {}
        Ok(data.len())
    }
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut q = self.replies.lock();
        let n = buf.len().min(q.len());
        for b in buf.iter_mut().take(n) {
            *b = q.pop_front().unwrap();
        }
        Ok(n)
    }
}

#[test]
fn event_driven_server() {
    let replies = Arc::new(parking_lot::Mutex::new(std::collections::VecDeque::new()));
    let sink = replies.clone();
    // Sends at most 1000 bytes per call, as a socket might.
    let fsend = PackedFunc::from_fn(move |a| {
        let b = a.bytes(0)?;
        let n = b.len().min(1000);
        sink.lock().extend(&b[..n]);
        Ok(Value::Int(n as i64))
    });
    let Value::Func(handler) = global("rpc.CreateEventDrivenServer")
        .call(&[Value::func(fsend), Value::str("ev"), Value::str("%toinit")])
        .unwrap()
    else {
        panic!()
    };
    // The init header: the key, length-prefixed.
    let key = b"client:ev";
    let mut head = (key.len() as i32).to_le_bytes().to_vec();
    head.extend(key);
    assert!(matches!(handler.call(&[Value::bytes(head), Value::Int(1)]).unwrap(), Value::Int(1)));
    let ch = EventChannel { handler: (*handler).clone(), replies };
    let sess = ClientSession::new(Box::new(ch), String::new());
    sess.init_remote(&[]).unwrap();
    let m = tvm_runtime::rpc::create_session_module(Arc::new(sess)).unwrap();
    check_arrays(&m, true);
    // Large copies go through in pieces.
    let dev = remote_cpu(&m);
    let a = NDArray::empty(&[100_000], FLOAT32, dev).unwrap();
    let src: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
    a.copy_from_bytes(&src).unwrap();
    assert_eq!(a.to_bytes().unwrap(), src);
    drop((a, m));
    // After the client's shutdown, the handler reports the end.
    assert!(matches!(handler.call(&[Value::bytes(Vec::new()), Value::Int(1)]).unwrap(), Value::Int(0)));
}

#[test]
fn forged_remote_tensors_are_refused_locally() {
    // A DLTensor claiming an RPC device but whose data is not a remote space.
    let mut shape = [4i64];
    let mut data = [0f32; 4];
    let t = DLTensor {
        data: data.as_mut_ptr().cast(),
        device: DLDevice { device_type: 129, device_id: 0 },
        ndim: 1,
        dtype: FLOAT32,
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let e = tvm_runtime::ndarray::copy_to_bytes(&t, data.as_mut_ptr().cast(), 16).unwrap_err().to_string();
    assert!(e.contains("closed or does not exist") || e.contains("not the data of an array"), "{e}");
}

#[test]
fn proxy_chain_and_panics() {
    let inner = start(ServerConfig { key: "inner".into(), ..Default::default() });
    let outer = start(ServerConfig::default());
    // The client asks the outer server to serve a session that it opens on the inner one
    // (`session_constructor_args=["rpc.Connect", host, port, key]`): everything is forwarded.
    let args = [
        Value::str("127.0.0.1"),
        Value::Int(i64::from(outer.port)),
        Value::str(""),
        Value::str("rpc.Connect"),
        Value::str("127.0.0.1"),
        Value::Int(i64::from(inner.port)),
        Value::str("inner"),
    ];
    let Value::Module(chain) = global("rpc.Connect").call(&args).unwrap() else { panic!() };
    check_arrays(&chain, true);
    check_files(&chain);
    check_add_one(&chain);
    // TVM v0.9+'s clients pass `enable_logging` before the constructor arguments.
    let mut v09 = args.to_vec();
    v09.insert(3, Value::Int(0));
    let Value::Module(chain) = global("rpc.Connect").call(&v09).unwrap() else { panic!() };
    check_add_one(&chain);
    let plain = [Value::str("127.0.0.1"), Value::Int(i64::from(inner.port)), Value::str("inner"), Value::Int(1)];
    let Value::Module(direct) = global("rpc.Connect").call(&plain).unwrap() else { panic!() };
    check_add_one(&direct);
    // A constructor that does not exist is the client's error, at connection time.
    let bad =
        [Value::str("127.0.0.1"), Value::Int(i64::from(outer.port)), Value::str(""), Value::str("no.such.constructor")];
    let e = global("rpc.Connect").call(&bad).unwrap_err().to_string();
    assert!(e.contains("Cannot find session constructor"), "{e}");
    // A panic in a remote function is that call's error; the session goes on.
    registry::register("test.rpc.panics", PackedFunc::from_fn(|_| panic!("boom")), true).unwrap();
    let direct = connect(outer.port, "").unwrap();
    let e = func(&direct, "test.rpc.panics").call(&[]).unwrap_err().to_string();
    assert!(e.contains("panic") && e.contains("boom"), "{e}");
    check_arrays(&direct, true);
}
