//! The Relax VM executable (`relax.VMExecutable`) of TVM v0.22-v0.27: reading with every index
//! checked, and writing back byte for byte.
//!
//! # Layout
//!
//! Little-endian throughout; `str` = u64 byte count + bytes, `vec<T>` = u64 count + elements.
//!
//! ```text
//! magic         u64      0xD225DE2F4214151E (v0.23+, "V2") or 0xD225DE2F4214151D (v0.21, v0.22)
//! version       str      "0.14" (unchanged since Relax's first release)
//! globals       vec<FuncInfo>   the function table, by function index
//! memory scopes u64 n, then n × (i64 constant index, str scope)    only with the V2 magic
//! constants     u64 n, then n × (i32 type index, value)
//! instr_offset  vec<i64> where each instruction starts in instr_data
//! instr_data    vec<i64> the instructions, back to back
//!
//! FuncInfo = i32 kind (0 packed, 1 VM, 2 VM-TIR), str name, i64 start_instr, i64 end_instr,
//!            i64 num_args, i64 register_file_size, vec<str> param_names
//! ```
//!
//! A *packed* function is a kernel or runtime builtin looked up by name when a VM is made (the
//! library's imports first, then the global registry); the compiler declares it with
//! `num_args = -2` and no code. A *VM* function is bytecode: instructions
//! `start_instr..end_instr` (indices into `instr_offset`), `register_file_size` registers, its
//! `num_args` parameters in registers `0..num_args`, `param_names` either empty or one per
//! parameter. A *VM-TIR* function is compiled code: the library symbol `__vmtir__<name>` called
//! with the VM, the register file (`num_args` inputs, the result after them, so
//! `register_file_size > num_args`), the constant pool and the function pool.
//!
//! Constants are tagged by tvm-ffi 0.1 static type index in v0.22+ ([`Dialect::Ffi`]), by the
//! classic runtime's `ConstantType` code in v0.14-v0.20 ([`Dialect::Classic`]; v0.21's early
//! in-tree tvm-ffi numbered Shape 71 and NDArray 72, which neither reads):
//!
//! | ffi | classic | kind | value |
//! |---|---|---|---|
//! | 70 | 0 | tensor | an NDArray record (magic `0xDD5E40F096B4A13F`), CPU only |
//! | 69 | 2 | shape | u64 count, then that many i64 |
//! | 65 | 3 | string | u64 count, then the bytes |
//! | 1 | 4 | int | i64 |
//! | 3 | 5 | float | f64 |
//! | 5 | 1 | data type | u8 code, u8 bits, u16 lanes |
//!
//! Instructions, each a run of i64 words starting with the opcode:
//!
//! ```text
//! Call 1: dst, func_idx, num_args, num_args × arg    dst: a register or the void register
//! Ret  2: result register
//! Goto 3: pc_offset                                  next pc = pc + pc_offset
//! If   4: cond register, false_offset                cond != 0: pc + 1, else pc + false_offset
//! ```
//!
//! A register number below 2^54 is a slot of the frame; 2^54 is the void register (reads as
//! None, writes are dropped), 2^54 + 1 the VM itself (read as an opaque pointer, the
//! first argument of builtins that need the VM). A call argument packs its kind in the top 8
//! bits (0 register, 1 immediate, 2 constant index, 3 function index) and a signed 56-bit value
//! below.
//!
//! # Versions
//!
//! v0.23-v0.27 write the same bytes (the V2 magic, memory scopes, tvm-ffi 0.1 type indices):
//! `executable.cc`, `executable.h` and `bytecode.h` of v0.24 and v0.25 are identical, v0.26
//! changed only how `stats` prints a data type and an include, and the newest source (the
//! mirror has no v0.27.0 tag; its head, after v0.26, matches v0.26) and the v0.27.0.post1
//! fixtures agree. So v0.25, v0.26 and v0.27 exports read alike. v0.22 writes the V1 magic and
//! no memory-scope section, read too. v0.14-v0.20 (`relax_vm/executable.cc`, classic runtime)
//! write the same layout with the V1 magic and the classic constant codes, wrapped as a string
//! in the `relax.Executable` blob entry: [`Executable::load_classic`] reads what is inside.
//!
//! # Checks
//!
//! TVM checks almost nothing at load and trusts the compiler; an index out of range is then a
//! crash at run time. [`Executable::load`] refuses, with the section, function and instruction
//! named: a wrong magic or version; any read past the end; counts that cannot fit in the bytes
//! left (checked before allocating); bytes after the code section; unknown function kinds,
//! constant types, opcodes and argument kinds; duplicate function names; memory scopes of
//! constants that do not exist; instruction offsets that do not tile `instr_data` exactly;
//! VM functions whose instruction range is empty or outside the code, whose parameters do not
//! fit their registers (or exceed [`MAX_REGISTERS`]), whose parameter names do not match their
//! arity; in VM function code, a register outside the frame, a constant or function index out
//! of range, a call to a VM or VM-TIR function with the wrong number of arguments, a jump
//! that leaves the function or does not move (`Goto` 0, `If` with `false_offset` < 2), and a
//! last instruction that falls through the end of the function.

