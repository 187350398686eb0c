//! Lowering of control and thread instructions: barriers, warp shuffles and votes, and calls
//! (inlined `.func`s, native libdevice functions).

use super::instr::Mods;
use super::ir::{Op, Reg, ShflMode, VoteMode};
use super::lower::{Fit, Lower, Sym, R};
use super::parse::{Lit, Operand};
use super::Ty;

impl<'a> Lower<'a> {
    pub(crate) fn barrier(&mut self, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        m.take("cta");
        m.take("aligned");
        if m.take("warp") {
            m.take("sync");
            self.emit(guard, Op::Nop);
            return Ok(());
        }
        if !m.take("sync") {
            return self.unsupported("barriers other than bar.sync / barrier.sync");
        }
        let id = match ops {
            [] => 0,
            [Operand::Imm(Lit::Int(v))] if *v < 16 => *v as u32,
            [_] => return self.unsupported("a barrier number in a register"),
            _ => return self.unsupported("a barrier with a thread count"),
        };
        self.emit(guard, Op::Bar { id });
        Ok(())
    }

    pub(crate) fn shfl(&mut self, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let sync = m.take("sync");
        let mode = match m.take_any(&["up", "down", "bfly", "idx"]) {
            Some("up") => ShflMode::Up,
            Some("down") => ShflMode::Down,
            Some("bfly") => ShflMode::Bfly,
            Some(_) => ShflMode::Idx,
            None => return self.err("needs a mode"),
        };
        if self.one_type(&m.types())? != Ty::B32 {
            return self.err("shfl needs .b32");
        }
        self.want(ops, 4 + usize::from(sync))?;
        let (d, p) = match &ops[0] {
            Operand::Pair(d, p) => {
                let d = self.dst(&Operand::Name(d.clone()), Ty::B32, Fit::Exact)?;
                (d, Some(self.dst(&Operand::Name(p.clone()), Ty::Pred, Fit::Exact)?))
            }
            o => (self.dst(o, Ty::B32, Fit::Exact)?, None),
        };
        let a = self.src(&ops[1], Ty::B32, Fit::Exact)?;
        let b = self.src(&ops[2], Ty::B32, Fit::Exact)?;
        let c = self.src(&ops[3], Ty::B32, Fit::Exact)?;
        let member = if sync { Some(self.src(&ops[4], Ty::B32, Fit::Exact)?) } else { None };
        self.emit(guard, Op::Shfl { mode, d, p, a, b, c, member });
        Ok(())
    }

    pub(crate) fn vote(&mut self, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        let sync = m.take("sync");
        let mode = match m.take_any(&["all", "any", "uni", "ballot"]) {
            Some("all") => VoteMode::All,
            Some("any") => VoteMode::Any,
            Some("uni") => VoteMode::Uni,
            Some(_) => VoteMode::Ballot,
            None => return self.err("needs a mode"),
        };
        let ty = self.one_type(&m.types())?;
        let want = if mode == VoteMode::Ballot { Ty::B32 } else { Ty::Pred };
        if ty != want {
            return self.err(format!("vote of this kind needs .{}", want.name()));
        }
        self.want(ops, 2 + usize::from(sync))?;
        let d = self.dst(&ops[0], want, Fit::Exact)?;
        let (a, neg) = self.pred(&ops[1])?;
        let member = if sync { Some(self.src(&ops[2], Ty::B32, Fit::Exact)?) } else { None };
        self.emit(guard, Op::Vote { mode, d, a, neg, member });
        Ok(())
    }

    pub(crate) fn call(&mut self, m: &mut Mods<'_>, ops: &[Operand], guard: Option<(Reg, bool)>) -> R<()> {
        m.take("uni");
        let (rets, fname, args): (&[Operand], &str, &[Operand]) = match ops {
            [Operand::List(r), Operand::Name(f), Operand::List(a)] => (r, f, a),
            [Operand::List(r), Operand::Name(f)] => (r, f, &[]),
            [Operand::Name(f), Operand::List(a)] => (&[], f, a),
            [Operand::Name(f)] => (&[], f, &[]),
            _ => return self.unsupported("indirect calls"),
        };
        let slot = |l: &mut Self, o: &Operand| -> R<(Reg, u32)> {
            match o {
                Operand::Name(n) => match l.lookup(n) {
                    Some(Sym::Slot(r, s)) => Ok((r, s)),
                    _ => l.err(format!("call argument {n} is not a .param")),
                },
                _ => l.err("call arguments are .param names"),
            }
        };
        let mut arg_slots = Vec::new();
        for a in args {
            arg_slots.push(slot(self, a)?);
        }
        let ret_slot = match rets {
            [] => None,
            [r] => Some(slot(self, r)?),
            _ => return self.unsupported("several return values"),
        };
        let callee = self.ast.funcs.iter().find(|f| f.name == fname && f.body.is_some());
        if let Some(f) = callee {
            if guard.is_some() {
                return self.unsupported("a guarded call of a .func");
            }
            if self.inline_stack.iter().any(|n| n == fname) {
                return self.unsupported(format!("recursive call of {fname}"));
            }
            if f.params.len() != arg_slots.len() || f.rets.len() != usize::from(ret_slot.is_some()) {
                return self.err(format!("call of {fname} with the wrong number of arguments"));
            }
            let mut bind = Vec::new();
            for (p, &(r, s)) in f.params.iter().zip(&arg_slots) {
                if p.size() != u64::from(s) {
                    return self.err(format!("argument {} of {fname} has the wrong size", p.name));
                }
                bind.push((p.name.clone(), Sym::Slot(r, s)));
            }
            if let (Some(p), Some((r, s))) = (f.rets.first(), ret_slot) {
                bind.push((p.name.clone(), Sym::Slot(r, s)));
            }
            let (line, text) = (self.line, self.text.clone());
            let outer = self.enter_inline(bind);
            self.inline_stack.push(fname.to_string());
            self.body(f.body.as_ref().expect("a body"))?;
            self.inline_stack.pop();
            self.leave_inline(outer);
            (self.line, self.text) = (line, text);
            return Ok(());
        }
        let Some(native) = crate::libdevice::find(fname) else {
            return self.unsupported(format!(
                "call of external function {fname} (cudasim implements libdevice's __nv_* functions natively; this one is not among them)"
            ));
        };
        let sizes: Vec<u8> = arg_slots.iter().map(|&(_, s)| s as u8).collect();
        if sizes != native.params || ret_slot.map_or(0, |(_, s)| s as u8) != native.ret {
            return self.err(format!("call of {fname} does not match its prototype"));
        }
        let args = arg_slots.iter().map(|&(r, _)| r).collect();
        self.emit(guard, Op::Call { f: native, ret: ret_slot.map(|(r, _)| r), args });
        Ok(())
    }
}
