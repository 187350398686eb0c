//! Modules, functions and launches; streams and events.

use super::errors::*;
use super::mem::stream_device;
use super::work::{self, Work};
use super::{current, lock, out, run, sim, FuncEntry, ModEntry, Sim, StreamInfo};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::Arc;

/// Reads an image passed by pointer: PTX up to its NUL; binaries are recognised by their
/// first bytes (and refused by the loader).
///
/// # Safety
/// `image` points at a NUL-terminated text or at a cubin / fatbin.
unsafe fn image_bytes<'a>(image: *const c_void) -> Result<&'a [u8], CUresult> {
    if image.is_null() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let p = image.cast::<u8>();
    // Look at up to 4 bytes, stopping at a NUL, for the binary formats' magic numbers.
    let mut head = [0u8; 4];
    for (i, h) in head.iter_mut().enumerate() {
        // SAFETY: the bytes before a NUL (or a binary's header) are readable (the contract).
        *h = unsafe { *p.add(i) };
        if *h == 0 {
            break;
        }
    }
    for magic in [&b"\x7fELF"[..], &[0x50, 0xED, 0x55, 0xBA], &[0x46, 0x62, 0x43, 0xA1]] {
        if head[..] == *magic {
            return Ok(magic);
        }
    }
    // SAFETY: a NUL-terminated text (the contract).
    Ok(unsafe { CStr::from_ptr(image.cast::<c_char>()) }.to_bytes())
}

/// Loads `bytes` into the current device; the handle, or the error and its log.
fn load(bytes: &[u8]) -> Result<usize, (CUresult, String)> {
    let (s, d) = current().map_err(|e| (e, String::new()))?;
    let module = {
        let mut st = lock(&s.devices[d].state);
        crate::module::load(bytes, s.cfg.sm, &mut st.mem, s.windows).map_err(|e| (e.code, e.log))?
    };
    let mut h = lock(&s.handles);
    let handle = h.fresh(1);
    h.modules.insert(handle, ModEntry { dev: d, module: Arc::new(module), funcs: Default::default() });
    Ok(handle)
}

fn report(s: Result<&Sim, CUresult>, log: &str) {
    if let Ok(s) = s {
        if !log.is_empty() {
            s.say(&format!("cuModuleLoadData: {log}"));
        }
    }
}

/// `cuModuleLoadData`: PTX text (NUL-terminated).
///
/// # Safety
/// `m` is NULL or valid for writing; `image` as for the driver.
#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadData(m: *mut *mut c_void, image: *const c_void) -> CUresult {
    run(|| {
        if m.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: per the contract.
        let bytes = unsafe { image_bytes(image)? };
        match load(bytes) {
            // SAFETY: checked non-NULL above.
            Ok(h) => unsafe { out(m, h as *mut c_void) },
            Err((e, log)) => {
                report(sim(), &log);
                Err(e)
            }
        }
    })
}

/// `cuModuleLoadDataEx`: as [`cuModuleLoadData`], writing the JIT error log into
/// `CU_JIT_ERROR_LOG_BUFFER` when asked (and an empty info log).
///
/// # Safety
/// `options` and `values` hold `n` entries, values as the options define.
#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadDataEx(
    m: *mut *mut c_void,
    image: *const c_void,
    n: c_uint,
    options: *mut c_int,
    values: *mut *mut c_void,
) -> CUresult {
    run(|| {
        if m.is_null() || (n > 0 && (options.is_null() || values.is_null())) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: per the contract.
        let bytes = unsafe { image_bytes(image)? };
        let result = load(bytes);
        let log = match &result {
            Ok(_) => String::new(),
            Err((_, log)) => log.clone(),
        };
        // Log buffers: option 3/5 give the buffer, 4/6 its size (in the value slot, where the
        // bytes written are reported back).
        let n = n as usize;
        // SAFETY: `n` entries each (the contract).
        let (opts, vals) =
            unsafe { (std::slice::from_raw_parts(options, n), std::slice::from_raw_parts_mut(values, n)) };
        for (buf_opt, size_opt, text) in [(5, 6, log.as_str()), (3, 4, "")] {
            let buf = opts.iter().position(|&o| o == buf_opt);
            let size = opts.iter().position(|&o| o == size_opt);
            if let (Some(b), Some(sz)) = (buf, size) {
                let cap = vals[sz] as usize;
                let dst = vals[b].cast::<u8>();
                if cap > 0 && !dst.is_null() {
                    let k = text.len().min(cap - 1);
                    // SAFETY: the buffer holds `cap` bytes (the contract).
                    unsafe {
                        std::ptr::copy_nonoverlapping(text.as_ptr(), dst, k);
                        *dst.add(k) = 0;
                    }
                    vals[sz] = (k + 1) as *mut c_void;
                }
            }
        }
        match result {
            // SAFETY: checked non-NULL above.
            Ok(h) => unsafe { out(m, h as *mut c_void) },
            Err((e, log)) => {
                report(sim(), &log);
                Err(e)
            }
        }
    })
}