use std::collections::HashMap;
use tvm_runtime_classic::abi::DLDataType;
use tvm_runtime_classic::error::{Error, Result};
use tvm_runtime_classic::io::{Reader, Writer};
use tvm_runtime_core::formats::params::{read_record, NDARRAY_MAGIC};

/// Magic of v0.21 and v0.22 executables (no memory-scope section).
pub(crate) const MAGIC_V1: u64 = 0xD225_DE2F_4214_151D;
/// Magic of v0.23 and later executables.
pub(crate) const MAGIC_V2: u64 = 0xD225_DE2F_4214_151E;
/// The version string every Relax executable carries.
pub const VERSION: &str = "0.14";
/// The largest register file a function may declare (as the Relay VM's loader).
pub const MAX_REGISTERS: i64 = 1 << 20;
/// The first special register number.
pub(crate) const BEGIN_SPECIAL_REG: i64 = 1 << 54;
/// The void register.
pub(crate) const VOID_REGISTER: i64 = BEGIN_SPECIAL_REG;
/// The register that reads as the VM itself.
pub(crate) const VM_REGISTER: i64 = BEGIN_SPECIAL_REG + 1;

/// How constants are tagged: which TVM wrote the executable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// tvm-ffi 0.1 static type indices ([`tag`]): TVM v0.22 and later, in `__tvm_ffi__library_bin`.
    Ffi,
    /// The classic runtime's `ConstantType` codes ([`classic_tag`]): TVM v0.14-v0.20, a
    /// `relax.Executable` entry of `__tvm_dev_mblob` (always the V1 magic).
    Classic,
}

/// The classic runtime's constant codes (TVM v0.14-v0.20 `relax_vm/executable.cc`).
pub(crate) mod classic_tag {
    /// `NDArray`.
    pub(crate) const TENSOR: i32 = 0;
    /// `DLDataType`.
    pub(crate) const DATA_TYPE: i32 = 1;
    /// `ShapeTuple`.
    pub(crate) const SHAPE: i32 = 2;
    /// `String`.
    pub(crate) const STR: i32 = 3;
    /// int.
    pub(crate) const INT: i32 = 4;
    /// float.
    pub(crate) const FLOAT: i32 = 5;
}

/// tvm-ffi 0.1 static type indices used as constant tags.
pub mod tag {
    /// `int`.
    pub const INT: i32 = 1;
    /// `float`.
    pub const FLOAT: i32 = 3;
    /// `DLDataType`.
    pub const DATA_TYPE: i32 = 5;
    /// `ffi.String`.
    pub const STR: i32 = 65;
    /// `ffi.Shape`.
    pub const SHAPE: i32 = 69;
    /// `ffi.Tensor`.
    pub const TENSOR: i32 = 70;
}

/// Opcodes.
pub mod opcode {
    /// Call a function.
    pub(crate) const CALL: i64 = 1;
    /// Return a register.
    pub(crate) const RET: i64 = 2;
    /// Relative jump.
    pub(crate) const GOTO: i64 = 3;
    /// Conditional relative jump.
    pub(crate) const IF: i64 = 4;
}

/// What a function-table entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuncKind {
    /// A kernel or builtin, found by name.
    Packed = 0,
    /// Bytecode.
    Vm = 1,
    /// Compiled code behind `__vmtir__<name>`.
    VmTir = 2,
}

impl FuncKind {
    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            FuncKind::Packed => "packed",
            FuncKind::Vm => "VM",
            FuncKind::VmTir => "VM-TIR",
        }
    }
}

