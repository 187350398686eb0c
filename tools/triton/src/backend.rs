//! The backend API's entry points (`TRITONBACKEND_*`, tritonbackend.h r24.10): the only
//! `extern "C"` code of the crate. Each one catches panics and errors and hands them to Triton
//! as a `TRITONSERVER_Error`; `ModelInstanceExecute` answers every request (with its outputs or
//! its own error) and releases it, whatever happens to the others.

use crate::batch::{self, InputTensor, Outcome};
use crate::config::{self, ModelConfig};
use crate::ffi::{self, TRITONBACKEND_Backend as Backend, TRITONBACKEND_Model as TModel};
use crate::ffi::{TRITONBACKEND_ModelInstance as Instance, TRITONBACKEND_Request as Request, TRITONSERVER_Error};
use crate::model::{Executor, Model};
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// An error on its way to Triton.
struct Fail {
    code: ffi::ErrorCode,
    msg: String,
}

type Res<T> = Result<T, Fail>;

fn fail(code: ffi::ErrorCode, msg: impl Into<String>) -> Fail {
    Fail { code, msg: msg.into() }
}

fn invalid(msg: impl Into<String>) -> Fail {
    fail(ffi::ERROR_INVALID_ARG, msg)
}

/// A new Triton error (owned by the caller).
fn new_error(code: ffi::ErrorCode, msg: &str) -> *mut TRITONSERVER_Error {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // SAFETY: `c` is a valid NUL-terminated string; Triton copies it.
    unsafe { ffi::TRITONSERVER_ErrorNew(code, c.as_ptr()) }
}

/// A Triton error returned by a call as our own (deleting Triton's).
fn check(err: *mut TRITONSERVER_Error, what: &str) -> Res<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: `err` is a live error Triton gave us; we own it and delete it once read.
    let msg = unsafe { cstr(ffi::TRITONSERVER_ErrorMessage(err)) };
    // SAFETY: as above; not used afterwards.
    unsafe { ffi::TRITONSERVER_ErrorDelete(err) };
    Err(fail(ffi::ERROR_INTERNAL, format!("{what}: {msg}")))
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: per the contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Writes a line to the server's log.
fn log(level: ffi::LogLevel, msg: &str) {
    let c = CString::new(format!("tvm backend: {}", msg.replace('\0', " "))).unwrap_or_default();
    let file = c"triton_tvm";
    // SAFETY: both strings are valid for the call; the returned error (if any) is ours to free.
    let err = unsafe { ffi::TRITONSERVER_LogMessage(level, file.as_ptr(), 0, c.as_ptr()) };
    if !err.is_null() {
        // SAFETY: we own it.
        unsafe { ffi::TRITONSERVER_ErrorDelete(err) };
    }
}

