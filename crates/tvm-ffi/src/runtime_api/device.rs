//! Device globals of TVM v0.27 (`src/runtime/device_api.cc`, `module.cc`, `thread_pool.cc`):
//! `runtime.GetDeviceAttr`, the `runtime.Device_Stream*` family, `runtime.TVMSetStream`,
//! `__tvm_set_device`, the `device_api.<name>` markers, `runtime.RuntimeEnabled`,
//! `runtime.NumThreads`, `runtime.config_threadpool` and
//! `tvm.runtime.threading.set_current_thread_affinity`.
//!
//! Device types are numbered as in DLPack 1.x (TVM v0.27): 13 is `cuda_managed`, 14 `oneapi`,
//! 16 `hexagon`. The back ends are the classic runtime's ([`tvm_runtime_classic::device::get_api`]), used for
//! the types whose name is the same in both numberings.

use super::super::any::Any;
use super::super::registry::{self, Builder};
use super::super::{FfiError, FfiResult};
use super::{check_failed, Sig};
use std::ffi::c_void;
use tvm_runtime_classic::abi::DLDevice;
use tvm_runtime_classic::device::{self, DeviceApi};

/// `DLDeviceType2Str` of TVM v0.27 (None for a type it does not know).
pub use tvm_runtime_classic::device::names::v027_name as device_type_name;

/// `DeviceAPIManager::Get(type, allow_missing)`: the device API of a type, `Ok(None)` when it is
/// not built in and `allow_missing` is set; an unknown type is an error either way.
pub fn get_api(device_type: i32, allow_missing: bool) -> FfiResult<Option<&'static dyn DeviceApi>> {
    let name = device_type_name(device_type)
        .ok_or_else(|| FfiError::new("InternalError", format!("unknown type = {device_type}")))?;
    // The classic table numbers some types differently (v0.8): only a type of the same name
    // there is the same back end.
    let api = match device::device_name(device_type) {
        Ok(n) if n == name => device::get_api(device_type, true)?,
        _ => None,
    };
    match api {
        Some(a) => Ok(Some(a)),
        None if allow_missing => Ok(None),
        None => Err(check_failed(format!("(allow_missing) is false: Device API {name} is not enabled."))),
    }
}

/// The device API of a type, or the manager's error for a missing or unknown one.
pub fn api(device_type: i32) -> FfiResult<&'static dyn DeviceApi> {
    get_api(device_type, false)?
        .ok_or_else(|| FfiError::runtime(format!("Device API of type {device_type} is missing")))
}

fn api_of(dev: DLDevice) -> FfiResult<&'static dyn DeviceApi> {
    api(dev.device_type)
}

