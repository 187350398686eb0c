//! Lowering of one kernel: names resolved (scoped registers, variables, labels), every operand
//! made a register (immediates and addresses become constant registers, special registers are
//! filled in per warp), shared and local memory laid out, calls of `.func` bodies inlined and
//! calls of `.extern` functions bound to their native implementations. Everything is checked
//! here, so that running a kernel never meets an instruction it cannot execute.

use super::ir::{Inst, Kernel, Op, Reg, Special};
use super::parse::{Ast, FuncDecl, Lit, Operand, Stmt, VarDecl, VarSpace};
use super::{mask, PtxError, Ty};
use std::collections::HashMap;

/// Bases of the generic-address windows of shared and local memory.
#[derive(Clone, Copy, Debug)]
pub struct Windows {
    /// Generic address of shared offset 0.
    pub shared: u64,
    /// Generic address of local offset 0.
    pub local: u64,
}

/// What a name stands for in a body.
#[derive(Clone, Copy, Debug)]
pub enum Sym {
    /// A declared register not used yet (width in bits; 1 for predicates).
    Decl(u8),
    /// A register.
    Reg(Reg, u8),
    /// A local variable at this offset.
    Local(u64),
    /// A shared variable at this offset.
    Shared(u64),
    /// The dynamic shared memory (`.extern .shared` array).
    DynShared,
    /// A global or const variable at this device address.
    Global(u64),
    /// A kernel parameter: offset and size.
    KParam(u32, u32),
    /// A call argument or result slot (a register) and its size in bytes.
    Slot(Reg, u32),
}

pub(crate) type R<T> = Result<T, PtxError>;

/// The names of one scope: declared one by one, or as `%r<N>` ranges.
#[derive(Default)]
struct Scope {
    names: HashMap<String, Sym>,
    /// Prefix, count and width of each `%name<count>` declaration.
    ranges: Vec<(String, u32, u8)>,
}

impl Scope {
    fn get(&self, name: &str) -> Option<Sym> {
        if let Some(s) = self.names.get(name) {
            return Some(*s);
        }
        self.ranges.iter().rev().find_map(|(prefix, count, bits)| {
            let rest = name.strip_prefix(prefix.as_str())?;
            let canonical =
                !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) && (rest == "0" || !rest.starts_with('0'));
            let i: u32 = rest.parse().ok().filter(|_| canonical)?;
            (i < *count).then_some(Sym::Decl(*bits))
        })
    }
}

/// How strictly an operand register's width must match the instruction type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// The same width (predicates for `.pred`).
    Exact,
    /// At least as wide (`ld`, `st`, `cvt`).
    Wider,
}

/// The state of lowering one kernel.
pub struct Lower<'a> {
    pub(crate) ast: &'a Ast,
    globals: &'a super::ir::Globals,
    pub(crate) win: Windows,
    pub(crate) widths: Vec<u8>,
    consts: HashMap<u64, Reg>,
    const_list: Vec<(Reg, u64)>,
    specials: HashMap<Special, Reg>,
    pub(crate) insts: Vec<Inst>,
    scopes: Vec<Scope>,
    labels: HashMap<(u32, String), u32>,
    fixups: Vec<(usize, u32, String, u32)>,
    /// The current inline frame (0: the kernel) and the stack of inlined functions.
    pub(crate) frame: u32,
    frames: u32,
    pub(crate) inline_stack: Vec<String>,
    /// Branches to patch to the end of each inlined call (by frame).
    pub(crate) returns: HashMap<u32, Vec<usize>>,
    local_size: u64,
    shared_size: u64,
    module_shared: HashMap<String, u64>,
    dyn_align: u64,
    dyn_regs: Vec<(Reg, bool)>,
    pub(crate) line: u32,
    pub(crate) text: String,
    pub(crate) too_big: bool,
}

/// Instructions a kernel may have after inlining, and registers it may use.
const MAX_INSTS: usize = 1 << 20;
const MAX_REGS: usize = 1 << 16;