/// Runs `f`, turning its error or panic into a Triton error.
fn guard(what: &str, f: impl FnOnce() -> Res<()>) -> *mut TRITONSERVER_Error {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => {
            log(ffi::LOG_ERROR, &format!("{what}: {}", e.msg));
            new_error(e.code, &e.msg)
        }
        Err(p) => {
            let msg = format!("{what}: internal error (panic: {})", panic_text(&p));
            log(ffi::LOG_ERROR, &msg);
            new_error(ffi::ERROR_INTERNAL, &msg)
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// A message's JSON; `owned`: the message is ours to delete (a model config is, the backend
/// config is not).
fn message_json(msg: *mut ffi::TRITONSERVER_Message, owned: bool) -> Res<serde_json::Value> {
    let mut base: *const c_char = std::ptr::null();
    let mut len = 0usize;
    // SAFETY: `msg` is a live message; the out-params are valid.
    let r = check(unsafe { ffi::TRITONSERVER_MessageSerializeToJson(msg, &mut base, &mut len) }, "reading a message");
    let parsed = r.and_then(|()| {
        let bytes = if base.is_null() {
            &[][..]
        } else {
            // SAFETY: Triton returned `len` bytes at `base`, valid while `msg` lives.
            unsafe { std::slice::from_raw_parts(base.cast::<u8>(), len) }
        };
        serde_json::from_slice(bytes).map_err(|e| fail(ffi::ERROR_INTERNAL, format!("message JSON: {e}")))
    });
    if owned {
        // SAFETY: we own `msg` and are done with it.
        let _ = check(unsafe { ffi::TRITONSERVER_MessageDelete(msg) }, "deleting a message");
    }
    parsed
}

/// What `--backend-config=tvm,KEY=VALUE` set.
struct BackendState {
    threads: Option<usize>,
}

/// A model: its export, loaded once, and its configuration.
struct ModelState {
    model: Arc<Model>,
    cfg: Arc<ModelConfig>,
    threads: usize,
    /// Where KIND_CPU instances run (`parameters { key: "device" ... }`, default the CPU).
    device: tvm_rt::Device,
}

/// An instance: its own executor over the model's module.
struct InstanceState {
    model: Arc<Model>,
    cfg: Arc<ModelConfig>,
    exec: Mutex<Executor>,
    threads: usize,
}

#[no_mangle]
/// Checks the API version and reads the backend configuration.
pub extern "C" fn TRITONBACKEND_Initialize(backend: *mut Backend) -> *mut TRITONSERVER_Error {
    guard("TRITONBACKEND_Initialize", || {
        let (mut major, mut minor) = (0u32, 0u32);
        // SAFETY: valid out-params.
        check(unsafe { ffi::TRITONBACKEND_ApiVersion(&mut major, &mut minor) }, "TRITONBACKEND_ApiVersion")?;
        if major != ffi::BACKEND_API_MAJOR || minor < ffi::BACKEND_API_MINOR {
            return Err(fail(
                ffi::ERROR_UNSUPPORTED,
                format!(
                    "the server's backend API is {major}.{minor}; this backend needs {}.{} or a later minor",
                    ffi::BACKEND_API_MAJOR,
                    ffi::BACKEND_API_MINOR
                ),
            ));
        }
        let mut msg = std::ptr::null_mut();
        // SAFETY: `backend` is the live backend Triton passed; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_BackendConfig(backend, &mut msg) }, "TRITONBACKEND_BackendConfig")?;
        let cfg = message_json(msg, false)?;
        let threads =
            match cfg.pointer("/cmdline/threads").and_then(|v| v.as_str()) {
                Some(v) => Some(v.trim().parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
                    invalid(format!("--backend-config=tvm,threads={v}: expected a positive integer"))
                })?),
                None => None,
            };
        let state = Box::into_raw(Box::new(BackendState { threads }));
        // SAFETY: live backend; the state is ours until TRITONBACKEND_Finalize.
        if let Err(e) = check(unsafe { ffi::TRITONBACKEND_BackendSetState(backend, state.cast()) }, "BackendSetState") {
            // SAFETY: not handed over; ours to free.
            drop(unsafe { Box::from_raw(state) });
            return Err(e);
        }
        log(ffi::LOG_INFO, &format!("initialized (API {major}.{minor}, runtime {})", env!("CARGO_PKG_VERSION")));
        Ok(())
    })
}

#[no_mangle]
/// Frees the backend state.
pub extern "C" fn TRITONBACKEND_Finalize(backend: *mut Backend) -> *mut TRITONSERVER_Error {
    guard("TRITONBACKEND_Finalize", || {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: live backend; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_BackendState(backend, &mut p) }, "BackendState")?;
        if !p.is_null() {
            // SAFETY: set by TRITONBACKEND_Initialize from a Box, freed only here.
            drop(unsafe { Box::from_raw(p.cast::<BackendState>()) });
        }
        Ok(())
    })
}

fn model_name(model: *mut TModel) -> Res<String> {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: live model; valid out-param.
    check(unsafe { ffi::TRITONBACKEND_ModelName(model, &mut p) }, "ModelName")?;
    // SAFETY: Triton's string, valid while the model lives.
    Ok(unsafe { cstr(p) })
}

fn model_config(model: *mut TModel) -> Res<serde_json::Value> {
    let mut msg = std::ptr::null_mut();
    // SAFETY: live model; config version 1 is the only one; valid out-param.
    check(unsafe { ffi::TRITONBACKEND_ModelConfig(model, 1, &mut msg) }, "ModelConfig")?;
    message_json(msg, true)
}

