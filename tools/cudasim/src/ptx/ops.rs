//! Integer, bit and predicate semantics, built once per instruction at load. Values are held
//! in 64-bit slots, zero-extended from their width; each function reads the low `bits` of its
//! operands and returns its result zero-extended the same way. Where PTX leaves a result
//! unspecified (division by zero) the simulator defines one and says so in its README.

use super::ir::{Cmp, F1, F2, F3, F4};
use super::{mask, sx, Ty};

fn zx(v: u64, bits: u32) -> u64 {
    v & mask(bits)
}

/// `add` / `sub` on integers (`.sat` only for `.s32`).
pub fn add_sub(ty: Ty, sub: bool, sat: bool) -> F2 {
    let bits = ty.bits();
    let m = mask(bits);
    if sat {
        return Box::new(move |a, b| {
            let (a, b) = (a as u32 as i32, b as u32 as i32);
            let r = if sub { a.saturating_sub(b) } else { a.saturating_add(b) };
            r as u32 as u64
        });
    }
    if sub {
        Box::new(move |a, b| a.wrapping_sub(b) & m)
    } else {
        Box::new(move |a, b| a.wrapping_add(b) & m)
    }
}

/// How `mul` / `mad` keep their product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    /// `.lo`: the low `bits`.
    Lo,
    /// `.hi`: the high `bits`.
    Hi,
    /// `.wide`: all `2 * bits`.
    Wide,
}

fn product(a: u64, b: u64, bits: u32, signed: bool, half: Half) -> u64 {
    if signed {
        let p = i128::from(sx(a, bits)) * i128::from(sx(b, bits));
        match half {
            Half::Lo => (p as u64) & mask(bits),
            Half::Hi => ((p >> bits) as u64) & mask(bits),
            Half::Wide => (p as u64) & mask(2 * bits),
        }
    } else {
        let p = u128::from(zx(a, bits)) * u128::from(zx(b, bits));
        match half {
            Half::Lo => (p as u64) & mask(bits),
            Half::Hi => ((p >> bits) as u64) & mask(bits),
            Half::Wide => (p as u64) & mask(2 * bits),
        }
    }
}

/// Integer `mul.{lo,hi,wide}`.
pub fn mul(ty: Ty, half: Half) -> F2 {
    let (bits, signed) = (ty.bits(), ty.signed());
    Box::new(move |a, b| product(a, b, bits, signed, half))
}

/// Integer `mad.{lo,hi,wide}` (`.sat` only with `.hi.s32`).
pub fn mad(ty: Ty, half: Half, sat: bool) -> F3 {
    let (bits, signed) = (ty.bits(), ty.signed());
    let rbits = if half == Half::Wide { 2 * bits } else { bits };
    let m = mask(rbits);
    if sat {
        return Box::new(move |a, b, c| {
            let p = product(a, b, bits, true, half) as u32 as i32;
            p.saturating_add(c as u32 as i32) as u32 as u64
        });
    }
    Box::new(move |a, b, c| product(a, b, bits, signed, half).wrapping_add(c) & m)
}

/// `mul24.{lo,hi}` on 32-bit types: the 48-bit product of the low 24 bits.
pub fn mul24(ty: Ty, hi: bool) -> F2 {
    let signed = ty.signed();
    Box::new(move |a, b| mul24v(a, b, signed, hi))
}

fn mul24v(a: u64, b: u64, signed: bool, hi: bool) -> u64 {
    let p = if signed { (sx(a, 24) * sx(b, 24)) as u64 } else { (a & 0xFF_FFFF) * (b & 0xFF_FFFF) };
    if hi {
        (p >> 16) & 0xFFFF_FFFF
    } else {
        p & 0xFFFF_FFFF
    }
}

/// `mad24.{lo,hi}`.
pub fn mad24(ty: Ty, hi: bool) -> F3 {
    let signed = ty.signed();
    Box::new(move |a, b, c| mul24v(a, b, signed, hi).wrapping_add(c) & 0xFFFF_FFFF)
}

