//! Failing kernels (in a process of their own: a failure makes the context unusable, for every
//! later call, until it is reset): out-of-bounds global and shared accesses, a misaligned
//! access, `trap`, a kernel that never ends, warp instructions of a diverged warp. Also: calls
//! before `cuInit`.

mod common;
use common::*;
use cudasim::driver::errors::*;
use cudasim::driver::*;

const KERNELS: &str = ".visible .entry oob(.param .u64 p)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
.visible .entry misaligned(.param .u64 p)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    ld.global.u32 %r1, [%rd1+2];
    ret;
}
.visible .entry trapper()
{
    trap;
    ret;
}
.visible .entry forever()
{
    .reg .pred %p<2>;
LOOP:
    bra.uni LOOP;
}
.visible .entry shared_oob()
{
    .reg .b32 %r<3>;
    .shared .align 4 .b8 sh[16];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    st.shared.u32 [%r2], %r1;
    ret;
}
.visible .entry diverged_shuffle()
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra SKIP;
    shfl.sync.down.b32 %r2, %r1, 1, 31, -1;
SKIP:
    ret;
}
";

/// Launches `name` (one block of `threads`), waits, returns the first error; then checks the
/// error is sticky and clears it with a reset.
fn fails(m: &Module, name: &str, threads: u32, args: &[P]) -> CUresult {
    let f = m.func(name);
    let r = launch(f, [1, 1, 1], [threads, 1, 1], 0, args);
    if r != CUDA_SUCCESS {
        let mut p = 0;
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { cuMemAlloc_v2(&mut p, 16) }, r, "{name}: the error is sticky");
        // SAFETY: device 0 exists.
        ok(unsafe { cuDevicePrimaryCtxReset_v2(0) });
    }
    r
}

#[test]
fn failing_kernels() {
    let mut n = 0;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { cuDeviceGetCount(&mut n) }, CUDA_ERROR_NOT_INITIALIZED);
    std::env::set_var("CUDASIM_MAX_STEPS", "2000000");
    setup(0);
    let src = ptx(KERNELS);
    let buf = Buf::new(64);
    let m = load(&src);
    // 16 elements fit; 64 threads write past the end.
    let oob = m.func("oob");
    ok(launch(oob, [1, 1, 1], [16, 1, 1], 0, &[P::U64(buf.0)]));
    let r = launch_async(oob, [1, 1, 1], [64, 1, 1], 0, &[P::U64(buf.0)]);
    assert_eq!(r, CUDA_SUCCESS, "launches are asynchronous: the fault shows later");
    let mut host = [0u32; 4];
    // SAFETY: `host` holds 16 bytes.
    let r = unsafe { cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), buf.0, 16) };
    assert_eq!(r, CUDA_ERROR_ILLEGAL_ADDRESS);
    // Every later call on the context reports it.
    let mut p = 0;
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(cuMemAlloc_v2(&mut p, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
        assert_eq!(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    }
    assert_eq!(launch_async(oob, [1, 1, 1], [1, 1, 1], 0, &[P::U64(buf.0)]), CUDA_ERROR_ILLEGAL_ADDRESS);
    // A reset frees everything and clears the error.
    // SAFETY: device 0 exists.
    ok(unsafe { cuDevicePrimaryCtxReset_v2(0) });
    std::mem::forget((buf, m));
    let m = load(&src);
    let buf = Buf::new(64);
    assert_eq!(fails(&m, "oob", 17, &[P::U64(buf.0)]), CUDA_ERROR_ILLEGAL_ADDRESS);
    std::mem::forget((buf, m));
    let m = load(&src);
    let buf = Buf::new(64);
    assert_eq!(fails(&m, "misaligned", 1, &[P::U64(buf.0)]), CUDA_ERROR_MISALIGNED_ADDRESS);
    std::mem::forget((buf, m));
    let m = load(&src);
    assert_eq!(fails(&m, "trapper", 1, &[]), CUDA_ERROR_LAUNCH_FAILED);
    std::mem::forget(m);
    let m = load(&src);
    assert_eq!(fails(&m, "forever", 32, &[]), CUDA_ERROR_LAUNCH_TIMEOUT);
    std::mem::forget(m);
    let m = load(&src);
    assert_eq!(fails(&m, "shared_oob", 4, &[]), CUDA_SUCCESS);
    assert_eq!(fails(&m, "shared_oob", 5, &[]), CUDA_ERROR_ILLEGAL_ADDRESS);
    std::mem::forget(m);
    let m = load(&src);
    assert_eq!(fails(&m, "diverged_shuffle", 32, &[]), CUDA_ERROR_ILLEGAL_INSTRUCTION);
    std::mem::forget(m);
    // After all that, the device works.
    let m = load(&src);
    let buf = Buf::new(64);
    ok(launch(m.func("oob"), [1, 1, 1], [16, 1, 1], 0, &[P::U64(buf.0)]));
    assert_eq!(buf.read::<u32>(16), (0..16).collect::<Vec<u32>>());
}