/// One function-table entry, as stored (checked by [`Executable::load`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncInfo {
    /// The kind.
    pub kind: FuncKind,
    /// The global name.
    pub name: String,
    /// First instruction (VM functions).
    pub start_instr: i64,
    /// One past the last instruction (VM functions).
    pub end_instr: i64,
    /// Parameter count (-2 for packed functions as the compiler writes them).
    pub num_args: i64,
    /// Registers of a frame.
    pub register_file_size: i64,
    /// Parameter names (empty, or one per parameter).
    pub param_names: Vec<String>,
}

/// A tensor constant as stored: shape, element type and the raw (little-endian) data bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorConst {
    /// The shape.
    pub shape: Vec<i64>,
    /// The element type.
    pub dtype: DLDataType,
    /// `elements * ceil(bits / 8)` bytes (vector lanes are not stored, as in TVM).
    pub data: Vec<u8>,
}

/// A constant-pool entry (equality compares floats by their bits, so that a NaN constant equals
/// itself).
#[derive(Clone, Debug)]
pub enum Constant {
    /// A CPU tensor.
    Tensor(TensorConst),
    /// An `ffi.Shape`.
    Shape(Vec<i64>),
    /// An `ffi.String` (bytes as stored; TVM does not require UTF-8).
    Str(Vec<u8>),
    /// An int.
    Int(i64),
    /// A float.
    Float(f64),
    /// A data type.
    DataType(DLDataType),
}

impl PartialEq for Constant {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Constant::Tensor(a), Constant::Tensor(b)) => a == b,
            (Constant::Shape(a), Constant::Shape(b)) => a == b,
            (Constant::Str(a), Constant::Str(b)) => a == b,
            (Constant::Int(a), Constant::Int(b)) => a == b,
            (Constant::Float(a), Constant::Float(b)) => a.to_bits() == b.to_bits(),
            (Constant::DataType(a), Constant::DataType(b)) => a == b,
            _ => false,
        }
    }
}

impl Constant {
    /// The tag it is stored under.
    pub fn tag(&self, dialect: Dialect) -> i32 {
        let k = self.kind();
        TAGS.iter().find(|t| t.0 == k).map_or(-1, |t| if dialect == Dialect::Ffi { t.1 } else { t.2 })
    }

    fn kind(&self) -> ConstKind {
        match self {
            Constant::Tensor(_) => ConstKind::Tensor,
            Constant::Shape(_) => ConstKind::Shape,
            Constant::Str(_) => ConstKind::Str,
            Constant::Int(_) => ConstKind::Int,
            Constant::Float(_) => ConstKind::Float,
            Constant::DataType(_) => ConstKind::DataType,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ConstKind {
    Tensor,
    Shape,
    Str,
    Int,
    Float,
    DataType,
}

/// Each constant kind with its ffi and classic tags.
const TAGS: [(ConstKind, i32, i32); 6] = [
    (ConstKind::Tensor, tag::TENSOR, classic_tag::TENSOR),
    (ConstKind::Shape, tag::SHAPE, classic_tag::SHAPE),
    (ConstKind::Str, tag::STR, classic_tag::STR),
    (ConstKind::Int, tag::INT, classic_tag::INT),
    (ConstKind::Float, tag::FLOAT, classic_tag::FLOAT),
    (ConstKind::DataType, tag::DATA_TYPE, classic_tag::DATA_TYPE),
];

/// A register operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    /// A slot of the frame (checked against the register file size).
    R(usize),
    /// The void register.
    Void,
    /// The VM itself.
    Vm,
}

impl Reg {
    fn decode(v: i64) -> Result<Reg> {
        match v {
            VOID_REGISTER => Ok(Reg::Void),
            VM_REGISTER => Ok(Reg::Vm),
            // Out-of-frame slots are refused by the function check, with context.
            0..BEGIN_SPECIAL_REG => Ok(Reg::R(v as usize)),
            _ => Err(Error::value(format!("{v} is not a register"))),
        }
    }

    /// The stored word.
    pub fn encode(self) -> i64 {
        match self {
            Reg::R(r) => r as i64,
            Reg::Void => VOID_REGISTER,
            Reg::Vm => VM_REGISTER,
        }
    }
}

impl std::fmt::Display for Reg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reg::R(r) => write!(f, "%{r}"),
            Reg::Void => f.write_str("%void"),
            Reg::Vm => f.write_str("%vm"),
        }
    }
}

