//! Floating-point semantics: arithmetic on `.f16`, `.f16x2`, `.f32` and `.f64` with PTX's
//! rounding modifiers (`.rn` natively; `.rz`, `.rm`, `.rp` exactly, from the residual of the
//! round-to-nearest result), `.ftz` and `.sat`; comparisons; `testp`; and `cvt` between every
//! integer and float type. `.approx` instructions return the correctly rounded (or the host
//! libm's) value, which is within the error bounds PTX documents for them.

use super::ir::{Cmp, F1, F2, F3};
use super::{mask, sx, Ty};
use half::{bf16, f16};

/// A rounding mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rnd {
    /// To nearest, ties to even.
    N,
    /// Toward zero.
    Z,
    /// Toward minus infinity.
    M,
    /// Toward plus infinity.
    P,
}

impl Rnd {
    /// `.rn`, `.rz`, `.rm`, `.rp` (float rounding) or `.rni`, ... (integer rounding).
    pub fn parse(s: &str) -> Option<(Rnd, bool)> {
        Some(match s {
            "rn" => (Rnd::N, false),
            "rz" => (Rnd::Z, false),
            "rm" => (Rnd::M, false),
            "rp" => (Rnd::P, false),
            "rni" => (Rnd::N, true),
            "rzi" => (Rnd::Z, true),
            "rmi" => (Rnd::M, true),
            "rpi" => (Rnd::P, true),
            _ => return None,
        })
    }
}

fn f32v(x: u64) -> f32 {
    f32::from_bits(x as u32)
}

fn f64v(x: u64) -> f64 {
    f64::from_bits(x)
}

fn f16v(x: u64) -> f32 {
    f16::from_bits(x as u16).to_f32()
}

fn next_up32(x: f32) -> f32 {
    if x.is_nan() || x == f32::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f32::from_bits(1);
    }
    let b = x.to_bits();
    f32::from_bits(if x > 0.0 { b + 1 } else { b - 1 })
}

fn next_down32(x: f32) -> f32 {
    -next_up32(-x)
}

fn next_up64(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f64::from_bits(1);
    }
    let b = x.to_bits();
    f64::from_bits(if x > 0.0 { b + 1 } else { b - 1 })
}

fn next_down64(x: f64) -> f64 {
    -next_up64(-x)
}

fn next_up16(x: f16) -> f16 {
    if x.is_nan() || x == f16::INFINITY {
        return x;
    }
    if x.to_f32() == 0.0 {
        return f16::from_bits(1);
    }
    let b = x.to_bits();
    f16::from_bits(if x.to_f32() > 0.0 { b + 1 } else { b - 1 })
}

fn next_down16(x: f16) -> f16 {
    -next_up16(-x)
}

/// Which way to step a round-to-nearest result `t` whose exact value differs from it by a
/// quantity of sign `r`: -1 down, +1 up, 0 keep.
fn step(t_positive: bool, t_zero: bool, r: f64, m: Rnd) -> i8 {
    if r == 0.0 || r.is_nan() {
        return 0;
    }
    let pos = if t_zero { r > 0.0 } else { t_positive };
    let down = match m {
        Rnd::M => r < 0.0,
        Rnd::Z => pos && r < 0.0,
        _ => false,
    };
    let up = match m {
        Rnd::P => r > 0.0,
        Rnd::Z => !pos && r > 0.0,
        _ => false,
    };
    if down {
        -1
    } else if up {
        1
    } else {
        0
    }
}

/// Rounds the exact value `s + resid` (`s` an f64, `resid` of which only the sign matters when
/// `s` is representable) to f32.
fn round32(s: f64, resid: f64, m: Rnd) -> f32 {
    let t = s as f32;
    if m == Rnd::N || t.is_nan() {
        return t;
    }
    let d = s - f64::from(t);
    let r = if d != 0.0 { d } else { resid };
    match step(t > 0.0, t == 0.0, r, m) {
        -1 => next_down32(t),
        1 => next_up32(t),
        _ => t,
    }
}

/// Rounds `s + resid` (the f64 `s` already rounded to nearest) to f64 in mode `m`.
fn round64(s: f64, resid: f64, m: Rnd) -> f64 {
    if m == Rnd::N || s.is_nan() {
        return s;
    }
    match step(s > 0.0, s == 0.0, resid, m) {
        -1 => next_down64(s),
        1 => next_up64(s),
        _ => s,
    }
}