fn backend_threads(model: *mut TModel) -> Res<Option<usize>> {
    let mut backend = std::ptr::null_mut();
    // SAFETY: live model; valid out-param.
    check(unsafe { ffi::TRITONBACKEND_ModelBackend(model, &mut backend) }, "ModelBackend")?;
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: live backend; valid out-param.
    check(unsafe { ffi::TRITONBACKEND_BackendState(backend, &mut p) }, "BackendState")?;
    // SAFETY: our BackendState (set in TRITONBACKEND_Initialize), alive until the backend goes.
    Ok(unsafe { p.cast::<BackendState>().as_ref() }.and_then(|b| b.threads))
}

/// Loads the model, completes its configuration when Triton lets us, checks it.
fn model_initialize(model: *mut TModel) -> Res<()> {
    let name = model_name(model)?;
    let mut version = 0u64;
    // SAFETY: live model; valid out-param.
    check(unsafe { ffi::TRITONBACKEND_ModelVersion(model, &mut version) }, "ModelVersion")?;
    let (mut kind, mut loc): (ffi::ArtifactType, *const c_char) = (0, std::ptr::null());
    // SAFETY: live model; valid out-params.
    check(unsafe { ffi::TRITONBACKEND_ModelRepository(model, &mut kind, &mut loc) }, "ModelRepository")?;
    if kind != ffi::ARTIFACT_FILESYSTEM {
        return Err(fail(ffi::ERROR_UNSUPPORTED, "the model repository is not on a file system"));
    }
    // SAFETY: Triton's string, valid while the model lives.
    let dir = PathBuf::from(unsafe { cstr(loc) });
    let mut json = model_config(model)?;
    let pre = ModelConfig::parse(&json).map_err(|e| invalid(format!("model {name}: {e}")))?;
    let function = pre.parameters.get("function").cloned().unwrap_or_else(|| "main".to_owned());
    let path = dir.join(version.to_string()).join(&pre.model_filename);
    let loaded = Model::load(&path, &function).map_err(|e| invalid(format!("model {name}: {e}")))?;
    let mut auto = false;
    // SAFETY: live model; valid out-param.
    check(unsafe { ffi::TRITONBACKEND_ModelAutoCompleteConfig(model, &mut auto) }, "ModelAutoCompleteConfig")?;
    if auto {
        if let Some(done) =
            config::auto_complete(&json, loaded.io()).map_err(|e| invalid(format!("model {name}: {e}")))?
        {
            let text = done.to_string();
            let mut msg = std::ptr::null_mut();
            // SAFETY: `text` is valid for the call (Triton copies it); valid out-param.
            let err =
                unsafe { ffi::TRITONSERVER_MessageNewFromSerializedJson(&mut msg, text.as_ptr().cast(), text.len()) };
            check(err, "MessageNewFromSerializedJson")?;
            // SAFETY: live model and message; Triton does not take the message.
            let r = check(unsafe { ffi::TRITONBACKEND_ModelSetConfig(model, 1, msg) }, "ModelSetConfig");
            // SAFETY: ours, done with it.
            let _ = check(unsafe { ffi::TRITONSERVER_MessageDelete(msg) }, "MessageDelete");
            r?;
            json = model_config(model)?;
            log(ffi::LOG_INFO, &format!("model {name}: inputs and outputs completed from the export"));
        }
    }
    let cfg = ModelConfig::parse(&json).map_err(|e| invalid(format!("model {name}: {e}")))?;
    cfg.check(loaded.io()).map_err(|e| invalid(format!("model {name} ({}): {e}", path.display())))?;
    let param = cfg.count_parameter("threads").map_err(|e| invalid(format!("model {name}: {e}")))?;
    let cores = tvm_runtime::threading::max_concurrency();
    let threads = config::threads_per_instance(param, backend_threads(model)?, cores, cfg.instance_count);
    log(
        ffi::LOG_INFO,
        &format!(
            "model {name} version {version}: {} ({}), {} input(s), max_batch_size {}, {} instance(s) x {threads} thread(s)",
            loaded.kind().description(),
            path.display(),
            cfg.inputs.len(),
            cfg.max_batch_size,
            cfg.instance_count
        ),
    );
    let device = cfg.device_parameter().map_err(|e| invalid(format!("model {name}: {e}")))?;
    let state = Box::into_raw(Box::new(ModelState { model: Arc::new(loaded), cfg: Arc::new(cfg), threads, device }));
    // SAFETY: live model; the state is ours until TRITONBACKEND_ModelFinalize.
    if let Err(e) = check(unsafe { ffi::TRITONBACKEND_ModelSetState(model, state.cast()) }, "ModelSetState") {
        // SAFETY: not handed over.
        drop(unsafe { Box::from_raw(state) });
        return Err(e);
    }
    Ok(())
}

