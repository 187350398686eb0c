//! One warp: the lock-step schedule (lanes at the lowest program counter run together) and the
//! execution of each instruction over the active lanes, with every memory access checked.

use super::{Exec, Fault, FaultKind, Warp, WINDOW};
use crate::memory::GlobalView;
use crate::ptx::ir::{AtomOp, Inst, Op, Reg, ShflMode, Space, VoteMode};
use crate::ptx::{mask, sx};

fn at(r: Reg, lane: usize) -> usize {
    ((r as usize) << 5) | lane
}

/// The set bits of a lane mask, lowest first.
struct Lanes(u32);

impl Iterator for Lanes {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let l = self.0.trailing_zeros();
        self.0 &= self.0 - 1;
        Some(l as usize)
    }
}

/// Where an address points.
#[derive(Clone, Copy)]
enum Loc {
    Shared(u64),
    Local(u64),
    Param(u64),
    Global(u64),
}

fn range(buf: &mut [u8], off: u64, len: usize) -> Option<&mut [u8]> {
    let off = usize::try_from(off).ok()?;
    buf.get_mut(off..off.checked_add(len)?)
}

/// The bytes at `loc` (shared, this lane's local memory, or global memory).
fn bytes<'s>(
    global: &'s mut GlobalView<'_>,
    loc: Loc,
    len: usize,
    shared: &'s mut [u8],
    local: &'s mut [u8],
) -> Option<&'s mut [u8]> {
    match loc {
        Loc::Shared(o) => range(shared, o, len),
        Loc::Local(o) => range(local, o, len),
        Loc::Global(a) => global.slice(a, len),
        Loc::Param(_) => None,
    }
}