/// `cuModuleLoad`: a PTX file.
///
/// # Safety
/// `m` is NULL or valid for writing; `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn cuModuleLoad(m: *mut *mut c_void, path: *const c_char) -> CUresult {
    run(|| {
        if m.is_null() || path.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: a C string (the contract).
        let p = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
        let bytes = std::fs::read(p).map_err(|_| CUDA_ERROR_FILE_NOT_FOUND)?;
        match load(&bytes) {
            // SAFETY: checked non-NULL above.
            Ok(h) => unsafe { out(m, h as *mut c_void) },
            Err((e, log)) => {
                report(sim(), &log);
                Err(e)
            }
        }
    })
}

/// `cuModuleUnload`: waits for the device's work, frees the module's variables.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuModuleUnload(m: *mut c_void) -> CUresult {
    run(|| {
        let s = sim()?;
        let entry = {
            let mut h = lock(&s.handles);
            let e = h.modules.remove(&(m as usize)).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
            h.funcs.retain(|_, f| f.module != m as usize);
            e
        };
        let mut st = lock(&s.devices[entry.dev].state);
        let r = work::run_queue(s, &mut st, u64::MAX);
        for (addr, _) in entry.module.globals.values() {
            st.mem.free(*addr, true);
        }
        r
    })
}

/// `cuModuleGetFunction`.
///
/// # Safety
/// `f` is NULL or valid for writing; `name` is a C string.
#[no_mangle]
pub unsafe extern "C" fn cuModuleGetFunction(f: *mut *mut c_void, m: *mut c_void, name: *const c_char) -> CUresult {
    run(|| {
        let (s, _) = current()?;
        if f.is_null() || name.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: a C string (the contract).
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let mut h = lock(&s.handles);
        let entry = h.modules.get(&(m as usize)).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        if let Some(&fh) = entry.funcs.get(&name) {
            // SAFETY: checked non-NULL above.
            return unsafe { out(f, fh as *mut c_void) };
        }
        let kernel = entry.module.kernels.iter().find(|(n, _)| *n == name).map(|(_, k)| Arc::clone(k));
        let kernel = kernel.ok_or(CUDA_ERROR_NOT_FOUND)?;
        let (dev, versions) = (entry.dev, (entry.module.ptx_version, entry.module.target));
        let fh = h.fresh(2);
        h.funcs.insert(fh, FuncEntry { dev, module: m as usize, kernel, max_dyn: 48 * 1024, versions });
        h.modules.get_mut(&(m as usize)).expect("looked up above").funcs.insert(name, fh);
        // SAFETY: checked non-NULL above.
        unsafe { out(f, fh as *mut c_void) }
    })
}

