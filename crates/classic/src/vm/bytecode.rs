//! The instructions of TVM v0.8's Relay VM: opcodes, the serialized field lists of
//! `executable.cc` (decoded with every count and value range checked), the instruction hash, and
//! the text form of `bytecode.cc` (`get_bytecode`).
//!
//! A serialized instruction is a `vec<i64>`: `[hash, opcode, fields...]`, where `hash` combines the
//! opcode and the fields with TVM's `HashCombine`. Field layouts (`dst` is the destination
//! register; `$r` marks a register):
//!
//! | opcode | fields |
//! |---|---|
//! | 0 Move | `$from $dst` |
//! | 1 Ret | `$result` |
//! | 2 Invoke | `func_index num_args $dst $args...` |
//! | 3 InvokeClosure | `$closure num_args $dst $args...` |
//! | 4 InvokePacked | `packed_index arity output_size $args...` (inputs then outputs) |
//! | 5 AllocTensor | `$storage $offset dtype.code dtype.bits dtype.lanes ndim $dst shape...` |
//! | 6 AllocTensorReg | `$storage $offset $shape dtype.code dtype.bits dtype.lanes $dst` |
//! | 7 AllocADT | `tag num_fields $dst $fields...` |
//! | 8 AllocClosure | `func_index num_freevars $dst $freevars...` |
//! | 9 GetField | `$object field_index $dst` |
//! | 10 If | `$test $target true_offset false_offset` |
//! | 11 LoadConst | `const_index $dst` |
//! | 12 Goto | `pc_offset` |
//! | 13 GetTag | `$object $dst` |
//! | 14 LoadConsti | `value $dst` |
//! | 15 Fatal | (none) |
//! | 16 AllocStorage | `$size alignment hint.code hint.bits hint.lanes device_type $dst` |
//! | 17 ShapeOf | `$tensor $dst` |
//! | 18 ReshapeTensor | `$tensor $newshape $dst` |
//! | 19 DeviceCopy | `$src src_device_type dst_device_type $dst` |

use crate::abi::DLDataType;
use crate::error::{Error, Result};
use std::fmt;

/// A register number (checked against the function's register file at load).
pub type Reg = u32;

/// One instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Instruction {
    /// Copies a register.
    Move { from: Reg, dst: Reg },
    /// Returns a register to the caller.
    Ret { result: Reg },
    /// Calls VM function `func` with `args`.
    Invoke { func: usize, args: Box<[Reg]>, dst: Reg },
    /// Calls the closure in `closure` with `args` after its captured values.
    InvokeClosure { closure: Reg, args: Box<[Reg]>, dst: Reg },
    /// Calls primitive `packed` with tensors (inputs then the last `output_size` outputs).
    InvokePacked { packed: usize, output_size: usize, args: Box<[Reg]> },
    /// A tensor of constant shape inside a storage block, at the offset held in `offset`.
    AllocTensor { storage: Reg, offset: Reg, shape: Box<[i64]>, dtype: DLDataType, dst: Reg },
    /// A tensor whose shape is the 1-D tensor in register `shape`.
    AllocTensorReg { storage: Reg, offset: Reg, shape: Reg, dtype: DLDataType, dst: Reg },
    /// An ADT object with a constructor tag and fields.
    AllocAdt { tag: i32, fields: Box<[Reg]>, dst: Reg },
    /// A closure of VM function `func` capturing `free_vars`.
    AllocClosure { func: usize, free_vars: Box<[Reg]>, dst: Reg },
    /// Field `index` of an ADT.
    GetField { object: Reg, index: usize, dst: Reg },
    /// Jumps by `true_offset` when the scalars in `test` and `target` are equal, else by
    /// `false_offset`.
    If { test: Reg, target: Reg, true_offset: i64, false_offset: i64 },
    /// Constant `index` of the executable.
    LoadConst { index: usize, dst: Reg },
    /// Jumps by `offset`.
    Goto { offset: i64 },
    /// The constructor tag of an ADT, as an int32 tensor.
    GetTag { object: Reg, dst: Reg },
    /// An int64 tensor holding `value`.
    LoadConsti { value: i64, dst: Reg },
    /// Stops with an error.
    Fatal,
    /// A storage block of the size held in `size`, on `device_type`.
    AllocStorage { size: Reg, alignment: i64, dtype_hint: DLDataType, device_type: i32, dst: Reg },
    /// The shape of a tensor, as an int64 tensor.
    ShapeOf { tensor: Reg, dst: Reg },
    /// A view of `tensor` with the shape held in `newshape`.
    ReshapeTensor { tensor: Reg, newshape: Reg, dst: Reg },
    /// A copy of `src` (on `src_device_type`) on `dst_device_type`.
    DeviceCopy { src: Reg, src_device_type: i32, dst_device_type: i32, dst: Reg },
}

