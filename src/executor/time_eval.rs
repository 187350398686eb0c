//! The time evaluator (`runtime.RPCTimeEvaluator`, graph-executor.md §9) and the CPU timer and
//! cache-flush globals around it.

use crate::abi::DLDevice;
use crate::device;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::registry::{self, Registrar};
use crate::value::{code, Args, Value};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

/// Measures `pf` as TVM's time evaluator does; returns `repeat` f64 seconds-per-call values.
pub fn evaluate(
    pf: &PackedFunc,
    args: &Args<'_>,
    dev: DLDevice,
    number: &AtomicI64,
    repeat: i64,
    min_repeat_ms: i64,
    preproc: Option<&PackedFunc>,
) -> Result<Vec<u8>> {
    let sync = || -> Result<()> {
        if dev.device_type != device::CPU {
            device::api(dev.device_type)?.stream_sync(dev, std::ptr::null_mut())?;
        }
        Ok(())
    };
    let mut ret = Value::Null;
    pf.call_args(args, &mut ret)?;
    device::api(dev.device_type)?.stream_sync(dev, std::ptr::null_mut())?;
    let mut out = Vec::with_capacity(repeat.max(0) as usize * 8);
    for _ in 0..repeat.max(0) {
        if let Some(p) = preproc {
            p.call_args(args, &mut ret)?;
        }
        let mut duration_ms = 0.0f64;
        let mut n = number.load(Ordering::Relaxed).max(1);
        loop {
            if duration_ms > 0.0 {
                n = (min_repeat_ms as f64 / (duration_ms / n as f64) + 1.0).max(n as f64 * 1.618) as i64;
                number.store(n, Ordering::Relaxed);
            }
            sync()?;
            let t0 = Instant::now();
            for _ in 0..n {
                pf.call_args(args, &mut ret)?;
            }
            sync()?;
            duration_ms = t0.elapsed().as_nanos() as f64 / 1e6;
            if duration_ms >= min_repeat_ms as f64 {
                break;
            }
        }
        out.extend_from_slice(&(duration_ms / 1e3 / n as f64).to_ne_bytes());
    }
    Ok(out)
}

fn time_evaluator(a: &Args<'_>) -> Result<Value> {
    a.expect_len("runtime.RPCTimeEvaluator", 8)?;
    let name = a.string(1)?;
    let dev = DLDevice { device_type: a.i32(2)?, device_id: a.i32(3)? };
    let number = a.i64(4)?;
    let repeat = a.i64(5)?;
    let min_repeat_ms = a.i64(6)?;
    let preproc_name = a.string(7)?;
    if dev.device_type == 13 {
        return Err(Error::tvm("micro backend not enabled"));
    }
    let pf = match a.module(0)? {
        Some(m) if m.type_key() == "rpc" => {
            return crate::rpc::remote_time_evaluator(&m, &name, dev, number, repeat, min_repeat_ms, &preproc_name)
        }
        Some(m) => m
            .get_function(&name, false)?
            .ok_or_else(|| Error::value(format!("Cannot find {name} in the global registry")))?,
        None => {
            registry::get(&name).ok_or_else(|| Error::value(format!("Cannot find {name} in the global function")))?
        }
    };
    let preproc = if preproc_name.is_empty() {
        None
    } else {
        Some(
            registry::get(&preproc_name)
                .ok_or_else(|| Error::value(format!("Cannot find {preproc_name} in the global function")))?,
        )
    };
    device::api(dev.device_type)?;
    let number = AtomicI64::new(number);
    Ok(Value::func(PackedFunc::from_fn(move |args| {
        let blob = evaluate(&pf, args, dev, &number, repeat, min_repeat_ms, preproc.as_ref())?;
        Ok(Value::bytes(blob))
    })))
}

/// Flushes the cache lines of every argument but the first (x86-64 `clflush`).
fn cache_flush(a: &Args<'_>) -> Result<Value> {
    for i in 1..a.len() {
        if !matches!(a.code(i)?, code::DLTENSOR | code::NDARRAY) {
            continue;
        }
        let p = a.dltensor(i)?;
        // SAFETY: codes 7/13 carry a live tensor for the call.
        let Some(t) = (unsafe { p.as_ref() }) else { continue };
        let n = device::tensor_bytes(t)?;
        let base = t.data.cast::<u8>().wrapping_add(t.byte_offset as usize);
        #[cfg(target_arch = "x86_64")]
        for off in (0..n).step_by(64) {
            // SAFETY: the line lies inside the tensor's data; clflush has no other effect.
            unsafe { std::arch::x86_64::_mm_clflush(base.wrapping_add(off)) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (base, n);
    }
    Ok(Value::Null)
}

/// Registers the globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.RPCTimeEvaluator", time_evaluator);
    r.func("cache_flush_cpu_non_first_arg", cache_flush);
}
