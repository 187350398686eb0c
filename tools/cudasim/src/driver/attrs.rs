//! Devices: count, handles, names, attributes (a V100-like device by default, its compute
//! capability from `CUDASIM_SM`), memory size.

use super::errors::*;
use super::{out, run, sim};
use std::ffi::{c_char, c_int};

/// `CUdevice_attribute` values the simulator answers (others in range are 0).
pub fn attribute(attr: c_int, sm: u32, sm_count: u32, ordinal: usize) -> Option<c_int> {
    Some(match attr {
        1 => 1024,                  // MAX_THREADS_PER_BLOCK
        2 | 3 => 1024,              // MAX_BLOCK_DIM_X / Y
        4 => 64,                    // MAX_BLOCK_DIM_Z
        5 => i32::MAX,              // MAX_GRID_DIM_X
        6 | 7 => 65535,             // MAX_GRID_DIM_Y / Z
        8 => 48 * 1024,             // MAX_SHARED_MEMORY_PER_BLOCK
        9 => 64 * 1024,             // TOTAL_CONSTANT_MEMORY
        10 => 32,                   // WARP_SIZE
        11 => i32::MAX,             // MAX_PITCH
        12 => 65536,                // MAX_REGISTERS_PER_BLOCK
        13 => 1_530_000,            // CLOCK_RATE (kHz)
        14 => 512,                  // TEXTURE_ALIGNMENT
        15 => 1,                    // GPU_OVERLAP
        16 => sm_count as c_int,    // MULTIPROCESSOR_COUNT
        17 => 0,                    // KERNEL_EXEC_TIMEOUT
        18 => 0,                    // INTEGRATED
        19 => 1,                    // CAN_MAP_HOST_MEMORY
        20 => 0,                    // COMPUTE_MODE (default)
        30 => 512,                  // SURFACE_ALIGNMENT
        31 => 1,                    // CONCURRENT_KERNELS
        32 => 0,                    // ECC_ENABLED
        33 => ordinal as c_int + 1, // PCI_BUS_ID
        34 => 0,                    // PCI_DEVICE_ID
        35 => 0,                    // TCC_DRIVER
        36 => 877_000,              // MEMORY_CLOCK_RATE (kHz)
        37 => 4096,                 // GLOBAL_MEMORY_BUS_WIDTH
        38 => 6 * 1024 * 1024,      // L2_CACHE_SIZE
        39 => 2048,                 // MAX_THREADS_PER_MULTIPROCESSOR
        40 => 2,                    // ASYNC_ENGINE_COUNT
        41 => 1,                    // UNIFIED_ADDRESSING
        50 => 0,                    // PCI_DOMAIN_ID
        75 => (sm / 10) as c_int,   // COMPUTE_CAPABILITY_MAJOR
        76 => (sm % 10) as c_int,   // COMPUTE_CAPABILITY_MINOR
        78 => 1,                    // STREAM_PRIORITIES_SUPPORTED
        79 | 80 => 1,               // GLOBAL / LOCAL_L1_CACHE_SUPPORTED
        81 => 96 * 1024,            // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        82 => 65536,                // MAX_REGISTERS_PER_MULTIPROCESSOR
        86 => 0,                    // HOST_NATIVE_ATOMIC_SUPPORTED
        87 => 2,                    // SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO
        95 | 96 => 0,               // COOPERATIVE_LAUNCH (not simulated)
        97 => 48 * 1024,            // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (no opt-in beyond 48 KiB)
        106 => 32,                  // MAX_BLOCKS_PER_MULTIPROCESSOR
        21..=150 => 0,
        _ => return None,
    })
}

/// `cuDeviceGetCount`.
///
/// # Safety
/// `n` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(n: *mut c_int) -> CUresult {
    // SAFETY: per the contract.
    run(|| unsafe { out(n, sim()?.devices.len() as c_int) })
}

/// `cuDeviceGet`: device handles are the ordinals.
///
/// # Safety
/// `d` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(d: *mut c_int, ordinal: c_int) -> CUresult {
    run(|| {
        sim()?.device(i64::from(ordinal))?;
        // SAFETY: per the contract.
        unsafe { out(d, ordinal) }
    })
}

/// `cuDeviceGetName`.
///
/// # Safety
/// `name` is NULL or holds `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, d: c_int) -> CUresult {
    run(|| {
        let dev = sim()?.device(i64::from(d))?;
        if name.is_null() || len <= 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let bytes = dev.name.as_bytes();
        let n = bytes.len().min(len as usize - 1);
        // SAFETY: `name` holds `len` bytes; `n + 1 <= len`.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), name.cast::<u8>(), n);
            *name.add(n) = 0;
        }
        Ok(())
    })
}

/// `cuDeviceGetAttribute`.
///
/// # Safety
/// `v` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(v: *mut c_int, attr: c_int, d: c_int) -> CUresult {
    run(|| {
        let s = sim()?;
        let dev = s.device(i64::from(d))?;
        let a = attribute(attr, s.cfg.sm, s.cfg.sm_count, dev.ordinal).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        // SAFETY: per the contract.
        unsafe { out(v, a) }
    })
}

/// `cuDeviceTotalMem_v2`.
///
/// # Safety
/// `bytes` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, d: c_int) -> CUresult {
    run(|| {
        let s = sim()?;
        s.device(i64::from(d))?;
        // SAFETY: per the contract.
        unsafe { out(bytes, s.cfg.memory as usize) }
    })
}

/// `cuDeviceComputeCapability` (deprecated, still exported by drivers).
///
/// # Safety
/// `major` and `minor` are NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceComputeCapability(major: *mut c_int, minor: *mut c_int, d: c_int) -> CUresult {
    run(|| {
        let s = sim()?;
        s.device(i64::from(d))?;
        // SAFETY: per the contract.
        unsafe {
            out(major, (s.cfg.sm / 10) as c_int)?;
            out(minor, (s.cfg.sm % 10) as c_int)
        }
    })
}

/// `cuDeviceGetUuid`: 16 bytes naming the simulator and the ordinal.
///
/// # Safety
/// `uuid` is NULL or valid for writing 16 bytes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid(uuid: *mut [u8; 16], d: c_int) -> CUresult {
    run(|| {
        let dev = sim()?.device(i64::from(d))?;
        let mut u = *b"cudasim-device-0";
        u[15] = b'0' + dev.ordinal as u8;
        // SAFETY: per the contract.
        unsafe { out(uuid, u) }
    })
}

/// `cuDeviceGetUuid_v2`.
///
/// # Safety
/// As [`cuDeviceGetUuid`].
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut [u8; 16], d: c_int) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuDeviceGetUuid(uuid, d) }
}

/// `cuDeviceCanAccessPeer`: 0 (kernels cannot address another device's memory; peer copies
/// work).
///
/// # Safety
/// `can` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceCanAccessPeer(can: *mut c_int, d: c_int, peer: c_int) -> CUresult {
    run(|| {
        let s = sim()?;
        s.device(i64::from(d))?;
        s.device(i64::from(peer))?;
        // SAFETY: per the contract.
        unsafe { out(can, 0) }
    })
}