/// Rounds the exact value `x + resid` to f16.
fn round16(x: f64, resid: f64, m: Rnd) -> f16 {
    let t = f16::from_f64(x);
    if m == Rnd::N || t.is_nan() {
        return t;
    }
    let d = x - t.to_f64();
    let r = if d != 0.0 { d } else { resid };
    match step(t.to_f32() > 0.0, t.to_f32() == 0.0, r, m) {
        -1 => next_down16(t),
        1 => next_up16(t),
        _ => t,
    }
}

fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

fn ftz32(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

fn ftz16(x: f32) -> f32 {
    if x != 0.0 && x.abs() < 6.103_515_6e-5 {
        0.0f32.copysign(x)
    } else {
        x
    }
}

fn sat(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        0.0
    } else if x > 1.0 {
        1.0
    } else {
        x
    }
}

/// An f32 result: flushed, saturated, NaN made canonical (`0x7FFFFFFF`, as the GPU does).
fn out32(x: f32, ftz: bool, sat_: bool) -> u64 {
    let mut x = if ftz { ftz32(x) } else { x };
    if sat_ {
        x = sat(f64::from(x)) as f32;
    }
    if x.is_nan() {
        0x7FFF_FFFF
    } else {
        u64::from(x.to_bits())
    }
}

fn out64(x: f64, sat_: bool) -> u64 {
    (if sat_ { sat(x) } else { x }).to_bits()
}

fn out16(x: f16, ftz: bool, sat_: bool) -> u64 {
    let mut v = x.to_f32();
    if ftz {
        v = ftz16(v);
    }
    if sat_ {
        v = sat(f64::from(v)) as f32;
    }
    if v.is_nan() {
        0x7FFF
    } else {
        u64::from(f16::from_f32(v).to_bits())
    }
}

/// Binary float operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FBin {
    /// `add`.
    Add,
    /// `sub`.
    Sub,
    /// `mul`.
    Mul,
    /// `div` (any flavour).
    Div,
    /// `min`.
    Min,
    /// `max`.
    Max,
    /// `min.NaN`.
    MinNan,
    /// `max.NaN`.
    MaxNan,
    /// `copysign` (sign of the first operand, magnitude of the second).
    Copysign,
}

fn bin64(op: FBin, a: f64, b: f64, m: Rnd) -> f64 {
    match op {
        FBin::Add | FBin::Sub => {
            let b = if op == FBin::Sub { -b } else { b };
            let (s, e) = two_sum(a, b);
            round64(s, e, m)
        }
        FBin::Mul => {
            let s = a * b;
            let e = if s.is_finite() { a.mul_add(b, -s) } else { 0.0 };
            round64(s, e, m)
        }
        FBin::Div => {
            let q = a / b;
            let r = if q.is_finite() && b.is_finite() && b != 0.0 { (-q).mul_add(b, a) * b.signum() } else { 0.0 };
            round64(q, r, m)
        }
        FBin::Min | FBin::Max | FBin::MinNan | FBin::MaxNan => minmax(op, a, b),
        FBin::Copysign => b.abs().copysign(a),
    }
}

fn minmax(op: FBin, a: f64, b: f64) -> f64 {
    let nan_prop = matches!(op, FBin::MinNan | FBin::MaxNan);
    if a.is_nan() || b.is_nan() {
        if nan_prop || (a.is_nan() && b.is_nan()) {
            return f64::NAN;
        }
        return if a.is_nan() { b } else { a };
    }
    let min = matches!(op, FBin::Min | FBin::MinNan);
    if a == b {
        // -0 orders below +0.
        return if min == a.is_sign_negative() { a } else { b };
    }
    if (a < b) == min {
        a
    } else {
        b
    }
}