/// Lowers kernel `f` of `ast`; `globals` gives the device address of each module variable.
pub fn lower_kernel(ast: &Ast, f: &FuncDecl, globals: &super::ir::Globals, win: Windows) -> R<Kernel> {
    let mut l = Lower {
        ast,
        globals,
        win,
        widths: Vec::new(),
        consts: HashMap::new(),
        const_list: Vec::new(),
        specials: HashMap::new(),
        insts: Vec::new(),
        scopes: vec![Scope::default()],
        labels: HashMap::new(),
        fixups: Vec::new(),
        frame: 0,
        frames: 0,
        inline_stack: vec![f.name.clone()],
        returns: HashMap::new(),
        local_size: 0,
        shared_size: 0,
        module_shared: HashMap::new(),
        dyn_align: 16,
        dyn_regs: Vec::new(),
        line: f.line,
        text: String::new(),
        too_big: false,
    };
    // Parameters: laid out in order, each at its alignment.
    let mut params = Vec::new();
    let mut off = 0u64;
    for p in &f.params {
        let size = p.size();
        if size == 0 {
            return Err(PtxError::invalid(p.line, format!("parameter {} has no size", p.name)));
        }
        off = off.next_multiple_of(p.alignment().max(1));
        params.push((off as u32, size as u32));
        l.scopes[0].names.insert(p.name.clone(), Sym::KParam(off as u32, size as u32));
        off += size;
    }
    if off > 4096 {
        return Err(PtxError::invalid(f.line, format!("{} bytes of kernel parameters (at most 4096)", off)));
    }
    let body = f.body.as_ref().ok_or_else(|| PtxError::invalid(f.line, format!("kernel {} has no body", f.name)))?;
    l.body(body)?;
    if l.too_big || l.widths.len() > MAX_REGS {
        return Err(PtxError::unsupported(
            f.line,
            format!("kernel {} with more than {MAX_INSTS} instructions or {MAX_REGS} registers after inlining", f.name),
        ));
    }
    // A kernel falls off its end only after `ret`; make that explicit.
    l.insts.push(Inst { guard: None, op: Op::Exit, line: 0, text: "ret".into() });
    for (at, frame, name, line) in std::mem::take(&mut l.fixups) {
        let target = *l
            .labels
            .get(&(frame, name.clone()))
            .ok_or_else(|| PtxError::invalid(line, format!("undefined label {name}")))?;
        if let Some(Inst { op: Op::Bra { target: t }, .. }) = l.insts.get_mut(at) {
            *t = target;
        }
    }
    let dyn_offset = l.shared_size.next_multiple_of(l.dyn_align);
    for (r, generic) in std::mem::take(&mut l.dyn_regs) {
        let v = if generic { l.win.shared + dyn_offset } else { dyn_offset };
        l.const_list.push((r, v));
    }
    if l.shared_size > 48 * 1024 {
        return Err(PtxError::invalid(
            f.line,
            format!("{} bytes of static shared memory (at most 49152)", l.shared_size),
        ));
    }
    if l.local_size > 512 * 1024 {
        return Err(PtxError::invalid(f.line, format!("{} bytes of local memory per thread", l.local_size)));
    }
    Ok(Kernel {
        name: f.name.clone(),
        params,
        param_size: off as u32,
        nregs: l.widths.len() as u32,
        insts: l.insts,
        consts: l.const_list,
        specials: l.specials.into_iter().map(|(s, r)| (r, s)).collect(),
        static_shared: l.shared_size as u32,
        dyn_offset: dyn_offset as u32,
        local_size: l.local_size as u32,
        maxntid: f.maxntid,
        reqntid: f.reqntid,
    })
}