/// The opcode names, by number.
pub(crate) const OPCODE_NAMES: [&str; 20] = [
    "Move",
    "Ret",
    "Invoke",
    "InvokeClosure",
    "InvokePacked",
    "AllocTensor",
    "AllocTensorReg",
    "AllocADT",
    "AllocClosure",
    "GetField",
    "If",
    "LoadConst",
    "Goto",
    "GetTag",
    "LoadConsti",
    "Fatal",
    "AllocStorage",
    "ShapeOf",
    "ReshapeTensor",
    "DeviceCopy",
];

/// TVM's `HashCombine` (src/support/utils.h).
fn hash_combine(key: u64, value: i64) -> u64 {
    key ^ (value as u64).wrapping_add(0x9e37_79b9).wrapping_add(key << 6).wrapping_add(key >> 2)
}

/// The hash stored before a serialized instruction: the opcode combined with every field.
pub(crate) fn instruction_hash(opcode: i64, fields: &[i64]) -> i64 {
    fields.iter().fold(opcode as u64, |k, &f| hash_combine(k, f)) as i64
}

/// Reads the fields of one instruction, with errors that name the field.
struct Fields<'a> {
    f: &'a [i64],
    op: &'static str,
}

impl Fields<'_> {
    fn err(&self, msg: impl fmt::Display) -> Error {
        Error::value(format!("{}: {msg}", self.op))
    }

    /// Exactly `n` fields.
    fn exactly(&self, n: usize) -> Result<()> {
        if self.f.len() != n {
            return Err(self.err(format!("expects {n} fields, got {}", self.f.len())));
        }
        Ok(())
    }

    /// At least `n` fixed fields followed by the count in field `count_at` of further fields.
    fn with_tail(&self, fixed: usize, count_at: usize, what: &str) -> Result<usize> {
        if self.f.len() < fixed {
            return Err(self.err(format!("expects at least {fixed} fields, got {}", self.f.len())));
        }
        let n = self.f[count_at];
        let want = usize::try_from(n).ok().and_then(|n| n.checked_add(fixed));
        if want != Some(self.f.len()) {
            return Err(self.err(format!(
                "{n} {what} announced, but the instruction has {} fields after its {fixed} fixed ones",
                self.f.len() - fixed
            )));
        }
        Ok(n as usize)
    }

    fn reg(&self, i: usize, what: &str) -> Result<Reg> {
        let v = self.f[i];
        Reg::try_from(v).map_err(|_| self.err(format!("{what} register {v} is out of range")))
    }

    fn regs(&self, from: usize, what: &str) -> Result<Box<[Reg]>> {
        (from..self.f.len()).map(|i| self.reg(i, what)).collect()
    }

    fn index(&self, i: usize, what: &str) -> Result<usize> {
        let v = self.f[i];
        usize::try_from(v).map_err(|_| self.err(format!("{what} {v} is negative")))
    }

    fn device_type(&self, i: usize, what: &str) -> Result<i32> {
        let v = self.f[i];
        i32::try_from(v).map_err(|_| self.err(format!("{what} {v} is out of range")))
    }

    fn dtype(&self, at: usize, what: &str) -> Result<DLDataType> {
        let (c, b, l) = (self.f[at], self.f[at + 1], self.f[at + 2]);
        match (u8::try_from(c), u8::try_from(b), u16::try_from(l)) {
            (Ok(code), Ok(bits), Ok(lanes)) => Ok(DLDataType { code, bits, lanes }),
            _ => Err(self.err(format!("{what} ({c}, {b}, {l}) does not fit a DLDataType"))),
        }
    }
}