fn get(b: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    v[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(v)
}

fn put(b: &mut [u8], v: u64) {
    let n = b.len();
    b.copy_from_slice(&v.to_le_bytes()[..n]);
}

/// A failed access: kind and description.
type Bad = (FaultKind, String);

impl Exec<'_, '_, '_> {
    fn locate(&self, space: Space, addr: u64) -> Loc {
        match space {
            Space::Shared => Loc::Shared(addr),
            Space::Local => Loc::Local(addr),
            Space::Param => Loc::Param(addr),
            Space::Global => Loc::Global(addr),
            Space::Generic => {
                if addr.wrapping_sub(self.win.shared) < WINDOW {
                    Loc::Shared(addr - self.win.shared)
                } else if addr.wrapping_sub(self.win.local) < WINDOW {
                    Loc::Local(addr - self.win.local)
                } else {
                    Loc::Global(addr)
                }
            }
        }
    }

    fn describe(loc: Loc, addr: u64, size: usize, write: bool) -> String {
        let what = if write { "writes" } else { "reads" };
        match loc {
            Loc::Shared(o) => format!("{what} {size} bytes at shared offset {o:#x}, outside the block's shared memory"),
            Loc::Local(o) => format!("{what} {size} bytes at local offset {o:#x}, outside the thread's local memory"),
            Loc::Param(o) => format!("{what} {size} bytes at parameter offset {o:#x}, outside the parameters"),
            Loc::Global(_) => format!("{what} {size} bytes at {addr:#x}, outside any allocation"),
        }
    }

    fn read(&mut self, space: Space, addr: u64, size: usize, shared: &mut [u8], local: &mut [u8]) -> Result<u64, Bad> {
        if addr % size as u64 != 0 {
            return Err((FaultKind::Misaligned, format!("reads {size} bytes at misaligned address {addr:#x}")));
        }
        let loc = self.locate(space, addr);
        if let Loc::Param(o) = loc {
            let p = usize::try_from(o).ok().and_then(|o| self.cfg.params.get(o..o.checked_add(size)?));
            return p.map(get).ok_or_else(|| (FaultKind::IllegalAddress, Self::describe(loc, addr, size, false)));
        }
        match bytes(self.global, loc, size, shared, local) {
            Some(b) => Ok(get(b)),
            None => Err((FaultKind::IllegalAddress, Self::describe(loc, addr, size, false))),
        }
    }

    fn write(
        &mut self,
        space: Space,
        addr: u64,
        size: usize,
        v: u64,
        shared: &mut [u8],
        local: &mut [u8],
    ) -> Result<(), Bad> {
        if addr % size as u64 != 0 {
            return Err((FaultKind::Misaligned, format!("writes {size} bytes at misaligned address {addr:#x}")));
        }
        let loc = self.locate(space, addr);
        match bytes(self.global, loc, size, shared, local) {
            Some(b) => {
                put(b, v);
                Ok(())
            }
            None => Err((FaultKind::IllegalAddress, Self::describe(loc, addr, size, true))),
        }
    }

    fn fault(&self, (kind, what): Bad, w: &Warp, lane: usize, inst: &Inst, ctaid: [u32; 3]) -> Fault {
        let [bx, by, _] = self.cfg.block;
        let t = w.index * 32 + lane as u32;
        let tid = [t % bx, (t / bx) % by, t / (bx * by)];
        Fault {
            kind,
            msg: format!(
                "kernel `{}` block ({},{},{}) thread ({},{},{}): `{}` (ptx line {}) {what}",
                self.k.name, ctaid[0], ctaid[1], ctaid[2], tid[0], tid[1], tid[2], inst.text, inst.line
            ),
        }
    }

    /// Runs warp `w` for at most `budget` warp-instructions: true when no lane can run (all
    /// exited or waiting at a barrier), false when the budget ran out.
    pub(crate) fn run_warp(
        &mut self,
        w: &mut Warp,
        shared: &mut [u8],
        ctaid: [u32; 3],
        budget: u64,
    ) -> Result<bool, Fault> {
        let k = self.k;
        let mut left = budget;
        'group: loop {
            let runnable = w.alive & !w.waiting;
            if runnable == 0 {
                return Ok(true);
            }
            let mut pc = u32::MAX;
            for l in Lanes(runnable) {
                pc = pc.min(w.pc[l]);
            }
            let (mut group, mut next_other) = (0u32, u32::MAX);
            for l in Lanes(runnable) {
                if w.pc[l] == pc {
                    group |= 1 << l;
                } else {
                    next_other = next_other.min(w.pc[l]);
                }
            }
            loop {
                if left == 0 {
                    for l in Lanes(group) {
                        w.pc[l] = pc;
                    }
                    return Ok(false);
                }
                left -= 1;
                self.steps += 1;
                let inst = &k.insts[pc as usize];
                let eff = match inst.guard {
                    None => group,
                    Some((p, neg)) => {
                        let mut e = 0;
                        for l in Lanes(group) {
                            if (w.regs[at(p, l)] != 0) != neg {
                                e |= 1 << l;
                            }
                        }
                        e
                    }
                };
                match inst.op {
                    Op::Bra { target } => {
                        if eff == group {
                            pc = target;
                        } else if eff == 0 {
                            pc += 1;
                        } else {
                            for l in Lanes(eff) {
                                w.pc[l] = target;
                            }
                            for l in Lanes(group & !eff) {
                                w.pc[l] = pc + 1;
                            }
                            continue 'group;
                        }
                    }
                    Op::Exit => {
                        w.alive &= !eff;
                        group &= !eff;
                        pc += 1;
                        if group == 0 {
                            continue 'group;
                        }
                    }
                    Op::Bar { .. } => {
                        w.waiting |= eff;
                        for l in Lanes(eff) {
                            w.pc[l] = pc + 1;
                        }
                        group &= !eff;
                        pc += 1;
                        if group == 0 {
                            continue 'group;
                        }
                    }
                    _ => {
                        if eff != 0 {
                            self.exec(inst, eff, w, shared, ctaid)?;
                        }
                        pc += 1;
                    }
                }
                if pc >= next_other {
                    for l in Lanes(group) {
                        w.pc[l] = pc;
                    }
                    continue 'group;
                }
            }
        }
    }

    fn exec(&mut self, inst: &Inst, eff: u32, w: &mut Warp, shared: &mut [u8], ctaid: [u32; 3]) -> Result<(), Fault> {
        let ls = self.k.local_size as usize;
        match &inst.op {
            Op::Mov { d, a } => {
                for l in Lanes(eff) {
                    w.regs[at(*d, l)] = w.regs[at(*a, l)];
                }
            }
            Op::A1 { d, a, f } => {
                for l in Lanes(eff) {
                    w.regs[at(*d, l)] = f(w.regs[at(*a, l)]);
                }
            }
            Op::A2 { d, a, b, f } => {
                for l in Lanes(eff) {
                    w.regs[at(*d, l)] = f(w.regs[at(*a, l)], w.regs[at(*b, l)]);
                }
            }
            Op::A3 { d, a, b, c, f } => {
                for l in Lanes(eff) {
                    w.regs[at(*d, l)] = f(w.regs[at(*a, l)], w.regs[at(*b, l)], w.regs[at(*c, l)]);
                }
            }
            Op::A4 { d, a, b, c, e, f } => {
                for l in Lanes(eff) {
                    let r = &w.regs;
                    w.regs[at(*d, l)] = f(r[at(*a, l)], r[at(*b, l)], r[at(*c, l)], r[at(*e, l)]);
                }
            }
            Op::Setp { p, q, a, b, f, comb } => {
                for l in Lanes(eff) {
                    let mut t = f(w.regs[at(*a, l)], w.regs[at(*b, l)]);
                    let mut u = !t;
                    if let Some((op, c, neg)) = comb {
                        let cv = (w.regs[at(*c, l)] != 0) != *neg;
                        let apply = |x: bool| match op {
                            crate::ptx::ir::BoolOp::And => x && cv,
                            crate::ptx::ir::BoolOp::Or => x || cv,
                            crate::ptx::ir::BoolOp::Xor => x != cv,
                        };
                        (t, u) = (apply(t), apply(u));
                    }
                    w.regs[at(*p, l)] = u64::from(t);
                    if let Some(q) = q {
                        w.regs[at(*q, l)] = u64::from(u);
                    }
                }
            }
            Op::Selp { d, a, b, c } => {
                for l in Lanes(eff) {
                    w.regs[at(*d, l)] = if w.regs[at(*c, l)] != 0 { w.regs[at(*a, l)] } else { w.regs[at(*b, l)] };
                }
            }
            Op::Ld { space, d, n, size, signed, dmask, addr, off } => {
                let (n, size) = (*n as usize, *size as usize);
                for l in Lanes(eff) {
                    let a = w.regs[at(*addr, l)].wrapping_add(*off as u64);
                    if n > 1 && a % (n * size) as u64 != 0 {
                        let why = format!("reads a vector at misaligned address {a:#x}");
                        return Err(self.fault((FaultKind::Misaligned, why), w, l, inst, ctaid));
                    }
                    for (k, &dk) in d.iter().enumerate().take(n) {
                        let local = &mut w.local[l * ls..(l + 1) * ls];
                        let v = match self.read(*space, a.wrapping_add((k * size) as u64), size, shared, local) {
                            Ok(v) => v,
                            Err(b) => return Err(self.fault(b, w, l, inst, ctaid)),
                        };
                        let v = if *signed { sx(v, size as u32 * 8) as u64 } else { v };
                        w.regs[at(dk, l)] = v & dmask;
                    }
                }
            }
            Op::St { space, s, n, size, addr, off } => {
                let (n, size) = (*n as usize, *size as usize);
                for l in Lanes(eff) {
                    let a = w.regs[at(*addr, l)].wrapping_add(*off as u64);
                    if n > 1 && a % (n * size) as u64 != 0 {
                        let why = format!("writes a vector at misaligned address {a:#x}");
                        return Err(self.fault((FaultKind::Misaligned, why), w, l, inst, ctaid));
                    }
                    for (k, &sk) in s.iter().enumerate().take(n) {
                        let v = w.regs[at(sk, l)];
                        let local = &mut w.local[l * ls..(l + 1) * ls];
                        if let Err(b) = self.write(*space, a.wrapping_add((k * size) as u64), size, v, shared, local) {
                            return Err(self.fault(b, w, l, inst, ctaid));
                        }
                    }
                }
            }
            Op::Atom { space, op, size, d, addr, off, b, c } => {
                let size = *size as usize;
                let m = mask(size as u32 * 8);
                for l in Lanes(eff) {
                    let a = w.regs[at(*addr, l)].wrapping_add(*off as u64);
                    let local = &mut w.local[l * ls..(l + 1) * ls];
                    let old = match self.read(*space, a, size, shared, local) {
                        Ok(v) => v,
                        Err(e) => return Err(self.fault(e, w, l, inst, ctaid)),
                    };
                    let bv = w.regs[at(*b, l)] & m;
                    let new = atomic(*op, old, bv, c.map(|c| w.regs[at(c, l)] & m), size);
                    let local = &mut w.local[l * ls..(l + 1) * ls];
                    if let Err(e) = self.write(*space, a, size, new & m, shared, local) {
                        return Err(self.fault(e, w, l, inst, ctaid));
                    }
                    if let Some(d) = d {
                        w.regs[at(*d, l)] = old;
                    }
                }
            }
            Op::Cvta { d, a, base, to, dmask } => {
                for l in Lanes(eff) {
                    let v = w.regs[at(*a, l)];
                    w.regs[at(*d, l)] = (if *to { v.wrapping_sub(*base) } else { v.wrapping_add(*base) }) & dmask;
                }
            }
            Op::Isspacep { p, a, space } => {
                for l in Lanes(eff) {
                    let v = w.regs[at(*a, l)];
                    let is = matches!(
                        (self.locate(Space::Generic, v), space),
                        (Loc::Shared(_), Space::Shared)
                            | (Loc::Local(_), Space::Local)
                            | (Loc::Global(_), Space::Global)
                    );
                    w.regs[at(*p, l)] = u64::from(is);
                }
            }
            Op::Call { f, ret, args } => {
                let mut buf = [0u64; 4];
                for l in Lanes(eff) {
                    for (k, r) in args.iter().enumerate() {
                        buf[k] = w.regs[at(*r, l)];
                    }
                    let v = (f.f)(&buf[..args.len()]);
                    if let Some(r) = ret {
                        w.regs[at(*r, l)] = v & mask(u32::from(f.ret) * 8);
                    }
                }
            }
            Op::Shfl { mode, d, p, a, b, c, member } => {
                self.shfl(inst, eff, w, ctaid, (*mode, *d, *p, *a, *b, *c, *member))?
            }
            Op::Vote { mode, d, a, neg, member } => {
                if let Some(m) = member {
                    self.check_converged(inst, eff, w, ctaid, *m)?;
                }
                let mut ballot = 0u32;
                for l in Lanes(eff) {
                    if (w.regs[at(*a, l)] != 0) != *neg {
                        ballot |= 1 << l;
                    }
                }
                let v = match mode {
                    VoteMode::All => u64::from(ballot == eff),
                    VoteMode::Any => u64::from(ballot != 0),
                    VoteMode::Uni => u64::from(ballot == 0 || ballot == eff),
                    VoteMode::Ballot => u64::from(ballot),
                };
                for l in Lanes(eff) {
                    w.regs[at(*d, l)] = v;
                }
            }
            Op::Activemask { d } => {
                for l in Lanes(eff) {
                    w.regs[at(*d, l)] = u64::from(eff);
                }
            }
            Op::Clock { d, dmask } => {
                for l in Lanes(eff) {
                    w.regs[at(*d, l)] = self.steps & dmask;
                }
            }
            Op::Trap => {
                let l = eff.trailing_zeros() as usize;
                return Err(self.fault((FaultKind::Trap, "executed trap".into()), w, l, inst, ctaid));
            }
            Op::Nop | Op::Bra { .. } | Op::Exit | Op::Bar { .. } => {}
        }
        Ok(())
    }

    /// `.sync` warp instructions: every live lane of `membermask` must be here.
    fn check_converged(&self, inst: &Inst, eff: u32, w: &Warp, ctaid: [u32; 3], member: Reg) -> Result<(), Fault> {
        let l = eff.trailing_zeros() as usize;
        let m = w.regs[at(member, l)] as u32;
        let missing = m & w.alive & !eff;
        if missing != 0 {
            let why = format!("membermask {m:#010x} names lanes {missing:#010x} that are not converged here");
            return Err(self.fault((FaultKind::Illegal, why), w, l, inst, ctaid));
        }
        Ok(())
    }

    #[allow(clippy::type_complexity, reason = "the fields of Op::Shfl, passed as they are")]
    fn shfl(
        &self,
        inst: &Inst,
        eff: u32,
        w: &mut Warp,
        ctaid: [u32; 3],
        (mode, d, p, a, b, c, member): (ShflMode, Reg, Option<Reg>, Reg, Reg, Reg, Option<Reg>),
    ) -> Result<(), Fault> {
        if let Some(m) = member {
            self.check_converged(inst, eff, w, ctaid, m)?;
        }
        let mut vals = [0u64; 32];
        vals.copy_from_slice(&w.regs[at(a, 0)..at(a, 0) + 32]);
        for l in Lanes(eff) {
            let lane = l as i32;
            let bv = (w.regs[at(b, l)] & 0x1f) as i32;
            let cv = w.regs[at(c, l)];
            let (clamp, seg) = ((cv & 0x1f) as i32, ((cv >> 8) & 0x1f) as i32);
            let max_lane = (lane & seg) | (clamp & !seg);
            let min_lane = lane & seg;
            let (j, ok) = match mode {
                ShflMode::Up => (lane - bv, lane - bv >= max_lane),
                ShflMode::Down => (lane + bv, lane + bv <= max_lane),
                ShflMode::Bfly => (lane ^ bv, (lane ^ bv) <= max_lane),
                ShflMode::Idx => {
                    let j = min_lane | (bv & !seg);
                    (j, j <= max_lane)
                }
            };
            let src = if ok { (j & 31) as usize } else { l };
            w.regs[at(d, l)] = vals[src];
            if let Some(p) = p {
                w.regs[at(p, l)] = u64::from(ok);
            }
        }
        Ok(())
    }
}