/// The exact f32 result of a binary op, rounded in mode `m`.
fn bin32(op: FBin, a: f32, b: f32, m: Rnd) -> f32 {
    if m == Rnd::N {
        return match op {
            FBin::Add => a + b,
            FBin::Sub => a - b,
            FBin::Mul => a * b,
            FBin::Div => a / b,
            _ => minmax_or_copysign32(op, a, b),
        };
    }
    let (a64, b64) = (f64::from(a), f64::from(b));
    match op {
        FBin::Add | FBin::Sub => {
            let (s, e) = two_sum(a64, if op == FBin::Sub { -b64 } else { b64 });
            round32(s, e, m)
        }
        FBin::Mul => round32(a64 * b64, 0.0, m),
        FBin::Div => {
            let q = a64 / b64;
            let r = if q.is_finite() && b64.is_finite() && b64 != 0.0 {
                (-q).mul_add(b64, a64) * b64.signum()
            } else {
                0.0
            };
            round32(q, r, m)
        }
        _ => minmax_or_copysign32(op, a, b),
    }
}

fn minmax_or_copysign32(op: FBin, a: f32, b: f32) -> f32 {
    if op == FBin::Copysign {
        b.abs().copysign(a)
    } else {
        minmax(op, f64::from(a), f64::from(b)) as f32
    }
}

/// A binary float instruction on `ty` (`.f16`, `.f16x2`, `.f32`, `.f64`).
pub fn bin(op: FBin, ty: Ty, m: Rnd, ftz: bool, sat_: bool) -> F2 {
    match ty {
        Ty::F64 => Box::new(move |a, b| out64(bin64(op, f64v(a), f64v(b), m), sat_)),
        Ty::F32 => Box::new(move |a, b| {
            let (a, b) = if ftz { (ftz32(f32v(a)), ftz32(f32v(b))) } else { (f32v(a), f32v(b)) };
            if op == FBin::Copysign {
                return u64::from(b.abs().copysign(a).to_bits());
            }
            out32(bin32(op, a, b, m), ftz, sat_)
        }),
        Ty::F16 => Box::new(move |a, b| half_bin(op, a, b, m, ftz, sat_)),
        _ => Box::new(move |a, b| {
            half_bin(op, a & 0xFFFF, b & 0xFFFF, m, ftz, sat_)
                | (half_bin(op, (a >> 16) & 0xFFFF, (b >> 16) & 0xFFFF, m, ftz, sat_) << 16)
        }),
    }
}

fn half_bin(op: FBin, a: u64, b: u64, m: Rnd, ftz: bool, sat_: bool) -> u64 {
    let (mut x, mut y) = (f16v(a), f16v(b));
    if ftz {
        (x, y) = (ftz16(x), ftz16(y));
    }
    // The exact result of +, -, * of two halves is an f64; rounding it once gives the answer.
    let exact = match op {
        FBin::Add => f64::from(x) + f64::from(y),
        FBin::Sub => f64::from(x) - f64::from(y),
        FBin::Mul => f64::from(x) * f64::from(y),
        FBin::Div => f64::from(x) / f64::from(y),
        _ => f64::from(minmax_or_copysign32(op, x, y)),
    };
    out16(round16(exact, 0.0, m), ftz, sat_)
}

/// `fma` / `mad` on floats (`.f64` only with `.rn`: refused otherwise by the lowering).
pub fn fma(ty: Ty, m: Rnd, ftz: bool, sat_: bool) -> F3 {
    match ty {
        Ty::F64 => Box::new(move |a, b, c| out64(f64v(a).mul_add(f64v(b), f64v(c)), sat_)),
        Ty::F32 => Box::new(move |a, b, c| {
            let f = |x| if ftz { ftz32(f32v(x)) } else { f32v(x) };
            let (a, b, c) = (f(a), f(b), f(c));
            let r = if m == Rnd::N {
                a.mul_add(b, c)
            } else {
                let (s, e) = two_sum(f64::from(a) * f64::from(b), f64::from(c));
                round32(s, e, m)
            };
            out32(r, ftz, sat_)
        }),
        Ty::F16 => Box::new(move |a, b, c| half_fma(a, b, c, m, ftz, sat_)),
        _ => Box::new(move |a, b, c| {
            half_fma(a & 0xFFFF, b & 0xFFFF, c & 0xFFFF, m, ftz, sat_)
                | (half_fma((a >> 16) & 0xFFFF, (b >> 16) & 0xFFFF, (c >> 16) & 0xFFFF, m, ftz, sat_) << 16)
        }),
    }
}

fn half_fma(a: u64, b: u64, c: u64, m: Rnd, ftz: bool, sat_: bool) -> u64 {
    let f = |x| if ftz { ftz16(f16v(x)) } else { f16v(x) };
    let (s, e) = two_sum(f64::from(f(a)) * f64::from(f(b)), f64::from(f(c)));
    out16(round16(s, e, m), ftz, sat_)
}

