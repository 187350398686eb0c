//! libdevice's `__nv_*` functions, implemented natively. PTX that TVM exports without
//! libdevice linked in (as `mlp2_nvptx.so` was) calls them as `.extern .func`s; a real driver
//! would fail to link such a module, the simulator resolves the names here instead. Results
//! come from Rust's `f32`/`f64` methods (the host's libm) and the `libm` crate: correctly
//! rounded where libdevice is (`fma`, `sqrt`, rounding functions), within a few ulp elsewhere,
//! like libdevice itself, but not bit-identical to it.

use crate::ptx::ir::Native;

fn f(x: u64) -> f32 {
    f32::from_bits(x as u32)
}

fn d(x: u64) -> f64 {
    f64::from_bits(x)
}

fn rf(x: f32) -> u64 {
    u64::from(x.to_bits())
}

fn rd(x: f64) -> u64 {
    x.to_bits()
}

fn ri(x: i32) -> u64 {
    u64::from(x as u32)
}

fn logb(x: f32) -> f32 {
    if x == 0.0 {
        f32::NEG_INFINITY
    } else if !x.is_finite() {
        x.abs()
    } else {
        libm::ilogbf(x) as f32
    }
}

macro_rules! natives {
    ($( $name:literal : [$($p:literal),*] -> $r:literal = $f:expr ;)*) => {
        static NATIVES: &[Native] = &[ $( Native { name: $name, params: &[$($p),*], ret: $r, f: $f }, )* ];
    };
}