/// `cuModuleGetGlobal_v2`.
///
/// # Safety
/// `dptr` and `bytes` are NULL (not wanted) or valid for writing; `name` is a C string.
#[no_mangle]
pub unsafe extern "C" fn cuModuleGetGlobal_v2(
    dptr: *mut u64,
    bytes: *mut usize,
    m: *mut c_void,
    name: *const c_char,
) -> CUresult {
    run(|| {
        let (s, _) = current()?;
        if name.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: a C string (the contract).
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let h = lock(&s.handles);
        let entry = h.modules.get(&(m as usize)).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        let &(addr, size) = entry.module.globals.get(&name).ok_or(CUDA_ERROR_NOT_FOUND)?;
        // SAFETY: per the contract (NULL pointers are skipped).
        unsafe {
            if !dptr.is_null() {
                out(dptr, addr)?;
            }
            if !bytes.is_null() {
                out(bytes, size as usize)?;
            }
        }
        Ok(())
    })
}

/// `cuFuncGetAttribute`.
///
/// # Safety
/// `v` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuFuncGetAttribute(v: *mut c_int, attr: c_int, f: *mut c_void) -> CUresult {
    run(|| {
        let s = sim()?;
        let h = lock(&s.handles);
        let fe = h.funcs.get(&(f as usize)).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        let k = &fe.kernel;
        let limit = |t: Option<[u32; 3]>| t.map_or(1024, |t| t.iter().product::<u32>().min(1024));
        let value = match attr {
            0 => limit(k.reqntid.or(k.maxntid)) as c_int,
            1 => k.static_shared as c_int,
            2 => 0,
            3 => k.local_size as c_int,
            4 => k.nregs.min(255) as c_int,
            5 => fe.versions.0 as c_int,
            6 => fe.versions.1 as c_int,
            7 => 0,
            8 => fe.max_dyn as c_int,
            9 => -1,
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        // SAFETY: per the contract.
        unsafe { out(v, value) }
    })
}

/// `cuFuncSetAttribute`: `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` (up to 48 KiB with
/// the static part) and the carveout preference.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuFuncSetAttribute(f: *mut c_void, attr: c_int, value: c_int) -> CUresult {
    run(|| {
        let s = sim()?;
        let mut h = lock(&s.handles);
        let fe = h.funcs.get_mut(&(f as usize)).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        match attr {
            8 if value >= 0 && fe.kernel.static_shared as i64 + i64::from(value) <= 48 * 1024 => {
                fe.max_dyn = value as u32;
                Ok(())
            }
            9 => Ok(()),
            _ => Err(CUDA_ERROR_INVALID_VALUE),
        }
    })
}

/// `cuFuncSetCacheConfig`: accepted, nothing to configure.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuFuncSetCacheConfig(f: *mut c_void, _config: c_int) -> CUresult {
    run(|| {
        let s = sim()?;
        lock(&s.handles).funcs.get(&(f as usize)).map(|_| ()).ok_or(CUDA_ERROR_INVALID_HANDLE)
    })
}

/// The parameter buffer of a launch, from `kernelParams` or `extra`.
///
/// # Safety
/// As for `cuLaunchKernel`.
unsafe fn params(
    k: &crate::ptx::ir::Kernel,
    kp: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> Result<Vec<u8>, CUresult> {
    let mut buf = vec![0u8; k.param_size as usize];
    if !kp.is_null() {
        for (i, &(off, size)) in k.params.iter().enumerate() {
            // SAFETY: `kernelParams` holds one pointer per parameter, each to `size` bytes.
            let p = unsafe { *kp.add(i) };
            if p.is_null() {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            // SAFETY: as above.
            let src = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size as usize) };
            buf[off as usize..(off + size) as usize].copy_from_slice(src);
        }
        return Ok(buf);
    }
    if !extra.is_null() {
        // CU_LAUNCH_PARAM_BUFFER_POINTER (1), ..._SIZE (2), ..._END (0).
        let (mut ptr, mut size) = (std::ptr::null::<u8>(), None::<usize>);
        let mut i = 0;
        loop {
            // SAFETY: `extra` is a list of key, value pairs ended by 0 (the contract).
            let key = unsafe { *extra.add(i) } as usize;
            if key == 0 {
                break;
            }
            // SAFETY: as above.
            let val = unsafe { *extra.add(i + 1) };
            match key {
                1 => ptr = val.cast(),
                // SAFETY: the size entry points at a size_t (the contract).
                2 => size = Some(unsafe { *val.cast::<usize>() }),
                _ => return Err(CUDA_ERROR_INVALID_VALUE),
            }
            i += 2;
        }
        match size {
            Some(n) if !ptr.is_null() && n >= buf.len() => {
                let len = buf.len();
                // SAFETY: the buffer holds `n >= len` bytes (the contract).
                buf.copy_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) });
                return Ok(buf);
            }
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        }
    }
    if k.params.is_empty() {
        Ok(buf)
    } else {
        Err(CUDA_ERROR_INVALID_VALUE)
    }
}

