//! The CPU device API: `posix_memalign`/`free`, `memcpy`, no streams,
//! workspaces from a per-thread pool.

use super::{Attr, DeviceApi, ALLOC_ALIGNMENT};
use crate::abi::{DLDataType, DLDevice};
use crate::error::{Error, Result};
use std::ffi::c_void;

/// The CPU device API.
pub(crate) struct CpuApi;

/// The one instance.
pub(crate) static CPU_API: CpuApi = CpuApi;

/// Allocates `nbytes` with `alignment` (a power of two; below 8 raised to 8) through
/// `posix_memalign`, so that a bare `free` releases it. 0 bytes gives a unique pointer.
pub(crate) fn aligned_alloc(nbytes: usize, alignment: usize) -> Result<*mut c_void> {
    if !alignment.is_power_of_two() {
        return Err(Error::value(format!("invalid alignment {alignment}")));
    }
    let align = alignment.max(std::mem::size_of::<*mut c_void>());
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: `p` is a valid out-pointer; `align` is a power of two multiple of sizeof(void*).
    let rc = unsafe { libc::posix_memalign(&mut p, align, nbytes.max(1)) };
    if rc != 0 || p.is_null() {
        return Err(Error::tvm(format!("out of memory: allocating {nbytes} bytes aligned at {align}")));
    }
    Ok(p)
}

/// The most memory this machine can hand out: physical memory plus swap (`sysinfo`), the bound
/// Linux's default overcommit heuristic applies. `None` where it cannot be read. Parsers use it to
/// refuse, with a message naming the field, inputs that claim more than can ever be allocated.
pub fn memory_limit() -> Option<usize> {
    let mut info = std::mem::MaybeUninit::<libc::sysinfo>::zeroed();
    // SAFETY: `sysinfo` writes the struct it is given.
    if unsafe { libc::sysinfo(info.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: `sysinfo` succeeded, so it filled the struct.
    let info = unsafe { info.assume_init() };
    let unit = u64::from(info.mem_unit.max(1));
    #[allow(clippy::useless_conversion, reason = "c_ulong is u32 on 32-bit targets")]
    let total = u64::from(info.totalram).saturating_add(u64::from(info.totalswap)).saturating_mul(unit);
    usize::try_from(total).ok()
}

/// Frees memory from [`aligned_alloc`] (NULL is a no-op).
///
/// # Safety
/// `ptr` is NULL or came from [`aligned_alloc`] and is not used afterwards.
pub(crate) unsafe fn aligned_free(ptr: *mut c_void) {
    // SAFETY: per contract; free(NULL) is a no-op.
    unsafe { libc::free(ptr) };
}

impl DeviceApi for CpuApi {
    fn set_device(&self, _dev: DLDevice) -> Result<()> {
        Ok(())
    }

    fn get_attr(&self, _dev: DLDevice, kind: i32) -> Result<Attr> {
        Ok(if kind == 0 { Attr::Int(1) } else { Attr::Null })
    }

    fn alloc_data_space(
        &self,
        _dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        _hint: DLDataType,
    ) -> Result<*mut c_void> {
        aligned_alloc(nbytes, alignment)
    }

    fn free_data_space(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        // SAFETY: CPU data space pointers come from `aligned_alloc` (the C API's contract).
        unsafe { aligned_free(ptr) };
        Ok(())
    }

    fn copy_flat(
        &self,
        from: *const c_void,
        from_offset: u64,
        to: *mut c_void,
        to_offset: u64,
        nbytes: usize,
        _dev_from: DLDevice,
        _dev_to: DLDevice,
        _type_hint: DLDataType,
        _stream: *mut c_void,
    ) -> Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        if from.is_null() || to.is_null() {
            return Err(Error::value("copy between CPU buffers with a NULL data pointer"));
        }
        let src = from.cast::<u8>().wrapping_add(from_offset as usize);
        let dst = to.cast::<u8>().wrapping_add(to_offset as usize);
        // SAFETY: both tensors hold `nbytes` bytes past their offsets (the tensor contract the
        // caller checked sizes against); `copy` tolerates overlap.
        unsafe { std::ptr::copy(src, dst, nbytes) };
        Ok(())
    }

    fn stream_sync(&self, _dev: DLDevice, _stream: *mut c_void) -> Result<()> {
        Ok(())
    }

    fn alloc_workspace(&self, dev: DLDevice, nbytes: u64, _hint: DLDataType) -> Result<*mut c_void> {
        super::workspace::cpu_alloc_workspace(dev.device_id, nbytes)
    }

    fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        super::workspace::cpu_free_workspace(dev.device_id, ptr)
    }
}

const _: () = assert!(ALLOC_ALIGNMENT == 128);
