//! The driver API's semantics: constants (checked against NVIDIA's header values as cudarc
//! binds them), devices, contexts, memory and its checks, copies of every kind, asynchronous
//! work on streams and events, module loading and its refusals, launch checks, handles.

mod common;
use common::*;
use cudasim::driver::errors::*;
use cudasim::driver::*;
use std::ffi::{c_void, CStr, CString};

macro_rules! same_codes {
    ($($name:ident),*) => {
        $(
            assert_eq!(cudarc::driver::sys::CUresult::$name as i32, $name, stringify!($name));
            let mut p = std::ptr::null();
            // SAFETY: valid out-pointer.
            ok(unsafe { cuGetErrorName($name, &mut p) });
            // SAFETY: a static string.
            assert_eq!(unsafe { CStr::from_ptr(p) }.to_str().unwrap(), stringify!($name));
        )*
    };
}

#[test]
fn constants_match_nvidias() {
    same_codes!(
        CUDA_SUCCESS,
        CUDA_ERROR_INVALID_VALUE,
        CUDA_ERROR_OUT_OF_MEMORY,
        CUDA_ERROR_NOT_INITIALIZED,
        CUDA_ERROR_DEINITIALIZED,
        CUDA_ERROR_STUB_LIBRARY,
        CUDA_ERROR_NO_DEVICE,
        CUDA_ERROR_INVALID_DEVICE,
        CUDA_ERROR_INVALID_IMAGE,
        CUDA_ERROR_INVALID_CONTEXT,
        CUDA_ERROR_NO_BINARY_FOR_GPU,
        CUDA_ERROR_INVALID_PTX,
        CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
        CUDA_ERROR_INVALID_SOURCE,
        CUDA_ERROR_FILE_NOT_FOUND,
        CUDA_ERROR_INVALID_HANDLE,
        CUDA_ERROR_NOT_FOUND,
        CUDA_ERROR_NOT_READY,
        CUDA_ERROR_ILLEGAL_ADDRESS,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        CUDA_ERROR_LAUNCH_TIMEOUT,
        CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
        CUDA_ERROR_CONTEXT_IS_DESTROYED,
        CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUDA_ERROR_MISALIGNED_ADDRESS,
        CUDA_ERROR_LAUNCH_FAILED,
        CUDA_ERROR_NOT_SUPPORTED,
        CUDA_ERROR_UNKNOWN
    );
    assert_eq!(ALL.len(), 28, "every code is checked above");
    let mut p = std::ptr::null();
    // SAFETY: valid out-pointers.
    unsafe {
        ok(cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &mut p));
        assert_eq!(CStr::from_ptr(p).to_str().unwrap(), "an illegal memory access was encountered");
        assert_eq!(cuGetErrorString(12345, &mut p), CUDA_ERROR_INVALID_VALUE);
        assert!(p.is_null());
    }
    // Device attributes, by cudarc's enum values.
    setup(0);
    use cudarc::driver::sys::CUdevice_attribute as A;
    let attr = |a: A| {
        let mut v = 0;
        // SAFETY: valid out-pointer.
        ok(unsafe { cuDeviceGetAttribute(&mut v, a as i32, 0) });
        v
    };
    assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 1024);
    assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE), 32);
    assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK), 48 * 1024);
    assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 7);
    assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), 0);
    assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z), 64);
    assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 80);
    assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING), 1);
    assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK), 65536);
    let mut v = 0;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { cuDeviceGetAttribute(&mut v, 100_000, 0) }, CUDA_ERROR_INVALID_VALUE);
}