/// `sad`: `|a - b| + c`.
pub fn sad(ty: Ty) -> F3 {
    let (bits, signed) = (ty.bits(), ty.signed());
    let m = mask(bits);
    Box::new(move |a, b, c| {
        let d = if signed { sx(a, bits).abs_diff(sx(b, bits)) } else { zx(a, bits).abs_diff(zx(b, bits)) };
        d.wrapping_add(c) & m
    })
}

/// Integer `div` (by zero: all ones) and `rem` (by zero: the dividend).
pub fn div_rem(ty: Ty, rem: bool) -> F2 {
    let (bits, signed) = (ty.bits(), ty.signed());
    let m = mask(bits);
    Box::new(move |a, b| {
        if zx(b, bits) == 0 {
            return if rem { a & m } else { m };
        }
        if signed {
            let (a, b) = (sx(a, bits), sx(b, bits));
            (if rem { a.wrapping_rem(b) } else { a.wrapping_div(b) }) as u64 & m
        } else {
            let (a, b) = (zx(a, bits), zx(b, bits));
            (if rem { a % b } else { a / b }) & m
        }
    })
}

/// Integer `abs` / `neg`.
pub fn abs_neg(ty: Ty, neg: bool) -> F1 {
    let bits = ty.bits();
    let m = mask(bits);
    if neg {
        Box::new(move |a| a.wrapping_neg() & m)
    } else {
        Box::new(move |a| (sx(a, bits).wrapping_abs() as u64) & m)
    }
}

/// Integer `min` / `max`.
pub fn min_max(ty: Ty, max: bool) -> F2 {
    let (bits, signed) = (ty.bits(), ty.signed());
    Box::new(move |a, b| {
        let a_lt_b = if signed { sx(a, bits) < sx(b, bits) } else { zx(a, bits) < zx(b, bits) };
        if a_lt_b == max {
            b
        } else {
            a
        }
    })
}

/// `popc`, `clz`, `brev`, `cnot`, `not`.
pub fn bit1(name: &str, ty: Ty) -> Option<F1> {
    let bits = ty.bits();
    let m = mask(bits);
    Some(match name {
        "popc" => Box::new(move |a| u64::from((a & m).count_ones())),
        "clz" => Box::new(move |a| u64::from((a & m).leading_zeros() - (64 - bits))),
        "brev" => Box::new(move |a| (a & m).reverse_bits() >> (64 - bits)),
        "cnot" => Box::new(move |a| u64::from(a & m == 0)),
        "not" if ty == Ty::Pred => Box::new(|a| a ^ 1),
        "not" => Box::new(move |a| !a & m),
        _ => return None,
    })
}

/// `bfind[.shiftamt]`: the position of the most significant non-sign bit, or all ones.
pub fn bfind(ty: Ty, shiftamt: bool) -> F1 {
    let (bits, signed) = (ty.bits(), ty.signed());
    Box::new(move |a| {
        let mut v = zx(a, bits);
        if signed && sx(a, bits) < 0 {
            v = !v & mask(bits);
        }
        if v == 0 {
            return 0xFFFF_FFFF;
        }
        let pos = 63 - u64::from(v.leading_zeros());
        if shiftamt {
            u64::from(bits) - 1 - pos
        } else {
            pos
        }
    })
}

/// `bfe`: extract `len` bits at `pos` (sign-extended for signed types).
pub fn bfe(ty: Ty) -> F3 {
    let (bits, signed) = (ty.bits(), ty.signed());
    let msb = bits - 1;
    Box::new(move |a, b, c| {
        let pos = (b & 0xff) as u32;
        let len = (c & 0xff) as u32;
        let sbit = if signed && len > 0 { (a >> (pos + len - 1).min(msb)) & 1 } else { 0 };
        let mut d = 0u64;
        for i in 0..=msb {
            let bit = if i < len && pos + i <= msb { (a >> (pos + i)) & 1 } else { sbit };
            d |= bit << i;
        }
        d
    })
}