fn atomic(op: AtomOp, old: u64, b: u64, c: Option<u64>, size: usize) -> u64 {
    let bits = size as u32 * 8;
    match op {
        AtomOp::And => old & b,
        AtomOp::Or => old | b,
        AtomOp::Xor => old ^ b,
        AtomOp::Exch => b,
        AtomOp::Cas => {
            if old == b {
                c.unwrap_or(old)
            } else {
                old
            }
        }
        AtomOp::Add => old.wrapping_add(b),
        AtomOp::AddF32 => {
            let ftz = |x: f32| if x.is_subnormal() { 0.0f32.copysign(x) } else { x };
            let r = ftz(ftz(f32::from_bits(old as u32)) + ftz(f32::from_bits(b as u32)));
            u64::from(if r.is_nan() { 0x7FFF_FFFF } else { r.to_bits() })
        }
        AtomOp::AddF64 => (f64::from_bits(old) + f64::from_bits(b)).to_bits(),
        AtomOp::Inc => {
            if old >= b {
                0
            } else {
                old + 1
            }
        }
        AtomOp::Dec => {
            if old == 0 || old > b {
                b
            } else {
                old - 1
            }
        }
        AtomOp::MinS => {
            if sx(b, bits) < sx(old, bits) {
                b
            } else {
                old
            }
        }
        AtomOp::MaxS => {
            if sx(b, bits) > sx(old, bits) {
                b
            } else {
                old
            }
        }
        AtomOp::MinU => old.min(b),
        AtomOp::MaxU => old.max(b),
    }
}
