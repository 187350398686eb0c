//! TEMPORARY stub until the real workspace pool lands.
use crate::error::Result;
use std::ffi::c_void;
pub fn cpu_alloc_workspace(_device_id: i32, nbytes: u64) -> Result<*mut c_void> {
    crate::device::cpu::aligned_alloc(nbytes as usize, 128)
}
pub fn cpu_free_workspace(_device_id: i32, ptr: *mut c_void) -> Result<()> {
    // SAFETY: stub.
    unsafe { crate::device::cpu::aligned_free(ptr) };
    Ok(())
}