impl Instruction {
    /// Decodes `opcode` and its `fields` (without the hash), checking field counts and the range
    /// of every value; references to registers, functions, constants and jump targets are
    /// checked later against the executable.
    pub fn decode(opcode: i64, fields: &[i64]) -> Result<Instruction> {
        let name = usize::try_from(opcode)
            .ok()
            .and_then(|o| OPCODE_NAMES.get(o))
            .ok_or_else(|| Error::value(format!("unknown opcode {opcode}")))?;
        let f = Fields { f: fields, op: name };
        Ok(match opcode {
            0 => {
                f.exactly(2)?;
                Instruction::Move { from: f.reg(0, "source")?, dst: f.reg(1, "destination")? }
            }
            1 => {
                f.exactly(1)?;
                Instruction::Ret { result: f.reg(0, "result")? }
            }
            2 => {
                f.with_tail(3, 1, "arguments")?;
                Instruction::Invoke {
                    func: f.index(0, "function index")?,
                    dst: f.reg(2, "destination")?,
                    args: f.regs(3, "argument")?,
                }
            }
            3 => {
                f.with_tail(3, 1, "arguments")?;
                Instruction::InvokeClosure {
                    closure: f.reg(0, "closure")?,
                    dst: f.reg(2, "destination")?,
                    args: f.regs(3, "argument")?,
                }
            }
            4 => {
                let arity = f.with_tail(3, 1, "arguments")?;
                let output_size = f.index(2, "output count")?;
                if output_size > arity {
                    return Err(f.err(format!("{output_size} outputs but only {arity} arguments")));
                }
                Instruction::InvokePacked {
                    packed: f.index(0, "primitive function index")?,
                    output_size,
                    args: f.regs(3, "argument")?,
                }
            }
            5 => {
                f.with_tail(7, 5, "dimensions")?;
                let shape: Box<[i64]> = fields[7..].into();
                if let Some(d) = shape.iter().find(|&&d| d < 0) {
                    return Err(f.err(format!("negative extent {d} in shape {shape:?}")));
                }
                Instruction::AllocTensor {
                    storage: f.reg(0, "storage")?,
                    offset: f.reg(1, "offset")?,
                    dtype: f.dtype(2, "dtype")?,
                    dst: f.reg(6, "destination")?,
                    shape,
                }
            }
            6 => {
                f.exactly(7)?;
                Instruction::AllocTensorReg {
                    storage: f.reg(0, "storage")?,
                    offset: f.reg(1, "offset")?,
                    shape: f.reg(2, "shape")?,
                    dtype: f.dtype(3, "dtype")?,
                    dst: f.reg(6, "destination")?,
                }
            }
            7 => {
                f.with_tail(3, 1, "fields")?;
                let tag = i32::try_from(fields[0]).map_err(|_| f.err(format!("tag {} is out of range", fields[0])))?;
                Instruction::AllocAdt { tag, dst: f.reg(2, "destination")?, fields: f.regs(3, "field")? }
            }
            8 => {
                f.with_tail(3, 1, "free variables")?;
                Instruction::AllocClosure {
                    func: f.index(0, "function index")?,
                    dst: f.reg(2, "destination")?,
                    free_vars: f.regs(3, "free variable")?,
                }
            }
            9 => {
                f.exactly(3)?;
                Instruction::GetField {
                    object: f.reg(0, "object")?,
                    index: f.index(1, "field index")?,
                    dst: f.reg(2, "destination")?,
                }
            }
            10 => {
                f.exactly(4)?;
                Instruction::If {
                    test: f.reg(0, "test")?,
                    target: f.reg(1, "target")?,
                    true_offset: fields[2],
                    false_offset: fields[3],
                }
            }
            11 => {
                f.exactly(2)?;
                Instruction::LoadConst { index: f.index(0, "constant index")?, dst: f.reg(1, "destination")? }
            }
            12 => {
                f.exactly(1)?;
                Instruction::Goto { offset: fields[0] }
            }
            13 => {
                f.exactly(2)?;
                Instruction::GetTag { object: f.reg(0, "object")?, dst: f.reg(1, "destination")? }
            }
            14 => {
                f.exactly(2)?;
                Instruction::LoadConsti { value: fields[0], dst: f.reg(1, "destination")? }
            }
            15 => {
                f.exactly(0)?;
                Instruction::Fatal
            }
            16 => {
                f.exactly(7)?;
                let alignment = fields[1];
                if alignment <= 0 || !(alignment as u64).is_power_of_two() {
                    return Err(f.err(format!("alignment {alignment} is not a power of two")));
                }
                Instruction::AllocStorage {
                    size: f.reg(0, "size")?,
                    alignment,
                    dtype_hint: f.dtype(2, "dtype hint")?,
                    device_type: f.device_type(5, "device type")?,
                    dst: f.reg(6, "destination")?,
                }
            }
            17 => {
                f.exactly(2)?;
                Instruction::ShapeOf { tensor: f.reg(0, "tensor")?, dst: f.reg(1, "destination")? }
            }
            18 => {
                f.exactly(3)?;
                Instruction::ReshapeTensor {
                    tensor: f.reg(0, "tensor")?,
                    newshape: f.reg(1, "shape")?,
                    dst: f.reg(2, "destination")?,
                }
            }
            19 => {
                f.exactly(4)?;
                Instruction::DeviceCopy {
                    src: f.reg(0, "source")?,
                    src_device_type: f.device_type(1, "source device type")?,
                    dst_device_type: f.device_type(2, "destination device type")?,
                    dst: f.reg(3, "destination")?,
                }
            }
            _ => unreachable!("opcode {opcode} has a name but no decoder"),
        })
    }

