//! The text the Executable module returns (`get_bytecode`, `get_constants`, `get_stats`), as
//! TVM v0.8 prints it. TVM builds these with a `std::ostringstream` and moves its write position
//! back two characters with `seekp(-2)` to overwrite trailing `", "`; [`Ostream`] reproduces
//! that, quirks included (an empty parameter list eats the function name's last character, a
//! non-scalar last constant shape ends in `"],]"`).

use super::executable::Executable;
use crate::value::dtype;
use std::fmt::Write as _;

/// A text buffer with a movable write position; writes overwrite, as in a `stringbuf`.
#[derive(Default)]
struct Ostream {
    buf: Vec<u8>,
    pos: usize,
}

impl Ostream {
    fn put(&mut self, s: &str) {
        for &b in s.as_bytes() {
            if self.pos < self.buf.len() {
                self.buf[self.pos] = b;
            } else {
                self.buf.push(b);
            }
            self.pos += 1;
        }
    }

    /// `seekp(-n, cur)`.
    fn back(&mut self, n: usize) {
        self.pos = self.pos.saturating_sub(n);
    }

    /// `seekp(-n, end)`.
    fn back_from_end(&mut self, n: usize) {
        self.pos = self.buf.len().saturating_sub(n);
    }

    fn last(&self) -> Option<u8> {
        self.buf.last().copied()
    }

    fn into_string(self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }
}

fn dtype_text(t: crate::abi::DLDataType) -> String {
    dtype::format(t).unwrap_or_else(|_| format!("{}:{}:{}", t.code, t.bits, t.lanes))
}

/// `Executable::GetBytecode`.
pub fn bytecode(exec: &Executable) -> String {
    let mut o = Ostream::default();
    for (i, f) in exec.functions.iter().enumerate() {
        o.put(&format!("VM Function[{i}]: {}(", f.name));
        for p in &f.params {
            o.put(&format!("{p}, "));
        }
        o.back_from_end(2);
        o.put(")\n");
        o.put(&format!("# reg file size = {}\n", f.register_file_size));
        o.put(&format!("# instruction count = {}\n", f.instructions.len()));
        o.put("opcode, fields # inst(text):\n");
        for (idx, ins) in f.instructions.iter().enumerate() {
            let mut line = format!("{idx:>2}: {} ", ins.opcode());
            for v in ins.fields() {
                let _ = write!(line, "{v} ");
            }
            let _ = write!(line, "  # {ins}");
            o.put(&line);
            if o.last() != Some(b'\n') {
                o.put("\n");
            }
        }
        o.put("\n");
    }
    o.into_string()
}

/// `Executable::GetConstants`.
pub fn constants(exec: &Executable) -> String {
    let mut s = String::new();
    for (i, c) in exec.constants.iter().enumerate() {
        let dims: Vec<String> = c.shape().iter().map(i64::to_string).collect();
        let _ = writeln!(
            s,
            "VM Constant[{i}]: has shape {}[{}] on device of type {}",
            dtype_text(c.dtype()),
            dims.join(", "),
            exec.const_device_type[i]
        );
    }
    s
}

/// `Executable::Stats`. Globals are listed in function-index order (TVM walks an
/// `unordered_map`, whose order is its hash table's).
pub fn stats(exec: &Executable) -> String {
    let mut o = Ostream::default();
    o.put("Relay VM executable statistics:\n");
    o.put(&format!("  Constant shapes (# {}): [", exec.constants.len()));
    for c in &exec.constants {
        if c.shape().is_empty() {
            o.put("scalar, ");
            continue;
        }
        o.put("[");
        for d in c.shape() {
            o.put(&format!("{d}, "));
        }
        o.back(2);
        o.put("], \n");
    }
    if !exec.constants.is_empty() {
        o.back(2);
    }
    o.put("]\n");
    o.put(&format!("  Globals (#{}): [", exec.globals.len()));
    for (i, g) in exec.globals.iter().enumerate() {
        o.put(&format!("(\"{g}\", {i}), "));
    }
    if !exec.globals.is_empty() {
        o.back(2);
    }
    o.put("]\n");
    o.put(&format!("  Primitive ops (#{}): [", exec.primitives.len()));
    for p in &exec.primitives {
        o.put(&format!("{p}, "));
    }
    if !exec.primitives.is_empty() {
        o.back(2);
    }
    o.put("]\n");
    o.into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seekp_overwrites() {
        let mut o = Ostream::default();
        o.put("main(");
        o.back_from_end(2);
        o.put(")\n");
        assert_eq!(o.into_string(), "mai)\n");
        let mut o = Ostream::default();
        o.put("[[1, 2], \n");
        o.back(2);
        o.put("]\n");
        assert_eq!(o.into_string(), "[[1, 2],]\n");
    }
}
