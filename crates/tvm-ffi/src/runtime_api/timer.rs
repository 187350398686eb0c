//! `runtime.RPCTimeEvaluator` for local modules and global functions (TVM v0.27's
//! `rpc_module.cc` and `WrapTimeEvaluator` of `timer.cc`), and `cache_flush_cpu_non_first_arg`.
//!
//! The evaluator calls the function once (warm-up), then `repeat` times measures `number` calls
//! (`number` grows by the golden ratio, or to what `min_repeat_ms` needs, until a measurement
//! lasts `min_repeat_ms` or `limit_zero_time_iterations` measurements took no time; the grown
//! `number` is kept by later calls of the evaluator). It returns `ffi.Bytes` holding one
//! native-endian `f64` per repeat: the seconds per call, which `Module.time_evaluator` unpacks
//! with `struct.unpack("@" + "d" * repeat, blob)`.

use super::super::any::{Any, TVMFFIAny};
use super::super::function;
use super::super::object::ObjectRef;
use super::super::registry::{self, Builder};
use super::super::{ti, FfiError, FfiResult};
use super::{api, check_failed, Sig};
use std::sync::atomic::AtomicI64;
use tvm_runtime_classic::abi::{DLDataType, DLDevice};
use tvm_runtime_classic::device;
use tvm_runtime_classic::timer::{measure, Steps, TimerConfig};

fn sync(dev: DLDevice) -> FfiResult<()> {
    let api = api(dev.device_type)?;
    Ok(api.stream_sync(dev, std::ptr::null_mut())?)
}

/// Runs one evaluation of `pf` over `args` (the loop is the core's, [`tvm_runtime_classic::timer::measure`]):
/// the bytes of `repeat` f64 seconds-per-call values.
pub(super) fn evaluate(
    pf: &ObjectRef,
    args: &[TVMFFIAny],
    dev: DLDevice,
    cfg: &TimerConfig,
    number: &AtomicI64,
    preproc: Option<&ObjectRef>,
) -> FfiResult<Vec<u8>> {
    function::call(pf, args)?;
    let flush = if cfg.cache_flush_bytes > 0 {
        let i32_t = DLDataType { code: 0, bits: 32, lanes: 1 };
        let n = cfg.cache_flush_bytes / 4;
        Some((super::alloc_with_scope(&[n], i32_t, dev, None)?, super::alloc_with_scope(&[n], i32_t, dev, None)?))
    } else {
        None
    };
    sync(dev)?;
    let steps = Steps {
        // The CPU timer only reads the clock; other devices' timers sync around the calls.
        sync: &|| if dev.device_type == device::CPU { Ok(()) } else { sync(dev) },
        before_repeat: &mut || match preproc {
            Some(p) => function::call(p, args).map(drop),
            None => Ok(()),
        },
        before_attempt: &mut || match &flush {
            // SAFETY: both are live tensors of this evaluation.
            Some((a, b)) => unsafe {
                super::copy_from_to(
                    super::super::tensor::dltensor(b.as_ptr()),
                    super::super::tensor::dltensor(a.as_ptr()),
                )
            },
            None => Ok(()),
        },
        call: &mut || function::call(pf, args).map(drop),
    };
    measure(cfg, number, steps)
}

/// `WrapTimeEvaluator`: the evaluator function of `pf`.
pub(super) fn wrap(pf: ObjectRef, dev: DLDevice, cfg: TimerConfig, preproc: Option<ObjectRef>) -> ObjectRef {
    let number = AtomicI64::new(cfg.number);
    function::from_fn(move |args| {
        let blob = evaluate(&pf, args, dev, &cfg, &number, preproc.as_ref())?;
        Ok(Any::bytes(&blob))
    })
}

const EVAL: Sig = Sig {
    name: "runtime.RPCTimeEvaluator",
    params: &[
        "Optional<ffi.Module>",
        "std::string",
        "int",
        "int",
        "int",
        "int",
        "int",
        "int",
        "int",
        "int",
        "int",
        "std::string",
    ],
    ret: "ffi.Function",
};