/// `bfi`: insert the low `len` bits of `a` into `b` at `pos`.
pub fn bfi(ty: Ty) -> F4 {
    let msb = ty.bits() - 1;
    Box::new(move |a, b, pos, len| {
        let (pos, len) = ((pos & 0xff) as u32, (len & 0xff) as u32);
        let mut d = b;
        for i in 0..len {
            if pos + i > msb {
                break;
            }
            d = (d & !(1 << (pos + i))) | (((a >> i) & 1) << (pos + i));
        }
        d
    })
}

/// `and`, `or`, `xor` (also on predicates).
pub fn logic(name: &str, ty: Ty) -> Option<F2> {
    let m = mask(ty.bits());
    Some(match name {
        "and" => Box::new(move |a, b| a & b & m),
        "or" => Box::new(move |a, b| (a | b) & m),
        "xor" => Box::new(move |a, b| (a ^ b) & m),
        _ => return None,
    })
}

/// `shl`, `shr` (arithmetic for signed types); shift amounts beyond the width saturate.
pub fn shift(left: bool, ty: Ty) -> F2 {
    let (bits, signed) = (ty.bits(), ty.signed());
    let m = mask(bits);
    if left {
        Box::new(move |a, b| if (b as u32) >= bits { 0 } else { (a << (b as u32)) & m })
    } else if signed {
        Box::new(move |a, b| ((sx(a, bits) >> (b as u32).min(bits - 1)) as u64) & m)
    } else {
        Box::new(move |a, b| if (b as u32) >= bits { 0 } else { zx(a, bits) >> (b as u32) })
    }
}

/// `lop3.b32` with its lookup table.
pub fn lop3(lut: u8) -> F3 {
    Box::new(move |a, b, c| {
        let mut d = 0u64;
        for i in 0..8 {
            if (lut >> i) & 1 == 1 {
                let x = if i & 4 != 0 { a } else { !a };
                let y = if i & 2 != 0 { b } else { !b };
                let z = if i & 1 != 0 { c } else { !c };
                d |= x & y & z;
            }
        }
        d & 0xFFFF_FFFF
    })
}

/// `shf.{l,r}.{wrap,clamp}.b32`: a funnel shift of `b:a`.
pub fn shf(left: bool, clamp: bool) -> F3 {
    Box::new(move |a, b, c| {
        let n = if clamp { (c as u32).min(32) } else { (c as u32) & 31 };
        let v = ((b & 0xFFFF_FFFF) << 32) | (a & 0xFFFF_FFFF);
        if left {
            ((v << n) >> 32) & 0xFFFF_FFFF
        } else {
            (v >> n) & 0xFFFF_FFFF
        }
    })
}

/// `prmt.b32` (default mode): pick bytes of `b:a` by the selector `c`.
pub fn prmt() -> F3 {
    Box::new(|a, b, c| {
        let bytes = ((b & 0xFFFF_FFFF) << 32) | (a & 0xFFFF_FFFF);
        let mut d = 0u64;
        for i in 0..4 {
            let sel = (c >> (4 * i)) & 0xF;
            let mut byte = (bytes >> (8 * (sel & 7))) & 0xFF;
            if sel & 8 != 0 {
                byte = if byte & 0x80 != 0 { 0xFF } else { 0 };
            }
            d |= byte << (8 * i);
        }
        d
    })
}

/// `dp4a.atype.btype`: four byte products summed into `c`.
pub fn dp4a(a_signed: bool, b_signed: bool) -> F3 {
    Box::new(move |a, b, c| {
        let mut acc = c as u32 as i32 as i64;
        for i in 0..4 {
            let x = (a >> (8 * i)) & 0xFF;
            let y = (b >> (8 * i)) & 0xFF;
            let x = if a_signed { sx(x, 8) } else { x as i64 };
            let y = if b_signed { sx(y, 8) } else { y as i64 };
            acc = acc.wrapping_add(x * y);
        }
        acc as u64 & 0xFFFF_FFFF
    })
}

