//! Lowering of each instruction: the opcode's modifiers are consumed one by one (anything left
//! over is refused, naming it), the operands resolved and checked against the instruction's
//! types, and the operation built with its semantics.

use super::fops::{self, CvtMods, FBin, FUn, Rnd};
use super::ir::{AtomOp, BoolOp, Op, Reg, Space};
use super::lower::{Fit, Lower, Sym, R};
use super::ops::{self, Half};
use super::parse::{Instr, Lit, Operand};
use super::{mask, Ty};

/// Whether `name` is an instruction the simulator implements (in some form).
pub(crate) fn is_known(name: &str) -> bool {
    const KNOWN: &[&str] = &[
        "mov",
        "add",
        "sub",
        "mul",
        "mad",
        "fma",
        "div",
        "rem",
        "min",
        "max",
        "copysign",
        "abs",
        "neg",
        "sqrt",
        "rsqrt",
        "rcp",
        "sin",
        "cos",
        "lg2",
        "ex2",
        "tanh",
        "mul24",
        "mad24",
        "sad",
        "popc",
        "clz",
        "brev",
        "bfind",
        "bfe",
        "bfi",
        "cnot",
        "not",
        "and",
        "or",
        "xor",
        "shl",
        "shr",
        "lop3",
        "shf",
        "prmt",
        "dp4a",
        "dp2a",
        "testp",
        "setp",
        "set",
        "selp",
        "slct",
        "cvt",
        "cvta",
        "isspacep",
        "ld",
        "ldu",
        "st",
        "atom",
        "red",
        "prefetch",
        "prefetchu",
        "bra",
        "ret",
        "exit",
        "trap",
        "call",
        "bar",
        "barrier",
        "membar",
        "fence",
        "nanosleep",
        "pmevent",
        "shfl",
        "vote",
        "activemask",
    ];
    KNOWN.contains(&name)
}

/// The modifiers of an opcode, consumed by its handler.
pub(crate) struct Mods<'s> {
    words: Vec<&'s str>,
    used: Vec<bool>,
}