#[test]
fn devices_and_contexts() {
    setup(0);
    let (mut n, mut d, mut v) = (0, 0, 0);
    let mut name = [0i8; 64];
    // SAFETY: valid out-pointers and buffer sizes.
    unsafe {
        ok(cuDeviceGetCount(&mut n));
        assert_eq!(n, 2);
        ok(cuDeviceGet(&mut d, 1));
        assert_eq!(d, 1);
        assert_eq!(cuDeviceGet(&mut d, 2), CUDA_ERROR_INVALID_DEVICE);
        assert_eq!(cuDeviceGet(&mut d, -1), CUDA_ERROR_INVALID_DEVICE);
        ok(cuDeviceGetName(name.as_mut_ptr(), 64, 1));
        assert!(CStr::from_ptr(name.as_ptr()).to_str().unwrap().contains("cudasim"));
        ok(cuDriverGetVersion(&mut v));
        assert!(v >= 12000);
        let mut total = 0;
        ok(cuDeviceTotalMem_v2(&mut total, 0));
        assert_eq!(total, 4096 << 20);
    }
    // A fresh thread has no current context.
    std::thread::spawn(|| {
        let (mut p, mut ctx, mut dev) = (0u64, std::ptr::null_mut(), 0);
        // SAFETY: valid out-pointers.
        unsafe {
            assert_eq!(cuMemAlloc_v2(&mut p, 16), CUDA_ERROR_INVALID_CONTEXT);
            ok(cuCtxGetCurrent(&mut ctx));
            assert!(ctx.is_null());
            let mut primary = std::ptr::null_mut();
            ok(cuDevicePrimaryCtxRetain(&mut primary, 1));
            ok(cuCtxPushCurrent_v2(primary));
            ok(cuCtxGetDevice(&mut dev));
            assert_eq!(dev, 1);
            ok(cuCtxGetCurrent(&mut ctx));
            assert_eq!(ctx, primary);
            let mut popped = std::ptr::null_mut();
            ok(cuCtxPopCurrent_v2(&mut popped));
            assert_eq!(popped, primary);
            assert_eq!(cuCtxGetDevice(&mut dev), CUDA_ERROR_INVALID_CONTEXT);
            assert_eq!(cuCtxSetCurrent(0x1234 as *mut c_void), CUDA_ERROR_INVALID_CONTEXT);
            let (mut flags, mut active) = (0, 0);
            ok(cuDevicePrimaryCtxGetState(1, &mut flags, &mut active));
            assert_eq!(active, 1);
            ok(cuDevicePrimaryCtxRelease_v2(1));
        }
    })
    .join()
    .unwrap();
}

/// The permissions of the host mapping holding `addr` (from /proc/self/maps).
fn mapping_permissions(addr: u64) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let (range, rest) = l.split_once(' ')?;
        let (a, b) = range.split_once('-')?;
        let (a, b) = (u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?);
        (a <= addr && addr < b).then(|| rest[..4].to_string())
    })
}

#[test]
fn device_memory_is_checked_and_out_of_the_hosts_reach() {
    setup(0);
    let b = Buf::from(&[1u32, 2, 3, 4]);
    // The host cannot touch device memory: its address lies in a mapping with no access.
    assert_eq!(mapping_permissions(b.0).as_deref(), Some("---p"));
    let host = [0u8; 32];
    let mut p = 0u64;
    // SAFETY: the calls only get addresses; the driver checks them.
    unsafe {
        assert_eq!(cuMemAlloc_v2(&mut p, 0), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemAlloc_v2(&mut p, 1 << 40), CUDA_ERROR_OUT_OF_MEMORY);
        assert_eq!(cuMemFree_v2(b.0 + 4), CUDA_ERROR_INVALID_VALUE, "not the start of an allocation");
        assert_eq!(cuMemFree_v2(host.as_ptr() as u64), CUDA_ERROR_INVALID_VALUE);
        // A host pointer passed as the device pointer, a range past the end.
        assert_eq!(cuMemcpyHtoD_v2(host.as_ptr() as u64, host.as_ptr().cast(), 4), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemcpyHtoD_v2(b.0, host.as_ptr().cast(), 17), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemcpyDtoH_v2(host.as_ptr() as *mut c_void, b.0 + 12, 8), CUDA_ERROR_INVALID_VALUE);
        // A device pointer passed as the host pointer.
        assert_eq!(cuMemcpyHtoD_v2(b.0, b.0 as *const c_void, 4), CUDA_ERROR_INVALID_VALUE);
        // (Other tests allocate at the same time: only bounds can be checked here; the
        // accounting itself is a unit test of the memory module.)
        let big = Buf::new(1 << 20);
        let (mut free, mut total) = (0, 0);
        ok(cuMemGetInfo_v2(&mut free, &mut total));
        assert_eq!(total, 4096 << 20);
        assert!(free <= total - (1 << 20));
        let (mut base, mut size) = (0, 0);
        ok(cuMemGetAddressRange_v2(&mut base, &mut size, big.0 + 100));
        assert_eq!((base, size), (big.0, 1 << 20));
        let mut kind = 0u32;
        ok(cuPointerGetAttribute((&mut kind as *mut u32).cast(), 2, big.0));
        assert_eq!(kind, 2, "device memory");
        let mut ordinal = -1i32;
        ok(cuPointerGetAttribute((&mut ordinal as *mut i32).cast(), 9, big.0));
        assert_eq!(ordinal, 0);
    }
}

