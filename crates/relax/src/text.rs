//! The executable's `as_text` and `stats` strings, laid out as TVM's `VMExecutable::AsText` and
//! `Stats` lay them out (the `relax.VMExecutable` module functions of those names).

use super::executable::{Arg, Constant, Executable, FuncKind, Instruction};

impl Executable {
    fn func_name(&self, i: usize) -> String {
        match self.functions.get(i) {
            Some(f) => f.name.clone(),
            None => format!("unknown_func_index({i})"),
        }
    }

    fn arg_text(&self, a: &Arg) -> String {
        match a {
            Arg::Register(r) => r.to_string(),
            Arg::Immediate(v) => format!("i{v}"),
            Arg::ConstIdx(c) => format!("c[{c}]"),
            Arg::FuncIdx(f) => format!("f[{}]", self.func_name(*f)),
        }
    }

    /// The bytecode as text: one block per function, as TVM prints it.
    pub fn as_text(&self) -> String {
        let mut os = String::new();
        for f in &self.functions {
            match f.kind {
                FuncKind::Packed => {
                    os += &format!("@{} packed_func;\n\n", f.name);
                    continue;
                }
                FuncKind::VmTir => {
                    os += &format!("@{} num_inputs={} vm_tir_func;\n\n", f.name, f.num_args);
                    continue;
                }
                FuncKind::Vm => {}
            }
            os += &format!("@{}:\n", f.name);
            for ins in self.code(f) {
                os += "  ";
                match ins {
                    Instruction::Call { dst, func, args } => {
                        let args: Vec<String> = args.iter().map(|a| self.arg_text(a)).collect();
                        os += &format!(
                            "{:<6}{:<16} in: {:<12} dst: {dst}\n",
                            "call",
                            self.func_name(*func),
                            args.join(", ")
                        );
                    }
                    Instruction::Ret { result } => os += &format!("{:<6}{result}\n", "ret "),
                    Instruction::Goto { offset } => os += &format!("{:<6}{offset}\n", "goto"),
                    Instruction::If { cond, false_offset } => os += &format!("{:<6}{cond}, {false_offset}\n", "If"),
                }
            }
            os.push('\n');
        }
        os
    }

    /// The constant pool and the globals in a few lines, as TVM prints them (a float constant,
    /// which TVM's `stats` refuses, prints as its value).
    pub fn stats(&self) -> String {
        // TVM writes "x, " after each item and steps back over the last two characters (also
        // after an empty shape, which so prints as `shapetupl], `: kept, to read the same).
        fn back2(s: &mut String) {
            for _ in 0..2 {
                s.pop();
            }
        }
        let mut os = String::from("Relax VM executable statistics:\n");
        os += &format!("  Constant pool (# {}): [", self.constants.len());
        for c in &self.constants {
            match c {
                Constant::Tensor(t) if t.shape.is_empty() => os += "scalar, ",
                Constant::Tensor(t) => {
                    os.push('[');
                    for d in &t.shape {
                        os += &format!("{d}, ");
                    }
                    back2(&mut os);
                    os += "], ";
                }
                Constant::Shape(s) => {
                    os += "shapetuple[";
                    for d in s {
                        os += &format!("{d}, ");
                    }
                    back2(&mut os);
                    os += "], ";
                }
                Constant::Str(s) => os += &format!("\"{}\", ", String::from_utf8_lossy(s)),
                Constant::Int(v) => os += &format!("{v}, "),
                Constant::Float(v) => os += &format!("{v}, "),
                Constant::DataType(t) => {
                    let name = tvm_runtime_tvm_ffi::dtype::format(*t)
                        .unwrap_or_else(|_| format!("(code {}, bits {}, lanes {})", t.code, t.bits, t.lanes));
                    os += &format!("{name}, ");
                }
            }
        }
        if !self.constants.is_empty() {
            back2(&mut os);
        }
        os += "]\n";
        os += &format!("  Globals (#{}): [", self.functions.len());
        for f in &self.functions {
            os += &format!("{}, ", f.name);
        }
        if !self.functions.is_empty() {
            back2(&mut os);
        }
        os += "]\n";
        os
    }
}