/// A call argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A register's value.
    Register(Reg),
    /// An integer.
    Immediate(i64),
    /// A constant-pool entry.
    ConstIdx(usize),
    /// A function-table entry (as a closure or function).
    FuncIdx(usize),
}

const KIND_SHIFT: u32 = 56;
const VALUE_MASK: i64 = (1 << KIND_SHIFT) - 1;

impl Arg {
    /// Decodes a packed argument word.
    pub fn decode(word: i64) -> Result<Arg> {
        let kind = (word >> KIND_SHIFT) & 0xFF;
        // Sign-extend the low 56 bits.
        let value = ((word & VALUE_MASK) << 8) >> 8;
        let index =
            |what: &str| usize::try_from(value).map_err(|_| Error::value(format!("{what} index {value} is negative")));
        match kind {
            0 => Ok(Arg::Register(Reg::decode(value)?)),
            1 => Ok(Arg::Immediate(value)),
            2 => Ok(Arg::ConstIdx(index("constant")?)),
            3 => Ok(Arg::FuncIdx(index("function")?)),
            k => Err(Error::value(format!("argument word {word:#018x} has unknown kind {k}"))),
        }
    }

    /// The packed argument word.
    pub fn encode(self) -> i64 {
        let (kind, value) = match self {
            Arg::Register(r) => (0, r.encode()),
            Arg::Immediate(v) => (1, v),
            Arg::ConstIdx(i) => (2, i as i64),
            Arg::FuncIdx(i) => (3, i as i64),
        };
        (kind << KIND_SHIFT) | (value & VALUE_MASK)
    }
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// `dst = func(args...)`.
    Call {
        /// Where the result goes (`Reg::Void` drops it).
        dst: Reg,
        /// The function-table index of the callee.
        func: usize,
        /// The arguments.
        args: Vec<Arg>,
    },
    /// Return a register's value.
    Ret {
        /// The register.
        result: Reg,
    },
    /// `pc += offset`.
    Goto {
        /// The relative target.
        offset: i64,
    },
    /// `pc += if cond != 0 { 1 } else { false_offset }`.
    If {
        /// The condition register.
        cond: Reg,
        /// The relative target when false.
        false_offset: i64,
    },
}

impl Instruction {
    /// The mnemonic.
    pub fn name(&self) -> &'static str {
        match self {
            Instruction::Call { .. } => "call",
            Instruction::Ret { .. } => "ret",
            Instruction::Goto { .. } => "goto",
            Instruction::If { .. } => "if",
        }
    }

    /// Decodes the instruction at the start of `words`; returns it and its length in words.
    fn decode(words: &[i64]) -> Result<(Instruction, usize)> {
        let need = |n: usize| {
            if words.len() < n {
                Err(Error::value(format!("needs {n} words, only {} left in instr_data", words.len())))
            } else {
                Ok(())
            }
        };
        need(1)?;
        match words[0] {
            opcode::CALL => {
                need(4)?;
                let dst = Reg::decode(words[1]).map_err(|e| e.context("call destination"))?;
                let func = usize::try_from(words[2])
                    .map_err(|_| Error::value(format!("function index {} is negative", words[2])))?;
                let n = usize::try_from(words[3])
                    .ok()
                    .filter(|&n| n <= words.len() - 4)
                    .ok_or_else(|| Error::value(format!("{} arguments run past the end of instr_data", words[3])))?;
                let args = words[4..4 + n]
                    .iter()
                    .enumerate()
                    .map(|(i, &w)| Arg::decode(w).map_err(|e| e.context(format!("argument {i}"))))
                    .collect::<Result<Vec<_>>>()?;
                Ok((Instruction::Call { dst, func, args }, 4 + n))
            }
            opcode::RET => {
                need(2)?;
                Ok((Instruction::Ret { result: Reg::decode(words[1])? }, 2))
            }
            opcode::GOTO => {
                need(2)?;
                Ok((Instruction::Goto { offset: words[1] }, 2))
            }
            opcode::IF => {
                need(3)?;
                let cond = Reg::decode(words[1]).map_err(|e| e.context("condition"))?;
                Ok((Instruction::If { cond, false_offset: words[2] }, 3))
            }
            op => Err(Error::value(format!("unknown opcode {op}"))),
        }
    }

    fn encode(&self, out: &mut Vec<i64>) {
        match self {
            Instruction::Call { dst, func, args } => {
                out.extend([opcode::CALL, dst.encode(), *func as i64, args.len() as i64]);
                out.extend(args.iter().map(|a| a.encode()));
            }
            Instruction::Ret { result } => out.extend([opcode::RET, result.encode()]),
            Instruction::Goto { offset } => out.extend([opcode::GOTO, *offset]),
            Instruction::If { cond, false_offset } => out.extend([opcode::IF, cond.encode(), *false_offset]),
        }
    }
}