/// Unary float operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FUn {
    /// `abs`.
    Abs,
    /// `neg`.
    Neg,
    /// `sqrt` (rounded).
    Sqrt,
    /// `rsqrt.approx`.
    Rsqrt,
    /// `rcp` (rounded).
    Rcp,
    /// `sin.approx`.
    Sin,
    /// `cos.approx`.
    Cos,
    /// `lg2.approx`.
    Lg2,
    /// `ex2.approx`.
    Ex2,
    /// `tanh.approx`.
    Tanh,
}

fn un64(op: FUn, a: f64, m: Rnd) -> f64 {
    match op {
        FUn::Abs => a.abs(),
        FUn::Neg => -a,
        FUn::Sqrt => {
            let s = a.sqrt();
            let r = if s.is_finite() && s != 0.0 { (-s).mul_add(s, a) } else { 0.0 };
            round64(s, r, m)
        }
        FUn::Rsqrt => 1.0 / a.sqrt(),
        FUn::Rcp => bin64(FBin::Div, 1.0, a, m),
        FUn::Sin => a.sin(),
        FUn::Cos => a.cos(),
        FUn::Lg2 => a.log2(),
        FUn::Ex2 => a.exp2(),
        FUn::Tanh => a.tanh(),
    }
}

fn un32(op: FUn, a: f32, m: Rnd) -> f32 {
    match op {
        FUn::Abs => a.abs(),
        FUn::Neg => -a,
        FUn::Sqrt if m == Rnd::N => a.sqrt(),
        FUn::Sqrt => {
            let a64 = f64::from(a);
            let s = a64.sqrt();
            let r = if s.is_finite() && s != 0.0 { (-s).mul_add(s, a64) } else { 0.0 };
            round32(s, r, m)
        }
        FUn::Rsqrt => (1.0 / f64::from(a).sqrt()) as f32,
        FUn::Rcp => bin32(FBin::Div, 1.0, a, m),
        FUn::Sin => a.sin(),
        FUn::Cos => a.cos(),
        FUn::Lg2 => a.log2(),
        FUn::Ex2 => a.exp2(),
        FUn::Tanh => a.tanh(),
    }
}

/// A unary float instruction.
pub fn un(op: FUn, ty: Ty, m: Rnd, ftz: bool, sat_: bool) -> F1 {
    let bitwise = matches!(op, FUn::Abs | FUn::Neg);
    match ty {
        Ty::F64 => Box::new(move |a| out64(un64(op, f64v(a), m), sat_)),
        Ty::F32 => Box::new(move |a| {
            let x = if ftz { ftz32(f32v(a)) } else { f32v(a) };
            if bitwise {
                return u64::from(un32(op, x, m).to_bits());
            }
            out32(un32(op, x, m), ftz, sat_)
        }),
        Ty::F16 => Box::new(move |a| half_un(op, a, m, ftz)),
        _ => Box::new(move |a| half_un(op, a & 0xFFFF, m, ftz) | (half_un(op, (a >> 16) & 0xFFFF, m, ftz) << 16)),
    }
}

fn half_un(op: FUn, a: u64, m: Rnd, ftz: bool) -> u64 {
    match op {
        FUn::Abs => a & 0x7FFF,
        FUn::Neg => a ^ 0x8000,
        _ => {
            let x = if ftz { ftz16(f16v(a)) } else { f16v(a) };
            out16(round16(un64(op, f64::from(x), Rnd::N), 0.0, m), ftz, false)
        }
    }
}

fn fval(ty: Ty, x: u64) -> f64 {
    match ty {
        Ty::F64 => f64v(x),
        Ty::F32 => f64::from(f32v(x)),
        Ty::Bf16 => f64::from(bf16::from_bits(x as u16).to_f32()),
        _ => f64::from(f16v(x)),
    }
}