#[no_mangle]
/// Loads a model's export and checks its configuration.
pub extern "C" fn TRITONBACKEND_ModelInitialize(model: *mut TModel) -> *mut TRITONSERVER_Error {
    guard("TRITONBACKEND_ModelInitialize", || model_initialize(model))
}

#[no_mangle]
/// Frees a model's state (the export is unloaded once its last instance is gone too).
pub extern "C" fn TRITONBACKEND_ModelFinalize(model: *mut TModel) -> *mut TRITONSERVER_Error {
    guard("TRITONBACKEND_ModelFinalize", || {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: live model; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_ModelState(model, &mut p) }, "ModelState")?;
        if !p.is_null() {
            // SAFETY: set by TRITONBACKEND_ModelInitialize from a Box, freed only here.
            drop(unsafe { Box::from_raw(p.cast::<ModelState>()) });
        }
        Ok(())
    })
}

#[no_mangle]
/// Makes an instance's executor.
pub extern "C" fn TRITONBACKEND_ModelInstanceInitialize(instance: *mut Instance) -> *mut TRITONSERVER_Error {
    guard("TRITONBACKEND_ModelInstanceInitialize", || {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: live instance; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_ModelInstanceName(instance, &mut p) }, "ModelInstanceName")?;
        // SAFETY: Triton's string, valid while the instance lives.
        let name = unsafe { cstr(p) };
        let mut kind = 0;
        // SAFETY: live instance; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_ModelInstanceKind(instance, &mut kind) }, "ModelInstanceKind")?;
        let mut device_id = 0i32;
        // SAFETY: live instance; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_ModelInstanceDeviceId(instance, &mut device_id) }, "ModelInstanceDeviceId")?;
        let mut model = std::ptr::null_mut();
        // SAFETY: live instance; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_ModelInstanceModel(instance, &mut model) }, "ModelInstanceModel")?;
        let mut mp: *mut c_void = std::ptr::null_mut();
        // SAFETY: live model; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_ModelState(model, &mut mp) }, "ModelState")?;
        // SAFETY: our ModelState, alive until ModelFinalize, which follows every instance's.
        let ms =
            unsafe { mp.cast::<ModelState>().as_ref() }.ok_or_else(|| fail(ffi::ERROR_INTERNAL, "no model state"))?;
        let dev = match kind {
            // Triton makes KIND_GPU instances only where it sees CUDA GPUs.
            ffi::KIND_GPU => tvm_rt::Device::cuda(device_id),
            ffi::KIND_CPU | ffi::KIND_AUTO => ms.device,
            _ => {
                return Err(fail(
                    ffi::ERROR_UNSUPPORTED,
                    format!("instance {name}: KIND_MODEL instances are not supported; use KIND_CPU or KIND_GPU"),
                ))
            }
        };
        dev.check_present().map_err(|e| fail(ffi::ERROR_UNAVAILABLE, format!("instance {name} on {dev}: {e}")))?;
        let exec =
            ms.model.executor(dev).map_err(|e| fail(ffi::ERROR_INTERNAL, format!("instance {name} on {dev}: {e}")))?;
        let state = Box::into_raw(Box::new(InstanceState {
            model: ms.model.clone(),
            cfg: ms.cfg.clone(),
            exec: Mutex::new(exec),
            threads: ms.threads,
        }));
        log(ffi::LOG_INFO, &format!("instance {name}: executor ready on {dev}"));
        // SAFETY: live instance; the state is ours until ModelInstanceFinalize.
        if let Err(e) = check(unsafe { ffi::TRITONBACKEND_ModelInstanceSetState(instance, state.cast()) }, "SetState") {
            // SAFETY: not handed over.
            drop(unsafe { Box::from_raw(state) });
            return Err(e);
        }
        Ok(())
    })
}

