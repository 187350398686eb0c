//! The serialized VM executable of TVM v0.8 (`executable.cc`): reading with everything checked,
//! and writing back byte for byte.
//!
//! Layout (dmlc::Stream conventions): magic `0xD225DE2F4214151D` (u64), the
//! version string (`"0.8.0"`), then four sections:
//!
//! 1. globals: `vec<str>`, the VM function names in function-index order;
//! 2. constants: a u64 count, that many NDArray records, then
//!    `vec<i64>` the device type of each constant;
//! 3. primitives: `vec<str>` the kernel names in packed-index order, then
//!    `map<u64, map<str, str>>` their string attributes (`hash`, `*layout`, ...);
//! 4. code: a u64 function count, then per function `vec<str>` `[name, register file size,
//!    instruction count]` (the numbers in decimal text), `vec<str>` parameter names, `vec<i64>`
//!    parameter device types, and the instructions, each a `vec<i64>` `[hash, opcode,
//!    fields...]` (see [`super::bytecode`]).
//!
//! Loading refuses anything the interpreter could trip over: every count is bounded by the bytes
//! left before anything is allocated, and every register, constant, function, primitive and jump
//! target is checked against what it refers to, so the interpreter never meets a bad index.

use super::bytecode::{instruction_hash, Instruction};
use crate::abi::DLDataType;
use crate::device;
use crate::error::{Error, Result};
use crate::io::{Reader, Writer};
use crate::ndarray::serialize::{load_ndarray, save_ndarray};
use crate::ndarray::NDArray;
use std::collections::{BTreeMap, HashMap};

/// The magic number at the start of a serialized executable.
pub(crate) const MAGIC: u64 = 0xD225_DE2F_4214_151D;

/// The only version string this runtime reads (`TVM_VERSION` of v0.8.0).
pub const VERSION: &str = "0.8.0";

/// The largest register file a function may declare (8 MiB of registers per call frame).
pub const MAX_REGISTERS: usize = 1 << 20;

/// Smallest serialized sizes, used to bound counts by the bytes left.
const MIN_NDARRAY_RECORD: usize = 8 + 8 + 8 + 4 + 4 + 8;
const MIN_FUNCTION: usize = 8 + 3 * 8 + 8 + 8;
const MIN_INSTRUCTION: usize = 8 + 2 * 8;

/// One VM function.
#[derive(Clone, Debug)]
pub struct VmFunction {
    /// Its name (a global).
    pub name: String,
    /// Parameter names.
    pub params: Vec<String>,
    /// The device type of each parameter.
    pub params_device_type: Vec<i32>,
    /// Registers of a call frame.
    pub register_file_size: usize,
    /// The code.
    pub instructions: Vec<Instruction>,
}

/// A loaded executable (immutable; shared by every VM made from it).
#[derive(Debug)]
pub struct Executable {
    /// Function names by index.
    pub globals: Vec<String>,
    /// Function name -> index.
    pub global_map: HashMap<String, usize>,
    /// Constants, on the CPU.
    pub constants: Vec<NDArray>,
    /// The device type each constant is used on.
    pub const_device_type: Vec<i32>,
    /// Primitive (kernel) names by packed index.
    pub primitives: Vec<String>,
    /// String attributes of the primitives, by packed index.
    pub primitive_attrs: BTreeMap<u64, BTreeMap<String, String>>,
    /// Functions by index.
    pub functions: Vec<VmFunction>,
}

fn section(name: &'static str) -> impl Fn(Error) -> Error {
    move |e| e.context(format_args!("Invalid VM file format in the {name} section"))
}

fn vec_i64(r: &mut Reader<'_>) -> Result<Vec<i64>> {
    Ok(r.vec_u64()?.into_iter().map(|v| v as i64).collect())
}

/// A device type an executable may name: a known device, not an RPC session.
fn device_type(v: i64, what: &dyn std::fmt::Display) -> Result<i32> {
    i32::try_from(v)
        .ok()
        .filter(|&t| t < device::RPC_SESS_MASK && device::device_name(t).is_ok())
        .ok_or_else(|| Error::value(format!("{what}: {v} is not a device type")))
}

