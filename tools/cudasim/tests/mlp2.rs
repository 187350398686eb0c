//! TVM's own PTX: the two dense kernels of `mlp2_nvptx.so` (TVM v0.8, sm_70, libdevice not
//! linked: `__nv_fmaf` is an external call), run on the simulator and compared with a CPU
//! computation of the same layers.

mod common;
use common::*;

/// The PTX inside `../shared/fixtures/mlp2_nvptx.so` (the `cuda` blob's image: text from
/// `.version` to its NUL), or `None` (skip) when the fixtures are absent; under `CI=true` an
/// absent fixture is a failure.
fn tvm_ptx() -> Option<String> {
    let shared = std::env::var_os("TVMRT_SHARED_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
        std::path::PathBuf::from,
    );
    let p = shared.join("fixtures/mlp2_nvptx.so");
    let Ok(bytes) = std::fs::read(&p) else {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "fixture {} missing (required under CI)", p.display());
        println!("SKIP: fixture {} not found", p.display());
        return None;
    };
    let start = bytes.windows(8).position(|w| w == b".version").expect("PTX in the library");
    let end = start + bytes[start..].iter().position(|&b| b == 0).expect("NUL-terminated");
    let ptx = String::from_utf8(bytes[start..end].to_vec()).expect("PTX is text");
    Some(if simulated() { ptx } else { define_fmaf(&ptx) })
}

/// The PTX with libdevice's `__nv_fmaf` defined instead of declared `.extern`: a real driver
/// has no libdevice to resolve it from (the simulator implements it natively).
fn define_fmaf(ptx: &str) -> String {
    let decl = ".extern .func  (.param .b32 func_retval0) __nv_fmaf";
    let start = ptx.find(decl).expect("the __nv_fmaf declaration");
    let end = start + ptx[start..].find(';').expect("its end");
    let def = ".func (.param .b32 func_retval0) __nv_fmaf(.param .b32 a, .param .b32 b, .param .b32 c)\n{\n\
        \t.reg .f32 %t<4>;\n\tld.param.f32 %t0, [a];\n\tld.param.f32 %t1, [b];\n\tld.param.f32 %t2, [c];\n\
        \tfma.rn.f32 %t3, %t0, %t1, %t2;\n\tst.param.f32 [func_retval0+0], %t3;\n\tret;\n}";
    format!("{}{def}{}", &ptx[..start], &ptx[end + 1..])
}

#[test]
fn fmaf_definition_runs_like_the_native_one() {
    // The rewrite used on a real driver, checked here on the simulator's PTX interpreter.
    let Some(ptx) = tvm_ptx() else { return };
    // (On another driver `tvm_ptx` has made the rewrite already.)
    let defined = if simulated() { define_fmaf(&ptx) } else { ptx };
    assert!(!defined.contains(".extern"), "declaration replaced");
    setup(0);
    let m = load(&defined);
    let (n_in, n_out) = (128, 10);
    let (x, w, b) = (values(n_in, 7), values(n_in * n_out, 8), values(n_out, 9));
    let (dx, dw, db, dy) = (Buf::from(&x), Buf::from(&w), Buf::from(&b), Buf::new(n_out * 4));
    let f = m.func("tvmgen_default_fused_nn_dense_add_kernel0");
    ok(launch(f, [n_out as u32, 1, 1], [64, 1, 1], 0, &[P::U64(dx.0), P::U64(dw.0), P::U64(dy.0), P::U64(db.0)]));
    close(&dy.read::<f32>(n_out), &dense(&x, &w, &b, n_in, false));
}

fn dense(x: &[f32], w: &[f32], b: &[f32], n_in: usize, relu: bool) -> Vec<f32> {
    b.iter()
        .enumerate()
        .map(|(o, bias)| {
            let s: f32 = (0..n_in).map(|i| x[i] * w[o * n_in + i]).sum::<f32>() + bias;
            if relu {
                s.max(0.0)
            } else {
                s
            }
        })
        .collect()
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((s >> 8) as f32 / (1u32 << 24) as f32) - 0.5
        })
        .collect()
}

fn close(got: &[f32], want: &[f32]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-4 + 1e-4 * w.abs(), "element {i}: {g} vs {w}");
    }
}

#[test]
fn tvm_dense_relu_kernel() {
    let Some(ptx) = tvm_ptx() else { return };
    setup(0);
    let m = load(&ptx);
    // dense_add_nn_relu: 784 inputs, one block of 64 threads per output (128 outputs).
    let (n_in, n_out) = (784, 128);
    let x = values(n_in, 1);
    let w = values(n_in * n_out, 2);
    let b = values(n_out, 3);
    let (dx, dw, db, dy) = (Buf::from(&x), Buf::from(&w), Buf::from(&b), Buf::new(n_out * 4));
    let f = m.func("tvmgen_default_fused_nn_dense_add_nn_relu_kernel0");
    ok(launch(f, [n_out as u32, 1, 1], [64, 1, 1], 0, &[P::U64(dx.0), P::U64(dw.0), P::U64(dy.0), P::U64(db.0)]));
    close(&dy.read::<f32>(n_out), &dense(&x, &w, &b, n_in, true));
}

#[test]
fn tvm_dense_kernel() {
    let Some(ptx) = tvm_ptx() else { return };
    setup(0);
    let m = load(&ptx);
    // dense_add: 128 inputs, 64 threads per block, 10 outputs.
    let (n_in, n_out) = (128, 10);
    let x = values(n_in, 4);
    let w = values(n_in * n_out, 5);
    let b = values(n_out, 6);
    let (dx, dw, db, dy) = (Buf::from(&x), Buf::from(&w), Buf::from(&b), Buf::new(n_out * 4));
    let f = m.func("tvmgen_default_fused_nn_dense_add_kernel0");
    ok(launch(f, [n_out as u32, 1, 1], [64, 1, 1], 0, &[P::U64(dx.0), P::U64(dw.0), P::U64(dy.0), P::U64(db.0)]));
    close(&dy.read::<f32>(n_out), &dense(&x, &w, &b, n_in, false));
}