natives! {
    // float, one argument
    "__nv_expf": [4] -> 4 = |a| rf(f(a[0]).exp());
    "__nv_exp2f": [4] -> 4 = |a| rf(f(a[0]).exp2());
    "__nv_exp10f": [4] -> 4 = |a| rf(libm::exp10f(f(a[0])));
    "__nv_expm1f": [4] -> 4 = |a| rf(f(a[0]).exp_m1());
    "__nv_logf": [4] -> 4 = |a| rf(f(a[0]).ln());
    "__nv_log2f": [4] -> 4 = |a| rf(f(a[0]).log2());
    "__nv_log10f": [4] -> 4 = |a| rf(f(a[0]).log10());
    "__nv_log1pf": [4] -> 4 = |a| rf(f(a[0]).ln_1p());
    "__nv_logbf": [4] -> 4 = |a| rf(logb(f(a[0])));
    "__nv_sqrtf": [4] -> 4 = |a| rf(f(a[0]).sqrt());
    "__nv_rsqrtf": [4] -> 4 = |a| rf((1.0 / f64::from(f(a[0])).sqrt()) as f32);
    "__nv_cbrtf": [4] -> 4 = |a| rf(f(a[0]).cbrt());
    "__nv_rcbrtf": [4] -> 4 = |a| rf((1.0 / f64::from(f(a[0])).cbrt()) as f32);
    "__nv_sinf": [4] -> 4 = |a| rf(f(a[0]).sin());
    "__nv_cosf": [4] -> 4 = |a| rf(f(a[0]).cos());
    "__nv_tanf": [4] -> 4 = |a| rf(f(a[0]).tan());
    "__nv_asinf": [4] -> 4 = |a| rf(f(a[0]).asin());
    "__nv_acosf": [4] -> 4 = |a| rf(f(a[0]).acos());
    "__nv_atanf": [4] -> 4 = |a| rf(f(a[0]).atan());
    "__nv_sinhf": [4] -> 4 = |a| rf(f(a[0]).sinh());
    "__nv_coshf": [4] -> 4 = |a| rf(f(a[0]).cosh());
    "__nv_tanhf": [4] -> 4 = |a| rf(f(a[0]).tanh());
    "__nv_asinhf": [4] -> 4 = |a| rf(f(a[0]).asinh());
    "__nv_acoshf": [4] -> 4 = |a| rf(f(a[0]).acosh());
    "__nv_atanhf": [4] -> 4 = |a| rf(f(a[0]).atanh());
    "__nv_erff": [4] -> 4 = |a| rf(libm::erff(f(a[0])));
    "__nv_erfcf": [4] -> 4 = |a| rf(libm::erfcf(f(a[0])));
    "__nv_lgammaf": [4] -> 4 = |a| rf(libm::lgammaf(f(a[0])));
    "__nv_tgammaf": [4] -> 4 = |a| rf(libm::tgammaf(f(a[0])));
    "__nv_fabsf": [4] -> 4 = |a| rf(f(a[0]).abs());
    "__nv_floorf": [4] -> 4 = |a| rf(f(a[0]).floor());
    "__nv_ceilf": [4] -> 4 = |a| rf(f(a[0]).ceil());
    "__nv_truncf": [4] -> 4 = |a| rf(f(a[0]).trunc());
    "__nv_roundf": [4] -> 4 = |a| rf(f(a[0]).round());
    "__nv_rintf": [4] -> 4 = |a| rf(f(a[0]).round_ties_even());
    "__nv_nearbyintf": [4] -> 4 = |a| rf(f(a[0]).round_ties_even());
    "__nv_saturatef": [4] -> 4 = |a| rf(if f(a[0]) > 0.0 { f(a[0]).min(1.0) } else { 0.0 });
    "__nv_normcdff": [4] -> 4 = |a| rf(0.5 * libm::erfcf(-f(a[0]) / std::f32::consts::SQRT_2));
    "__nv_fast_expf": [4] -> 4 = |a| rf(f(a[0]).exp());
    "__nv_fast_exp10f": [4] -> 4 = |a| rf(libm::exp10f(f(a[0])));
    "__nv_fast_logf": [4] -> 4 = |a| rf(f(a[0]).ln());
    "__nv_fast_log2f": [4] -> 4 = |a| rf(f(a[0]).log2());
    "__nv_fast_log10f": [4] -> 4 = |a| rf(f(a[0]).log10());
    "__nv_fast_sinf": [4] -> 4 = |a| rf(f(a[0]).sin());
    "__nv_fast_cosf": [4] -> 4 = |a| rf(f(a[0]).cos());
    "__nv_fast_tanf": [4] -> 4 = |a| rf(f(a[0]).tan());
    "__nv_isnanf": [4] -> 4 = |a| ri(i32::from(f(a[0]).is_nan()));
    "__nv_isinff": [4] -> 4 = |a| ri(i32::from(f(a[0]).is_infinite()));
    "__nv_finitef": [4] -> 4 = |a| ri(i32::from(f(a[0]).is_finite()));
    "__nv_signbitf": [4] -> 4 = |a| ri(i32::from(f(a[0]).is_sign_negative()));
    // float, two or three arguments
    "__nv_powf": [4, 4] -> 4 = |a| rf(f(a[0]).powf(f(a[1])));
    "__nv_fast_powf": [4, 4] -> 4 = |a| rf(f(a[0]).powf(f(a[1])));
    "__nv_powif": [4, 4] -> 4 = |a| rf(f(a[0]).powi(a[1] as u32 as i32));
    "__nv_fmodf": [4, 4] -> 4 = |a| rf(f(a[0]) % f(a[1]));
    "__nv_remainderf": [4, 4] -> 4 = |a| rf(libm::remainderf(f(a[0]), f(a[1])));
    "__nv_atan2f": [4, 4] -> 4 = |a| rf(f(a[0]).atan2(f(a[1])));
    "__nv_fminf": [4, 4] -> 4 = |a| rf(f(a[0]).min(f(a[1])));
    "__nv_fmaxf": [4, 4] -> 4 = |a| rf(f(a[0]).max(f(a[1])));
    "__nv_hypotf": [4, 4] -> 4 = |a| rf(f(a[0]).hypot(f(a[1])));
    "__nv_copysignf": [4, 4] -> 4 = |a| rf(f(a[0]).copysign(f(a[1])));
    "__nv_fdimf": [4, 4] -> 4 = |a| rf(libm::fdimf(f(a[0]), f(a[1])));
    "__nv_nextafterf": [4, 4] -> 4 = |a| rf(libm::nextafterf(f(a[0]), f(a[1])));
    "__nv_fdividef": [4, 4] -> 4 = |a| rf(f(a[0]) / f(a[1]));
    "__nv_fast_fdividef": [4, 4] -> 4 = |a| rf(f(a[0]) / f(a[1]));
    "__nv_ldexpf": [4, 4] -> 4 = |a| rf(libm::ldexpf(f(a[0]), a[1] as u32 as i32));
    "__nv_scalbnf": [4, 4] -> 4 = |a| rf(libm::scalbnf(f(a[0]), a[1] as u32 as i32));
    "__nv_fmaf": [4, 4, 4] -> 4 = |a| rf(f(a[0]).mul_add(f(a[1]), f(a[2])));
    "__nv_fmaf_rn": [4, 4, 4] -> 4 = |a| rf(f(a[0]).mul_add(f(a[1]), f(a[2])));
    "__nv_fadd_rn": [4, 4] -> 4 = |a| rf(f(a[0]) + f(a[1]));
    "__nv_fsub_rn": [4, 4] -> 4 = |a| rf(f(a[0]) - f(a[1]));
    "__nv_fmul_rn": [4, 4] -> 4 = |a| rf(f(a[0]) * f(a[1]));
    "__nv_fdiv_rn": [4, 4] -> 4 = |a| rf(f(a[0]) / f(a[1]));
    "__nv_fsqrt_rn": [4] -> 4 = |a| rf(f(a[0]).sqrt());
    "__nv_frcp_rn": [4] -> 4 = |a| rf(1.0 / f(a[0]));
    // double
    "__nv_exp": [8] -> 8 = |a| rd(d(a[0]).exp());
    "__nv_exp2": [8] -> 8 = |a| rd(d(a[0]).exp2());
    "__nv_exp10": [8] -> 8 = |a| rd(libm::exp10(d(a[0])));
    "__nv_expm1": [8] -> 8 = |a| rd(d(a[0]).exp_m1());
    "__nv_log": [8] -> 8 = |a| rd(d(a[0]).ln());
    "__nv_log2": [8] -> 8 = |a| rd(d(a[0]).log2());
    "__nv_log10": [8] -> 8 = |a| rd(d(a[0]).log10());
    "__nv_log1p": [8] -> 8 = |a| rd(d(a[0]).ln_1p());
    "__nv_sqrt": [8] -> 8 = |a| rd(d(a[0]).sqrt());
    "__nv_rsqrt": [8] -> 8 = |a| rd(1.0 / d(a[0]).sqrt());
    "__nv_cbrt": [8] -> 8 = |a| rd(d(a[0]).cbrt());
    "__nv_sin": [8] -> 8 = |a| rd(d(a[0]).sin());
    "__nv_cos": [8] -> 8 = |a| rd(d(a[0]).cos());
    "__nv_tan": [8] -> 8 = |a| rd(d(a[0]).tan());
    "__nv_asin": [8] -> 8 = |a| rd(d(a[0]).asin());
    "__nv_acos": [8] -> 8 = |a| rd(d(a[0]).acos());
    "__nv_atan": [8] -> 8 = |a| rd(d(a[0]).atan());
    "__nv_sinh": [8] -> 8 = |a| rd(d(a[0]).sinh());
    "__nv_cosh": [8] -> 8 = |a| rd(d(a[0]).cosh());
    "__nv_tanh": [8] -> 8 = |a| rd(d(a[0]).tanh());
    "__nv_asinh": [8] -> 8 = |a| rd(d(a[0]).asinh());
    "__nv_acosh": [8] -> 8 = |a| rd(d(a[0]).acosh());
    "__nv_atanh": [8] -> 8 = |a| rd(d(a[0]).atanh());
    "__nv_erf": [8] -> 8 = |a| rd(libm::erf(d(a[0])));
    "__nv_erfc": [8] -> 8 = |a| rd(libm::erfc(d(a[0])));
    "__nv_lgamma": [8] -> 8 = |a| rd(libm::lgamma(d(a[0])));
    "__nv_tgamma": [8] -> 8 = |a| rd(libm::tgamma(d(a[0])));
    "__nv_fabs": [8] -> 8 = |a| rd(d(a[0]).abs());
    "__nv_floor": [8] -> 8 = |a| rd(d(a[0]).floor());
    "__nv_ceil": [8] -> 8 = |a| rd(d(a[0]).ceil());
    "__nv_trunc": [8] -> 8 = |a| rd(d(a[0]).trunc());
    "__nv_round": [8] -> 8 = |a| rd(d(a[0]).round());
    "__nv_rint": [8] -> 8 = |a| rd(d(a[0]).round_ties_even());
    "__nv_nearbyint": [8] -> 8 = |a| rd(d(a[0]).round_ties_even());
    "__nv_isnand": [8] -> 4 = |a| ri(i32::from(d(a[0]).is_nan()));
    "__nv_isinfd": [8] -> 4 = |a| ri(i32::from(d(a[0]).is_infinite()));
    "__nv_isfinited": [8] -> 4 = |a| ri(i32::from(d(a[0]).is_finite()));
    "__nv_signbitd": [8] -> 4 = |a| ri(i32::from(d(a[0]).is_sign_negative()));
    "__nv_pow": [8, 8] -> 8 = |a| rd(d(a[0]).powf(d(a[1])));
    "__nv_powi": [8, 4] -> 8 = |a| rd(d(a[0]).powi(a[1] as u32 as i32));
    "__nv_fmod": [8, 8] -> 8 = |a| rd(d(a[0]) % d(a[1]));
    "__nv_remainder": [8, 8] -> 8 = |a| rd(libm::remainder(d(a[0]), d(a[1])));
    "__nv_atan2": [8, 8] -> 8 = |a| rd(d(a[0]).atan2(d(a[1])));
    "__nv_fmin": [8, 8] -> 8 = |a| rd(d(a[0]).min(d(a[1])));
    "__nv_fmax": [8, 8] -> 8 = |a| rd(d(a[0]).max(d(a[1])));
    "__nv_hypot": [8, 8] -> 8 = |a| rd(d(a[0]).hypot(d(a[1])));
    "__nv_copysign": [8, 8] -> 8 = |a| rd(d(a[0]).copysign(d(a[1])));
    "__nv_fdim": [8, 8] -> 8 = |a| rd(libm::fdim(d(a[0]), d(a[1])));
    "__nv_nextafter": [8, 8] -> 8 = |a| rd(libm::nextafter(d(a[0]), d(a[1])));
    "__nv_ldexp": [8, 4] -> 8 = |a| rd(libm::ldexp(d(a[0]), a[1] as u32 as i32));
    "__nv_fma": [8, 8, 8] -> 8 = |a| rd(d(a[0]).mul_add(d(a[1]), d(a[2])));
    // integers
    "__nv_abs": [4] -> 4 = |a| ri((a[0] as u32 as i32).wrapping_abs());
    "__nv_llabs": [8] -> 8 = |a| (a[0] as i64).wrapping_abs() as u64;
    "__nv_min": [4, 4] -> 4 = |a| ri((a[0] as u32 as i32).min(a[1] as u32 as i32));
    "__nv_max": [4, 4] -> 4 = |a| ri((a[0] as u32 as i32).max(a[1] as u32 as i32));
    "__nv_umin": [4, 4] -> 4 = |a| u64::from((a[0] as u32).min(a[1] as u32));
    "__nv_umax": [4, 4] -> 4 = |a| u64::from((a[0] as u32).max(a[1] as u32));
    "__nv_llmin": [8, 8] -> 8 = |a| (a[0] as i64).min(a[1] as i64) as u64;
    "__nv_llmax": [8, 8] -> 8 = |a| (a[0] as i64).max(a[1] as i64) as u64;
    "__nv_ullmin": [8, 8] -> 8 = |a| a[0].min(a[1]);
    "__nv_ullmax": [8, 8] -> 8 = |a| a[0].max(a[1]);
    "__nv_popc": [4] -> 4 = |a| u64::from((a[0] as u32).count_ones());
    "__nv_popcll": [8] -> 4 = |a| u64::from(a[0].count_ones());
    "__nv_clz": [4] -> 4 = |a| u64::from((a[0] as u32).leading_zeros());
    "__nv_clzll": [8] -> 4 = |a| u64::from(a[0].leading_zeros());
    "__nv_ffs": [4] -> 4 = |a| { let v = a[0] as u32; u64::from(if v == 0 { 0 } else { v.trailing_zeros() + 1 }) };
    "__nv_ffsll": [8] -> 4 = |a| u64::from(if a[0] == 0 { 0 } else { a[0].trailing_zeros() + 1 });
    "__nv_brev": [4] -> 4 = |a| u64::from((a[0] as u32).reverse_bits());
    "__nv_brevll": [8] -> 8 = |a| a[0].reverse_bits();
    "__nv_mulhi": [4, 4] -> 4 = |a| ri(((i64::from(a[0] as u32 as i32) * i64::from(a[1] as u32 as i32)) >> 32) as i32);
    "__nv_umulhi": [4, 4] -> 4 = |a| ((a[0] & 0xFFFF_FFFF) * (a[1] & 0xFFFF_FFFF)) >> 32;
    "__nv_mul64hi": [8, 8] -> 8 = |a| ((i128::from(a[0] as i64) * i128::from(a[1] as i64)) >> 64) as u64;
    "__nv_umul64hi": [8, 8] -> 8 = |a| ((u128::from(a[0]) * u128::from(a[1])) >> 64) as u64;
    "__nv_float_as_int": [4] -> 4 = |a| a[0] & 0xFFFF_FFFF;
    "__nv_int_as_float": [4] -> 4 = |a| a[0] & 0xFFFF_FFFF;
    "__nv_double_as_longlong": [8] -> 8 = |a| a[0];
    "__nv_longlong_as_double": [8] -> 8 = |a| a[0];
}