/// `VerifyDataType` of memory_manager.cc (and no zero-bit types).
pub(crate) fn verify_dtype(t: DLDataType) -> Result<()> {
    let ok = t.lanes >= 1
        && t.bits != 0
        && t.bits.is_power_of_two()
        && (t.bits % 8 == 0 || (t.bits == 1 && t.code == crate::value::dtype::CODE_UINT));
    if ok {
        Ok(())
    } else {
        Err(Error::value(format!("invalid tensor data type (code {}, {} bits, {} lanes)", t.code, t.bits, t.lanes)))
    }
}

impl Executable {
    /// Reads and checks a serialized executable (the bytes of `exe.save()`).
    pub fn load(code: &[u8]) -> Result<Executable> {
        let mut r = Reader::new(code, "VM executable");
        let magic = r.u64().map_err(section("header"))?;
        if magic != MAGIC {
            return Err(Error::value(format!(
                "Invalid VM file format in the header section: magic {magic:#018x}, expected {MAGIC:#018x}"
            )));
        }
        let version = r.str_bytes().map_err(section("version"))?;
        if version != VERSION.as_bytes() {
            return Err(Error::value(format!(
                "Invalid VM file format in the version section: the executable was made by TVM {:?}, \
                 this runtime reads {VERSION:?} only",
                String::from_utf8_lossy(version)
            )));
        }
        let globals = r.vec_string().map_err(section("global"))?;

        let n_const = r.count(MIN_NDARRAY_RECORD).map_err(section("constant"))?;
        let mut constants = Vec::with_capacity(n_const);
        for i in 0..n_const {
            constants.push(
                load_ndarray(&mut r).map_err(|e| e.context(format!("constant {i}"))).map_err(section("constant"))?,
            );
        }
        let const_dev = vec_i64(&mut r).map_err(section("constant"))?;

        let primitives = r.vec_string().map_err(section("primitive name"))?;
        let mut primitive_attrs = BTreeMap::new();
        let n_attrs = r.count(16).map_err(section("primitive attrs"))?;
        for _ in 0..n_attrs {
            let key = r.u64().map_err(section("primitive attrs"))?;
            let n = r.count(16).map_err(section("primitive attrs"))?;
            let mut m = BTreeMap::new();
            for _ in 0..n {
                let k = r.string().map_err(section("primitive attrs"))?;
                let v = r.string().map_err(section("primitive attrs"))?;
                m.insert(k, v);
            }
            primitive_attrs.insert(key, m);
        }

        let n_funcs = r.count(MIN_FUNCTION).map_err(section("code"))?;
        let mut raw_functions = Vec::with_capacity(n_funcs);
        for fi in 0..n_funcs {
            let f = read_function(&mut r).map_err(|e| e.context(format!("function {fi}"))).map_err(section("code"))?;
            raw_functions.push(f);
        }
        if r.remaining() != 0 {
            return Err(Error::value(format!(
                "Invalid VM file format: {} unexpected bytes after the code section",
                r.remaining()
            )));
        }

        let global_map = check_globals(&globals)?;
        if const_dev.len() != constants.len() {
            return Err(Error::value(format!(
                "Invalid VM file format in the constant section: {} constants but {} device types",
                constants.len(),
                const_dev.len()
            )));
        }
        let const_device_type = const_dev
            .iter()
            .enumerate()
            .map(|(i, &t)| device_type(t, &format_args!("constant {i}'s device type")))
            .collect::<Result<Vec<_>>>()?;
        let mut seen = HashMap::new();
        for (i, p) in primitives.iter().enumerate() {
            if let Some(j) = seen.insert(p.as_str(), i) {
                return Err(Error::value(format!(
                    "Invalid VM file format in the primitive name section: {p:?} is both primitive {j} and {i}"
                )));
            }
        }
        if raw_functions.len() != globals.len() {
            return Err(Error::value(format!(
                "Invalid VM file format in the code section: {} functions for {} globals",
                raw_functions.len(),
                globals.len()
            )));
        }
        let mut slots: Vec<Option<VmFunction>> = vec![None; globals.len()];
        for f in raw_functions {
            let idx = *global_map.get(&f.name).ok_or_else(|| {
                Error::value(format!("Invalid VM file format in the code section: function {:?} is no global", f.name))
            })?;
            if slots[idx].is_some() {
                return Err(Error::value(format!(
                    "Invalid VM file format in the code section: function {:?} is defined twice",
                    f.name
                )));
            }
            slots[idx] = Some(f);
        }
        let functions: Vec<VmFunction> = slots.into_iter().flatten().collect();
        let exec =
            Executable { globals, global_map, constants, const_device_type, primitives, primitive_attrs, functions };
        for f in &exec.functions {
            exec.check_function(f).map_err(|e| e.context(format!("Invalid VM function {:?}", f.name)))?;
        }
        Ok(exec)
    }

