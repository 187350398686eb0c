//! The time evaluator (`runtime.RPCTimeEvaluator`) and the CPU timer and
//! cache-flush globals around it.

use crate::abi::DLDevice;
use crate::device;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::ndarray::NDArray;
use crate::registry::{self, Registrar};
use crate::timer::{measure, Steps};
use crate::value::{code, Args, Value};
use std::sync::atomic::AtomicI64;

pub use crate::timer::TimerConfig;

/// Decodes the settings from arguments 4.. of `runtime.RPCTimeEvaluator`, whose count tells
/// the release of the caller: 8 (v0.8: number, repeat, min_repeat_ms, f_preproc), 10 (v0.9:
/// also cooldown_interval_ms, repeats_to_cooldown), 11 (v0.10..v0.13: also
/// limit_zero_time_iterations before them), 12 (v0.14..v0.19: also cache_flush_bytes).
/// Returns the settings and the index of `f_preproc`.
pub(crate) fn config_from_args(a: &Args<'_>) -> Result<(TimerConfig, usize)> {
    let mut c = TimerConfig {
        number: a.i64(4)?,
        repeat: a.i64(5)?,
        min_repeat_ms: a.i64(6)?,
        limit_zero_time_iterations: i64::MAX,
        cooldown_interval_ms: 0,
        repeats_to_cooldown: 1,
        cache_flush_bytes: 0,
    };
    let preproc = match a.len() {
        8 => 7,
        10 => {
            (c.cooldown_interval_ms, c.repeats_to_cooldown) = (a.i64(7)?, a.i64(8)?);
            9
        }
        11 | 12 => {
            c.limit_zero_time_iterations = a.i64(7)?;
            (c.cooldown_interval_ms, c.repeats_to_cooldown) = (a.i64(8)?, a.i64(9)?);
            if a.len() == 12 {
                c.cache_flush_bytes = a.i64(10)?;
            }
            a.len() - 1
        }
        n => {
            return Err(Error::tvm(format!(
                "Function runtime.RPCTimeEvaluator expects 8 (TVM v0.8), 10 (v0.9), 11 (v0.10-v0.13) or 12 \
                 (v0.14-v0.19) arguments, but {n} were provided."
            )))
        }
    };
    if c.repeats_to_cooldown <= 0 {
        return Err(Error::value(format!("repeats_to_cooldown must be positive, got {}", c.repeats_to_cooldown)));
    }
    if c.cache_flush_bytes < 0 || c.cooldown_interval_ms < 0 {
        return Err(Error::value("cache_flush_bytes and cooldown_interval_ms must not be negative"));
    }
    Ok((c, preproc))
}

/// Synchronises `dev`'s default stream (nothing to do on the CPU).
pub(crate) fn sync_device(dev: DLDevice) -> Result<()> {
    if dev.device_type != device::CPU {
        device::api(dev.device_type)?.stream_sync(dev, std::ptr::null_mut())?;
    }
    Ok(())
}

/// Measures `pf` as TVM's time evaluator does; returns `repeat` f64 seconds-per-call values.
/// `number` is shared by the calls of one evaluator (TVM grows it once and keeps it).
pub fn evaluate(
    pf: &PackedFunc,
    args: &Args<'_>,
    dev: DLDevice,
    number: &AtomicI64,
    cfg: &TimerConfig,
    preproc: Option<&PackedFunc>,
) -> Result<Vec<u8>> {
    let mut ret = Value::Null;
    pf.call_args(args, &mut ret)?;
    // Two scratch arrays on the device, copied into each other to push the data out of caches.
    let flush = if cfg.cache_flush_bytes > 0 {
        let n = cfg.cache_flush_bytes / 4;
        let i32_t = crate::value::dtype::dtype(0, 32, 1);
        Some((NDArray::empty(&[n], i32_t, dev)?, NDArray::empty(&[n], i32_t, dev)?))
    } else {
        None
    };
    device::api(dev.device_type)?.stream_sync(dev, std::ptr::null_mut())?;
    let mut scratch = Value::Null;
    let mut preprocess = || -> Result<()> {
        match preproc {
            Some(p) => p.call_args(args, &mut scratch),
            None => Ok(()),
        }
    };
    let mut flush_caches = || -> Result<()> {
        match &flush {
            Some((a, b)) => crate::ndarray::copy_tensor(b.tensor(), a.tensor(), std::ptr::null_mut()),
            None => Ok(()),
        }
    };
    let steps = Steps {
        sync: &|| sync_device(dev),
        before_repeat: &mut preprocess,
        before_attempt: &mut flush_caches,
        call: &mut || pf.call_args(args, &mut ret),
    };
    measure(cfg, number, steps)
}

fn time_evaluator(a: &Args<'_>) -> Result<Value> {
    let (cfg, preproc_at) = config_from_args(a)?;
    let name = a.string(1)?;
    let dev = DLDevice { device_type: a.i32(2)?, device_id: a.i32(3)? };
    let preproc_name = a.string(preproc_at)?;
    if dev.device_type == 13 || dev.device_type == 35 {
        // kDLMicroDev: 13 in v0.8, 35 from v0.9 on.
        return Err(Error::tvm("micro backend not enabled"));
    }
    let pf = match a.module(0)? {
        // The remote side gets the caller's settings as given (its release is the caller's).
        #[cfg(feature = "rpc")]
        Some(m) if m.type_key() == "rpc" => return crate::rpc::remote_time_evaluator(&m, &name, dev, &a.slice_from(4)),
        // Imports are searched, as from v0.9 on (v0.8 looked at the module itself only).
        Some(m) => m
            .get_function(&name, true)?
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
    let number = AtomicI64::new(cfg.number);
    Ok(Value::func(PackedFunc::from_fn(move |args| {
        let blob = evaluate(&pf, args, dev, &number, &cfg, preproc.as_ref())?;
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
        // SAFETY: the tensor's n bytes of data lie at base for the call.
        unsafe { crate::timer::flush_cache_lines(base, n) };
    }
    Ok(Value::Null)
}

/// Registers the globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.RPCTimeEvaluator", time_evaluator);
    r.func("cache_flush_cpu_non_first_arg", cache_flush);
}