#[test]
fn copies_and_memsets_of_every_kind() {
    setup(0);
    let a = Buf::from(&(0..64u32).collect::<Vec<_>>());
    let b = Buf::new(256);
    // SAFETY: buffers of the sizes given.
    unsafe {
        ok(cuMemcpyDtoD_v2(b.0, a.0 + 16, 64));
        ok(cuMemsetD8_v2(b.0 + 64, 0xAB, 4));
        ok(cuMemsetD16_v2(b.0 + 68, 0x1234, 2));
        ok(cuMemsetD32_v2(b.0 + 72, 0xDEAD_BEEF, 2));
    }
    let got: Vec<u32> = b.read(20);
    assert_eq!(&got[..16], &(4..20).collect::<Vec<_>>()[..]);
    assert_eq!(&got[16..20], &[0xABAB_ABAB, 0x1234_1234, 0xDEAD_BEEF, 0xDEAD_BEEF]);
    // Unified cuMemcpy infers directions; pinned memory works as host memory on both sides.
    let mut pinned = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the pinned block is freed below.
    unsafe {
        ok(cuMemAllocHost_v2(&mut pinned, 64));
        ok(cuMemcpy(pinned as u64, a.0, 64));
        let v = std::slice::from_raw_parts(pinned.cast::<u32>(), 16).to_vec();
        assert_eq!(v, (0..16).collect::<Vec<u32>>());
        let mut kind = 0u32;
        ok(cuPointerGetAttribute((&mut kind as *mut u32).cast(), 2, pinned as u64));
        assert_eq!(kind, 1, "host memory");
        let mut dptr = 0;
        ok(cuMemHostGetDevicePointer_v2(&mut dptr, pinned, 0));
        assert_eq!(dptr, pinned as u64);
        ok(cuMemcpyHtoD_v2(b.0, pinned, 8));
        ok(cuMemFreeHost(pinned));
        assert_eq!(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE);
    }
    assert_eq!(b.read::<u32>(2), [0, 1]);
    // Between devices.
    let other_buf = std::thread::spawn(|| {
        setup(1);
        Buf::new(64)
    })
    .join()
    .unwrap();
    let other = other_buf.0;
    let mut ctx0 = std::ptr::null_mut();
    let mut ctx1 = std::ptr::null_mut();
    // SAFETY: retained primary contexts; device buffers of 64 bytes.
    unsafe {
        ok(cuDevicePrimaryCtxRetain(&mut ctx0, 0));
        ok(cuDevicePrimaryCtxRetain(&mut ctx1, 1));
        ok(cuMemcpyPeer(other, ctx1, a.0, ctx0, 64));
        ok(cuMemcpyDtoD_v2(b.0, other, 64));
        assert_eq!(cuMemcpyPeer(other, ctx0, a.0, ctx0, 64), CUDA_ERROR_INVALID_VALUE, "wrong context for dst");
        ok(cuDevicePrimaryCtxRelease_v2(0));
        ok(cuDevicePrimaryCtxRelease_v2(1));
    }
    assert_eq!(b.read::<u32>(16), (0..16).collect::<Vec<u32>>());
}

const FILL: &str = ".visible .entry fill(.param .u64 p, .param .u32 v)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
";