#[no_mangle]
/// Frees an instance's executor.
pub extern "C" fn TRITONBACKEND_ModelInstanceFinalize(instance: *mut Instance) -> *mut TRITONSERVER_Error {
    guard("TRITONBACKEND_ModelInstanceFinalize", || {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: live instance; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_ModelInstanceState(instance, &mut p) }, "ModelInstanceState")?;
        if !p.is_null() {
            // SAFETY: set by ModelInstanceInitialize from a Box, freed only here.
            drop(unsafe { Box::from_raw(p.cast::<InstanceState>()) });
        }
        Ok(())
    })
}

/// Nanoseconds on the clock Triton's statistics use (`steady_clock`, CLOCK_MONOTONIC).
fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-param.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// A request's inputs, gathered into host memory.
fn read_inputs(req: *mut Request) -> Res<Vec<InputTensor>> {
    let mut n = 0u32;
    // SAFETY: live request; valid out-param.
    check(unsafe { ffi::TRITONBACKEND_RequestInputCount(req, &mut n) }, "RequestInputCount")?;
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut input = std::ptr::null_mut();
        // SAFETY: live request, index in range; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_RequestInputByIndex(req, i, &mut input) }, "RequestInputByIndex")?;
        let (mut name, mut dtype, mut shape, mut dims) = (std::ptr::null(), 0u32, std::ptr::null(), 0u32);
        let (mut bytes, mut buffers) = (0u64, 0u32);
        // SAFETY: live input; valid out-params.
        let err = unsafe {
            ffi::TRITONBACKEND_InputProperties(
                input,
                &mut name,
                &mut dtype,
                &mut shape,
                &mut dims,
                &mut bytes,
                &mut buffers,
            )
        };
        check(err, "InputProperties")?;
        // SAFETY: Triton's string, valid while the request lives.
        let name = unsafe { cstr(name) };
        let shape = if shape.is_null() || dims == 0 {
            Vec::new()
        } else {
            // SAFETY: Triton's array of `dims` values, valid while the request lives.
            unsafe { std::slice::from_raw_parts(shape, dims as usize) }.to_vec()
        };
        let mut data = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0).min(1 << 31));
        for b in 0..buffers {
            let (mut ptr, mut len, mut mem, mut mem_id) = (std::ptr::null(), 0u64, ffi::MEMORY_CPU, 0i64);
            // SAFETY: live input, index in range; valid out-params (the memory type asks for CPU).
            let err = unsafe { ffi::TRITONBACKEND_InputBuffer(input, b, &mut ptr, &mut len, &mut mem, &mut mem_id) };
            check(err, "InputBuffer")?;
            if mem != ffi::MEMORY_CPU && mem != ffi::MEMORY_CPU_PINNED {
                return Err(invalid(format!(
                    "input {name:?}: buffer {b} is in GPU memory; this backend reads CPU memory"
                )));
            }
            if len > 0 && !ptr.is_null() {
                // SAFETY: Triton's buffer of `len` bytes in CPU memory, valid while the request lives.
                data.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len as usize) });
            }
        }
        out.push(InputTensor { name, dtype, shape, data });
    }
    Ok(out)
}

/// The output names a request asks for.
fn requested_outputs(req: *mut Request) -> Res<Vec<String>> {
    let mut n = 0u32;
    // SAFETY: live request; valid out-param.
    check(unsafe { ffi::TRITONBACKEND_RequestOutputCount(req, &mut n) }, "RequestOutputCount")?;
    (0..n)
        .map(|i| {
            let mut p = std::ptr::null();
            // SAFETY: live request, index in range; valid out-param.
            check(unsafe { ffi::TRITONBACKEND_RequestOutputName(req, i, &mut p) }, "RequestOutputName")?;
            // SAFETY: Triton's string, valid while the request lives.
            Ok(unsafe { cstr(p) })
        })
        .collect()
}