/// `cuLaunchKernel`: checks the function belongs to the current context, the stream too, the
/// geometry and shared memory against the device's limits, copies the parameters and queues
/// the launch.
///
/// # Safety
/// `kernel_params` holds a pointer per kernel parameter (or `extra` describes a buffer).
#[no_mangle]
pub unsafe extern "C" fn cuLaunchKernel(
    f: *mut c_void,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    stream: *mut c_void,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    run(|| {
        let (s, d) = current()?;
        let (kernel, max_dyn) = {
            let h = lock(&s.handles);
            let fe = h.funcs.get(&(f as usize)).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
            if fe.dev != d {
                return Err(CUDA_ERROR_INVALID_HANDLE);
            }
            (Arc::clone(&fe.kernel), fe.max_dyn)
        };
        if stream_device(s, stream)?.is_some_and(|sd| sd != d) {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        let threads = u64::from(bx) * u64::from(by) * u64::from(bz);
        let bad_dims = [gx, gy, gz, bx, by, bz].contains(&0)
            || gx > i32::MAX as u32
            || gy > 65535
            || gz > 65535
            || bx > 1024
            || by > 1024
            || bz > 64
            || threads > 1024;
        let limit = kernel.reqntid.or(kernel.maxntid).map_or(1024, |t| t.iter().map(|&v| u64::from(v)).product());
        let req_mismatch = kernel.reqntid.is_some_and(|r| r != [bx, by, bz]);
        if bad_dims || threads > limit || req_mismatch {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        if shared > max_dyn || u64::from(kernel.dyn_offset) + u64::from(shared) > 48 * 1024 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // The simulator's own limit on a block's registers and local memory (host memory).
        if (u64::from(kernel.nregs) * 8 + u64::from(kernel.local_size)) * threads.next_multiple_of(32) > 1 << 30 {
            return Err(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
        }
        // SAFETY: per the contract.
        let params = unsafe { params(&kernel, kernel_params, extra)? };
        let w = Work::Launch { kernel, grid: [gx, gy, gz], block: [bx, by, bz], dyn_smem: shared, params };
        work::submit(s, d, w).map(|_| ())
    })
}

/// `cuStreamCreate` (flags 0 or `CU_STREAM_NON_BLOCKING`).
///
/// # Safety
/// `ps` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(ps: *mut *mut c_void, flags: c_uint) -> CUresult {
    run(|| {
        let (s, d) = current()?;
        if flags > 1 || ps.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let mut h = lock(&s.handles);
        let handle = h.fresh(3);
        h.streams.insert(handle, StreamInfo { dev: d });
        // SAFETY: checked non-NULL above.
        unsafe { out(ps, handle as *mut c_void) }
    })
}

/// `cuStreamCreateWithPriority` (priorities accepted and ignored).
///
/// # Safety
/// `ps` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuStreamCreateWithPriority(ps: *mut *mut c_void, flags: c_uint, _prio: c_int) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuStreamCreate(ps, flags) }
}

/// `cuStreamDestroy_v2`: its queued work still runs.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(st: *mut c_void) -> CUresult {
    run(|| {
        let s = sim()?;
        let info = lock(&s.handles).streams.remove(&(st as usize)).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        work::flush(s, info.dev, u64::MAX)
    })
}

fn sync_stream(st: *mut c_void) -> Result<(), CUresult> {
    let (s, cur) = current()?;
    let d = stream_device(s, st)?.unwrap_or(cur);
    work::flush(s, d, u64::MAX)
}