    /// The opcode number.
    pub fn opcode(&self) -> i64 {
        match self {
            Instruction::Move { .. } => 0,
            Instruction::Ret { .. } => 1,
            Instruction::Invoke { .. } => 2,
            Instruction::InvokeClosure { .. } => 3,
            Instruction::InvokePacked { .. } => 4,
            Instruction::AllocTensor { .. } => 5,
            Instruction::AllocTensorReg { .. } => 6,
            Instruction::AllocAdt { .. } => 7,
            Instruction::AllocClosure { .. } => 8,
            Instruction::GetField { .. } => 9,
            Instruction::If { .. } => 10,
            Instruction::LoadConst { .. } => 11,
            Instruction::Goto { .. } => 12,
            Instruction::GetTag { .. } => 13,
            Instruction::LoadConsti { .. } => 14,
            Instruction::Fatal => 15,
            Instruction::AllocStorage { .. } => 16,
            Instruction::ShapeOf { .. } => 17,
            Instruction::ReshapeTensor { .. } => 18,
            Instruction::DeviceCopy { .. } => 19,
        }
    }

    /// The opcode's name.
    pub fn name(&self) -> &'static str {
        OPCODE_NAMES[self.opcode() as usize]
    }

    /// The serialized fields (without hash and opcode), as `executable.cc` writes them.
    pub fn fields(&self) -> Vec<i64> {
        let r = |x: Reg| i64::from(x);
        let regs = |v: &[Reg]| v.iter().map(|&x| i64::from(x)).collect::<Vec<_>>();
        let dt = |t: DLDataType| [i64::from(t.code), i64::from(t.bits), i64::from(t.lanes)];
        let mut f = Vec::new();
        match self {
            Instruction::Move { from, dst } => f.extend([r(*from), r(*dst)]),
            Instruction::Ret { result } => f.push(r(*result)),
            Instruction::Invoke { func, args, dst } => {
                f.extend([*func as i64, args.len() as i64, r(*dst)]);
                f.extend(regs(args));
            }
            Instruction::InvokeClosure { closure, args, dst } => {
                f.extend([r(*closure), args.len() as i64, r(*dst)]);
                f.extend(regs(args));
            }
            Instruction::InvokePacked { packed, output_size, args } => {
                f.extend([*packed as i64, args.len() as i64, *output_size as i64]);
                f.extend(regs(args));
            }
            Instruction::AllocTensor { storage, offset, shape, dtype, dst } => {
                f.extend([r(*storage), r(*offset)]);
                f.extend(dt(*dtype));
                f.extend([shape.len() as i64, r(*dst)]);
                f.extend(shape.iter());
            }
            Instruction::AllocTensorReg { storage, offset, shape, dtype, dst } => {
                f.extend([r(*storage), r(*offset), r(*shape)]);
                f.extend(dt(*dtype));
                f.push(r(*dst));
            }
            Instruction::AllocAdt { tag, fields, dst } => {
                f.extend([i64::from(*tag), fields.len() as i64, r(*dst)]);
                f.extend(regs(fields));
            }
            Instruction::AllocClosure { func, free_vars, dst } => {
                f.extend([*func as i64, free_vars.len() as i64, r(*dst)]);
                f.extend(regs(free_vars));
            }
            Instruction::GetField { object, index, dst } => f.extend([r(*object), *index as i64, r(*dst)]),
            Instruction::If { test, target, true_offset, false_offset } => {
                f.extend([r(*test), r(*target), *true_offset, *false_offset])
            }
            Instruction::LoadConst { index, dst } => f.extend([*index as i64, r(*dst)]),
            Instruction::Goto { offset } => f.push(*offset),
            Instruction::GetTag { object, dst } => f.extend([r(*object), r(*dst)]),
            Instruction::LoadConsti { value, dst } => f.extend([*value, r(*dst)]),
            Instruction::Fatal => {}
            Instruction::AllocStorage { size, alignment, dtype_hint, device_type, dst } => {
                f.extend([r(*size), *alignment]);
                f.extend(dt(*dtype_hint));
                f.extend([i64::from(*device_type), r(*dst)]);
            }
            Instruction::ShapeOf { tensor, dst } => f.extend([r(*tensor), r(*dst)]),
            Instruction::ReshapeTensor { tensor, newshape, dst } => f.extend([r(*tensor), r(*newshape), r(*dst)]),
            Instruction::DeviceCopy { src, src_device_type, dst_device_type, dst } => {
                f.extend([r(*src), i64::from(*src_device_type), i64::from(*dst_device_type), r(*dst)])
            }
        }
        f
    }

    /// Every register the instruction reads or writes.
    pub fn registers(&self) -> Vec<Reg> {
        let mut v = Vec::new();
        match self {
            Instruction::Move { from, dst } => v.extend([*from, *dst]),
            Instruction::Ret { result } => v.push(*result),
            Instruction::Invoke { args, dst, .. } => {
                v.extend(args.iter());
                v.push(*dst);
            }
            Instruction::InvokeClosure { closure, args, dst } => {
                v.extend(args.iter());
                v.extend([*closure, *dst]);
            }
            Instruction::InvokePacked { args, .. } => v.extend(args.iter()),
            Instruction::AllocTensor { storage, offset, dst, .. } => v.extend([*storage, *offset, *dst]),
            Instruction::AllocTensorReg { storage, offset, shape, dst, .. } => {
                v.extend([*storage, *offset, *shape, *dst])
            }
            Instruction::AllocAdt { fields, dst, .. } => {
                v.extend(fields.iter());
                v.push(*dst);
            }
            Instruction::AllocClosure { free_vars, dst, .. } => {
                v.extend(free_vars.iter());
                v.push(*dst);
            }
            Instruction::GetField { object, dst, .. } => v.extend([*object, *dst]),
            Instruction::If { test, target, .. } => v.extend([*test, *target]),
            Instruction::LoadConst { dst, .. } | Instruction::LoadConsti { dst, .. } => v.push(*dst),
            Instruction::Goto { .. } | Instruction::Fatal => {}
            Instruction::GetTag { object, dst } => v.extend([*object, *dst]),
            Instruction::AllocStorage { size, dst, .. } => v.extend([*size, *dst]),
            Instruction::ShapeOf { tensor, dst } => v.extend([*tensor, *dst]),
            Instruction::ReshapeTensor { tensor, newshape, dst } => v.extend([*tensor, *newshape, *dst]),
            Instruction::DeviceCopy { src, dst, .. } => v.extend([*src, *dst]),
        }
        v
    }
}