/// Fills a response with the requested outputs.
fn fill_response(resp: *mut ffi::TRITONBACKEND_Response, req: *mut Request, outcome: Outcome) -> Res<()> {
    let outs = outcome.map_err(invalid)?;
    for name in requested_outputs(req)? {
        let o =
            outs.iter().find(|o| o.name == name).ok_or_else(|| invalid(format!("the model has no output {name:?}")))?;
        let cname = CString::new(name.as_str()).map_err(|_| invalid("output name with NUL"))?;
        let mut output = std::ptr::null_mut();
        let dims = u32::try_from(o.shape.len()).map_err(|_| invalid("too many dimensions"))?;
        // SAFETY: live response; the name and shape are valid for the call (Triton copies them).
        let err = unsafe {
            ffi::TRITONBACKEND_ResponseOutput(resp, &mut output, cname.as_ptr(), o.dtype.code, o.shape.as_ptr(), dims)
        };
        check(err, "ResponseOutput")?;
        let (mut buf, mut mem, mut mem_id) = (std::ptr::null_mut(), ffi::MEMORY_CPU, 0i64);
        // SAFETY: live output; we ask for CPU memory of the output's size.
        let err =
            unsafe { ffi::TRITONBACKEND_OutputBuffer(output, &mut buf, o.data.len() as u64, &mut mem, &mut mem_id) };
        check(err, "OutputBuffer")?;
        if mem != ffi::MEMORY_CPU && mem != ffi::MEMORY_CPU_PINNED {
            return Err(fail(ffi::ERROR_UNSUPPORTED, format!("output {name:?}: Triton gave GPU memory")));
        }
        if !o.data.is_empty() {
            if buf.is_null() {
                return Err(fail(ffi::ERROR_INTERNAL, format!("output {name:?}: no buffer")));
            }
            // SAFETY: Triton's CPU buffer of `o.data.len()` bytes, not overlapping our vector.
            unsafe { std::ptr::copy_nonoverlapping(o.data.as_ptr(), buf.cast::<u8>(), o.data.len()) };
        }
    }
    Ok(())
}

/// Answers one request and releases it.
fn respond(instance: *mut Instance, req: *mut Request, outcome: Outcome, times: [u64; 4]) {
    let ok = outcome.is_ok();
    let mut resp = std::ptr::null_mut();
    // SAFETY: live request; valid out-param.
    let made = check(unsafe { ffi::TRITONBACKEND_ResponseNew(&mut resp, req) }, "ResponseNew");
    if made.is_ok() {
        let filled = catch_unwind(AssertUnwindSafe(|| fill_response(resp, req, outcome)))
            .unwrap_or_else(|p| Err(fail(ffi::ERROR_INTERNAL, format!("internal error (panic: {})", panic_text(&p)))));
        let err = match &filled {
            Ok(()) => std::ptr::null_mut(),
            Err(e) => new_error(e.code, &e.msg),
        };
        // SAFETY: live response, handed to Triton; `err` stays ours.
        let sent =
            check(unsafe { ffi::TRITONBACKEND_ResponseSend(resp, ffi::RESPONSE_COMPLETE_FINAL, err) }, "ResponseSend");
        if !err.is_null() {
            // SAFETY: ours.
            unsafe { ffi::TRITONSERVER_ErrorDelete(err) };
        }
        if let Err(e) = sent {
            log(ffi::LOG_ERROR, &e.msg);
        }
    } else if let Err(e) = made {
        log(ffi::LOG_ERROR, &e.msg);
    }
    let [es, cs, ce, ee] = times;
    // SAFETY: live instance and request.
    let _ =
        check(unsafe { ffi::TRITONBACKEND_ModelInstanceReportStatistics(instance, req, ok, es, cs, ce, ee) }, "stats");
    // SAFETY: live request, ours since Execute returns success; not touched afterwards.
    if let Err(e) = check(unsafe { ffi::TRITONBACKEND_RequestRelease(req, ffi::REQUEST_RELEASE_ALL) }, "RequestRelease")
    {
        log(ffi::LOG_ERROR, &e.msg);
    }
}

