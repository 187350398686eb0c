//! How fast the simulator runs kernels, to keep the CI budget in view (no speed goal):
//! TVM's two mlp2_nvptx kernels (from `../shared/fixtures/mlp2_nvptx.so`; a whole model run
//! is one of each) and an ALU loop, each launched and waited for `REPS` times; prints
//! milliseconds per launch and warp-instructions per second of the loop.
//!
//! `cargo bench -p cudasim --bench interp`. The model as a whole, through the runtime:
//! `TVM_CUDA_LIBRARY=$PWD/target/release/libcudasim.so BENCH_DEVICE=cuda cargo bench --bench gpu`.

use cudasim::driver::*;
use std::ffi::{c_void, CString};
use std::time::Instant;

fn ok(r: i32) {
    assert_eq!(r, 0, "driver call failed: {r}");
}

fn load(ptx: &str) -> *mut c_void {
    let t = CString::new(ptx).unwrap();
    let mut m = std::ptr::null_mut();
    // SAFETY: a NUL-terminated image and an out-pointer.
    ok(unsafe { cuModuleLoadData(&mut m, t.as_ptr().cast()) });
    m
}

fn func(m: *mut c_void, name: &str) -> *mut c_void {
    let n = CString::new(name).unwrap();
    let mut f = std::ptr::null_mut();
    // SAFETY: a loaded module, a C string, an out-pointer.
    ok(unsafe { cuModuleGetFunction(&mut f, m, n.as_ptr()) });
    f
}

fn alloc(n: usize) -> u64 {
    let mut p = 0;
    // SAFETY: an out-pointer.
    ok(unsafe { cuMemAlloc_v2(&mut p, n) });
    let zeros = vec![0u8; n];
    // SAFETY: both hold `n` bytes.
    ok(unsafe { cuMemcpyHtoD_v2(p, zeros.as_ptr().cast(), n) });
    p
}

/// Milliseconds per launch (and wait) of `f`, median of 5 rounds of `reps`.
fn time(f: *mut c_void, grid: u32, block: u32, args: &[u64], reps: usize) -> f64 {
    let mut slots = args.to_vec();
    let mut ptrs: Vec<*mut c_void> = slots.iter_mut().map(|s| (s as *mut u64).cast()).collect();
    let mut rounds: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                // SAFETY: one pointer per parameter (8-byte slots).
                ok(unsafe {
                    cuLaunchKernel(
                        f,
                        grid,
                        1,
                        1,
                        block,
                        1,
                        1,
                        0,
                        std::ptr::null_mut(),
                        ptrs.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                });
                // SAFETY: no preconditions.
                ok(unsafe { cuCtxSynchronize() });
            }
            t.elapsed().as_secs_f64() * 1e3 / reps as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[2]
}

const LOOP: &str = ".version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 out, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<4>;
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
    mov.f32 %f1, 0f3F800000;
L:
    fma.rn.f32 %f1, %f1, 0f3F7FFFFF, 0f3A83126F;
    add.s32 %r2, %r2, 1;
    setp.lt.s32 %p1, %r2, %r1;
    @%p1 bra L;
    ld.param.u64 %rd1, [out];
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f1;
    ret;
}
";

fn main() {
    std::env::set_var("CUDASIM_QUIET", "1");
    let mut ctx = std::ptr::null_mut();
    // SAFETY: initialisation and the primary context of device 0.
    unsafe {
        ok(cuInit(0));
        ok(cuDevicePrimaryCtxRetain(&mut ctx, 0));
        ok(cuCtxSetCurrent(ctx));
    }
    let so = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/mlp2_nvptx.so");
    match std::fs::read(&so) {
        Ok(bytes) => {
            let start = bytes.windows(8).position(|w| w == b".version").expect("PTX");
            let end = start + bytes[start..].iter().position(|&b| b == 0).expect("NUL");
            let m = load(std::str::from_utf8(&bytes[start..end]).unwrap());
            let (x, w1, b1, y1) = (alloc(784 * 4), alloc(784 * 128 * 4), alloc(128 * 4), alloc(128 * 4));
            let (w2, b2, y2) = (alloc(128 * 10 * 4), alloc(10 * 4), alloc(10 * 4));
            let d1 = time(func(m, "tvmgen_default_fused_nn_dense_add_nn_relu_kernel0"), 128, 64, &[x, w1, y1, b1], 20);
            let d2 = time(func(m, "tvmgen_default_fused_nn_dense_add_kernel0"), 10, 64, &[y1, w2, y2, b2], 20);
            println!("mlp2_nvptx dense 784->128 + relu (128 blocks x 64)  {d1:8.3} ms per launch");
            println!("mlp2_nvptx dense 128->10 (10 blocks x 64)            {d2:8.3} ms per launch");
            println!("mlp2_nvptx kernels of one model run                   {:8.3} ms", d1 + d2);
        }
        Err(_) => println!("mlp2_nvptx.so not found at {}: model kernels skipped", so.display()),
    }
    let m = load(LOOP);
    let out = alloc(256 * 4);
    let iters = 2000u64;
    let ms = time(func(m, "spin"), 8, 256, &[out, iters], 3);
    // 4 instructions per iteration, 8 warps per block, 8 blocks.
    let warp_instrs = (iters * 4 + 14) * 8 * 8;
    println!("ALU loop (64 warps x {iters} iterations)               {ms:8.3} ms per launch");
    println!("  {:.1} million warp-instructions per second", warp_instrs as f64 / ms / 1e3);
}