impl<'s> Mods<'s> {
    fn new(words: &[&'s str]) -> Mods<'s> {
        Mods { words: words.to_vec(), used: vec![false; words.len()] }
    }

    pub(crate) fn take(&mut self, w: &str) -> bool {
        for (i, x) in self.words.iter().enumerate() {
            if !self.used[i] && *x == w {
                self.used[i] = true;
                return true;
            }
        }
        false
    }

    pub(crate) fn take_any(&mut self, ws: &[&'static str]) -> Option<&'static str> {
        ws.iter().copied().find(|w| self.take(w))
    }

    fn ignore(&mut self, ws: &[&str]) {
        for w in ws {
            while self.take(w) {}
        }
    }

    pub(crate) fn types(&mut self) -> Vec<Ty> {
        let mut out = Vec::new();
        for (i, w) in self.words.iter().enumerate() {
            if !self.used[i] {
                if let Some(t) = Ty::parse(w) {
                    self.used[i] = true;
                    out.push(t);
                }
            }
        }
        out
    }

    fn rnd(&mut self) -> Option<(Rnd, bool)> {
        for (i, w) in self.words.iter().enumerate() {
            if !self.used[i] {
                if let Some(r) = Rnd::parse(w) {
                    self.used[i] = true;
                    return Some(r);
                }
            }
        }
        None
    }

    fn leftover(&self) -> Option<&'s str> {
        self.words.iter().zip(&self.used).find(|(_, u)| !**u).map(|(w, _)| *w)
    }
}

/// Hints and orderings that change nothing in a sequential simulator.
const MEMORY_HINTS: &[&str] = &[
    "weak",
    "volatile",
    "relaxed",
    "acquire",
    "release",
    "acq_rel",
    "cta",
    "gpu",
    "sys",
    "nc",
    "ca",
    "cg",
    "cs",
    "lu",
    "cv",
    "wb",
    "wt",
    "L1::evict_normal",
    "L1::evict_unchanged",
    "L1::evict_first",
    "L1::evict_last",
    "L1::no_allocate",
    "L2::64B",
    "L2::128B",
    "L2::256B",
    "L2::evict_normal",
    "L2::evict_first",
    "L2::evict_last",
    "noftz",
];

fn bty(bits: u32) -> Ty {
    match bits {
        1 => Ty::Pred,
        8 => Ty::B8,
        16 => Ty::B16,
        32 => Ty::B32,
        _ => Ty::B64,
    }
}

impl<'a> Lower<'a> {
    pub(crate) fn want(&self, ops: &[Operand], n: usize) -> R<()> {
        if ops.len() == n {
            Ok(())
        } else {
            self.err(format!("expects {n} operands, has {}", ops.len()))
        }
    }

    pub(crate) fn one_type(&self, tys: &[Ty]) -> R<Ty> {
        match tys {
            [t] => Ok(*t),
            _ => self.err("expects one type"),
        }
    }

    /// Lowers one instruction.
    pub(crate) fn instr(&mut self, i: &Instr) -> R<()> {
        if self.too_big {
            return self.unsupported("a kernel this large after inlining");
        }
        let parts: Vec<&str> = i.opcode.split('.').collect();
        let name = parts[0];
        let mut m = Mods::new(&parts[1..]);
        let guard = match &i.guard {
            Some((p, neg)) => Some((self.pred(&Operand::Name(p.clone()))?.0, *neg)),
            None => None,
        };
        let ops = &i.operands[..];
        match name {
            "mov" => self.mov(&mut m, ops, guard)?,
            "add" | "sub" | "mul" | "mad" | "fma" | "div" | "rem" | "min" | "max" | "copysign" => {
                self.arith(name, &mut m, ops, guard)?
            }
            "abs" | "neg" | "sqrt" | "rsqrt" | "rcp" | "sin" | "cos" | "lg2" | "ex2" | "tanh" => {
                self.unary(name, &mut m, ops, guard)?
            }
            "mul24" | "mad24" | "sad" | "popc" | "clz" | "brev" | "bfind" | "bfe" | "bfi" | "cnot" | "not" | "and"
            | "or" | "xor" | "shl" | "shr" | "lop3" | "shf" | "prmt" | "dp4a" | "dp2a" | "testp" => {
                self.bits_op(name, &mut m, ops, guard)?
            }
            "setp" | "set" | "selp" | "slct" => self.compare(name, &mut m, ops, guard)?,
            "cvt" => self.cvt(&mut m, ops, guard)?,
            "cvta" | "isspacep" => self.cvta(name, &mut m, ops, guard)?,
            "ld" | "ldu" | "st" => self.mem(name == "st", &mut m, ops, guard)?,
            "atom" | "red" => self.atom(name == "atom", &mut m, ops, guard)?,
            "prefetch" | "prefetchu" => {
                m.ignore(&["global", "local", "L1", "L2", "tensormap_space"]);
                self.emit(guard, Op::Nop);
            }
            "bra" => {
                m.take("uni");
                match ops {
                    [Operand::Name(l)] => self.branch(guard, l),
                    _ => return self.unsupported(format!("`{}` without a label", i.opcode)),
                }
            }
            "ret" => {
                m.take("uni");
                if self.frame == 0 {
                    self.emit(guard, Op::Exit);
                } else {
                    let at = self.insts.len();
                    self.emit(guard, Op::Bra { target: u32::MAX });
                    self.returns.entry(self.frame).or_default().push(at);
                }
            }
            "exit" => self.emit(guard, Op::Exit),
            "trap" => self.emit(guard, Op::Trap),
            "call" => self.call(&mut m, ops, guard)?,
            "bar" | "barrier" => self.barrier(&mut m, ops, guard)?,
            "membar" | "fence" => {
                m.ignore(&["cta", "gl", "sys", "gpu", "sc", "acq_rel", "cluster", "proxy", "alias", "async"]);
                self.emit(guard, Op::Nop);
            }
            "nanosleep" | "pmevent" => {
                m.ignore(&["u32", "mask"]);
                self.emit(guard, Op::Nop);
            }
            "shfl" => self.shfl(&mut m, ops, guard)?,
            "vote" => self.vote(&mut m, ops, guard)?,
            "activemask" => {
                m.take("b32");
                self.want(ops, 1)?;
                let d = self.dst(&ops[0], Ty::B32, Fit::Exact)?;
                self.emit(guard, Op::Activemask { d });
            }
            _ => return self.unsupported(format!("instruction `{}`", i.opcode)),
        }
        if let Some(w) = m.leftover() {
            return self.unsupported(format!("modifier .{w} of `{}`", i.opcode));
        }
        Ok(())
    }

    fn mov(&mut self, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let ty = self.one_type(&m.types())?;
        self.want(ops, 2)?;
        match (&ops[0], &ops[1]) {
            (Operand::Vector(ds), _) | (_, Operand::Vector(ds))
                if !matches!(ds.len(), 2 | 4) || ty.bits() / (ds.len() as u32) < 8 =>
            {
                return self.err("packs and unpacks 2 or 4 elements of 8 bits or more");
            }
            (Operand::Vector(ds), src) => {
                let w = ty.bits() / ds.len() as u32;
                let a = self.src(src, ty, Fit::Exact)?;
                for (k, d) in ds.iter().enumerate() {
                    let d = self.dst(d, bty(w), Fit::Exact)?;
                    let (sh, mk) = (k as u32 * w, mask(w));
                    self.emit(guard, Op::A1 { d, a, f: Box::new(move |v| (v >> sh) & mk) });
                }
            }
            (d, Operand::Vector(ss)) => {
                let w = ty.bits() / ss.len() as u32;
                let d = self.dst(d, ty, Fit::Exact)?;
                let mut r = Vec::new();
                for s in ss {
                    r.push(self.src(s, bty(w), Fit::Exact)?);
                }
                let mk = mask(w);
                match r[..] {
                    [a, b] => self.emit(guard, Op::A2 { d, a, b, f: Box::new(move |x, y| (x & mk) | ((y & mk) << w)) }),
                    [a, b, c, e] => self.emit(
                        guard,
                        Op::A4 {
                            d,
                            a,
                            b,
                            c,
                            e,
                            f: Box::new(move |x, y, z, u| {
                                (x & mk) | ((y & mk) << w) | ((z & mk) << (2 * w)) | ((u & mk) << (3 * w))
                            }),
                        },
                    ),
                    _ => return self.err("packs 2 or 4 elements"),
                }
            }
            (d, Operand::Name(n)) if n.starts_with("%clock") || n.starts_with("%globaltimer") => {
                let d = self.dst(d, ty, Fit::Exact)?;
                let dmask =
                    if n == "%clock" || n.ends_with("_lo") || n.ends_with("_hi") { 0xFFFF_FFFF } else { u64::MAX };
                self.emit(guard, Op::Clock { d, dmask });
            }
            (d, a) => {
                let d = self.dst(d, ty, Fit::Exact)?;
                let a = self.src(a, ty, Fit::Exact)?;
                self.emit(guard, Op::Mov { d, a });
            }
        }
        Ok(())
    }

    fn arith(&mut self, name: &str, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let ty = self.one_type(&m.types())?;
        if ty.float() {
            return self.float_arith(name, ty, m, ops, guard);
        }
        if ty == Ty::Pred || name == "fma" || name == "copysign" {
            return self.err(format!("{name} on .{}", ty.name()));
        }
        let half = m.take_any(&["lo", "hi", "wide"]).map(|h| match h {
            "hi" => Half::Hi,
            "wide" => Half::Wide,
            _ => Half::Lo,
        });
        let sat = m.take("sat");
        if sat && !(ty == Ty::S32 && (matches!(name, "add" | "sub") || half == Some(Half::Hi))) {
            return self.err(".sat on this type");
        }
        if half == Some(Half::Wide) && ty.bits() > 32 {
            return self.err(".wide of a 64-bit type");
        }
        let wide = half == Some(Half::Wide);
        let dty = if wide { bty(ty.bits() * 2) } else { ty };
        if name == "mad" {
            self.want(ops, 4)?;
            let d = self.dst(&ops[0], dty, Fit::Exact)?;
            let a = self.src(&ops[1], ty, Fit::Exact)?;
            let b = self.src(&ops[2], ty, Fit::Exact)?;
            let c = self.src(&ops[3], dty, Fit::Exact)?;
            let f = ops::mad(ty, half.unwrap_or(Half::Lo), sat);
            self.emit(guard, Op::A3 { d, a, b, c, f });
            return Ok(());
        }
        self.want(ops, 3)?;
        let f = match name {
            "add" | "sub" => ops::add_sub(ty, name == "sub", sat),
            "mul" => ops::mul(ty, half.unwrap_or(Half::Lo)),
            "div" | "rem" => ops::div_rem(ty, name == "rem"),
            _ => ops::min_max(ty, name == "max"),
        };
        if half.is_some() && name != "mul" {
            return self.err(".lo/.hi/.wide here");
        }
        let d = self.dst(&ops[0], dty, Fit::Exact)?;
        let a = self.src(&ops[1], ty, Fit::Exact)?;
        let b = self.src(&ops[2], ty, Fit::Exact)?;
        self.emit(guard, Op::A2 { d, a, b, f });
        Ok(())
    }

    fn float_arith(
        &mut self,
        name: &str,
        ty: Ty,
        m: &mut Mods<'_>,
        ops: &[Operand],
        guard: Option<(Reg, bool)>,
    ) -> R<()> {
        if ty == Ty::Bf16 {
            return self.unsupported(format!("{name}.bf16"));
        }
        let rnd = m.rnd();
        if rnd.is_some_and(|(_, int)| int) {
            return self.err("integer rounding on float arithmetic");
        }
        let mut r = rnd.map_or(Rnd::N, |(r, _)| r);
        let ftz = m.take("ftz");
        let sat = m.take("sat");
        let approx = m.take("approx");
        let full = m.take("full");
        let nan = m.take("NaN");
        if (approx || full) && (name != "div" || rnd.is_some()) {
            return self.err(".approx/.full here");
        }
        if approx || full {
            r = Rnd::N;
        }
        if name == "div" && ty == Ty::F32 && !(approx || full || rnd.is_some()) {
            return self.err("div.f32 needs .approx, .full or a rounding modifier");
        }
        if ty == Ty::F64 && r != Rnd::N && matches!(name, "fma" | "mad") {
            return self.unsupported(format!("{name} with directed rounding on .f64"));
        }
        if matches!(ty, Ty::F16 | Ty::F16x2) && (r != Rnd::N || name == "div") {
            return self.unsupported(format!("{name}.{} with this rounding", ty.name()));
        }
        if name == "rem" {
            return self.err("rem on a float type");
        }
        if name == "fma" || name == "mad" {
            self.want(ops, 4)?;
            let d = self.dst(&ops[0], ty, Fit::Exact)?;
            let a = self.src(&ops[1], ty, Fit::Exact)?;
            let b = self.src(&ops[2], ty, Fit::Exact)?;
            let c = self.src(&ops[3], ty, Fit::Exact)?;
            self.emit(guard, Op::A3 { d, a, b, c, f: fops::fma(ty, r, ftz, sat) });
            return Ok(());
        }
        let op = match name {
            "add" => FBin::Add,
            "sub" => FBin::Sub,
            "mul" => FBin::Mul,
            "div" => FBin::Div,
            "min" if nan => FBin::MinNan,
            "max" if nan => FBin::MaxNan,
            "min" => FBin::Min,
            "max" => FBin::Max,
            _ => FBin::Copysign,
        };
        self.want(ops, 3)?;
        let d = self.dst(&ops[0], ty, Fit::Exact)?;
        let a = self.src(&ops[1], ty, Fit::Exact)?;
        let b = self.src(&ops[2], ty, Fit::Exact)?;
        self.emit(guard, Op::A2 { d, a, b, f: fops::bin(op, ty, r, ftz, sat) });
        Ok(())
    }

    fn unary(&mut self, name: &str, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let ty = self.one_type(&m.types())?;
        self.want(ops, 2)?;
        if ty.int() && matches!(name, "abs" | "neg") {
            let d = self.dst(&ops[0], ty, Fit::Exact)?;
            let a = self.src(&ops[1], ty, Fit::Exact)?;
            self.emit(guard, Op::A1 { d, a, f: ops::abs_neg(ty, name == "neg") });
            return Ok(());
        }
        if !ty.float() || ty == Ty::Bf16 {
            return self.err(format!("{name} on .{}", ty.name()));
        }
        let rnd = m.rnd();
        let approx = m.take("approx");
        let ftz = m.take("ftz");
        let sat = m.take("sat");
        if rnd.is_some_and(|(_, int)| int) || (rnd.is_some() && approx) {
            return self.err("rounding modifiers");
        }
        let r = rnd.map_or(Rnd::N, |(r, _)| r);
        let op = match name {
            "abs" => FUn::Abs,
            "neg" => FUn::Neg,
            "sqrt" => FUn::Sqrt,
            "rsqrt" => FUn::Rsqrt,
            "rcp" => FUn::Rcp,
            "sin" => FUn::Sin,
            "cos" => FUn::Cos,
            "lg2" => FUn::Lg2,
            "ex2" => FUn::Ex2,
            _ => FUn::Tanh,
        };
        let needs_approx = matches!(op, FUn::Rsqrt | FUn::Sin | FUn::Cos | FUn::Lg2 | FUn::Ex2 | FUn::Tanh);
        if needs_approx && !approx {
            return self.err(format!("{name} needs .approx"));
        }
        if matches!(op, FUn::Sqrt | FUn::Rcp) && !approx && rnd.is_none() {
            return self.err(format!("{name} needs .approx or a rounding modifier"));
        }
        let d = self.dst(&ops[0], ty, Fit::Exact)?;
        let a = self.src(&ops[1], ty, Fit::Exact)?;
        self.emit(guard, Op::A1 { d, a, f: fops::un(op, ty, r, ftz, sat) });
        Ok(())
    }

    fn bits_op(&mut self, name: &str, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let tys = m.types();
        if matches!(name, "dp4a" | "dp2a") {
            let hi = if name == "dp2a" {
                match m.take_any(&["lo", "hi"]) {
                    Some(h) => h == "hi",
                    None => return self.err("dp2a needs .lo or .hi"),
                }
            } else {
                false
            };
            let [at, bt] = tys[..] else { return self.err("expects two types") };
            self.want(ops, 4)?;
            let d = self.dst(&ops[0], at, Fit::Exact)?;
            let a = self.src(&ops[1], Ty::B32, Fit::Exact)?;
            let b = self.src(&ops[2], Ty::B32, Fit::Exact)?;
            let c = self.src(&ops[3], at, Fit::Exact)?;
            let f = if name == "dp4a" {
                ops::dp4a(at.signed(), bt.signed())
            } else {
                ops::dp2a(hi, at.signed(), bt.signed())
            };
            self.emit(guard, Op::A3 { d, a, b, c, f });
            return Ok(());
        }
        let ty = self.one_type(&tys)?;
        if name == "testp" {
            let which = m.take_any(&["finite", "infinite", "number", "notanumber", "normal", "subnormal"]);
            let f = which.and_then(|w| fops::testp(w, ty)).map_or_else(|| self.err("testp needs its test"), Ok)?;
            self.want(ops, 2)?;
            let d = self.dst(&ops[0], Ty::Pred, Fit::Exact)?;
            let a = self.src(&ops[1], ty, Fit::Exact)?;
            self.emit(guard, Op::A1 { d, a, f });
            return Ok(());
        }
        if ty.float() {
            return self.err(format!("{name} on .{}", ty.name()));
        }
        let u32t = Ty::U32;
        match name {
            "popc" | "clz" | "brev" | "cnot" | "not" | "bfind" => {
                self.want(ops, 2)?;
                let dty = if matches!(name, "popc" | "clz" | "bfind") { u32t } else { ty };
                let f = if name == "bfind" {
                    ops::bfind(ty, m.take("shiftamt"))
                } else {
                    ops::bit1(name, ty).map_or_else(|| self.err("bad operation"), Ok)?
                };
                let d = self.dst(&ops[0], dty, Fit::Exact)?;
                let a = self.src(&ops[1], ty, Fit::Exact)?;
                self.emit(guard, Op::A1 { d, a, f });
            }
            "and" | "or" | "xor" => {
                self.want(ops, 3)?;
                let f = ops::logic(name, ty).map_or_else(|| self.err("bad operation"), Ok)?;
                let d = self.dst(&ops[0], ty, Fit::Exact)?;
                let a = self.src(&ops[1], ty, Fit::Exact)?;
                let b = self.src(&ops[2], ty, Fit::Exact)?;
                self.emit(guard, Op::A2 { d, a, b, f });
            }
            "shl" | "shr" => {
                self.want(ops, 3)?;
                let d = self.dst(&ops[0], ty, Fit::Exact)?;
                let a = self.src(&ops[1], ty, Fit::Exact)?;
                let b = self.src(&ops[2], u32t, Fit::Exact)?;
                self.emit(guard, Op::A2 { d, a, b, f: ops::shift(name == "shl", ty) });
            }
            "mul24" | "mad24" => {
                let hi = match m.take_any(&["lo", "hi"]) {
                    Some(h) => h == "hi",
                    None => return self.err("needs .lo or .hi"),
                };
                let n = if name == "mad24" { 4 } else { 3 };
                self.want(ops, n)?;
                let d = self.dst(&ops[0], ty, Fit::Exact)?;
                let a = self.src(&ops[1], ty, Fit::Exact)?;
                let b = self.src(&ops[2], ty, Fit::Exact)?;
                if name == "mad24" {
                    let c = self.src(&ops[3], ty, Fit::Exact)?;
                    self.emit(guard, Op::A3 { d, a, b, c, f: ops::mad24(ty, hi) });
                } else {
                    self.emit(guard, Op::A2 { d, a, b, f: ops::mul24(ty, hi) });
                }
            }
            "lop3" => {
                self.want(ops, 5)?;
                let lut = match &ops[4] {
                    Operand::Imm(Lit::Int(v)) => *v as u8,
                    _ => return self.err("the lookup table must be an immediate"),
                };
                let d = self.dst(&ops[0], ty, Fit::Exact)?;
                let a = self.src(&ops[1], ty, Fit::Exact)?;
                let b = self.src(&ops[2], ty, Fit::Exact)?;
                let c = self.src(&ops[3], ty, Fit::Exact)?;
                self.emit(guard, Op::A3 { d, a, b, c, f: ops::lop3(lut) });
            }
            "sad" | "bfe" | "shf" | "prmt" => {
                self.want(ops, 4)?;
                let (bt, ct) = if name == "bfe" {
                    (u32t, u32t)
                } else if name == "shf" {
                    (ty, u32t)
                } else {
                    (ty, ty)
                };
                let f = match name {
                    "sad" => ops::sad(ty),
                    "bfe" => ops::bfe(ty),
                    "prmt" => ops::prmt(),
                    _ => {
                        let left = match m.take_any(&["l", "r"]) {
                            Some(d) => d == "l",
                            None => return self.err("shf needs .l or .r"),
                        };
                        let clamp = match m.take_any(&["wrap", "clamp"]) {
                            Some(c) => c == "clamp",
                            None => return self.err("shf needs .wrap or .clamp"),
                        };
                        ops::shf(left, clamp)
                    }
                };
                let d = self.dst(&ops[0], ty, Fit::Exact)?;
                let a = self.src(&ops[1], ty, Fit::Exact)?;
                let b = self.src(&ops[2], bt, Fit::Exact)?;
                let c = self.src(&ops[3], ct, Fit::Exact)?;
                self.emit(guard, Op::A3 { d, a, b, c, f });
            }
            _ => {
                // bfi d, a, b, pos, len
                self.want(ops, 5)?;
                let d = self.dst(&ops[0], ty, Fit::Exact)?;
                let a = self.src(&ops[1], ty, Fit::Exact)?;
                let b = self.src(&ops[2], ty, Fit::Exact)?;
                let c = self.src(&ops[3], u32t, Fit::Exact)?;
                let e = self.src(&ops[4], u32t, Fit::Exact)?;
                self.emit(guard, Op::A4 { d, a, b, c, e, f: ops::bfi(ty) });
            }
        }
        Ok(())
    }

    fn compare(&mut self, name: &str, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let tys = m.types();
        if name == "selp" {
            let ty = self.one_type(&tys)?;
            self.want(ops, 4)?;
            let d = self.dst(&ops[0], ty, Fit::Exact)?;
            let a = self.src(&ops[1], ty, Fit::Exact)?;
            let b = self.src(&ops[2], ty, Fit::Exact)?;
            let (c, neg) = self.pred(&ops[3])?;
            let (a, b) = if neg { (b, a) } else { (a, b) };
            self.emit(guard, Op::Selp { d, a, b, c });
            return Ok(());
        }
        if name == "slct" {
            let ftz = m.take("ftz");
            let [dty, cty] = tys[..] else { return self.err("expects two types") };
            self.want(ops, 4)?;
            let d = self.dst(&ops[0], dty, Fit::Exact)?;
            let a = self.src(&ops[1], dty, Fit::Exact)?;
            let b = self.src(&ops[2], dty, Fit::Exact)?;
            let c = self.src(&ops[3], cty, Fit::Exact)?;
            let f = if cty.float() { fops::cmp("ge", cty, ftz) } else { ops::int_cmp("ge", cty) };
            let f = f.map_or_else(|| self.err("bad comparison type"), Ok)?;
            let p = self.new_reg(1);
            let zero = self.konst(0);
            self.emit(guard, Op::Setp { p, q: None, a: c, b: zero, f, comb: None });
            self.emit(guard, Op::Selp { d, a, b, c: p });
            return Ok(());
        }
        const CMPS: &[&str] = &[
            "eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu",
            "num", "nan",
        ];
        let cmp = m.take_any(CMPS).map_or_else(|| self.err("needs a comparison"), Ok)?;
        let bop = m.take_any(&["and", "or", "xor"]).map(|b| match b {
            "and" => BoolOp::And,
            "or" => BoolOp::Or,
            _ => BoolOp::Xor,
        });
        let ftz = m.take("ftz");
        let (dty, ty) = match (name, &tys[..]) {
            ("setp", [t]) => (Ty::Pred, *t),
            ("set", [d, s]) => (*d, *s),
            _ => return self.err("wrong types"),
        };
        if ty == Ty::F16x2 || ty == Ty::Bf16 || ty == Ty::Pred {
            return self.unsupported(format!("{name} on .{}", ty.name()));
        }
        let f = if ty.float() { fops::cmp(cmp, ty, ftz) } else { ops::int_cmp(cmp, ty) };
        let f = f.map_or_else(|| self.err(format!("comparison .{cmp} on .{}", ty.name())), Ok)?;
        let n = if bop.is_some() { 4 } else { 3 };
        self.want(ops, n)?;
        let comb = match bop {
            Some(b) => {
                let (c, neg) = self.pred(&ops[3])?;
                Some((b, c, neg))
            }
            None => None,
        };
        let a = self.src(&ops[1], ty, Fit::Exact)?;
        let b = self.src(&ops[2], ty, Fit::Exact)?;
        if name == "setp" {
            let (p, q) = match &ops[0] {
                Operand::Pair(p, q) => {
                    let p = self.dst(&Operand::Name(p.clone()), Ty::Pred, Fit::Exact)?;
                    (p, Some(self.dst(&Operand::Name(q.clone()), Ty::Pred, Fit::Exact)?))
                }
                o => (self.dst(o, Ty::Pred, Fit::Exact)?, None),
            };
            self.emit(guard, Op::Setp { p, q, a, b, f, comb });
            return Ok(());
        }
        // set: all ones (integers) or 1.0 (f32) when true.
        let d = self.dst(&ops[0], dty, Fit::Exact)?;
        let yes = match dty {
            Ty::F32 => 0x3F80_0000,
            Ty::U32 | Ty::S32 | Ty::B32 => 0xFFFF_FFFF,
            _ => return self.err("set needs .u32, .s32 or .f32 results"),
        };
        let p = self.new_reg(1);
        self.emit(guard, Op::Setp { p, q: None, a, b, f, comb });
        let (t, z) = (self.konst(yes), self.konst(0));
        self.emit(guard, Op::Selp { d, a: t, b: z, c: p });
        Ok(())
    }

    fn cvt(&mut self, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let mut md = CvtMods { ftz: m.take("ftz"), sat: m.take("sat"), ..CvtMods::default() };
        while let Some((r, int)) = m.rnd() {
            if int {
                md.irnd = Some(r);
            } else {
                md.rnd = Some(r);
            }
        }
        let [dty, aty] = m.types()[..] else { return self.err("expects two types") };
        self.want(ops, 2)?;
        let f = fops::cvt(dty, aty, md).map_err(|e| super::PtxError::unsupported(self.line, e))?;
        let d = self.dst(&ops[0], dty, Fit::Wider)?;
        let a = self.src(&ops[1], aty, Fit::Wider)?;
        let dm = mask(u32::from(self.width(d)));
        self.emit(guard, Op::A1 { d, a, f: Box::new(move |v| f(v) & dm) });
        Ok(())
    }

    fn space(&self, m: &mut Mods<'_>) -> Space {
        match m.take_any(&["global", "const", "shared", "shared::cta", "local", "param", "param::entry", "param::func"])
        {
            Some("global") | Some("const") => Space::Global,
            Some("shared") | Some("shared::cta") => Space::Shared,
            Some("local") => Space::Local,
            Some(_) => Space::Param,
            None => Space::Generic,
        }
    }

    fn cvta(&mut self, name: &str, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let to = m.take("to");
        let space = self.space(m);
        self.want(ops, 2)?;
        if name == "isspacep" {
            let p = self.dst(&ops[0], Ty::Pred, Fit::Exact)?;
            let a = self.src(&ops[1], Ty::B64, Fit::Exact)?;
            self.emit(guard, Op::Isspacep { p, a, space });
            return Ok(());
        }
        let ty = self.one_type(&m.types())?;
        if !matches!(ty, Ty::U32 | Ty::U64 | Ty::B32 | Ty::B64) {
            return self.err("cvta needs .u32 or .u64");
        }
        let d = self.dst(&ops[0], ty, Fit::Exact)?;
        let a = self.src(&ops[1], ty, Fit::Exact)?;
        let base = match space {
            Space::Global => {
                self.emit(guard, Op::Mov { d, a });
                return Ok(());
            }
            Space::Shared => self.win.shared,
            Space::Local => self.win.local,
            _ => return self.unsupported(format!("cvta of the {space:?} space")),
        };
        self.emit(guard, Op::Cvta { d, a, base, to, dmask: mask(ty.bits()) });
        Ok(())
    }

    /// The address register and offset of `[base+off]` in `space`.
    fn address(&mut self, o: &Operand, space: Space) -> R<(Reg, i64)> {
        let Operand::Addr { base, offset } = o else { return self.err(format!("expected an address, found {o:?}")) };
        match base {
            None => Ok((self.konst(*offset as u64), 0)),
            Some(n) => match self.resolve(n)? {
                Sym::Reg(r, w) if w == 64 || w == 32 => Ok((r, *offset)),
                Sym::Reg(..) => self.err(format!("address register {n} is not 32 or 64 bits")),
                sym => Ok((self.sym_address(n, sym, space, false)?, *offset)),
            },
        }
    }

    fn mem(&mut self, store: bool, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let space = self.space(m);
        m.ignore(MEMORY_HINTS);
        let n = match m.take_any(&["v2", "v4"]) {
            Some("v2") => 2,
            Some(_) => 4,
            None => 1,
        };
        let ty = self.one_type(&m.types())?;
        if ty == Ty::Pred || ty.bits() > 64 {
            return self.err(format!("ld/st of .{}", ty.name()));
        }
        self.want(ops, 2)?;
        let (addr_op, val) = if store { (&ops[0], &ops[1]) } else { (&ops[1], &ops[0]) };
        // Call argument and result slots are registers.
        if let Operand::Addr { base: Some(b), offset } = addr_op {
            if let Some(Sym::Slot(slot, size)) = self.lookup(b) {
                if *offset != 0 || n != 1 || ty.bytes() > size {
                    return self.unsupported(format!("access to parameter {b} at offset {offset}"));
                }
                let mk = mask(ty.bits());
                if store {
                    let a = self.src(val, ty, Fit::Wider)?;
                    self.emit(guard, Op::A1 { d: slot, a, f: Box::new(move |v| v & mk) });
                } else {
                    let d = self.dst(val, ty, Fit::Wider)?;
                    let (bits, signed, dm) = (ty.bits(), ty.signed(), mask(u32::from(self.width(d))));
                    let f: super::ir::F1 = if signed {
                        Box::new(move |v| super::sx(v, bits) as u64 & dm)
                    } else {
                        Box::new(move |v| v & mk)
                    };
                    self.emit(guard, Op::A1 { d, a: slot, f });
                }
                return Ok(());
            }
        }
        let (addr, off) = self.address(addr_op, space)?;
        let vals: Vec<Operand> = match val {
            Operand::Vector(v) if v.len() == n => v.clone(),
            Operand::Vector(_) => return self.err("vector length does not match"),
            o if n == 1 => vec![o.clone()],
            _ => return self.err("expects a vector operand"),
        };
        let mut regs = [0; 4];
        if store {
            for (k, v) in vals.iter().enumerate() {
                regs[k] = self.src(v, ty, Fit::Wider)?;
            }
            self.emit(guard, Op::St { space, s: regs, n: n as u8, size: ty.bytes() as u8, addr, off });
        } else {
            let mut width = None;
            for (k, v) in vals.iter().enumerate() {
                regs[k] = self.dst(v, ty, Fit::Wider)?;
                let w = self.width(regs[k]);
                if width.is_some_and(|x| x != w) {
                    return self.err("vector elements of different widths");
                }
                width = Some(w);
            }
            let dmask = mask(u32::from(width.unwrap_or(64)));
            let op =
                Op::Ld { space, d: regs, n: n as u8, size: ty.bytes() as u8, signed: ty.signed(), dmask, addr, off };
            self.emit(guard, op);
        }
        Ok(())
    }

    fn atom(&mut self, has_result: bool, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let space = self.space(m);
        if space != Space::Global && space != Space::Shared && space != Space::Generic {
            return self.err("atomics on this space");
        }
        m.ignore(MEMORY_HINTS);
        let which = m.take_any(&["and", "or", "xor", "exch", "cas", "add", "inc", "dec", "min", "max"]);
        let which = which.map_or_else(|| self.err("needs an operation"), Ok)?;
        let ty = self.one_type(&m.types())?;
        let op = match (which, ty) {
            ("add", Ty::F32) => AtomOp::AddF32,
            ("add", Ty::F64) => AtomOp::AddF64,
            ("add", Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64) => AtomOp::Add,
            ("inc", Ty::U32) => AtomOp::Inc,
            ("dec", Ty::U32) => AtomOp::Dec,
            ("min", t) if t.int() => {
                if t.signed() {
                    AtomOp::MinS
                } else {
                    AtomOp::MinU
                }
            }
            ("max", t) if t.int() => {
                if t.signed() {
                    AtomOp::MaxS
                } else {
                    AtomOp::MaxU
                }
            }
            ("and", t) if t.int() => AtomOp::And,
            ("or", t) if t.int() => AtomOp::Or,
            ("xor", t) if t.int() => AtomOp::Xor,
            ("exch", t) if t.int() || t == Ty::F32 || t == Ty::F64 => AtomOp::Exch,
            ("cas", t) if t.int() => AtomOp::Cas,
            _ => return self.unsupported(format!("atomic .{which}.{}", ty.name())),
        };
        if ty.bits() != 32 && ty.bits() != 64 {
            return self.unsupported(format!("atomic on .{}", ty.name()));
        }
        let cas = op == AtomOp::Cas;
        let first = usize::from(has_result);
        self.want(ops, first + 2 + usize::from(cas))?;
        let d = if has_result { Some(self.dst(&ops[0], ty, Fit::Exact)?) } else { None };
        let (addr, off) = self.address(&ops[first], space)?;
        let b = self.src(&ops[first + 1], ty, Fit::Exact)?;
        let c = if cas { Some(self.src(&ops[first + 2], ty, Fit::Exact)?) } else { None };
        self.emit(guard, Op::Atom { space, op, size: ty.bytes() as u8, d, addr, off, b, c });
        Ok(())
    }
}