/// The host's physical memory in bytes (what TVM's CPU device reports as
/// `kTotalGlobalMemory`), -1 when unknown.
fn total_host_memory() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sysinfo` fills the zeroed struct it is given.
        unsafe {
            let mut info: libc::sysinfo = std::mem::zeroed();
            if libc::sysinfo(&mut info) == 0 {
                return (info.totalram as i64).saturating_mul(info.mem_unit as i64);
            }
        }
        -1
    }
    #[cfg(not(target_os = "linux"))]
    {
        -1
    }
}

/// `runtime.GetDeviceAttr(device_type, device_id, kind)`: `kExist` (0) of a device type that is
/// not built in is 0; other kinds need its API. None means "no answer".
pub(super) fn get_device_attr(device_type: i32, device_id: i32, kind: i32) -> FfiResult<Any> {
    let dev = DLDevice { device_type, device_id };
    let api = if kind == 0 {
        match get_api(device_type, true)? {
            Some(a) => a,
            None => return Ok(Any::int(0)),
        }
    } else {
        api_of(dev)?
    };
    // TVM v0.27's CPU device reports its memory (kTotalGlobalMemory); the classic one does not.
    if device_type == device::CPU && kind == 14 {
        return Ok(Any::int(total_host_memory()));
    }
    Ok(crate::classic_values::attr_to_any(api.get_attr(dev, kind)?))
}

/// `runtime.RuntimeEnabled(target)`.
pub(super) fn runtime_enabled(target: &str) -> FfiResult<bool> {
    let name = match target {
        "cpu" => return Ok(true),
        "cuda" | "gpu" => "device_api.cuda",
        "cl" | "opencl" => "device_api.opencl",
        "mtl" | "metal" => "device_api.metal",
        "tflite" => "target.runtime.tflite",
        "vulkan" => "device_api.vulkan",
        "rpc" => "device_api.rpc",
        "hexagon" => "device_api.hexagon",
        t if t.starts_with("nvptx") => "device_api.cuda",
        t if t.starts_with("rocm") => "device_api.rocm",
        t if t.starts_with("llvm") => {
            let Some(f) = registry::get("codegen.llvm_target_enabled") else { return Ok(false) };
            let r = super::super::function::call_any(&f, &[Any::string(t)])?;
            return r
                .as_bool()
                .ok_or_else(|| FfiError::type_error("codegen.llvm_target_enabled did not return a bool"));
        }
        t => return Err(FfiError::new("InternalError", format!("Unknown optional runtime {t}"))),
    };
    Ok(registry::get(name).is_some())
}

/// A stream handle passed as an integer (`reinterpret_cast<TVMStreamHandle>(int64_t)`).
fn stream_of(v: i64) -> *mut c_void {
    v as usize as *mut c_void
}

/// `DeviceAPI::SetStream` of v0.27: the stream becomes the thread's current one for the device
/// (`TVMFFIEnvSetStream`, which kernels launched through tvm-ffi read), and the back end's.
fn set_stream(dev: DLDevice, stream: *mut c_void) -> FfiResult<()> {
    let api = api_of(dev)?;
    super::super::env::set_stream(dev.device_type, dev.device_id, stream)?;
    Ok(api.set_stream(dev, stream)?)
}

/// `tvm.runtime.threading.set_current_thread_affinity`: pins the calling thread to `cpus`.
pub(crate) fn set_current_thread_affinity(cpus: &[i64]) -> FfiResult<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is an empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
        for &c in cpus {
            let c = usize::try_from(c).ok().filter(|&c| c < max).ok_or_else(|| {
                FfiError::value(format!("set_current_thread_affinity: CPU id {c} is out of range [0, {max})"))
            })?;
            // SAFETY: `c` is below the set's capacity.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        // SAFETY: pid 0 is the calling thread; the set is initialized.
        if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
            return Err(FfiError::runtime(format!(
                "set_current_thread_affinity({cpus:?}) failed: {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpus;
    Ok(())
}

pub(super) fn register(b: &mut Builder) {
    b.add("device_api.cpu", |_| Ok(Any::opaque_ptr(device::CPU as usize as *mut c_void)));

    const ATTR: Sig = Sig { name: "runtime.GetDeviceAttr", params: &["int", "int", "int"], ret: "Any" };
    b.add(ATTR.name, |a| {
        ATTR.check_count(a)?;
        get_device_attr(ATTR.i32(a, 0)?, ATTR.i32(a, 1)?, ATTR.i32(a, 2)?)
    });
    const SET_DEVICE: Sig = Sig { name: "__tvm_set_device", params: &["int", "int"], ret: "void" };
    b.add(SET_DEVICE.name, |a| {
        SET_DEVICE.check_count(a)?;
        let dev = DLDevice { device_type: SET_DEVICE.i32(a, 0)?, device_id: SET_DEVICE.i32(a, 1)? };
        api_of(dev)?.set_device(dev)?;
        Ok(Any::none())
    });
    const CREATE: Sig = Sig { name: "runtime.Device_StreamCreate", params: &["Device"], ret: "int" };
    b.add(CREATE.name, |a| {
        CREATE.check_count(a)?;
        let dev = CREATE.device(a, 0)?;
        Ok(Any::int(api_of(dev)?.create_stream(dev)? as usize as i64))
    });
    const FREE: Sig = Sig { name: "runtime.Device_StreamFree", params: &["Device", "int"], ret: "void" };
    b.add(FREE.name, |a| {
        FREE.check_count(a)?;
        let dev = FREE.device(a, 0)?;
        api_of(dev)?.free_stream(dev, stream_of(FREE.int(a, 1)?))?;
        Ok(Any::none())
    });
    const SET: Sig = Sig { name: "runtime.Device_SetStream", params: &["Device", "int"], ret: "void" };
    b.add(SET.name, |a| {
        SET.check_count(a)?;
        set_stream(SET.device(a, 0)?, stream_of(SET.int(a, 1)?))?;
        Ok(Any::none())
    });
    const SYNC: Sig = Sig { name: "runtime.Device_StreamSync", params: &["Device", "int"], ret: "void" };
    b.add(SYNC.name, |a| {
        SYNC.check_count(a)?;
        let dev = SYNC.device(a, 0)?;
        api_of(dev)?.stream_sync(dev, stream_of(SYNC.int(a, 1)?))?;
        Ok(Any::none())
    });
    const SYNC_FROM_TO: Sig =
        Sig { name: "runtime.Device_StreamSyncFromTo", params: &["Device", "int", "int"], ret: "void" };
    b.add(SYNC_FROM_TO.name, |a| {
        SYNC_FROM_TO.check_count(a)?;
        let dev = SYNC_FROM_TO.device(a, 0)?;
        let (src, dst) = (stream_of(SYNC_FROM_TO.int(a, 1)?), stream_of(SYNC_FROM_TO.int(a, 2)?));
        api_of(dev)?.sync_stream_from_to(dev, src, dst)?;
        Ok(Any::none())
    });
    const TVM_SET_STREAM: Sig = Sig { name: "runtime.TVMSetStream", params: &["int", "int", "void*"], ret: "void" };
    b.add(TVM_SET_STREAM.name, |a| {
        TVM_SET_STREAM.check_count(a)?;
        let dev = DLDevice { device_type: TVM_SET_STREAM.i32(a, 0)?, device_id: TVM_SET_STREAM.i32(a, 1)? };
        set_stream(dev, TVM_SET_STREAM.ptr(a, 2)?)?;
        Ok(Any::none())
    });
    const ENABLED: Sig = Sig { name: "runtime.RuntimeEnabled", params: &["ffi.String"], ret: "bool" };
    b.add(ENABLED.name, |a| {
        ENABLED.check_count(a)?;
        Ok(Any::bool(runtime_enabled(ENABLED.str(a, 0)?)?))
    });
    const NUM_THREADS: Sig = Sig { name: "runtime.NumThreads", params: &[], ret: "int32_t" };
    b.add(NUM_THREADS.name, |a| {
        NUM_THREADS.check_count(a)?;
        Ok(Any::int(tvm_runtime_classic::threading::num_threads() as i64))
    });
    const AFFINITY: Sig =
        Sig { name: "tvm.runtime.threading.set_current_thread_affinity", params: &["ffi.Shape"], ret: "void" };
    b.add(AFFINITY.name, |a| {
        AFFINITY.check_count(a)?;
        set_current_thread_affinity(&AFFINITY.shape(a, 0)?)?;
        Ok(Any::none())
    });
    const CONFIG: Sig = Sig { name: "runtime.config_threadpool", params: &["int", "int"], ret: "void" };
    b.add(CONFIG.name, |a| {
        if a.len() == 3 {
            return Err(FfiError::value(
                "runtime.config_threadpool: an explicit list of CPU cores is not supported by this library (pass the \
                 mode and the thread count only)",
            ));
        }
        CONFIG.check_count(a)?;
        tvm_runtime_classic::threading::config_threadpool(CONFIG.i32(a, 0)?, CONFIG.i32(a, 1)?)?;
        Ok(Any::none())
    });
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn attr(t: i64, id: i64, kind: i64) -> FfiResult<Any> {
        call("runtime.GetDeviceAttr", &[Any::int(t), Any::int(id), Any::int(kind)])
    }

    #[test]
    fn cpu_attributes_are_those_of_tvm_v0_27() {
        assert_eq!(attr(1, 0, 0).unwrap().as_i64(), Some(1));
        assert_eq!(attr(1, 3, 0).unwrap().as_i64(), Some(1));
        for kind in [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 15] {
            assert!(attr(1, 0, kind).unwrap().is_none(), "kind {kind}");
        }
        assert!(attr(1, 0, 14).unwrap().as_i64().unwrap() > 1 << 20);
    }

    #[test]
    fn missing_and_unknown_device_types() {
        // Not built in: does not exist, and anything else is the manager's error.
        for t in [7, 8, 10, 13, 14, 16] {
            assert_eq!(attr(t, 0, 0).unwrap().as_i64(), Some(0), "type {t}");
        }
        let e = attr(7, 0, 1).unwrap_err();
        assert_eq!(
            (e.kind().as_str(), e.message().as_str()),
            ("InternalError", "Check failed: (allow_missing) is false: Device API vulkan is not enabled.")
        );
        let e = attr(16, 0, 1).unwrap_err();
        assert!(e.message().ends_with("Device API hexagon is not enabled."), "{}", e.message());
        for t in [0, 5, 17, 99, -1] {
            let e = attr(t, 0, 0).unwrap_err();
            assert_eq!((e.kind(), e.message()), ("InternalError".to_string(), format!("unknown type = {t}")));
        }
        let e = call("runtime.GetDeviceAttr", &[Any::none(), Any::int(0), Any::int(0)]).unwrap_err();
        assert!(e.message().contains("Expected `int` but got `None`"), "{}", e.message());
        let e = call("__tvm_set_device", &[Any::int(7), Any::int(0)]).unwrap_err();
        assert!(e.message().contains("Device API vulkan is not enabled"), "{}", e.message());
        call("__tvm_set_device", &[Any::int(1), Any::int(0)]).unwrap();
    }

    #[test]
    fn cpu_streams_are_null_and_set_stream_records_it() {
        let s = call("runtime.Device_StreamCreate", &[cpu()]).unwrap();
        assert_eq!(s.as_i64(), Some(0));
        call("runtime.Device_StreamSync", &[cpu(), Any::int(0)]).unwrap();
        call("runtime.Device_StreamSyncFromTo", &[cpu(), Any::int(0), Any::int(0)]).unwrap();
        call("runtime.Device_StreamFree", &[cpu(), Any::int(0)]).unwrap();
        call("runtime.Device_SetStream", &[cpu(), Any::int(0x40)]).unwrap();
        assert_eq!(super::super::super::env::get_stream(1, 0) as usize, 0x40);
        call("runtime.TVMSetStream", &[Any::int(1), Any::int(0), Any::none()]).unwrap();
        assert!(super::super::super::env::get_stream(1, 0).is_null());
        let vulkan = Any::device(DLDevice { device_type: 7, device_id: 0 });
        assert!(call("runtime.Device_StreamSync", &[vulkan, Any::int(0)]).is_err());
        let e = call("runtime.Device_StreamSync", &[Any::int(1), Any::int(0)]).unwrap_err();
        assert!(e.message().contains("Expected `Device` but got `int`"), "{}", e.message());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn thread_affinity_is_set_for_the_calling_thread_only() {
        std::thread::spawn(|| {
            let current = || {
                // SAFETY: a zeroed set is filled by the call for the calling thread.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
                    (0..1024).filter(|&c| libc::CPU_ISSET(c, &set)).map(|c| c as i64).collect::<Vec<_>>()
                }
            };
            let allowed = current();
            let first = allowed[0];
            let f = "tvm.runtime.threading.set_current_thread_affinity";
            call(f, &[shape(&[first])]).unwrap();
            assert_eq!(current(), vec![first]);
            call(f, &[shape(&allowed)]).unwrap();
            assert_eq!(current(), allowed);
            let e = call(f, &[shape(&[-1])]).unwrap_err();
            assert!(e.message().contains("CPU id -1 is out of range"), "{}", e.message());
            assert!(call(f, &[shape(&[])]).is_err(), "an empty set is refused by the kernel");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn runtime_enabled_threads_and_markers() {
        let enabled = |t: &str| call("runtime.RuntimeEnabled", &[Any::string(t)]);
        assert_eq!(enabled("cpu").unwrap().as_bool(), Some(true));
        assert_eq!(enabled("vulkan").unwrap().as_bool(), Some(false));
        assert_eq!(enabled("llvm -mcpu=x").unwrap().as_bool(), Some(false));
        // The GPU back ends' markers are the face's to install: none here.
        assert_eq!(enabled("cuda").unwrap().as_bool(), Some(false));
        let e = enabled("foo").unwrap_err();
        assert_eq!((e.kind(), e.message()), ("InternalError".into(), "Unknown optional runtime foo".into()));
        assert!(call("runtime.NumThreads", &[]).unwrap().as_i64().unwrap() >= 1);
        assert!(call("device_api.cpu", &[]).unwrap().type_index() == super::super::super::ti::OPAQUE_PTR);
        assert!(call("runtime.config_threadpool", &[Any::int(0), Any::int(0), Any::none()]).is_err());
        assert!(call("runtime.config_threadpool", &[Any::int(0), Any::none()]).is_err());
    }
}