/// A loaded executable: checked, immutable.
#[derive(Clone, Debug, PartialEq)]
pub struct Executable {
    /// The magic it was stored with ([`MAGIC_V1`] or [`MAGIC_V2`]).
    pub magic: u64,
    /// How its constants are tagged.
    pub dialect: Dialect,
    /// The function table.
    pub functions: Vec<FuncInfo>,
    /// Function name -> index.
    pub func_map: HashMap<String, usize>,
    /// Memory scopes of constants (constant index, scope), in file order (V2 only).
    pub memory_scopes: Vec<(usize, String)>,
    /// The constant pool.
    pub constants: Vec<Constant>,
    /// Every instruction, by instruction index.
    pub instructions: Vec<Instruction>,
}

fn section(name: &'static str) -> impl Fn(Error) -> Error {
    move |e| e.context(format_args!("relax.VMExecutable: invalid {name} section"))
}

/// Smallest stored sizes, to bound counts by the bytes left.
const MIN_FUNC_INFO: usize = 4 + 8 + 4 * 8 + 8;
const MIN_SCOPE: usize = 8 + 8;
const MIN_CONSTANT: usize = 4 + 4;

fn read_func_info(r: &mut Reader<'_>) -> Result<FuncInfo> {
    let k = r.i32()?;
    let kind = match k {
        0 => FuncKind::Packed,
        1 => FuncKind::Vm,
        2 => FuncKind::VmTir,
        _ => return Err(Error::value(format!("unknown function kind {k}"))),
    };
    let name = r.string()?;
    let ctx = |e: Error| e.context(format!("function {name:?}"));
    let start_instr = r.i64().map_err(ctx)?;
    let end_instr = r.i64().map_err(ctx)?;
    let num_args = r.i64().map_err(ctx)?;
    let register_file_size = r.i64().map_err(ctx)?;
    let param_names = r.vec_string().map_err(ctx)?;
    Ok(FuncInfo { kind, name, start_instr, end_instr, num_args, register_file_size, param_names })
}

fn read_constant(r: &mut Reader<'_>, dialect: Dialect) -> Result<Constant> {
    let t = r.i32()?;
    let found = TAGS.iter().find(|k| if dialect == Dialect::Ffi { k.1 == t } else { k.2 == t });
    let Some(&(kind, _, _)) = found else {
        return Err(Error::value(format!(
            "constant type {} {t} is not one of tensor, shape, string, int, float, data type",
            if dialect == Dialect::Ffi { "index" } else { "code" }
        )));
    };
    Ok(match kind {
        ConstKind::Tensor => {
            let rec = read_record(r)?;
            Constant::Tensor(TensorConst { shape: rec.shape, dtype: rec.dtype, data: rec.data.to_vec() })
        }
        ConstKind::Shape => {
            let n = r.count(8)?;
            Constant::Shape((0..n).map(|_| r.i64()).collect::<Result<_>>()?)
        }
        ConstKind::Str => Constant::Str(r.str_bytes()?.to_vec()),
        ConstKind::Int => Constant::Int(r.i64()?),
        ConstKind::Float => Constant::Float(f64::from_bits(r.u64()?)),
        ConstKind::DataType => Constant::DataType(r.dtype()?),
    })
}

fn vec_i64(r: &mut Reader<'_>) -> Result<Vec<i64>> {
    let n = r.count(8)?;
    (0..n).map(|_| r.i64()).collect()
}

impl Executable {
    /// Reads and checks a serialized executable of TVM v0.22+ (the payload of a
    /// `relax.VMExecutable` module in `__tvm_ffi__library_bin`).
    pub fn load(bytes: &[u8]) -> Result<Executable> {
        Self::load_as(bytes, Dialect::Ffi)
    }