fn time_evaluator(a: &[TVMFFIAny]) -> FfiResult<Any> {
    EVAL.check_count(a)?;
    let module = EVAL.opt_object(a, 0, ti::MODULE)?;
    let name = EVAL.str(a, 1)?;
    let dev = DLDevice { device_type: EVAL.i32(a, 2)?, device_id: EVAL.i32(a, 3)? };
    let s = TimerConfig {
        number: EVAL.i32(a, 4)? as i64,
        repeat: EVAL.i32(a, 5)? as i64,
        min_repeat_ms: EVAL.i32(a, 6)? as i64,
        limit_zero_time_iterations: EVAL.i32(a, 7)? as i64,
        cooldown_interval_ms: EVAL.i32(a, 8)? as i64,
        repeats_to_cooldown: EVAL.i32(a, 9)? as i64,
        cache_flush_bytes: EVAL.i32(a, 10)? as i64,
    };
    let preproc_name = EVAL.str(a, 11)?;
    if s.number <= 0 {
        return Err(FfiError::value(format!("runtime.RPCTimeEvaluator: number must be positive, got {}", s.number)));
    }
    if s.repeat < 0 || s.cache_flush_bytes < 0 || s.cooldown_interval_ms < 0 {
        return Err(FfiError::value(
            "runtime.RPCTimeEvaluator: repeat, cooldown_interval_ms and cache_flush_bytes must not be negative",
        ));
    }
    if s.cooldown_interval_ms > 0 && s.repeats_to_cooldown <= 0 {
        return Err(FfiError::value(format!(
            "runtime.RPCTimeEvaluator: repeats_to_cooldown must be positive, got {}",
            s.repeats_to_cooldown
        )));
    }
    let preproc = if preproc_name.is_empty() {
        None
    } else {
        Some(registry::get(preproc_name).ok_or_else(|| {
            check_failed(format!(
                "(pf_preproc.has_value()) is false: Cannot find {preproc_name} in the global function"
            ))
        })?)
    };
    let pf = match module {
        Some(m) => super::super::module::get_function(&m, name, true)?.ok_or_else(|| {
            check_failed(format!("(pf.has_value()) is false: Cannot find {name}` in the global registry"))
        })?,
        None => registry::get(name).ok_or_else(|| {
            check_failed(format!("(pf.has_value()) is false: Cannot find {name} in the global function"))
        })?,
    };
    Ok(Any::object(wrap(pf, dev, s, preproc)))
}

/// Flushes the cache lines of every tensor argument after the first (x86-64 `clflush`; host
/// memory only).
fn cache_flush(a: &[TVMFFIAny]) -> FfiResult<Any> {
    const FLUSH: Sig = Sig { name: "cache_flush_cpu_non_first_arg", params: &[], ret: "void" };
    for i in 1..a.len() {
        let t = FLUSH.dltensor(a, i).map_err(|_| {
            FfiError::type_error(format!(
                "cache_flush_cpu_non_first_arg: argument #{i} must be a tensor, got `{}`",
                super::super::types::type_key(a[i].type_index)
            ))
        })?;
        if !matches!(t.device.device_type, device::CPU | device::CUDA_HOST) || t.data.is_null() {
            continue;
        }
        let n = super::data_size(t)?;
        let base = t.data.cast::<u8>().wrapping_add(t.byte_offset as usize);
        // SAFETY: the tensor's n bytes of host data lie at base for the call.
        unsafe { tvm_runtime_classic::timer::flush_cache_lines(base, n) };
    }
    Ok(Any::none())
}

