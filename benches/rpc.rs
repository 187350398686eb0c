//! RPC figures of this runtime alone, client and server both ours over loopback (plain
//! `std::time`, `harness = false`): the round trip of a remote call of a function that does
//! nothing (`__tvm_set_device(1, 0)`), the same through the in-process `rpc.LocalSession` (the
//! cost of the session machinery without a socket), copies of a 64 MiB array to and from the
//! remote CPU, and remote `mlp.so` run latency as the remote time evaluator reports it.
//!
//! `cargo bench --bench rpc`. With `RPC_BENCH_SERVER=host:port` the client connects to that
//! server instead (TVM's own: `python -m tvm.exec.rpc_server`) to compare servers. The side by
//! side with TVM's client and server is `scripts/bench-rpc.sh`.

use std::path::PathBuf;
use std::time::Instant;
use tvm_runtime::abi::DLDevice;
use tvm_runtime::function::PackedFunc;
use tvm_runtime::module::Module;
use tvm_runtime::ndarray::NDArray;
use tvm_runtime::registry;
use tvm_runtime::rpc::{Isolation, Server, ServerConfig};
use tvm_runtime::value::dtype::FLOAT32;
use tvm_runtime::value::Value;

fn fixtures() -> PathBuf {
    std::env::var_os("TVM_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures"))
}

fn global(name: &str) -> PackedFunc {
    registry::get(name).unwrap_or_else(|| panic!("{name} missing"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn device(sess: &Module) -> DLDevice {
    let Value::Int(i) = global("rpc.SessTableIndex").call(&[Value::Module(sess.clone())]).unwrap() else { panic!() };
    DLDevice { device_type: 1 + 128 * (i as i32 + 1), device_id: 0 }
}

fn call_us(sess: &Module) -> f64 {
    let f = sess.get_function("__tvm_set_device", false).unwrap().unwrap();
    let args = [Value::Int(1), Value::Int(0)];
    for _ in 0..500 {
        f.call(&args).unwrap();
    }
    let batches = (0..30)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..200 {
                f.call(&args).unwrap();
            }
            t.elapsed().as_secs_f64() / 200.0 * 1e6
        })
        .collect();
    median(batches)
}

fn copies(sess: &Module) -> (f64, f64) {
    let n = 64usize << 20;
    let a = NDArray::empty(&[(n / 4) as i64], FLOAT32, device(sess)).unwrap();
    let host: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let mut back = vec![0u8; n];
    let (mut to, mut from) = (f64::MAX, f64::MAX);
    for _ in 0..7 {
        let t = Instant::now();
        a.copy_from_bytes(&host).unwrap();
        to = to.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        a.copy_to_bytes(&mut back).unwrap();
        from = from.min(t.elapsed().as_secs_f64());
    }
    assert!(back == host);
    (n as f64 / to / 1e6, n as f64 / from / 1e6)
}

fn mlp_us(sess: &Module) -> Option<f64> {
    let so = fixtures().join("mlp.so");
    let data = std::fs::read(&so).ok()?;
    let up = sess.get_function("tvm.rpc.server.upload", false).unwrap().unwrap();
    up.call(&[Value::str("mlp.so"), Value::bytes(data)]).unwrap();
    let Value::Module(lib) =
        global("rpc.LoadRemoteModule").call(&[Value::Module(sess.clone()), Value::str("mlp.so")]).unwrap()
    else {
        panic!()
    };
    let dev = device(sess);
    let Value::Module(gm) = lib.get_function("default", false).unwrap().unwrap().call(&[Value::Device(dev)]).unwrap()
    else {
        panic!()
    };
    let te = global("runtime.RPCTimeEvaluator")
        .call(&[
            Value::Module(gm),
            Value::str("run"),
            Value::Int(i64::from(dev.device_type)),
            Value::Int(0),
            Value::Int(200),
            Value::Int(7),
            Value::Int(0),
            Value::str(""),
        ])
        .unwrap();
    let Value::Func(te) = te else { panic!() };
    let Value::Bytes(blob) = te.call(&[]).unwrap() else { panic!() };
    Some(median(blob.chunks_exact(8).map(|c| f64::from_ne_bytes(c.try_into().unwrap()) * 1e6).collect()))
}

fn main() {
    tvm_runtime::classic_api::slots::install().unwrap();
    let (host, port, _server) = match std::env::var("RPC_BENCH_SERVER") {
        Ok(a) => {
            let (h, p) = tvm_runtime::rpc::tracker::parse_addr(&a).unwrap();
            (h, p, None)
        }
        Err(_) => {
            let s = Server::bind(ServerConfig {
                port: 0,
                silent: true,
                isolation: Isolation::Thread,
                ..Default::default()
            })
            .unwrap();
            let (port, stop) = (s.port(), s.stopper());
            let t = std::thread::spawn(move || s.run().unwrap());
            ("127.0.0.1".to_owned(), port, Some((stop, t)))
        }
    };
    let Value::Module(sess) =
        global("rpc.Connect").call(&[Value::str(host.clone()), Value::Int(i64::from(port)), Value::str("")]).unwrap()
    else {
        panic!()
    };
    println!("server {host}:{port}");
    println!("call_us        {:10.2}", call_us(&sess));
    let (to, from) = copies(&sess);
    println!("to_MBps        {to:10.0}");
    println!("from_MBps      {from:10.0}");
    if let Some(us) = mlp_us(&sess) {
        println!("mlp_te_us      {us:10.2}");
    }
    drop(sess);
    let Value::Module(local) = global("rpc.LocalSession").call(&[]).unwrap() else { panic!() };
    println!("local_call_us  {:10.2}", call_us(&local));
    if let Some((stop, t)) = _server {
        stop.stop();
        t.join().unwrap();
    }
}