    /// Reads and checks a serialized executable of TVM v0.14-v0.20 (the string inside the
    /// `relax.Executable` entry of `__tvm_dev_mblob`).
    pub(crate) fn load_classic(bytes: &[u8]) -> Result<Executable> {
        Self::load_as(bytes, Dialect::Classic)
    }

    /// Reads and checks a serialized executable whose constants are tagged as `dialect` says.
    pub fn load_as(bytes: &[u8], dialect: Dialect) -> Result<Executable> {
        let mut r = Reader::new(bytes, "relax.VMExecutable");
        let magic = r.u64().map_err(section("header"))?;
        let known = match dialect {
            Dialect::Ffi => magic == MAGIC_V1 || magic == MAGIC_V2,
            Dialect::Classic => magic == MAGIC_V1,
        };
        if !known {
            let expected = match dialect {
                Dialect::Ffi => format!("{MAGIC_V2:#018x} (or {MAGIC_V1:#018x} of TVM v0.21-v0.22)"),
                Dialect::Classic => format!("{MAGIC_V1:#018x} (TVM v0.14-v0.20)"),
            };
            return Err(Error::value(format!(
                "relax.VMExecutable: invalid header section: magic {magic:#018x}, expected {expected}"
            )));
        }
        let version = r.str_bytes().map_err(section("version"))?;
        if version != VERSION.as_bytes() {
            return Err(Error::value(format!(
                "relax.VMExecutable: invalid version section: version {:?}, this runtime reads {VERSION:?}",
                String::from_utf8_lossy(version)
            )));
        }

        let n = r.count(MIN_FUNC_INFO).map_err(section("global"))?;
        let mut functions = Vec::with_capacity(n);
        for i in 0..n {
            let f = read_func_info(&mut r).map_err(|e| e.context(format!("entry {i}"))).map_err(section("global"))?;
            functions.push(f);
        }
        let mut func_map = HashMap::with_capacity(n);
        for (i, f) in functions.iter().enumerate() {
            if let Some(j) = func_map.insert(f.name.clone(), i) {
                return Err(section("global")(Error::value(format!(
                    "{:?} is both function {j} and function {i}",
                    f.name
                ))));
            }
        }

        let mut memory_scopes = Vec::new();
        if magic == MAGIC_V2 {
            let n = r.count(MIN_SCOPE).map_err(section("memory scope"))?;
            memory_scopes.reserve(n);
            for i in 0..n {
                let read = |r: &mut Reader<'_>| -> Result<(i64, String)> { Ok((r.i64()?, r.string()?)) };
                let s = read(&mut r).map_err(|e| e.context(format!("entry {i}"))).map_err(section("memory scope"))?;
                memory_scopes.push(s);
            }
        }

        let n = r.count(MIN_CONSTANT).map_err(section("constant"))?;
        let mut constants = Vec::with_capacity(n);
        for i in 0..n {
            let c = read_constant(&mut r, dialect)
                .map_err(|e| e.context(format!("constant {i}")))
                .map_err(section("constant"))?;
            constants.push(c);
        }
        let memory_scopes = check_scopes(memory_scopes, constants.len()).map_err(section("memory scope"))?;

        let offsets = vec_i64(&mut r).map_err(|e| e.context("instr_offset")).map_err(section("code"))?;
        let data = vec_i64(&mut r).map_err(|e| e.context("instr_data")).map_err(section("code"))?;
        if r.remaining() != 0 {
            return Err(section("code")(Error::value(format!("{} bytes left over after it", r.remaining()))));
        }
        let instructions = decode_code(&offsets, &data).map_err(section("code"))?;

        let exec = Executable { magic, dialect, functions, func_map, memory_scopes, constants, instructions };
        for (i, f) in exec.functions.iter().enumerate() {
            exec.check_function(f)
                .map_err(|e| e.context(format!("{} function {:?} (index {i})", f.kind.name(), f.name)))?;
        }
        Ok(exec)
    }