pub(super) fn register(b: &mut Builder) {
    b.add(EVAL.name, time_evaluator);
    b.add("cache_flush_cpu_non_first_arg", cache_flush);
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn args(m: Any, name: &str, dev_type: i64, number: i64, repeat: i64, min_ms: i64, preproc: &str) -> Vec<Any> {
        let mut v = vec![m, Any::string(name), Any::int(dev_type), Any::int(0), Any::int(number), Any::int(repeat)];
        v.extend([min_ms, 100, 0, 1, 0].map(Any::int));
        v.push(Any::string(preproc));
        v
    }

    fn counter(name: &str) -> Arc<AtomicUsize> {
        let n = Arc::new(AtomicUsize::new(0));
        let c = n.clone();
        let f = function::from_fn(move |a| {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(Any::int(a.len() as i64))
        });
        registry::set(name, f, true, None).unwrap();
        n
    }

    fn floats(blob: &Any) -> Vec<f64> {
        let b = blob.as_str_bytes().expect("bytes");
        assert!(blob.type_index() == ti::BYTES || blob.type_index() == ti::SMALL_BYTES);
        b.chunks(8).map(|c| f64::from_ne_bytes(c.try_into().unwrap())).collect()
    }

    #[test]
    fn global_function_is_called_once_plus_number_times_repeat() {
        let n = counter("rtapi_test.count");
        let pre = counter("rtapi_test.pre");
        let fe = call("runtime.RPCTimeEvaluator", &args(Any::none(), "rtapi_test.count", 1, 3, 4, 0, "rtapi_test.pre"))
            .unwrap();
        assert_eq!(fe.type_index(), ti::FUNCTION);
        let f = fe.as_object().unwrap();
        let r = function::call_any(&f, &[Any::int(1), Any::int(2)]).unwrap();
        let times = floats(&r);
        assert_eq!(times.len(), 4);
        assert!(times.iter().all(|t| t.is_finite() && *t >= 0.0), "{times:?}");
        assert_eq!(n.load(Ordering::SeqCst), 1 + 3 * 4);
        assert_eq!(pre.load(Ordering::SeqCst), 4);
        // repeat 0: only the warm-up call, no bytes.
        let fe = call("runtime.RPCTimeEvaluator", &args(Any::none(), "rtapi_test.count", 1, 3, 0, 0, "")).unwrap();
        let r = function::call_any(&fe.as_object().unwrap(), &[]).unwrap();
        assert!(floats(&r).is_empty());
    }

    #[test]
    fn min_repeat_ms_grows_number_and_keeps_it() {
        let n = counter("rtapi_test.grow");
        let f = call("runtime.RPCTimeEvaluator", &args(Any::none(), "rtapi_test.grow", 1, 1, 2, 5, ""))
            .unwrap()
            .as_object()
            .unwrap();
        let times = floats(&function::call_any(&f, &[]).unwrap());
        assert_eq!(times.len(), 2);
        let first = n.swap(0, Ordering::SeqCst);
        assert!(first > 10, "number should have grown, {first} calls");
        function::call_any(&f, &[]).unwrap();
        // The grown number is kept: each measurement of the second run is at least as long.
        assert!(n.load(Ordering::SeqCst) >= 2, "{}", n.load(Ordering::SeqCst));
    }

    #[test]
    fn errors_are_clear() {
        counter("rtapi_test.e");
        let e = call("runtime.RPCTimeEvaluator", &args(Any::none(), "rtapi_test.none", 1, 1, 1, 0, "")).unwrap_err();
        assert_eq!(e.kind(), "InternalError");
        assert_eq!(
            e.message(),
            "Check failed: (pf.has_value()) is false: Cannot find rtapi_test.none in the global function"
        );
        let e = call("runtime.RPCTimeEvaluator", &args(Any::none(), "rtapi_test.e", 1, 1, 1, 0, "nope")).unwrap_err();
        assert!(e.message().ends_with("Cannot find nope in the global function"), "{}", e.message());
        let e = call("runtime.RPCTimeEvaluator", &args(Any::none(), "rtapi_test.e", 1, 0, 1, 0, "")).unwrap_err();
        assert!(e.message().contains("number must be positive"), "{}", e.message());
        let mut short = args(Any::none(), "rtapi_test.e", 1, 1, 1, 0, "");
        short.pop();
        let e = call("runtime.RPCTimeEvaluator", &short).unwrap_err();
        assert!(e.message().contains("Expected 12 but got 11 arguments"), "{}", e.message());
        let e = call("runtime.RPCTimeEvaluator", &args(Any::int(3), "rtapi_test.e", 1, 1, 1, 0, "")).unwrap_err();
        assert!(e.message().contains("Expected `Optional<ffi.Module>` but got `int`"), "{}", e.message());
        // The device is checked when the evaluator runs, as TVM does.
        let f = call("runtime.RPCTimeEvaluator", &args(Any::none(), "rtapi_test.e", 7, 1, 1, 0, ""))
            .unwrap()
            .as_object()
            .unwrap();
        let e = function::call_any(&f, &[]).unwrap_err();
        assert!(e.message().contains("Device API vulkan is not enabled"), "{}", e.message());
        // An error of the measured function comes through unchanged.
        registry::set("rtapi_test.raise", function::from_fn(|_| Err(FfiError::key("boom"))), true, None).unwrap();
        let f = call("runtime.RPCTimeEvaluator", &args(Any::none(), "rtapi_test.raise", 1, 1, 1, 0, ""))
            .unwrap()
            .as_object()
            .unwrap();
        let e = function::call_any(&f, &[]).unwrap_err();
        assert_eq!((e.kind(), e.message()), ("KeyError".into(), "boom".into()));
    }

    #[test]
    fn module_functions_and_cache_flush() {
        unsafe extern "C" fn nop(_h: *mut std::ffi::c_void, _a: *const TVMFFIAny, _n: i32, _r: *mut TVMFFIAny) -> i32 {
            0
        }
        tvm_runtime_core::library::symbols::register_symbol("__tvm_ffi_rtapi_nop", nop as *mut std::ffi::c_void);
        let m = Any::object(super::super::super::module::system_lib("").unwrap());
        let mut a = args(m.clone(), "rtapi_nop", 1, 2, 3, 0, "cache_flush_cpu_non_first_arg");
        a[10] = Any::int(4096);
        let f = call("runtime.RPCTimeEvaluator", &a).unwrap().as_object().unwrap();
        let t = tensor_of(&[16], "float32", &[0; 64]);
        assert_eq!(floats(&function::call_any(&f, &[t.clone(), t.clone()]).unwrap()).len(), 3);
        let e = call("runtime.RPCTimeEvaluator", &args(m, "rtapi_none", 1, 1, 1, 0, "")).unwrap_err();
        assert_eq!(
            e.message(),
            "Check failed: (pf.has_value()) is false: Cannot find rtapi_none` in the global registry"
        );
        call("cache_flush_cpu_non_first_arg", &[Any::int(0), t.clone(), t]).unwrap();
        let e = call("cache_flush_cpu_non_first_arg", &[Any::int(0), Any::int(1)]).unwrap_err();
        assert!(e.message().contains("argument #1 must be a tensor"), "{}", e.message());
    }
}