/// A float comparison of `setp` / `set` / `slct`.
pub fn cmp(op: &str, ty: Ty, ftz: bool) -> Option<Cmp> {
    let get = move |x: u64| {
        let v = fval(ty, x);
        if ftz && ty == Ty::F32 {
            f64::from(ftz32(v as f32))
        } else {
            v
        }
    };
    let f: fn(f64, f64) -> bool = match op {
        "eq" => |a, b| a == b,
        "ne" => |a, b| a != b && !a.is_nan() && !b.is_nan(),
        "lt" => |a, b| a < b,
        "le" => |a, b| a <= b,
        "gt" => |a, b| a > b,
        "ge" => |a, b| a >= b,
        "equ" => |a, b| a == b || a.is_nan() || b.is_nan(),
        "neu" => |a, b| a != b,
        "ltu" => |a, b| a < b || a.is_nan() || b.is_nan(),
        "leu" => |a, b| a <= b || a.is_nan() || b.is_nan(),
        "gtu" => |a, b| a > b || a.is_nan() || b.is_nan(),
        "geu" => |a, b| a >= b || a.is_nan() || b.is_nan(),
        "num" => |a, b| !a.is_nan() && !b.is_nan(),
        "nan" => |a, b| a.is_nan() || b.is_nan(),
        _ => return None,
    };
    Some(Box::new(move |a, b| f(get(a), get(b))))
}

/// `testp.<op>` on `ty`: 1 or 0.
pub fn testp(op: &str, ty: Ty) -> Option<F1> {
    let f: fn(f64, bool) -> bool = match op {
        "finite" => |x, _| x.is_finite(),
        "infinite" => |x, _| x.is_infinite(),
        "number" => |x, _| !x.is_nan(),
        "notanumber" => |x, _| x.is_nan(),
        "normal" => |x, sub| x.is_finite() && x != 0.0 && !sub,
        "subnormal" => |_, sub| sub,
        _ => return None,
    };
    Some(Box::new(move |a| {
        let sub = match ty {
            Ty::F32 => f32v(a).is_subnormal(),
            Ty::F64 => f64v(a).is_subnormal(),
            _ => false,
        };
        u64::from(f(fval(ty, a), sub))
    }))
}

/// The integer range of an integer type, as i128.
fn int_range(ty: Ty) -> (i128, i128) {
    let bits = ty.bits();
    if ty.signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

fn int_value(ty: Ty, x: u64) -> i128 {
    if ty.signed() {
        i128::from(sx(x, ty.bits()))
    } else {
        i128::from(x & mask(ty.bits()))
    }
}

/// An integer result of type `ty`: sign-extended to 64 bits for signed types.
fn int_bits(ty: Ty, v: i128) -> u64 {
    let m = v as u64 & mask(ty.bits());
    if ty.signed() {
        sx(m, ty.bits()) as u64
    } else {
        m
    }
}

/// Float bits of `ty` from an exact value `x` (plus residual sign), rounded in `m`.
fn to_float(ty: Ty, x: f64, resid: f64, m: Rnd) -> Result<u64, String> {
    Ok(match ty {
        Ty::F64 => round64(x, resid, m).to_bits(),
        Ty::F32 => u64::from(round32(x, resid, m).to_bits()),
        Ty::F16 => u64::from(round16(x, resid, m).to_bits()),
        Ty::Bf16 => u64::from(match m {
            Rnd::N => bf16::from_f64(x).to_bits(),
            _ => return Err("cvt to .bf16 rounds only with .rn".into()),
        }),
        _ => return Err(format!("cvt to .{}", ty.name())),
    })
}

/// The modifiers of a `cvt`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CvtMods {
    /// `.rn` / `.rz` / `.rm` / `.rp`.
    pub rnd: Option<Rnd>,
    /// `.rni` / `.rzi` / `.rmi` / `.rpi`.
    pub irnd: Option<Rnd>,
    /// `.ftz`.
    pub ftz: bool,
    /// `.sat`.
    pub sat: bool,
}

