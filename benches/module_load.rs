//! Module load time (plain `std::time`, `harness = false`): `TVMModLoadFromFile` followed by the
//! first `TVMModGetFunction`, then both handles freed (so the next round `dlopen`s the file
//! afresh), through the C API as a C program calls it. Prints the median and the best of many
//! rounds for:
//!
//! * `add_one.so` (TVM v0.8, no blob): cold (library unloaded between rounds) and warm (another
//!   handle keeps the library mapped, so `dlopen` only bumps a count);
//! * `resnet18.so` (GraphExecutorFactory blob, 46 MB of parameters), once a
//!   `runtime.module.loadbinary_GraphExecutorFactory` loader is registered (skipped before).
//!
//! `cargo bench --bench module_load` (fixtures from `../shared/fixtures`, or `TVM_FIXTURES`).

use std::ffi::{c_void, CString};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tvm_runtime::classic_api::runtime_api as api;

fn fixtures() -> PathBuf {
    std::env::var_os("TVM_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures"))
}

/// One round: load, look up `func`, free both. Returns the time of load + lookup.
fn round(path: &CString, func: &CString) -> Duration {
    let fmt = CString::default();
    let mut m: *mut c_void = std::ptr::null_mut();
    let mut f: *mut c_void = std::ptr::null_mut();
    let t = Instant::now();
    // SAFETY: valid strings and out-pointers.
    let rc = unsafe { api::TVMModLoadFromFile(path.as_ptr(), fmt.as_ptr(), &mut m) };
    assert_eq!(rc, 0, "load failed");
    // SAFETY: live module, valid string and out-pointer.
    let rc = unsafe { api::TVMModGetFunction(m, func.as_ptr(), 1, &mut f) };
    let dt = t.elapsed();
    assert!(rc == 0 && !f.is_null(), "function lookup failed");
    black_box(f);
    // SAFETY: owned handles, freed once.
    unsafe {
        api::TVMFuncFree(f);
        api::TVMModFree(m);
    }
    dt
}

fn report(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let median = times[times.len() / 2];
    println!("{what:<48} median {:>9.1} us   best {:>9.1} us   ({} rounds)", us(median), us(times[0]), times.len());
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn bench(file: &str, func: &str, rounds: usize) {
    let p = fixtures().join(file);
    if !p.is_file() {
        println!("{file}: skipped (not found at {})", p.display());
        return;
    }
    let path = CString::new(p.to_str().expect("utf-8 path")).expect("no NUL");
    let name = CString::new(func).expect("no NUL");
    round(&path, &name); // warm the page cache and the runtime's one-time setup
    let cold: Vec<Duration> = (0..rounds).map(|_| round(&path, &name)).collect();
    report(&format!("{file}: load + first GetFunction, cold"), cold);

    let fmt = CString::default();
    let mut keep: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid strings and out-pointer.
    assert_eq!(unsafe { api::TVMModLoadFromFile(path.as_ptr(), fmt.as_ptr(), &mut keep) }, 0);
    let warm: Vec<Duration> = (0..rounds).map(|_| round(&path, &name)).collect();
    report(&format!("{file}: load + first GetFunction, warm"), warm);
    // SAFETY: owned handle.
    unsafe { api::TVMModFree(keep) };
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    bench("add_one.so", "add_one", 1000);
    let factory = CString::new("runtime.module.loadbinary_GraphExecutorFactory").expect("no NUL");
    let mut f: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid string and out-pointer.
    let have_factory = unsafe { api::TVMFuncGetGlobal(factory.as_ptr(), &mut f) } == 0 && !f.is_null();
    if have_factory {
        // SAFETY: owned handle.
        unsafe { api::TVMFuncFree(f) };
        bench("resnet18.so", "default", 30);
    } else {
        println!("resnet18.so: skipped (runtime.module.loadbinary_GraphExecutorFactory is not registered yet)");
    }
}