/// `cuStreamSynchronize`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuStreamSynchronize(st: *mut c_void) -> CUresult {
    run(|| sync_stream(st))
}

/// `cuStreamQuery`: runs the stream's work, then reports it complete.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuStreamQuery(st: *mut c_void) -> CUresult {
    run(|| sync_stream(st))
}

/// `cuStreamWaitEvent`: ordering is already submission order; the handles are checked.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitEvent(st: *mut c_void, e: *mut c_void, flags: c_uint) -> CUresult {
    run(|| {
        let (s, _) = current()?;
        stream_device(s, st)?;
        if flags > 1 || !lock(&s.handles).events.contains_key(&(e as usize)) {
            return Err(if flags > 1 { CUDA_ERROR_INVALID_VALUE } else { CUDA_ERROR_INVALID_HANDLE });
        }
        Ok(())
    })
}

/// `cuEventCreate`.
///
/// # Safety
/// `pe` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(pe: *mut *mut c_void, flags: c_uint) -> CUresult {
    run(|| {
        let (s, d) = current()?;
        if flags > 7 || pe.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let mut st = lock(&s.devices[d].state);
        let mut h = lock(&s.handles);
        let handle = h.fresh(4);
        h.events.insert(handle, (d, flags));
        st.events.insert(handle, (None, None));
        // SAFETY: checked non-NULL above.
        unsafe { out(pe, handle as *mut c_void) }
    })
}

fn event(s: &Sim, e: *mut c_void) -> Result<(usize, u32), CUresult> {
    lock(&s.handles).events.get(&(e as usize)).copied().ok_or(CUDA_ERROR_INVALID_HANDLE)
}

/// `cuEventRecord`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuEventRecord(e: *mut c_void, st: *mut c_void) -> CUresult {
    run(|| {
        let (s, _) = current()?;
        let (d, _) = event(s, e)?;
        if stream_device(s, st)?.is_some_and(|sd| sd != d) {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        work::record(s, d, e as usize)
    })
}

fn sync_event(s: &Sim, e: *mut c_void) -> Result<(usize, u32), CUresult> {
    let (d, flags) = event(s, e)?;
    let seq = lock(&s.devices[d].state).events.get(&(e as usize)).and_then(|ev| ev.0);
    if let Some(seq) = seq {
        work::flush(s, d, seq)?;
    }
    Ok((d, flags))
}

/// `cuEventQuery`: runs the work up to the record, then reports it complete.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(e: *mut c_void) -> CUresult {
    run(|| sync_event(sim()?, e).map(|_| ()))
}

/// `cuEventSynchronize`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuEventSynchronize(e: *mut c_void) -> CUresult {
    run(|| sync_event(sim()?, e).map(|_| ()))
}

/// `cuEventElapsedTime`: milliseconds between the two records' completions.
///
/// # Safety
/// `ms` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuEventElapsedTime(ms: *mut f32, start: *mut c_void, end: *mut c_void) -> CUresult {
    run(|| {
        let s = sim()?;
        let (d0, f0) = sync_event(s, start)?;
        let (d1, f1) = sync_event(s, end)?;
        if (f0 | f1) & 2 != 0 {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        let t0 = lock(&s.devices[d0].state).events.get(&(start as usize)).and_then(|e| e.1);
        let t1 = lock(&s.devices[d1].state).events.get(&(end as usize)).and_then(|e| e.1);
        let (Some(t0), Some(t1)) = (t0, t1) else { return Err(CUDA_ERROR_INVALID_HANDLE) };
        let v = if t1 >= t0 { t1.duration_since(t0).as_secs_f32() } else { -t0.duration_since(t1).as_secs_f32() };
        // SAFETY: per the contract.
        unsafe { out(ms, v * 1000.0) }
    })
}

/// `cuEventDestroy_v2`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(e: *mut c_void) -> CUresult {
    run(|| {
        let s = sim()?;
        let (d, _) = lock(&s.handles).events.remove(&(e as usize)).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        lock(&s.devices[d].state).events.remove(&(e as usize));
        Ok(())
    })
}