/// `DLDatatypePrint` of bytecode.cc: the code's name (nothing for other codes), the bits, `x<lanes>`.
fn short_dtype(t: DLDataType) -> String {
    let prefix = match t.code {
        0 => "int",
        1 => "uint",
        2 => "float",
        _ => "",
    };
    let mut s = format!("{prefix}{}", t.bits);
    if t.lanes != 1 {
        s.push_str(&format!("x{}", t.lanes));
    }
    s
}

fn join<T: fmt::Display>(items: &[T], delim: &str) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(delim)
}

/// The text form of `InstructionPrint` (bytecode.cc).
impl fmt::Display for Instruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Instruction::Move { from, dst } => write!(f, "move ${dst} ${from}"),
            Instruction::Ret { result } => write!(f, "ret ${result}"),
            Instruction::Fatal => write!(f, "fatal"),
            Instruction::InvokePacked { packed, output_size, args } => {
                let n_in = args.len() - output_size;
                write!(
                    f,
                    "invoke_packed PackedFunc[{packed}] (in: ${}, out: ${})",
                    join(&args[..n_in], ", $"),
                    join(&args[n_in..], ", $")
                )
            }
            Instruction::AllocTensor { storage, offset, shape, dtype, dst } => {
                write!(f, "alloc_tensor ${dst} ${storage} ${offset} [{}] {}", join(shape, ", "), short_dtype(*dtype))
            }
            Instruction::AllocTensorReg { storage, offset, shape, dtype, dst } => {
                write!(f, "alloc_tensor_reg ${dst} ${storage} ${offset} ${shape} {}", short_dtype(*dtype))
            }
            Instruction::AllocAdt { tag, fields, dst } => {
                write!(f, "alloc_data ${dst} tag({tag}) [${}]", join(fields, ",$"))
            }
            Instruction::AllocClosure { func, free_vars, dst } => {
                write!(f, "alloc_closure ${dst} VMFunc[{func}](${})", join(free_vars, ",$"))
            }
            Instruction::If { test, target, true_offset, false_offset } => {
                write!(f, "if ${test} ${target} {true_offset} {false_offset}")
            }
            Instruction::Invoke { func, args, dst } => write!(f, "invoke ${dst} VMFunc[{func}](${})", join(args, ",$")),
            Instruction::InvokeClosure { closure, args, dst } => {
                write!(f, "invoke_closure ${dst} ${closure}(${})", join(args, ",$"))
            }
            Instruction::LoadConst { index, dst } => write!(f, "load_const ${dst} Const[{index}]"),
            Instruction::LoadConsti { value, dst } => write!(f, "load_consti ${dst} {value}"),
            Instruction::GetField { object, index, dst } => write!(f, "get_field ${dst} ${object}[{index}]"),
            Instruction::GetTag { object, dst } => write!(f, "get_tag ${dst} ${object}"),
            Instruction::Goto { offset } => write!(f, "goto {offset}"),
            Instruction::AllocStorage { size, alignment, dtype_hint, device_type, dst } => write!(
                f,
                "alloc_storage ${dst} ${size} {alignment} {} {device_type}",
                crate::value::dtype::format(*dtype_hint).unwrap_or_else(|_| short_dtype(*dtype_hint))
            ),
            Instruction::ShapeOf { tensor, dst } => write!(f, "shape_of ${dst} ${tensor}"),
            Instruction::ReshapeTensor { tensor, newshape, dst } => {
                write!(f, "reshape_tensor ${dst} ${tensor} ${newshape}")
            }
            Instruction::DeviceCopy { src, src_device_type, dst_device_type, dst } => {
                write!(f, "device_copy ${dst} ${src} {dst_device_type} {src_device_type}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_text() {
        let cases: Vec<(i64, Vec<i64>, &str)> = vec![
            (0, vec![3, 4], "move $4 $3"),
            (4, vec![1, 3, 1, 0, 5, 6], "invoke_packed PackedFunc[1] (in: $0, $5, out: $6)"),
            (5, vec![2, 3, 2, 32, 1, 2, 4, 1, 128], "alloc_tensor $4 $2 $3 [1, 128] float32"),
            (6, vec![16, 17, 5, 1, 1, 1, 18], "alloc_tensor_reg $18 $16 $17 $5 uint1"),
            (7, vec![0, 2, 14, 9, 13], "alloc_data $14 tag(0) [$9,$13]"),
            (10, vec![8, 9, 1, 8], "if $8 $9 1 8"),
            (16, vec![1, 64, 2, 32, 1, 1, 2], "alloc_storage $2 $1 64 float32 1"),
            (19, vec![1, 1, 4, 2], "device_copy $2 $1 4 1"),
            (15, vec![], "fatal"),
        ];
        for (op, fields, text) in cases {
            let i = Instruction::decode(op, &fields).unwrap();
            assert_eq!(i.fields(), fields);
            assert_eq!(i.opcode(), op);
            assert_eq!(i.to_string(), text);
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let e = |op, f: &[i64]| Instruction::decode(op, f).unwrap_err().to_string();
        assert!(e(20, &[]).contains("unknown opcode 20"));
        assert!(e(0, &[1]).contains("Move: expects 2 fields, got 1"));
        assert!(e(4, &[0, 5, 1, 1]).contains("5 arguments announced"));
        assert!(e(4, &[0, 1, 2, 1]).contains("2 outputs but only 1 arguments"));
        assert!(e(0, &[-1, 0]).contains("source register -1 is out of range"));
        assert!(e(5, &[0, 0, 2, 32, 1, 1, 0, -3]).contains("negative extent -3"));
        assert!(e(5, &[0, 0, 2, 300, 1, 0, 0]).contains("does not fit a DLDataType"));
        assert!(e(16, &[0, 3, 2, 32, 1, 1, 0]).contains("alignment 3"));
        assert!(e(5, &[0, 0, 2, 32, 1, i64::MAX, 0]).contains("dimensions announced"));
    }

    #[test]
    fn hash_matches_tvm() {
        // A `Ret $10` instruction as TVM v0.8 wrote it in vm_mlp.so.
        let h = instruction_hash(1, &[10]);
        assert_eq!(h, (1u64 ^ (10u64 + 0x9e37_79b9 + (1 << 6))) as i64);
    }
}
