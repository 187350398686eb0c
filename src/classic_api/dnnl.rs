//! The `dnnl_*` kernels that C-source BYOC libraries exported by TVM v0.8 import from
//! `libtvm_runtime.so` (declared `extern "C"` in TVM's `src/runtime/contrib/dnnl/dnnl_kernel.h`),
//! implemented on oneDNN by [`crate::byoc::dnnl::kernels`].
//!
//! They return nothing (as in TVM): on failure (oneDNN missing, bad sizes) the message goes to
//! the thread's last error (`TVMGetLastError`) and to stderr, and the outputs are not written.
//!
//! `dnnl_relu` and `dnnl_binary_op` take a `std::vector<int64_t>` by value: under the Itanium
//! C++ ABI (every Unix C++ compiler) a class with a non-trivial destructor is passed as a
//! pointer to a caller-owned temporary, which the caller destroys; libstdc++ and libc++ both lay
//! a vector out as `{begin, end, end_of_storage}`. [`StdVectorI64`] reads that.

use crate::byoc::dnnl::kernels::{self, Kernel};
use crate::error::{Error, Result};
use std::ffi::c_int;

/// A `std::vector<int64_t>` passed by value (see the module doc).
#[repr(C)]
pub struct StdVectorI64 {
    begin: *const i64,
    end: *const i64,
    end_of_storage: *const i64,
}

impl StdVectorI64 {
    /// A vector's three pointers (for callers written in Rust, such as tests).
    pub fn from_raw_parts(begin: *const i64, end: *const i64, end_of_storage: *const i64) -> StdVectorI64 {
        StdVectorI64 { begin, end, end_of_storage }
    }
}

/// The elements of a vector passed by value.
///
/// # Safety
/// `v` is NULL or points to a live vector.
unsafe fn vector(v: *const StdVectorI64) -> Result<Vec<i64>> {
    // SAFETY: per contract.
    let v = unsafe { v.as_ref() }.ok_or_else(|| Error::value("NULL shape vector"))?;
    if v.begin.is_null() {
        return Ok(Vec::new());
    }
    let bytes = (v.end as usize).checked_sub(v.begin as usize).filter(|b| b % 8 == 0 && *b <= 8 * 12);
    let n = bytes.ok_or_else(|| Error::value("malformed shape vector"))? / 8;
    // SAFETY: a live vector holds `end - begin` elements at `begin`.
    Ok(unsafe { std::slice::from_raw_parts(v.begin, n) }.to_vec())
}

fn report(name: &str, r: Result<()>) {
    if let Err(e) = r {
        let msg = format!("{name}: {e}");
        eprintln!("tvm_runtime: {msg}");
        crate::error::set_last_error(&msg);
    }
}

fn call(name: &str, body: impl FnOnce() -> Result<()>) {
    super::guard::guard_void(|| report(name, body()));
}

#[allow(clippy::too_many_arguments, reason = "TVM's C signature")]
fn conv_key(p: [c_int; 14], bias: bool, relu: bool) -> Kernel {
    Kernel::Conv(p.map(i64::from), bias, relu)
}

/// `dnnl_conv2d`: a convolution without bias.
///
/// # Safety
/// The buffers hold the sizes the parameters give (NCHW data, OIHW weights, NCHW output).
#[no_mangle]
#[allow(clippy::too_many_arguments, reason = "TVM's C signature")]
pub unsafe extern "C" fn dnnl_conv2d(
    data: *mut f32,
    weights: *mut f32,
    out: *mut f32,
    p_n: c_int,
    p_c: c_int,
    p_h: c_int,
    p_w: c_int,
    p_o: c_int,
    p_g: c_int,
    p_ph0: c_int,
    p_pw0: c_int,
    p_ph1: c_int,
    p_pw1: c_int,
    p_kh: c_int,
    p_kw: c_int,
    p_sh: c_int,
    p_sw: c_int,
) {
    let k = conv_key([p_n, p_c, p_h, p_w, p_o, p_g, p_ph0, p_pw0, p_ph1, p_pw1, p_kh, p_kw, p_sh, p_sw], false, false);
    // SAFETY: per contract.
    call("dnnl_conv2d", || unsafe { kernels::run(&k, &[data, weights], &[out]) });
}

/// `dnnl_fused_conv2d_relu`: a convolution followed by ReLU.
///
/// # Safety
/// As [`dnnl_conv2d`].
#[no_mangle]
#[allow(clippy::too_many_arguments, reason = "TVM's C signature")]
pub unsafe extern "C" fn dnnl_fused_conv2d_relu(
    data: *mut f32,
    weights: *mut f32,
    out: *mut f32,
    p_n: c_int,
    p_c: c_int,
    p_h: c_int,
    p_w: c_int,
    p_o: c_int,
    p_g: c_int,
    p_ph0: c_int,
    p_pw0: c_int,
    p_ph1: c_int,
    p_pw1: c_int,
    p_kh: c_int,
    p_kw: c_int,
    p_sh: c_int,
    p_sw: c_int,
) {
    let k = conv_key([p_n, p_c, p_h, p_w, p_o, p_g, p_ph0, p_pw0, p_ph1, p_pw1, p_kh, p_kw, p_sh, p_sw], false, true);
    // SAFETY: per contract.
    call("dnnl_fused_conv2d_relu", || unsafe { kernels::run(&k, &[data, weights], &[out]) });
}