    /// Checks one function-table entry and, for VM functions, its code.
    fn check_function(&self, f: &FuncInfo) -> Result<()> {
        let regs = f.register_file_size;
        match f.kind {
            FuncKind::Packed => return Ok(()),
            FuncKind::VmTir => {
                if f.num_args < 0 || regs <= f.num_args || regs > MAX_REGISTERS {
                    return Err(Error::value(format!(
                        "{} parameters need more than that many registers (at most {MAX_REGISTERS}), it has {regs}",
                        f.num_args
                    )));
                }
            }
            FuncKind::Vm => {
                if f.num_args < 0 || regs < f.num_args || regs > MAX_REGISTERS {
                    return Err(Error::value(format!(
                        "{} parameters in {regs} registers (at most {MAX_REGISTERS})",
                        f.num_args
                    )));
                }
            }
        }
        if !f.param_names.is_empty() && f.param_names.len() as i64 != f.num_args {
            return Err(Error::value(format!("{} parameter names for {} parameters", f.param_names.len(), f.num_args)));
        }
        if f.kind == FuncKind::VmTir {
            return Ok(());
        }
        let n = self.instructions.len() as i64;
        if !(0 <= f.start_instr && f.start_instr < f.end_instr && f.end_instr <= n) {
            return Err(Error::value(format!(
                "instructions {}..{} are not a non-empty range of the {n} instructions",
                f.start_instr, f.end_instr
            )));
        }
        let range = f.start_instr as usize..f.end_instr as usize;
        for pc in range.clone() {
            let ins = &self.instructions[pc];
            self.check_instruction(f, &range, pc, ins)
                .map_err(|e| e.context(format!("instruction {pc} ({})", ins.name())))?;
        }
        Ok(())
    }

    fn check_instruction(
        &self,
        f: &FuncInfo,
        range: &std::ops::Range<usize>,
        pc: usize,
        ins: &Instruction,
    ) -> Result<()> {
        let regs = f.register_file_size as usize;
        let read = |r: Reg, what: &str| match r {
            Reg::R(i) if i >= regs => {
                Err(Error::value(format!("{what} register %{i} is out of range (the frame has {regs} registers)")))
            }
            _ => Ok(()),
        };
        let jump = |offset: i64, what: &str| {
            // TVM's compiler lowers `R.If` to forward jumps only (loops are recursion): a jump
            // back would let bytecode spin forever, so it is refused.
            if offset < 0 {
                return Err(Error::value(format!(
                    "{what} offset {offset} jumps backwards (TVM's compiler emits forward jumps only)"
                )));
            }
            let target = (pc as i64).checked_add(offset);
            if offset == 0 || !target.is_some_and(|t| (range.start as i64..range.end as i64).contains(&t)) {
                return Err(Error::value(format!(
                    "{what} offset {offset} leads outside the function's instructions {}..{}",
                    range.start, range.end
                )));
            }
            Ok(())
        };
        let falls_through = match ins {
            Instruction::Call { dst, func, args } => {
                match dst {
                    Reg::R(i) if *i >= regs => {
                        return Err(Error::value(format!(
                            "destination register %{i} is out of range (the frame has {regs} registers)"
                        )))
                    }
                    Reg::Vm => return Err(Error::value("the destination is the VM register")),
                    _ => {}
                }
                let callee = self.functions.get(*func).ok_or_else(|| {
                    Error::value(format!("function index {func} is out of range ({} functions)", self.functions.len()))
                })?;
                if callee.kind != FuncKind::Packed && callee.num_args != args.len() as i64 {
                    return Err(Error::value(format!(
                        "{} arguments for {} function {:?}, which has {} parameters",
                        args.len(),
                        callee.kind.name(),
                        callee.name,
                        callee.num_args
                    )));
                }
                for (i, a) in args.iter().enumerate() {
                    let ctx = |e: Error| e.context(format!("argument {i}"));
                    match *a {
                        Arg::Register(r) => read(r, "argument").map_err(ctx)?,
                        Arg::Immediate(_) => {}
                        Arg::ConstIdx(c) if c >= self.constants.len() => {
                            return Err(ctx(Error::value(format!(
                                "constant index {c} is out of range ({} constants)",
                                self.constants.len()
                            ))))
                        }
                        Arg::FuncIdx(g) if g >= self.functions.len() => {
                            return Err(ctx(Error::value(format!(
                                "function index {g} is out of range ({} functions)",
                                self.functions.len()
                            ))))
                        }
                        _ => {}
                    }
                }
                true
            }
            Instruction::Ret { result } => {
                read(*result, "result")?;
                false
            }
            Instruction::Goto { offset } => {
                jump(*offset, "jump")?;
                false
            }
            Instruction::If { cond, false_offset } => {
                read(*cond, "condition")?;
                if *false_offset < 2 {
                    return Err(Error::value(format!("false offset {false_offset} is less than 2")));
                }
                jump(*false_offset, "false")?;
                true
            }
        };
        if falls_through && pc + 1 >= range.end {
            return Err(Error::value("the function's last instruction must return or jump"));
        }
        Ok(())
    }