/// `dp2a.{lo,hi}.atype.btype`: two 16-bit by 8-bit products summed into `c`.
pub fn dp2a(hi: bool, a_signed: bool, b_signed: bool) -> F3 {
    Box::new(move |a, b, c| {
        let mut acc = c as u32 as i32 as i64;
        for i in 0..2 {
            let x = (a >> (16 * i)) & 0xFFFF;
            let y = (b >> (8 * (i + if hi { 2 } else { 0 }))) & 0xFF;
            let x = if a_signed { sx(x, 16) } else { x as i64 };
            let y = if b_signed { sx(y, 8) } else { y as i64 };
            acc = acc.wrapping_add(x * y);
        }
        acc as u64 & 0xFFFF_FFFF
    })
}

/// An integer comparison of `setp` / `set` / `slct`.
pub fn int_cmp(op: &str, ty: Ty) -> Option<Cmp> {
    let (bits, signed) = (ty.bits(), ty.signed());
    let ord = move |a: u64, b: u64| {
        if signed {
            sx(a, bits).cmp(&sx(b, bits))
        } else {
            zx(a, bits).cmp(&zx(b, bits))
        }
    };
    let uord = move |a: u64, b: u64| zx(a, bits).cmp(&zx(b, bits));
    Some(match op {
        "eq" => Box::new(move |a, b| zx(a, bits) == zx(b, bits)),
        "ne" => Box::new(move |a, b| zx(a, bits) != zx(b, bits)),
        "lt" => Box::new(move |a, b| ord(a, b).is_lt()),
        "le" => Box::new(move |a, b| ord(a, b).is_le()),
        "gt" => Box::new(move |a, b| ord(a, b).is_gt()),
        "ge" => Box::new(move |a, b| ord(a, b).is_ge()),
        "lo" => Box::new(move |a, b| uord(a, b).is_lt()),
        "ls" => Box::new(move |a, b| uord(a, b).is_le()),
        "hi" => Box::new(move |a, b| uord(a, b).is_gt()),
        "hs" => Box::new(move |a, b| uord(a, b).is_ge()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const M32: u64 = 0xFFFF_FFFF;

    #[test]
    fn arithmetic_by_width_and_sign() {
        assert_eq!(add_sub(Ty::S32, false, false)(M32, 2), 1);
        assert_eq!(add_sub(Ty::S32, false, true)(0x7FFF_FFFF, 1), 0x7FFF_FFFF);
        assert_eq!(add_sub(Ty::S32, true, true)(0x8000_0000, 1), 0x8000_0000);
        assert_eq!(add_sub(Ty::U16, true, false)(0, 1), 0xFFFF);
        assert_eq!(mul(Ty::S32, Half::Wide)(M32, 4), (-4i64) as u64);
        assert_eq!(mul(Ty::U32, Half::Wide)(M32, 4), 0x3_FFFF_FFFC);
        assert_eq!(mul(Ty::U32, Half::Hi)(0x8000_0000, 4), 2);
        assert_eq!(mul(Ty::S32, Half::Hi)(M32, 4), M32);
        assert_eq!(mul(Ty::S64, Half::Hi)(u64::MAX, 3), u64::MAX);
        assert_eq!(mad(Ty::S32, Half::Lo, false)(3, M32, 10), 7);
        assert_eq!(mad(Ty::S32, Half::Wide, false)(M32, 2, 5), 3);
        assert_eq!(mul24(Ty::U32, false)(0x0100_0002, 3), 6);
        assert_eq!(mul24(Ty::U32, true)(0xFF_FFFF, 0xFF_FFFF), 0xFFFF_FE00);
        assert_eq!(sad(Ty::S32)(2, M32, 1), 4);
        let d = div_rem(Ty::S32, false);
        assert_eq!(d(-7i32 as u32 as u64, 2), -3i32 as u32 as u64);
        assert_eq!(d(5, 0), M32);
        assert_eq!(d(0x8000_0000, M32), 0x8000_0000);
        assert_eq!(div_rem(Ty::S32, true)(-7i32 as u32 as u64, 2), M32);
        assert_eq!(div_rem(Ty::U32, true)(7, 0), 7);
        assert_eq!(div_rem(Ty::U64, false)(u64::MAX, 2), u64::MAX / 2);
        assert_eq!(abs_neg(Ty::S32, false)(-5i32 as u32 as u64), 5);
        assert_eq!(abs_neg(Ty::S16, true)(1), 0xFFFF);
        assert_eq!(min_max(Ty::S32, false)(M32, 1), M32);
        assert_eq!(min_max(Ty::U32, false)(M32, 1), 1);
        assert_eq!(min_max(Ty::S64, true)(u64::MAX, 0), 0);
    }

    #[test]
    fn bits() {
        assert_eq!(bit1("popc", Ty::B32).unwrap()(0xF0F0), 8);
        assert_eq!(bit1("clz", Ty::B32).unwrap()(1), 31);
        assert_eq!(bit1("clz", Ty::B64).unwrap()(0), 64);
        assert_eq!(bit1("brev", Ty::B32).unwrap()(1), 0x8000_0000);
        assert_eq!(bit1("not", Ty::Pred).unwrap()(1), 0);
        assert_eq!(bit1("not", Ty::B16).unwrap()(1), 0xFFFE);
        assert_eq!(bit1("cnot", Ty::B32).unwrap()(0), 1);
        assert_eq!(bfind(Ty::U32, false)(0x10), 4);
        assert_eq!(bfind(Ty::U32, true)(0x10), 27);
        assert_eq!(bfind(Ty::S32, false)(-2i32 as u32 as u64), 0);
        assert_eq!(bfind(Ty::U32, false)(0), M32);
        assert_eq!(bfe(Ty::U32)(0xABCD, 4, 8), 0xBC);
        assert_eq!(bfe(Ty::S32)(0x0080, 4, 4), 0xFFFF_FFF8);
        assert_eq!(bfe(Ty::S32)(0x0080, 40, 4), 0);
        assert_eq!(bfi(Ty::B32)(0xF, 0, 4, 4), 0xF0);
        assert_eq!(logic("xor", Ty::B32).unwrap()(0xFF, 0x0F), 0xF0);
        assert_eq!(shift(true, Ty::B32)(1, 31), 0x8000_0000);
        assert_eq!(shift(true, Ty::B32)(1, 32), 0);
        assert_eq!(shift(false, Ty::S32)(0x8000_0000, 40), M32);
        assert_eq!(shift(false, Ty::U32)(0x8000_0000, 31), 1);
        // lop3 with the table of (a & b) ^ c.
        let lut = (0xF0u8 & 0xCC) ^ 0xAA;
        assert_eq!(lop3(lut)(0b1100, 0b1010, 0b0110), (0b1100 & 0b1010) ^ 0b0110);
        assert_eq!(shf(true, false)(0x8000_0000, 1, 1), 3);
        assert_eq!(shf(false, true)(0, 1, 40), 1);
        assert_eq!(shf(true, true)(7, 1, 40), 7);
        assert_eq!(shf(false, false)(0, 1, 4), 0x1000_0000);
        assert_eq!(prmt()(0x4433_2211, 0x8877_6655, 0x7654), 0x8877_6655);
        assert_eq!(prmt()(0x0000_0080, 0, 0x0008), 0x0000_00FF | 0x8080_8000);
        assert_eq!(dp4a(true, true)(0xFF02, 0x0103, 1), 1 + 6 - 1);
        assert_eq!(dp2a(false, false, false)(0x0002_0003, 0x0504, 0), 3 * 4 + 2 * 5);
    }

    #[test]
    fn comparisons() {
        let lt = int_cmp("lt", Ty::S32).unwrap();
        assert!(lt(M32, 0));
        assert!(!int_cmp("lo", Ty::S32).unwrap()(M32, 0));
        assert!(int_cmp("hs", Ty::U64).unwrap()(u64::MAX, 1));
        assert!(int_cmp("eq", Ty::B16).unwrap()(0x1_0001, 1));
        assert!(int_cmp("bad", Ty::S32).is_none());
    }
}