    /// Checks one function's code against the executable.
    fn check_function(&self, f: &VmFunction) -> Result<()> {
        if f.params.len() > f.register_file_size {
            return Err(Error::value(format!(
                "{} parameters do not fit its {} registers",
                f.params.len(),
                f.register_file_size
            )));
        }
        let n = f.instructions.len();
        if n == 0 {
            return Err(Error::value("it has no instructions"));
        }
        for (pc, ins) in f.instructions.iter().enumerate() {
            self.check_instruction(f, pc, ins).map_err(|e| e.context(format!("instruction {pc} ({})", ins.name())))?;
        }
        Ok(())
    }

    fn check_instruction(&self, f: &VmFunction, pc: usize, ins: &Instruction) -> Result<()> {
        let n = f.instructions.len();
        for r in ins.registers() {
            if r as usize >= f.register_file_size {
                return Err(Error::value(format!(
                    "register ${r} is out of range (the register file has {} registers)",
                    f.register_file_size
                )));
            }
        }
        let jump = |offset: i64| -> Result<()> {
            let target = (pc as i64).checked_add(offset);
            if offset == 0 || !target.is_some_and(|t| (0..n as i64).contains(&t)) {
                return Err(Error::value(format!(
                    "jump offset {offset} leads outside the function's {n} instructions"
                )));
            }
            Ok(())
        };
        let callee = |func: usize| -> Result<&VmFunction> {
            self.functions.get(func).ok_or_else(|| {
                Error::value(format!("function index {func} is out of range ({} functions)", self.functions.len()))
            })
        };
        let falls_through = match ins {
            Instruction::Ret { .. } | Instruction::Fatal => false,
            Instruction::Goto { offset } => {
                jump(*offset)?;
                false
            }
            Instruction::If { true_offset, false_offset, .. } => {
                jump(*true_offset)?;
                jump(*false_offset)?;
                false
            }
            Instruction::Invoke { func, args, .. } => {
                let g = callee(*func)?;
                if args.len() != g.params.len() {
                    return Err(Error::value(format!(
                        "{} arguments for function {:?}, which has {} parameters",
                        args.len(),
                        g.name,
                        g.params.len()
                    )));
                }
                true
            }
            Instruction::AllocClosure { func, free_vars, .. } => {
                let g = callee(*func)?;
                if free_vars.len() > g.params.len() {
                    return Err(Error::value(format!(
                        "{} captured values for function {:?}, which has {} parameters",
                        free_vars.len(),
                        g.name,
                        g.params.len()
                    )));
                }
                true
            }
            Instruction::InvokePacked { packed, .. } => {
                if *packed >= self.primitives.len() {
                    return Err(Error::value(format!(
                        "primitive function index {packed} is out of range ({} primitives)",
                        self.primitives.len()
                    )));
                }
                true
            }
            Instruction::LoadConst { index, .. } => {
                if *index >= self.constants.len() {
                    return Err(Error::value(format!(
                        "constant index {index} is out of range ({} constants)",
                        self.constants.len()
                    )));
                }
                true
            }
            Instruction::AllocTensor { dtype, .. } | Instruction::AllocTensorReg { dtype, .. } => {
                verify_dtype(*dtype)?;
                true
            }
            Instruction::AllocStorage { device_type: t, .. } => {
                device_type(i64::from(*t), &"storage device type")?;
                true
            }
            Instruction::DeviceCopy { src_device_type, dst_device_type, .. } => {
                device_type(i64::from(*src_device_type), &"source device type")?;
                device_type(i64::from(*dst_device_type), &"destination device type")?;
                true
            }
            _ => true,
        };
        if falls_through && pc + 1 >= n {
            return Err(Error::value("the last instruction must return, jump or stop"));
        }
        Ok(())
    }

    /// The index of a function.
    pub fn function_index(&self, name: &str) -> Option<usize> {
        self.global_map.get(name).copied()
    }