    /// The index of a function.
    pub fn function_index(&self, name: &str) -> Option<usize> {
        self.func_map.get(name).copied()
    }

    /// The instructions of a VM function (empty for the other kinds).
    pub fn code(&self, f: &FuncInfo) -> &[Instruction] {
        match f.kind {
            FuncKind::Vm => &self.instructions[f.start_instr as usize..f.end_instr as usize],
            _ => &[],
        }
    }

    /// Serializes as TVM's `VMExecutable::SaveToBytes` does (with the magic it was read with).
    pub fn save(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u64(self.magic);
        w.str_bytes(VERSION.as_bytes());
        w.u64(self.functions.len() as u64);
        for f in &self.functions {
            w.i32(f.kind as i32);
            w.str_bytes(f.name.as_bytes());
            for v in [f.start_instr, f.end_instr, f.num_args, f.register_file_size] {
                w.i64(v);
            }
            w.vec_str(&f.param_names);
        }
        if self.magic == MAGIC_V2 {
            w.u64(self.memory_scopes.len() as u64);
            for (i, s) in &self.memory_scopes {
                w.i64(*i as i64);
                w.str_bytes(s.as_bytes());
            }
        }
        w.u64(self.constants.len() as u64);
        for c in &self.constants {
            w.i32(c.tag(self.dialect));
            match c {
                Constant::Tensor(t) => {
                    w.u64(NDARRAY_MAGIC);
                    w.u64(0);
                    w.i32(1);
                    w.i32(0);
                    w.i32(t.shape.len() as i32);
                    w.dtype(t.dtype);
                    for &d in &t.shape {
                        w.i64(d);
                    }
                    w.i64(t.data.len() as i64);
                    w.bytes(&t.data);
                }
                Constant::Shape(s) => {
                    w.u64(s.len() as u64);
                    for &d in s {
                        w.i64(d);
                    }
                }
                Constant::Str(s) => w.str_bytes(s),
                Constant::Int(v) => w.i64(*v),
                Constant::Float(v) => w.u64(v.to_bits()),
                Constant::DataType(t) => w.dtype(*t),
            }
        }
        let mut data = Vec::new();
        let mut offsets = Vec::with_capacity(self.instructions.len());
        for ins in &self.instructions {
            offsets.push(data.len() as u64);
            ins.encode(&mut data);
        }
        w.vec_u64(&offsets);
        w.u64(data.len() as u64);
        for v in data {
            w.i64(v);
        }
        w.buf
    }
}

fn check_scopes(scopes: Vec<(i64, String)>, n_constants: usize) -> Result<Vec<(usize, String)>> {
    let mut seen = std::collections::HashSet::new();
    scopes
        .into_iter()
        .map(|(i, s)| {
            let idx = usize::try_from(i).ok().filter(|&i| i < n_constants).ok_or_else(|| {
                Error::value(format!("scope {s:?} is for constant {i}, but there are {n_constants} constants"))
            })?;
            if !seen.insert(idx) {
                return Err(Error::value(format!("constant {idx} has two scopes")));
            }
            Ok((idx, s))
        })
        .collect()
}

/// Decodes the code section: the offsets must tile `data` exactly, instruction after instruction.
fn decode_code(offsets: &[i64], data: &[i64]) -> Result<Vec<Instruction>> {
    let mut out = Vec::with_capacity(offsets.len());
    let mut at = 0usize;
    for (i, &off) in offsets.iter().enumerate() {
        if off != at as i64 {
            return Err(Error::value(format!(
                "instruction {i} starts at word {off} of instr_data, expected {at} (right after instruction {})",
                i as i64 - 1
            )));
        }
        let (ins, len) = Instruction::decode(&data[at..]).map_err(|e| e.context(format!("instruction {i}")))?;
        out.push(ins);
        at += len;
    }
    if at != data.len() {
        return Err(Error::value(format!("{} words of instr_data after the last instruction", data.len() - at)));
    }
    Ok(out)
}