/// The native implementation of `name`, if the simulator has one.
pub fn find(name: &str) -> Option<&'static Native> {
    NATIVES.iter().find(|n| n.name == name)
}

/// Every implemented name (for the README and tests).
pub fn names() -> impl Iterator<Item = &'static str> {
    NATIVES.iter().map(|n| n.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call1(name: &str, x: f32) -> f32 {
        f32::from_bits((find(name).unwrap().f)(&[u64::from(x.to_bits())]) as u32)
    }

    #[test]
    fn float_functions() {
        assert_eq!(call1("__nv_expf", 0.0), 1.0);
        assert!((call1("__nv_tanhf", 0.5) - 0.462_117_16).abs() < 1e-6);
        assert!((call1("__nv_erff", 1.0) - 0.842_700_8).abs() < 1e-6);
        assert_eq!(call1("__nv_sqrtf", 9.0), 3.0);
        let fma = find("__nv_fmaf").unwrap();
        let r = (fma.f)(&[2.0f32.to_bits().into(), 3.0f32.to_bits().into(), 1.0f32.to_bits().into()]);
        assert_eq!(f32::from_bits(r as u32), 7.0);
        assert_eq!(fma.params, &[4, 4, 4]);
        let pow = find("__nv_pow").unwrap();
        assert_eq!(f64::from_bits((pow.f)(&[2.0f64.to_bits(), 10.0f64.to_bits()])), 1024.0);
        assert_eq!((find("__nv_popcll").unwrap().f)(&[u64::MAX]), 64);
        assert_eq!((find("__nv_umulhi").unwrap().f)(&[0xFFFF_FFFF, 2]), 1);
        assert!(find("__nv_nothing").is_none());
        let mut seen = std::collections::HashSet::new();
        assert!(names().all(|n| seen.insert(n)), "names are unique");
    }
}
