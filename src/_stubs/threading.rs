//! TEMPORARY stub until the real pool lands (serial execution).
use crate::error::{Error, Result};
use std::ffi::{c_int, c_void};
#[repr(C)]
pub struct TVMParallelGroupEnv {
    pub sync_handle: *mut c_void,
    pub num_task: i32,
}
pub type FTVMParallelLambda =
    unsafe extern "C" fn(task_id: c_int, penv: *mut TVMParallelGroupEnv, cdata: *mut c_void) -> c_int;
pub fn parallel_launch(flambda: Option<FTVMParallelLambda>, cdata: *mut c_void, num_task: i32) -> Result<()> {
    let f = flambda.ok_or_else(|| Error::value("null lambda"))?;
    let n = num_task.max(1);
    let mut env = TVMParallelGroupEnv { sync_handle: std::ptr::null_mut(), num_task: n };
    for i in 0..n {
        // SAFETY: stub.
        if unsafe { f(i, &mut env, cdata) } != 0 {
            return Err(Error::tvm(format!("Task {i} error: {}", crate::error::last_error_message())));
        }
    }
    Ok(())
}
pub fn parallel_barrier(_task_id: i32, _penv: *mut TVMParallelGroupEnv) -> Result<()> {
    Ok(())
}
pub fn config_threadpool(_mode: i32, _nthreads: i32) -> Result<()> {
    Ok(())
}
pub fn num_threads() -> usize {
    1
}
pub fn run_once(
    handle: *mut *mut c_void,
    f: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    cdata: *mut c_void,
    _nbytes: i32,
) -> Result<()> {
    // SAFETY: stub.
    unsafe {
        if (*handle).is_null() {
            *handle = 1 as *mut c_void;
            if let Some(f) = f {
                if f(cdata) != 0 {
                    return Err(Error::tvm("run once failed"));
                }
            }
        }
    }
    Ok(())
}