thread_local! {
    /// The thread count this (Triton instance) thread has configured, 0 = none yet.
    static THREADS_SET: Cell<usize> = const { Cell::new(0) };
}

#[no_mangle]
/// Runs a batch of requests: every request gets a response (its outputs or its error) and is
/// released; the call itself then succeeds.
///
/// # Safety
/// Triton's contract: `requests` points to `request_count` live requests.
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceExecute(
    instance: *mut Instance,
    requests: *mut *mut Request,
    request_count: u32,
) -> *mut TRITONSERVER_Error {
    if requests.is_null() && request_count > 0 {
        return new_error(ffi::ERROR_INVALID_ARG, "no requests");
    }
    let reqs: Vec<*mut Request> = if request_count == 0 {
        Vec::new()
    } else {
        // SAFETY: per the contract; copied out, as Triton reclaims the array on return.
        unsafe { std::slice::from_raw_parts(requests, request_count as usize) }.to_vec()
    };
    let exec_start = now_ns();
    let mut compute = (exec_start, exec_start);
    let mut samples = 0i64;
    // Nothing below releases a request before every outcome is known.
    let outcomes: Vec<Outcome> = match catch_unwind(AssertUnwindSafe(|| -> Res<Vec<Outcome>> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: live instance; valid out-param.
        check(unsafe { ffi::TRITONBACKEND_ModelInstanceState(instance, &mut p) }, "ModelInstanceState")?;
        // SAFETY: our InstanceState, alive until ModelInstanceFinalize (never during Execute).
        let st = unsafe { p.cast::<InstanceState>().as_ref() }
            .ok_or_else(|| fail(ffi::ERROR_INTERNAL, "no instance state"))?;
        if THREADS_SET.with(Cell::get) != st.threads {
            tvm_rt::set_num_threads(st.threads).map_err(|e| fail(ffi::ERROR_INTERNAL, e.to_string()))?;
            THREADS_SET.with(|c| c.set(st.threads));
        }
        let inputs: Vec<Result<Vec<InputTensor>, String>> =
            reqs.iter().map(|&r| read_inputs(r).map_err(|e| e.msg)).collect();
        let good: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].is_ok()).collect();
        let batch: Vec<Vec<InputTensor>> = good.iter().map(|&i| inputs[i].clone().unwrap_or_default()).collect();
        compute.0 = now_ns();
        let mut exec = st.exec.lock().unwrap_or_else(|e| e.into_inner());
        let (results, runs) = batch::execute(&st.model, &st.cfg, &mut exec, &batch);
        drop(exec);
        compute.1 = now_ns();
        samples = runs.samples;
        let mut results = results.into_iter();
        Ok(inputs
            .into_iter()
            .map(|i| match i {
                Ok(_) => results.next().unwrap_or_else(|| Err("not run".into())),
                Err(e) => Err(e),
            })
            .collect())
    })) {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => reqs.iter().map(|_| Err(e.msg.clone())).collect(),
        Err(p) => reqs.iter().map(|_| Err(format!("internal error (panic: {})", panic_text(&p)))).collect(),
    };
    let exec_end = now_ns();
    // Statistics first: a client that has its response may ask for them at once.
    if samples > 0 {
        // SAFETY: live instance.
        let _ = check(
            unsafe {
                ffi::TRITONBACKEND_ModelInstanceReportBatchStatistics(
                    instance,
                    samples as u64,
                    exec_start,
                    compute.0,
                    compute.1,
                    exec_end,
                )
            },
            "batch stats",
        );
    }
    for (&r, o) in reqs.iter().zip(outcomes) {
        // `respond` catches what it calls; this only keeps an unwind from crossing into Triton.
        let times = [exec_start, compute.0, compute.1, exec_end];
        if catch_unwind(AssertUnwindSafe(|| respond(instance, r, o, times))).is_err() {
            log(ffi::LOG_ERROR, "internal error (panic) while answering a request");
        }
    }
    std::ptr::null_mut()
}