/// `dnnl_fused_conv2d_bias_relu`: a convolution plus bias (`O` elements), then ReLU.
///
/// # Safety
/// As [`dnnl_conv2d`]; `bias` holds `O` floats.
#[no_mangle]
#[allow(clippy::too_many_arguments, reason = "TVM's C signature")]
pub unsafe extern "C" fn dnnl_fused_conv2d_bias_relu(
    data: *mut f32,
    weights: *mut f32,
    bias: *mut f32,
    out: *mut f32,
    p_n: c_int,
    p_c: c_int,
    p_h: c_int,
    p_w: c_int,
    p_o: c_int,
    p_g: c_int,
    p_ph0: c_int,
    p_pw0: c_int,
    p_ph1: c_int,
    p_pw1: c_int,
    p_kh: c_int,
    p_kw: c_int,
    p_sh: c_int,
    p_sw: c_int,
) {
    let k = conv_key([p_n, p_c, p_h, p_w, p_o, p_g, p_ph0, p_pw0, p_ph1, p_pw1, p_kh, p_kw, p_sh, p_sw], true, true);
    // SAFETY: per contract.
    call("dnnl_fused_conv2d_bias_relu", || unsafe { kernels::run(&k, &[data, weights, bias], &[out]) });
}

/// `dnnl_dense`: `out (B, O) = data (B, I) x weight (O, I)^T`.
///
/// # Safety
/// The buffers hold the sizes the parameters give.
#[no_mangle]
pub unsafe extern "C" fn dnnl_dense(
    data: *mut f32,
    weight: *mut f32,
    out: *mut f32,
    p_b: c_int,
    p_i: c_int,
    p_o: c_int,
) {
    let k = Kernel::Dense([p_b, p_i, p_o].map(i64::from));
    // SAFETY: per contract.
    call("dnnl_dense", || unsafe { kernels::run(&k, &[data, weight], &[out]) });
}

/// `dnnl_relu(data, out, std::vector<int64_t> shape)`.
///
/// # Safety
/// `shape` points to a live `std::vector<int64_t>` (how C++ passes it by value); the buffers
/// hold its element count.
#[no_mangle]
pub unsafe extern "C" fn dnnl_relu(data: *mut f32, out: *mut f32, shape: *const StdVectorI64) {
    call("dnnl_relu", || {
        // SAFETY: per contract.
        let k = Kernel::Relu(unsafe { vector(shape)? });
        // SAFETY: per contract.
        unsafe { kernels::run(&k, &[data], &[out]) }
    });
}

/// `dnnl_bn`: batch normalization of NCHW data with the moving statistics; `new_mean` and
/// `new_variance` (may be NULL) receive them unchanged.
///
/// # Safety
/// `data` and `out` hold `N*C*H*W` floats, the other buffers `C` each.
#[no_mangle]
#[allow(clippy::too_many_arguments, reason = "TVM's C signature")]
pub unsafe extern "C" fn dnnl_bn(
    data: *mut f32,
    gamma: *mut f32,
    beta: *mut f32,
    mean: *mut f32,
    variance: *mut f32,
    out: *mut f32,
    new_mean: *mut f32,
    new_variance: *mut f32,
    p_n: c_int,
    p_c: c_int,
    p_h: c_int,
    p_w: c_int,
    p_e: c_int,
) {
    let k = Kernel::BatchNorm([p_n, p_c, p_h, p_w].map(i64::from), i64::from(p_e));
    call("dnnl_bn", || {
        // SAFETY: per contract.
        unsafe { kernels::run(&k, &[data, gamma, beta, mean, variance], &[out])? };
        let c = usize::try_from(p_c).unwrap_or(0);
        for (from, to) in [(mean, new_mean), (variance, new_variance)] {
            if !to.is_null() && to != from {
                // SAFETY: both hold `C` floats per contract (and do not overlap unless equal).
                unsafe { std::ptr::copy(from, to, c) };
            }
        }
        Ok(())
    });
}

/// `dnnl_binary_op(data, weight, out, algo, std::vector<int64_t> shape)`: `algo` 0 adds, 1
/// multiplies, element-wise over `shape`.
///
/// # Safety
/// As [`dnnl_relu`].
#[no_mangle]
pub unsafe extern "C" fn dnnl_binary_op(
    data: *mut f32,
    weight: *mut f32,
    out: *mut f32,
    algo_type: c_int,
    shape: *const StdVectorI64,
) {
    call("dnnl_binary_op", || {
        // SAFETY: per contract.
        let k = Kernel::Binary(i64::from(algo_type), unsafe { vector(shape)? });
        // SAFETY: per contract.
        unsafe { kernels::run(&k, &[data, weight], &[out]) }
    });
}