#[test]
fn asynchronous_work_runs_when_waited_for() {
    setup(0);
    let m = load(&ptx(FILL));
    let dev = Buf::from(&[1u32; 32]);
    let (mut s, mut pinned) = (std::ptr::null_mut(), std::ptr::null_mut());
    let (mut e0, mut e1, mut untimed) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: valid out-pointers; everything is released at the end.
    unsafe {
        ok(cuStreamCreate(&mut s, 0));
        ok(cuMemAllocHost_v2(&mut pinned, 128));
        ok(cuEventCreate(&mut e0, 0));
        ok(cuEventCreate(&mut e1, 0));
        ok(cuEventCreate(&mut untimed, 2));
        ok(cuEventRecord(e0, s));
        let mut slots = [dev.0, 7u64];
        let mut params: Vec<*mut c_void> = slots.iter_mut().map(|x| (x as *mut u64).cast()).collect();
        ok(cuLaunchKernel(m.func("fill"), 1, 1, 1, 32, 1, 1, 0, s, params.as_mut_ptr(), std::ptr::null_mut()));
        ok(cuMemcpyDtoHAsync_v2(pinned, dev.0, 128, s));
        ok(cuEventRecord(e1, s));
        ok(cuEventRecord(untimed, s));
        // Not waited for yet: the pinned buffer holds what it had or the copy's result (a GPU
        // may or may not have run it; the simulator runs queued work when something waits,
        // which a test on another thread of this process may do at any time).
        let host = std::slice::from_raw_parts(pinned.cast::<u32>(), 32);
        assert!(host[0] == 0 || host[0] == 7, "{}", host[0]);
        ok(cuEventSynchronize(e1));
        assert_eq!(host.to_vec(), vec![7u32; 32]);
        ok(cuEventQuery(e0));
        let mut ms = -1.0f32;
        ok(cuEventElapsedTime(&mut ms, e0, e1));
        assert!(ms >= 0.0);
        assert_eq!(cuEventElapsedTime(&mut ms, e0, untimed), CUDA_ERROR_INVALID_HANDLE);
        // Pageable host memory: an asynchronous copy takes the bytes at the call.
        let mut src = [5u32; 32];
        ok(cuMemcpyHtoDAsync_v2(dev.0, src.as_ptr().cast(), 128, s));
        src.fill(9);
        ok(cuStreamSynchronize(s));
        assert_eq!(dev.read::<u32>(32), vec![5u32; 32]);
        // Pinned memory: an asynchronous copy reads it when it runs.
        std::slice::from_raw_parts_mut(pinned.cast::<u32>(), 32).fill(3);
        ok(cuMemcpyHtoDAsync_v2(dev.0, pinned, 128, s));
        std::slice::from_raw_parts_mut(pinned.cast::<u32>(), 32).fill(4);
        ok(cuStreamQuery(s));
        assert_eq!(dev.read::<u32>(32), vec![4u32; 32]);
        ok(cuStreamWaitEvent(s, e1, 0));
        for e in [e0, e1, untimed] {
            ok(cuEventDestroy_v2(e));
        }
        assert_eq!(cuEventRecord(e0, s), CUDA_ERROR_INVALID_HANDLE);
        ok(cuStreamDestroy_v2(s));
        assert_eq!(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
        ok(cuMemFreeHost(pinned));
    }
}

#[test]
fn module_loading_refusals() {
    setup(0);
    let refused = |text: &[u8]| {
        let mut m = std::ptr::null_mut();
        // SAFETY: NUL-terminated image bytes.
        unsafe { cuModuleLoadData(&mut m, text.as_ptr().cast()) }
    };
    assert_eq!(refused(b"\x7fELF\x02\x01\x01\0"), CUDA_ERROR_NO_BINARY_FOR_GPU);
    assert_eq!(refused(&[0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0, 0]), CUDA_ERROR_NO_BINARY_FOR_GPU);
    assert_eq!(refused(b"hello\0"), CUDA_ERROR_INVALID_IMAGE);
    let cases = [
        (".version 9.9\n.target sm_70\n.address_size 64\n", CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "9.9"),
        (".version 7.0\n.target sm_80\n.address_size 64\n", CUDA_ERROR_INVALID_PTX, "sm_80"),
        (".version 7.0\n.target sm_70\n.address_size 32\n", CUDA_ERROR_INVALID_PTX, "address_size"),
    ];
    for (src, code, needle) in cases {
        let (r, log) = try_load(src).err().unwrap();
        assert_eq!(r, code, "{src}");
        assert!(log.contains(needle), "{log}");
    }
    let kernel =
        |body: &str| ptx(&format!(".visible .entry k()\n{{\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n{body}\nret;\n}}\n"));
    let bad = [
        ("tex.1d.v4.f32.s32 {%r1, %r1, %r1, %r1}, [t, {%r1}];", "`tex.1d.v4.f32.s32`"),
        ("add.s64 %rd1, %r1, %r2;", "does not fit"),
        ("bra NOWHERE;", "undefined label NOWHERE"),
        ("add.s32 %r1, %q1, 1;", "undeclared name %q1"),
        ("ld.global.L2::cache_hint.u32 %r1, [%rd1], %rd2;", "cache_hint"),
        ("bar.sync 0, 64;", "thread count"),
        ("mul.u32 %r1, %r1, %r1;", ""),
    ];
    for (body, needle) in bad.iter().take(6) {
        let (r, log) = try_load(&kernel(body)).err().unwrap_or_else(|| panic!("{body} loaded"));
        assert_eq!(r, CUDA_ERROR_INVALID_PTX, "{body}");
        assert!(log.contains(needle), "{body}: {log}");
    }
    // `mul` without .lo/.hi/.wide on integers is taken as .lo.
    assert!(try_load(&kernel(bad[6].0)).is_ok());
    let src = ptx(".extern .func (.param .b32 r) __nv_notthere (.param .b32 a);
.visible .entry k() { .reg .b32 %r<2>; { .param .b32 param0; st.param.b32 [param0+0], %r1; .param .b32 retval0;
call.uni (retval0), __nv_notthere, (param0); } ret; }");
    let (r, log) = try_load(&src).err().unwrap();
    assert_eq!(r, CUDA_ERROR_INVALID_PTX);
    assert!(log.contains("__nv_notthere"), "{log}");
    // Lookups.
    let m = load(&ptx(&format!(".visible .global .align 8 .u64 g = 42;\n{FILL}")));
    let (mut f, mut addr, mut size) = (std::ptr::null_mut(), 0u64, 0usize);
    let missing = CString::new("nope").unwrap();
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!(cuModuleGetFunction(&mut f, m.0, missing.as_ptr()), CUDA_ERROR_NOT_FOUND);
        assert_eq!(cuModuleGetGlobal_v2(&mut addr, &mut size, m.0, missing.as_ptr()), CUDA_ERROR_NOT_FOUND);
        let g = CString::new("g").unwrap();
        ok(cuModuleGetGlobal_v2(&mut addr, &mut size, m.0, g.as_ptr()));
        assert_eq!(size, 8);
        assert_eq!(cuModuleGetFunction(&mut f, 0xBAD as *mut c_void, missing.as_ptr()), CUDA_ERROR_INVALID_HANDLE);
    }
    assert_eq!(Buf(addr, 0).read::<u64>(1), [42]);
    std::mem::forget(Buf(addr, 0));
    // From a file.
    let path = std::env::temp_dir().join(format!("cudasim-{}.ptx", std::process::id()));
    std::fs::write(&path, ptx(FILL)).unwrap();
    let c = CString::new(path.to_str().unwrap()).unwrap();
    let mut m2 = std::ptr::null_mut();
    // SAFETY: valid pointers.
    unsafe {
        ok(cuModuleLoad(&mut m2, c.as_ptr()));
        ok(cuModuleUnload(m2));
        assert_eq!(cuModuleUnload(m2), CUDA_ERROR_INVALID_HANDLE);
        let none = CString::new("/nonexistent.ptx").unwrap();
        assert_eq!(cuModuleLoad(&mut m2, none.as_ptr()), CUDA_ERROR_FILE_NOT_FOUND);
    }
    std::fs::remove_file(path).unwrap();
}

#[test]
fn launch_checks_and_function_attributes() {
    setup(0);
    let src = ptx(".visible .entry k(.param .u64 p) .maxntid 128, 1, 1
{
    .reg .b64 %rd<2>;
    .local .align 4 .b8 depot[40];
    .shared .align 4 .b8 sh[100];
    ld.param.u64 %rd1, [p];
    ret;
}");
    let m = load(&src);
    let f = m.func("k");
    let attr = |a: i32| {
        let mut v = 0;
        // SAFETY: valid out-pointer.
        ok(unsafe { cuFuncGetAttribute(&mut v, a, f) });
        v
    };
    assert_eq!((attr(0), attr(1), attr(3), attr(5), attr(6)), (128, 100, 40, 70, 70));
    let b = Buf::new(8);
    let p = [P::U64(b.0)];
    assert_eq!(launch(f, [1, 1, 1], [129, 1, 1], 0, &p), CUDA_ERROR_INVALID_VALUE, ".maxntid");
    assert_eq!(launch(f, [0, 1, 1], [1, 1, 1], 0, &p), CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch(f, [1, 65536, 1], [1, 1, 1], 0, &p), CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch(f, [1, 1, 1], [1, 1, 65], 0, &p), CUDA_ERROR_INVALID_VALUE);
    assert_eq!(launch(f, [1, 1, 1], [64, 1, 1], 48 * 1024, &p), CUDA_ERROR_INVALID_VALUE, "shared memory");
    ok(launch(f, [1, 1, 1], [64, 1, 1], 1024, &p));
    // SAFETY: attribute values only.
    unsafe {
        assert_eq!(cuFuncSetAttribute(f, 8, 60 * 1024), CUDA_ERROR_INVALID_VALUE);
        ok(cuFuncSetAttribute(f, 8, 100));
    }
    assert_eq!(launch(f, [1, 1, 1], [64, 1, 1], 101, &p), CUDA_ERROR_INVALID_VALUE, "over the function's limit");
    // Parameters: none given, or through `extra`.
    let none = || {
        // SAFETY: NULL parameter lists (refused).
        unsafe {
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut())
        }
    };
    assert_eq!(none(), CUDA_ERROR_INVALID_VALUE);
    let m2 = load(&ptx(FILL));
    let out = Buf::from(&[0u32; 4]);
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&out.0.to_le_bytes());
    buf[8..12].copy_from_slice(&99u32.to_le_bytes());
    let mut size = 16usize;
    let mut extra = [
        1usize as *mut c_void,
        buf.as_mut_ptr().cast(),
        2usize as *mut c_void,
        (&mut size as *mut usize).cast(),
        std::ptr::null_mut(),
    ];
    // SAFETY: a parameter buffer described by `extra`.
    ok(unsafe {
        cuLaunchKernel(
            m2.func("fill"),
            1,
            1,
            1,
            4,
            1,
            1,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            extra.as_mut_ptr(),
        )
    });
    assert_eq!(out.read::<u32>(4), [99; 4]);
    // A function or stream of another context.
    let (m2h, fill) = (m2.0 as usize, m2.func("fill") as usize);
    std::thread::spawn(move || {
        setup(1);
        let out = Buf::new(16);
        assert_eq!(
            launch(fill as *mut c_void, [1, 1, 1], [4, 1, 1], 0, &[P::U64(out.0), P::U32(1)]),
            CUDA_ERROR_INVALID_HANDLE
        );
        let mut s = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        ok(unsafe { cuStreamCreate(&mut s, 0) });
        s as usize
    })
    .join()
    .map(|s| {
        let mut slots = [out.0, 1u64];
        let mut params: Vec<*mut c_void> = slots.iter_mut().map(|x| (x as *mut u64).cast()).collect();
        let r = unsafe {
            // SAFETY: one pointer per parameter.
            cuLaunchKernel(
                m2.func("fill"),
                1,
                1,
                1,
                4,
                1,
                1,
                0,
                s as *mut c_void,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(r, CUDA_ERROR_INVALID_HANDLE, "a stream of device 1 on device 0");
    })
    .unwrap();
    let _ = m2h;
    // A garbage handle is an error, not a crash.
    assert_eq!(
        launch(0x5EE0_0000_DEAD_BEEFu64 as *mut c_void, [1, 1, 1], [1, 1, 1], 0, &[]),
        CUDA_ERROR_INVALID_HANDLE
    );
}