impl<'a> Lower<'a> {
    pub(crate) fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(PtxError::invalid(self.line, format!("{}: {}", self.text, msg.into())))
    }

    pub(crate) fn unsupported<T>(&self, what: impl Into<String>) -> R<T> {
        Err(PtxError::unsupported(self.line, what.into()))
    }

    /// A fresh register of `bits` width.
    pub(crate) fn new_reg(&mut self, bits: u8) -> Reg {
        self.widths.push(bits);
        (self.widths.len() - 1) as Reg
    }

    /// A constant register holding `v`.
    pub(crate) fn konst(&mut self, v: u64) -> Reg {
        if let Some(&r) = self.consts.get(&v) {
            return r;
        }
        let r = self.new_reg(64);
        self.consts.insert(v, r);
        self.const_list.push((r, v));
        r
    }

    fn special(&mut self, s: Special) -> Reg {
        if let Some(&r) = self.specials.get(&s) {
            return r;
        }
        let r = self.new_reg(32);
        self.specials.insert(s, r);
        r
    }

    /// Appends an instruction with the current guard.
    pub(crate) fn emit(&mut self, guard: Option<(Reg, bool)>, op: Op) {
        if self.insts.len() >= MAX_INSTS {
            // Reported by `lower_kernel` (inlining can multiply a body's size).
            self.too_big = true;
            return;
        }
        self.insts.push(Inst { guard, op, line: self.line, text: self.text.clone().into_boxed_str() });
    }

    /// A branch to `label` (patched at the end).
    pub(crate) fn branch(&mut self, guard: Option<(Reg, bool)>, label: &str) {
        self.fixups.push((self.insts.len(), self.frame, label.to_string(), self.line));
        self.emit(guard, Op::Bra { target: u32::MAX });
    }

    pub(crate) fn lookup(&self, name: &str) -> Option<Sym> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn set(&mut self, name: &str, sym: Sym) {
        for s in self.scopes.iter_mut().rev() {
            if s.get(name).is_some() {
                s.names.insert(name.to_string(), sym);
                return;
            }
        }
    }

    fn declare(&mut self, name: String, sym: Sym) -> R<()> {
        let scope = self.scopes.last_mut().expect("a scope");
        if scope.names.insert(name.clone(), sym).is_some() {
            return Err(PtxError::invalid(self.line, format!("{name} declared twice")));
        }
        Ok(())
    }

    /// Lowers the statements of a body (the kernel's or an inlined function's).
    pub(crate) fn body(&mut self, body: &[Stmt]) -> R<()> {
        for s in body {
            match s {
                Stmt::Open => self.scopes.push(Scope::default()),
                Stmt::Close => {
                    self.scopes.pop();
                }
                Stmt::Label(name, line) => {
                    self.line = *line;
                    if self.labels.insert((self.frame, name.clone()), self.insts.len() as u32).is_some() {
                        return Err(PtxError::invalid(*line, format!("label {name} defined twice")));
                    }
                }
                Stmt::Reg { ty, names, line } => {
                    self.line = *line;
                    let bits = if *ty == Ty::Pred { 1 } else { ty.bits() as u8 };
                    for (n, count) in names {
                        match count {
                            // `%r<N>`: %r0 .. %r<N-1>, resolved when used.
                            Some(c) => self.scopes.last_mut().expect("a scope").ranges.push((n.clone(), *c, bits)),
                            None => self.declare(n.clone(), Sym::Decl(bits))?,
                        }
                    }
                }
                Stmt::Var(v) => self.local_var(v)?,
                Stmt::Instr(i) => {
                    self.line = i.line;
                    self.text = i.opcode.clone();
                    self.instr(i)?;
                }
            }
        }
        Ok(())
    }

    fn local_var(&mut self, v: &VarDecl) -> R<()> {
        self.line = v.line;
        if v.init.is_some() {
            return Err(PtxError::unsupported(v.line, format!("initialized function-scope variable {}", v.name)));
        }
        match v.space {
            VarSpace::Local => {
                let off = self.local_size.next_multiple_of(v.alignment());
                self.local_size = off + v.size();
                self.declare(v.name.clone(), Sym::Local(off))
            }
            VarSpace::Shared => {
                if v.external || v.dims.iter().any(Option::is_none) {
                    self.dyn_align = self.dyn_align.max(v.alignment());
                    return self.declare(v.name.clone(), Sym::DynShared);
                }
                let off = self.shared_size.next_multiple_of(v.alignment());
                self.shared_size = off + v.size();
                self.declare(v.name.clone(), Sym::Shared(off))
            }
            VarSpace::Param => {
                let size = v.size();
                if !(1..=8).contains(&size) {
                    return Err(PtxError::unsupported(v.line, format!("call parameter {} of {size} bytes", v.name)));
                }
                let r = self.new_reg(64);
                self.declare(v.name.clone(), Sym::Slot(r, size as u32))
            }
            _ => Err(PtxError::unsupported(v.line, format!("variable {} in a body", v.name))),
        }
    }

    /// The symbol of a module-scope variable (laying shared ones out on first use).
    fn module_sym(&mut self, name: &str) -> Option<Sym> {
        let v = self.ast.vars.iter().find(|v| v.name == name)?;
        match v.space {
            VarSpace::Shared => {
                if v.external || v.dims.iter().any(Option::is_none) {
                    self.dyn_align = self.dyn_align.max(v.alignment());
                    return Some(Sym::DynShared);
                }
                if let Some(&off) = self.module_shared.get(name) {
                    return Some(Sym::Shared(off));
                }
                let off = self.shared_size.next_multiple_of(v.alignment());
                self.shared_size = off + v.size();
                self.module_shared.insert(name.to_string(), off);
                Some(Sym::Shared(off))
            }
            _ => self.globals.get(name).map(|&(addr, _)| Sym::Global(addr)),
        }
    }

    /// What `name` refers to.
    pub(crate) fn resolve(&mut self, name: &str) -> R<Sym> {
        if let Some(s) = self.lookup(name) {
            if let Sym::Decl(bits) = s {
                let r = self.new_reg(bits);
                self.set(name, Sym::Reg(r, bits));
                return Ok(Sym::Reg(r, bits));
            }
            return Ok(s);
        }
        if let Some(s) = self.module_sym(name) {
            return Ok(s);
        }
        self.err(format!("undeclared name {name}"))
    }

    /// A special register, by name, with its width.
    fn special_reg(&mut self, name: &str) -> Option<R<(Reg, u8)>> {
        let dim = |s: &str| match s {
            "x" => Some(0u8),
            "y" => Some(1),
            "z" => Some(2),
            _ => None,
        };
        let (base, d) = match name.split_once('.') {
            Some((b, d)) => (b, dim(d)),
            None => (name, None),
        };
        let s = match (base, d) {
            ("%tid", Some(d)) => Special::Tid(d),
            ("%ntid", Some(d)) => Special::Ntid(d),
            ("%ctaid", Some(d)) => Special::Ctaid(d),
            ("%nctaid", Some(d)) => Special::Nctaid(d),
            ("%laneid", None) => Special::LaneId,
            ("%warpid", None) => Special::WarpId,
            ("%nwarpid", None) => Special::NWarpId,
            ("%smid", None) => Special::SmId,
            ("%nsmid", None) => Special::NSmId,
            ("%gridid", None) => Special::GridId,
            ("%lanemask_eq", None) => Special::LanemaskEq,
            ("%lanemask_le", None) => Special::LanemaskLe,
            ("%lanemask_lt", None) => Special::LanemaskLt,
            ("%lanemask_ge", None) => Special::LanemaskGe,
            ("%lanemask_gt", None) => Special::LanemaskGt,
            ("%dynamic_smem_size", None) => Special::DynSmem,
            ("%total_smem_size", None) => Special::TotalSmem,
            _ => {
                let known = ["%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"];
                if base.starts_with("%envreg") || base.starts_with("%pm") || known.contains(&base) {
                    return Some(self.unsupported(format!("special register {name} as an operand here")));
                }
                return None;
            }
        };
        let bits = if s == Special::GridId { 64 } else { 32 };
        Some(Ok((self.special(s), bits)))
    }

    fn check_width(&self, name: &str, width: u8, ty: Ty, fit: Fit) -> R<()> {
        let want = if ty == Ty::Pred { 1 } else { ty.bits() as u8 };
        let ok = if want == 1 || width == 1 {
            want == width
        } else {
            match fit {
                Fit::Exact => width == want,
                Fit::Wider => width >= want,
            }
        };
        if ok {
            Ok(())
        } else {
            self.err(format!("operand {name} ({width}-bit register) does not fit .{}", ty.name()))
        }
    }

    /// The bits of literal `lit` as an operand of type `ty`.
    pub(crate) fn lit_bits(&self, lit: Lit, ty: Ty) -> R<u64> {
        match lit_bits(lit, ty) {
            Some(v) => Ok(v),
            None => self.err(format!("literal {lit:?} does not fit .{}", ty.name())),
        }
    }

    /// A source operand of type `ty`.
    pub(crate) fn src(&mut self, o: &Operand, ty: Ty, fit: Fit) -> R<Reg> {
        match o {
            Operand::Imm(l) => {
                let v = self.lit_bits(*l, ty)?;
                Ok(self.konst(v))
            }
            Operand::Name(n) => {
                if n.starts_with('%') {
                    if let Some(s) = self.special_reg(n) {
                        let (r, w) = s?;
                        self.check_width(n, w, ty, Fit::Wider).or_else(|_| self.check_width(n, w, ty, Fit::Exact))?;
                        return Ok(r);
                    }
                }
                match self.resolve(n)? {
                    Sym::Reg(r, w) => {
                        self.check_width(n, w, ty, fit)?;
                        Ok(r)
                    }
                    other => {
                        if !ty.int() || ty.bits() < 32 {
                            return self.err(format!("the address of {n} as a .{} operand", ty.name()));
                        }
                        let v = self.sym_address(n, other, super::ir::Space::Generic, true)?;
                        Ok(v)
                    }
                }
            }
            _ => self.err(format!("unexpected operand {o:?}")),
        }
    }

    /// A destination operand of type `ty` (`_` discards).
    pub(crate) fn dst(&mut self, o: &Operand, ty: Ty, fit: Fit) -> R<Reg> {
        match o {
            Operand::Name(n) if n == "_" => Ok(self.new_reg(if ty == Ty::Pred { 1 } else { ty.bits() as u8 })),
            Operand::Name(n) => match self.resolve(n)? {
                Sym::Reg(r, w) => {
                    self.check_width(n, w, ty, fit)?;
                    Ok(r)
                }
                _ => self.err(format!("{n} is not a register")),
            },
            _ => self.err(format!("unexpected destination {o:?}")),
        }
    }

    /// The width of a destination register (bits).
    pub(crate) fn width(&self, r: Reg) -> u8 {
        self.widths[r as usize]
    }

    /// A predicate operand: register and negation.
    pub(crate) fn pred(&mut self, o: &Operand) -> R<(Reg, bool)> {
        match o {
            Operand::Name(n) => Ok((self.src(o, Ty::Pred, Fit::Exact).map_err(|_| self.bad_pred(n))?, false)),
            Operand::Not(n) => Ok((self.src(&Operand::Name(n.clone()), Ty::Pred, Fit::Exact)?, true)),
            Operand::Imm(Lit::Int(v)) => Ok((self.konst(*v & 1), false)),
            _ => self.err(format!("expected a predicate, found {o:?}")),
        }
    }

    fn bad_pred(&self, n: &str) -> PtxError {
        PtxError::invalid(self.line, format!("{}: {n} is not a predicate", self.text))
    }

    /// The address of symbol `name` as seen by an access in `space` (a constant register).
    pub(crate) fn sym_address(&mut self, name: &str, sym: Sym, space: super::ir::Space, mov: bool) -> R<Reg> {
        use super::ir::Space as S;
        let v = match (sym, space) {
            (Sym::Global(a), S::Global | S::Generic) => a,
            (Sym::Shared(o), S::Shared) => o,
            (Sym::Shared(o), S::Generic) if mov => o,
            (Sym::Shared(o), S::Generic) => self.win.shared + o,
            (Sym::Local(o), S::Local) => o,
            (Sym::Local(o), S::Generic) if mov => o,
            (Sym::Local(o), S::Generic) => self.win.local + o,
            (Sym::KParam(o, _), S::Param) => u64::from(o),
            (Sym::KParam(o, _), S::Generic) if mov => u64::from(o),
            (Sym::DynShared, S::Shared | S::Generic) => {
                let r = self.new_reg(64);
                self.dyn_regs.push((r, space == S::Generic && !mov));
                return Ok(r);
            }
            _ => return self.err(format!("{name} cannot be addressed in this state space")),
        };
        Ok(self.konst(v))
    }

    /// Enters an inlined call: a fresh frame for labels and a scope binding the callee's
    /// parameter names to the caller's slots.
    pub(crate) fn enter_inline(&mut self, bindings: Vec<(String, Sym)>) -> u32 {
        let outer = self.frame;
        self.frames += 1;
        self.frame = self.frames;
        self.scopes.push(Scope { names: bindings.into_iter().collect(), ranges: Vec::new() });
        outer
    }

    /// Leaves an inlined call: its `ret`s branch to here.
    pub(crate) fn leave_inline(&mut self, outer: u32) {
        let here = self.insts.len() as u32;
        for at in self.returns.remove(&self.frame).unwrap_or_default() {
            if let Some(Inst { op: Op::Bra { target }, .. }) = self.insts.get_mut(at) {
                *target = here;
            }
        }
        self.scopes.pop();
        self.frame = outer;
    }
}

/// The bits of literal `lit` as a value of type `ty` (`None` when it cannot be one).
pub fn lit_bits(lit: Lit, ty: Ty) -> Option<u64> {
    let m = mask(ty.bits());
    Some(match (lit, ty) {
        (Lit::Int(v), Ty::F32) => u64::from((v as i64 as f32).to_bits()),
        (Lit::Int(v), Ty::F64) => (v as i64 as f64).to_bits(),
        (Lit::Int(v), _) => v & m,
        (Lit::F32(b), Ty::F32) => u64::from(b),
        (Lit::F32(b), Ty::F64) => f64::from(f32::from_bits(b)).to_bits(),
        (Lit::F64(v), Ty::F64) => v.to_bits(),
        (Lit::F64(v), Ty::F32) => u64::from((v as f32).to_bits()),
        (Lit::F32(b), Ty::F16) => u64::from(half::f16::from_f32(f32::from_bits(b)).to_bits()),
        (Lit::F64(v), Ty::F16) => u64::from(half::f16::from_f64(v).to_bits()),
        (Lit::F32(b), _) if ty.bits() == 32 => u64::from(b),
        (Lit::F64(v), _) if ty.bits() == 64 => v.to_bits(),
        _ => return None,
    })
}