    /// Serializes the executable as TVM's `Executable::Save` does.
    pub fn save(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        w.u64(MAGIC);
        w.str_bytes(VERSION.as_bytes());
        w.vec_str(&self.globals);
        w.u64(self.constants.len() as u64);
        for c in &self.constants {
            save_ndarray(&mut w, c)?;
        }
        let dev: Vec<u64> = self.const_device_type.iter().map(|&t| i64::from(t) as u64).collect();
        w.vec_u64(&dev);
        w.vec_str(&self.primitives);
        w.u64(self.primitive_attrs.len() as u64);
        for (k, m) in &self.primitive_attrs {
            w.u64(*k);
            w.u64(m.len() as u64);
            for (a, b) in m {
                w.str_bytes(a.as_bytes());
                w.str_bytes(b.as_bytes());
            }
        }
        w.u64(self.functions.len() as u64);
        for f in &self.functions {
            let info = [f.name.clone(), f.register_file_size.to_string(), f.instructions.len().to_string()];
            w.vec_str(&info);
            w.vec_str(&f.params);
            let pdt: Vec<u64> = f.params_device_type.iter().map(|&t| i64::from(t) as u64).collect();
            w.vec_u64(&pdt);
            for ins in &f.instructions {
                let fields = ins.fields();
                let op = ins.opcode();
                let mut v = Vec::with_capacity(fields.len() + 2);
                v.push(instruction_hash(op, &fields) as u64);
                v.push(op as u64);
                v.extend(fields.iter().map(|&x| x as u64));
                w.vec_u64(&v);
            }
        }
        Ok(w.buf)
    }
}

fn check_globals(globals: &[String]) -> Result<HashMap<String, usize>> {
    let mut m = HashMap::with_capacity(globals.len());
    for (i, g) in globals.iter().enumerate() {
        if let Some(j) = m.insert(g.clone(), i) {
            return Err(Error::value(format!(
                "Invalid VM file format in the global section: {g:?} is both function {j} and {i}"
            )));
        }
    }
    Ok(m)
}

/// A decimal count of the function header (TVM writes it with `std::to_string`).
fn header_number(s: &str, what: &str, max: usize) -> Result<usize> {
    s.parse::<usize>()
        .ok()
        .filter(|&n| n <= max)
        .ok_or_else(|| Error::value(format!("{what} {s:?} is not a number up to {max}")))
}

/// Reads one function: header, parameters, instructions (decoded, hashes checked).
fn read_function(r: &mut Reader<'_>) -> Result<VmFunction> {
    let info = r.vec_string()?;
    if info.len() != 3 {
        return Err(Error::value(format!(
            "Failed to decode the vm function: the header has {} entries, expected 3",
            info.len()
        )));
    }
    let name = info[0].clone();
    let register_file_size = header_number(&info[1], "register file size", MAX_REGISTERS)?;
    let max_instructions = r.remaining() / MIN_INSTRUCTION;
    let num_instructions = header_number(&info[2], "instruction count", max_instructions).map_err(|e| {
        e.context(format!("{name:?} (the rest of the file holds at most {max_instructions} instructions)"))
    })?;
    let params = r.vec_string()?;
    let pdt = vec_i64(r)?;
    if pdt.len() != params.len() {
        return Err(Error::value(format!(
            "{name:?}: {} parameters but {} parameter device types",
            params.len(),
            pdt.len()
        )));
    }
    let params_device_type = pdt
        .iter()
        .enumerate()
        .map(|(i, &t)| device_type(t, &format_args!("{name:?}: parameter {i}'s device type")))
        .collect::<Result<Vec<_>>>()?;
    let mut instructions = Vec::with_capacity(num_instructions);
    for pc in 0..num_instructions {
        let raw = vec_i64(r)?;
        let ctx = |e: Error| e.context(format!("{name:?}, instruction {pc}"));
        if raw.len() < 2 {
            return Err(ctx(Error::value(format!("{} values, expected at least hash and opcode", raw.len()))));
        }
        let (hash, opcode, fields) = (raw[0], raw[1], &raw[2..]);
        if instruction_hash(opcode, fields) != hash {
            return Err(ctx(Error::value(format!("Found mismatch in hash for opcode: {opcode}"))));
        }
        instructions.push(Instruction::decode(opcode, fields).map_err(ctx)?);
    }
    Ok(VmFunction { name, params, params_device_type, register_file_size, instructions })
}