/// `cvt.<mods>.<dty>.<aty>`: the lane function, or why it is refused. Integer results are
/// sign-extended to 64 bits for signed types (the caller masks them to the register).
pub fn cvt(dty: Ty, aty: Ty, md: CvtMods) -> Result<F1, String> {
    let (di, ai) = (dty.int(), aty.int());
    let name = || format!("cvt .{} to .{}", aty.name(), dty.name());
    if dty == Ty::F16x2 || aty == Ty::F16x2 || dty == Ty::Pred || aty == Ty::Pred {
        return Err(name());
    }
    if di && ai {
        if md.rnd.is_some() || md.irnd.is_some() {
            return Err(format!("{} with a rounding modifier", name()));
        }
        let (lo, hi) = int_range(dty);
        let s = md.sat;
        return Ok(Box::new(move |a| {
            let v = int_value(aty, a);
            int_bits(dty, if s { v.clamp(lo, hi) } else { v })
        }));
    }
    if di {
        // Float to integer: round to an integer (required modifier), then saturate; NaN is 0.
        let m = md.irnd.ok_or_else(|| format!("{} needs .rni/.rzi/.rmi/.rpi", name()))?;
        let (lo, hi) = int_range(dty);
        let ftz = md.ftz;
        return Ok(Box::new(move |a| {
            let mut x = fval(aty, a);
            if ftz && aty == Ty::F32 {
                x = f64::from(ftz32(x as f32));
            }
            let r = match m {
                Rnd::N => x.round_ties_even(),
                Rnd::Z => x.trunc(),
                Rnd::M => x.floor(),
                Rnd::P => x.ceil(),
            };
            let v = if r.is_nan() { 0 } else { (r as i128).clamp(lo, hi) };
            int_bits(dty, v)
        }));
    }
    let (ftz, s) = (md.ftz, md.sat);
    let finish = move |bits: u64| -> u64 {
        if !(s || ftz) {
            return bits;
        }
        match dty {
            Ty::F32 => out32(f32v(bits), ftz, s),
            Ty::F64 => out64(f64v(bits), s),
            Ty::F16 => out16(f16::from_bits(bits as u16), ftz, s),
            _ => bits,
        }
    };
    if ai {
        let m = md.rnd.unwrap_or(Rnd::N);
        to_float(dty, 0.0, 0.0, m)?;
        return Ok(Box::new(move |a| {
            let v = int_value(aty, a);
            let x = v as f64;
            let resid = (v - x as i128) as f64;
            finish(to_float(dty, x, resid, m).unwrap_or(0))
        }));
    }
    // Float to float.
    if let Some(m) = md.irnd {
        if dty != aty {
            return Err(format!("{} with integer rounding", name()));
        }
        return Ok(Box::new(move |a| {
            let mut x = fval(aty, a);
            if ftz && aty == Ty::F32 {
                x = f64::from(ftz32(x as f32));
            }
            let r = match m {
                Rnd::N => x.round_ties_even(),
                Rnd::Z => x.trunc(),
                Rnd::M => x.floor(),
                Rnd::P => x.ceil(),
            };
            finish(to_float(dty, r, 0.0, Rnd::N).unwrap_or(0))
        }));
    }
    let narrowing = dty.bits() < aty.bits() || (dty == Ty::Bf16 && aty == Ty::F16);
    if narrowing && md.rnd.is_none() {
        return Err(format!("{} needs a rounding modifier", name()));
    }
    let m = md.rnd.unwrap_or(Rnd::N);
    to_float(dty, 0.0, 0.0, m)?;
    Ok(Box::new(move |a| {
        let mut x = fval(aty, a);
        if ftz && aty == Ty::F32 {
            x = f64::from(ftz32(x as f32));
        }
        if x.is_nan() {
            return match dty {
                Ty::F64 => f64::NAN.to_bits(),
                Ty::F32 => 0x7FFF_FFFF,
                Ty::Bf16 => 0x7FFF,
                _ => 0x7FFF,
            };
        }
        finish(to_float(dty, x, 0.0, m).unwrap_or(0))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b32(x: f32) -> u64 {
        u64::from(x.to_bits())
    }

    #[test]
    fn directed_rounding_is_exact() {
        let add = |m| bin(FBin::Add, Ty::F32, m, false, false);
        let (one, tiny) = (b32(1.0), b32(-1e-30));
        assert_eq!(add(Rnd::N)(one, tiny), b32(1.0));
        assert_eq!(add(Rnd::Z)(one, tiny), b32(next_down32(1.0)));
        assert_eq!(add(Rnd::M)(one, tiny), b32(next_down32(1.0)));
        assert_eq!(add(Rnd::P)(one, tiny), b32(1.0));
        // 1/3 rounds up to nearest (0x3EAAAAAB > 1/3): rp keeps it, rz and rm go one ulp down.
        let div = |m| bin(FBin::Div, Ty::F32, m, false, false);
        let third = 1.0f32 / 3.0;
        assert_eq!(third.to_bits(), 0x3EAA_AAAB);
        assert_eq!(div(Rnd::N)(b32(1.0), b32(3.0)), b32(third));
        assert_eq!(div(Rnd::P)(b32(1.0), b32(3.0)), b32(third));
        assert_eq!(div(Rnd::Z)(b32(1.0), b32(3.0)), 0x3EAA_AAAA);
        assert_eq!(div(Rnd::Z)(b32(-1.0), b32(3.0)), 0xBEAA_AAAA);
        assert_eq!(div(Rnd::M)(b32(-1.0), b32(3.0)), b32(-third));
        assert_eq!(div(Rnd::P)(b32(-1.0), b32(3.0)), 0xBEAA_AAAA);
        // 2/3 rounds down to nearest (0x3F2AAAAB... is above, 0x3F2AAAAA below): rp goes up.
        let two_thirds = 2.0f32 / 3.0;
        let up = div(Rnd::P)(b32(2.0), b32(3.0));
        assert!(
            f64::from(f32::from_bits(up as u32)) > 2.0 / 3.0
                && f64::from(two_thirds) <= f64::from(f32::from_bits(up as u32))
        );
        // Overflow: rz stays finite.
        assert_eq!(bin(FBin::Mul, Ty::F32, Rnd::Z, false, false)(b32(f32::MAX), b32(2.0)), b32(f32::MAX));
        assert_eq!(bin(FBin::Mul, Ty::F32, Rnd::N, false, false)(b32(f32::MAX), b32(2.0)), b32(f32::INFINITY));
        // fma: a*b+c exact then rounded.
        let f = fma(Ty::F32, Rnd::Z, false, false);
        assert_eq!(f(b32(1.0 + f32::EPSILON), b32(1.0 - f32::EPSILON), b32(0.0)), b32(next_down32(1.0)));
        let s = un(FUn::Sqrt, Ty::F32, Rnd::P, false, false);
        assert_eq!(s(b32(2.0)), b32(next_up32(2.0f32.sqrt())));
        let a64 = bin(FBin::Add, Ty::F64, Rnd::Z, false, false);
        assert_eq!(a64(1.0f64.to_bits(), (-1e-300f64).to_bits()), next_down64(1.0).to_bits());
    }

    #[test]
    fn flush_saturate_nan_minmax() {
        let add = bin(FBin::Add, Ty::F32, Rnd::N, true, false);
        assert_eq!(add(b32(1e-40), b32(0.0)), b32(0.0));
        let sat_ = bin(FBin::Add, Ty::F32, Rnd::N, false, true);
        assert_eq!(sat_(b32(0.75), b32(0.5)), b32(1.0));
        assert_eq!(sat_(b32(f32::NAN), b32(0.5)), b32(0.0));
        assert_eq!(bin(FBin::Mul, Ty::F32, Rnd::N, false, false)(b32(0.0), b32(f32::INFINITY)), 0x7FFF_FFFF);
        let min = bin(FBin::Min, Ty::F32, Rnd::N, false, false);
        assert_eq!(min(b32(f32::NAN), b32(2.0)), b32(2.0));
        assert_eq!(min(b32(0.0), b32(-0.0)), b32(-0.0));
        assert_eq!(bin(FBin::MaxNan, Ty::F32, Rnd::N, false, false)(b32(f32::NAN), b32(2.0)), 0x7FFF_FFFF);
        assert_eq!(bin(FBin::Copysign, Ty::F32, Rnd::N, false, false)(b32(-1.0), b32(3.0)), b32(-3.0));
        assert_eq!(un(FUn::Abs, Ty::F32, Rnd::N, false, false)(b32(-2.5)), b32(2.5));
        assert_eq!(un(FUn::Ex2, Ty::F32, Rnd::N, false, false)(b32(3.0)), b32(8.0));
    }

    #[test]
    fn halves() {
        let h = |x: f32| u64::from(f16::from_f32(x).to_bits());
        assert_eq!(bin(FBin::Add, Ty::F16, Rnd::N, false, false)(h(1.5), h(2.25)), h(3.75));
        let x2 = bin(FBin::Mul, Ty::F16x2, Rnd::N, false, false);
        assert_eq!(x2(h(2.0) | (h(3.0) << 16), h(4.0) | (h(-1.0) << 16)), h(8.0) | (h(-3.0) << 16));
        assert_eq!(fma(Ty::F16, Rnd::N, false, false)(h(2.0), h(3.0), h(1.0)), h(7.0));
        assert_eq!(un(FUn::Neg, Ty::F16, Rnd::N, false, false)(h(2.0)), h(-2.0));
    }

    #[test]
    fn comparisons_and_testp() {
        let nan = b32(f32::NAN);
        assert!(!cmp("ne", Ty::F32, false).unwrap()(nan, b32(1.0)));
        assert!(cmp("neu", Ty::F32, false).unwrap()(nan, b32(1.0)));
        assert!(cmp("ltu", Ty::F32, false).unwrap()(nan, b32(1.0)));
        assert!(cmp("lt", Ty::F64, false).unwrap()((-1.0f64).to_bits(), 0));
        assert!(cmp("nan", Ty::F32, false).unwrap()(nan, 0));
        assert_eq!(testp("subnormal", Ty::F32).unwrap()(b32(1e-40)), 1);
        assert_eq!(testp("finite", Ty::F32).unwrap()(b32(f32::INFINITY)), 0);
    }

    #[test]
    fn conversions() {
        let c = |d, a, md| cvt(d, a, md).unwrap();
        let rzi = CvtMods { irnd: Some(Rnd::Z), ..Default::default() };
        let rni = CvtMods { irnd: Some(Rnd::N), ..Default::default() };
        let rmi = CvtMods { irnd: Some(Rnd::M), ..Default::default() };
        assert_eq!(c(Ty::S32, Ty::F32, rzi)(b32(-2.7)), (-2i64) as u64);
        assert_eq!(c(Ty::S32, Ty::F32, rni)(b32(2.5)), 2);
        assert_eq!(c(Ty::S32, Ty::F32, rmi)(b32(-2.5)), (-3i64) as u64);
        assert_eq!(c(Ty::S32, Ty::F32, rzi)(b32(1e20)), 0x7FFF_FFFF);
        assert_eq!(c(Ty::U8, Ty::F32, rzi)(b32(-5.0)), 0);
        assert_eq!(c(Ty::S32, Ty::F32, rzi)(b32(f32::NAN)), 0);
        let rn = CvtMods { rnd: Some(Rnd::N), ..Default::default() };
        let rz = CvtMods { rnd: Some(Rnd::Z), ..Default::default() };
        assert_eq!(c(Ty::F32, Ty::S32, rn)(0xFFFF_FFFF), b32(-1.0));
        assert_eq!(c(Ty::F32, Ty::U32, rn)(0xFFFF_FFFF), b32(4_294_967_296.0));
        assert_eq!(c(Ty::F32, Ty::U32, rz)(0xFFFF_FFFF), b32(next_down32(4_294_967_296.0)));
        assert_eq!(c(Ty::F32, Ty::F64, rz)((1.0f64 / 3.0).to_bits()), 0x3EAA_AAAA);
        assert_eq!(c(Ty::F32, Ty::F64, rn)((1.0f64 / 3.0).to_bits()), 0x3EAA_AAAB);
        assert_eq!(c(Ty::F64, Ty::F32, CvtMods::default())(b32(0.1)), f64::from(0.1f32).to_bits());
        assert_eq!(c(Ty::F16, Ty::F32, rn)(b32(1.0)), 0x3C00);
        assert_eq!(c(Ty::F32, Ty::F16, CvtMods::default())(0x3C00), b32(1.0));
        assert_eq!(c(Ty::S64, Ty::S32, CvtMods::default())(0xFFFF_FFFF), u64::MAX);
        assert_eq!(c(Ty::U64, Ty::U32, CvtMods::default())(0xFFFF_FFFF), 0xFFFF_FFFF);
        assert_eq!(c(Ty::U8, Ty::S32, CvtMods { sat: true, ..Default::default() })(0xFFFF_FFFF), 0);
        assert_eq!(c(Ty::S8, Ty::S32, CvtMods::default())(0x1FF), u64::MAX);
        assert_eq!(c(Ty::F32, Ty::F32, rni)(b32(2.5)), b32(2.0));
        assert_eq!(c(Ty::Bf16, Ty::F32, rn)(b32(1.0)), 0x3F80);
        assert!(cvt(Ty::F32, Ty::F64, CvtMods::default()).is_err());
        assert!(cvt(Ty::S32, Ty::F32, CvtMods::default()).is_err());
    }
}
