//! The interpreter of vm.cc: call frames over one register stack, and every v0.8 opcode.
//!
//! The executable was checked at load (registers, constants, functions, primitives, jump
//! targets, dtypes), so indexing here cannot fail; what remains are run-time conditions (a
//! register read before it is written, an object of the wrong kind, a shape that does not fit its
//! storage, a device that was not initialised), each an error naming the function and
//! instruction. After an error the frames and registers are dropped, so the VM stays usable.

use super::bytecode::{Instruction, Reg};
use super::executable::Executable;
use super::memory::{Allocator, StorageObj};
use super::profiler::Recorder;
use crate::abi::{DLDataType, DLDevice, TVMValue};
use crate::device::{self, CPU};
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::ndarray::NDArray;
use crate::object::{register_type, type_index2key, AdtObj, ObjectBody, ObjectRef};
use crate::value::dtype::dtype;
use crate::value::{code, Args, Value};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{Arc, OnceLock};

/// The most nested calls a VM runs (Relay loops recurse; TVM has no limit but memory).
pub(crate) const MAX_CALL_DEPTH: usize = 1 << 20;
/// The most registers live over all frames (32 MiB of registers).
pub(crate) const MAX_STACK_REGISTERS: usize = 1 << 22;

/// The CPU, device 0 (where shapes, tags and scalars live).
pub const CPU0: DLDevice = DLDevice { device_type: CPU, device_id: 0 };

/// The body of a `vm.Closure` object: a VM function and the values it captured.
pub(crate) struct VmClosureObj {
    /// The function's index in the executable.
    pub func_index: usize,
    /// The captured values, passed before the call's own arguments.
    pub free_vars: Vec<ObjectRef>,
}

/// The type index of `vm.Closure`.
pub(crate) fn closure_type_index() -> u32 {
    static IDX: OnceLock<u32> = OnceLock::new();
    *IDX.get_or_init(|| register_type("vm.Closure", "runtime.Closure"))
}

struct Frame {
    func: usize,
    base: usize,
    /// Where the caller resumes, and the caller's register for the result.
    ret_pc: usize,
    caller_dst: Reg,
}

/// The mutable state of one VirtualMachine.
#[derive(Default)]
pub struct VmState {
    /// The device initialised for each device type.
    pub devices: Vec<Option<DLDevice>>,
    /// The allocator of each device type.
    pub allocators: Vec<Option<Arc<Allocator>>>,
    /// Inputs set per function.
    pub inputs: HashMap<String, Vec<ObjectRef>>,
    /// Constants copied to their devices, on first use.
    pub const_pool: Vec<Option<ObjectRef>>,
    /// The last result.
    pub return_register: Option<ObjectRef>,
    /// The profiler while `profile` runs.
    pub recorder: Option<Recorder>,
    regs: Vec<Option<ObjectRef>>,
    frames: Vec<Frame>,
}

impl Drop for VmState {
    fn drop(&mut self) {
        // The pools go with the VM; blocks still in use return to the device when freed.
        for a in self.allocators.iter().flatten() {
            a.close();
        }
    }
}

impl VmState {
    /// The device of a type, if initialised.
    pub fn device(&self, device_type: i32) -> Result<DLDevice> {
        usize::try_from(device_type).ok().and_then(|t| self.devices.get(t).copied().flatten()).ok_or_else(|| {
            Error::value(format!(
                "device type {device_type} ({}) has not been initialized in the device list: \
                     call init with it first",
                device::device_name(device_type).unwrap_or("unknown")
            ))
        })
    }

    /// Sets the device and allocator of a type (`init`); an allocator of another kind replaces
    /// the old one (whose pool is released), one of the same kind is kept.
    pub fn set_device(&mut self, dev: DLDevice, kind: super::memory::AllocatorKind) -> Result<()> {
        let t = usize::try_from(dev.device_type).map_err(|_| Error::value("negative device type"))?;
        if self.devices.len() <= t {
            self.devices.resize(t + 1, None);
            self.allocators.resize(t + 1, None);
        }
        let keep = self.allocators[t].as_ref().is_some_and(|a| a.kind() == kind && a.device() == dev);
        if !keep {
            if let Some(old) = self.allocators[t].take() {
                old.close();
            }
            self.allocators[t] = Some(Allocator::new(dev, kind)?);
        }
        self.devices[t] = Some(dev);
        Ok(())
    }
}

/// What an instruction does to control.
enum Flow {
    Next,
    Jump(i64),
    Call { func: usize, args: Vec<ObjectRef>, dst: Reg },
    Return(ObjectRef),
}

/// An executable with its resolved primitives: what every VM of it shares.
pub(crate) struct Interpreter {
    /// The executable.
    pub exec: Arc<Executable>,
    /// The primitive functions, by packed index.
    pub packed: Vec<PackedFunc>,
}

/// An NDArray view of an object, or a type error naming what it was.
pub(crate) fn as_ndarray(obj: &ObjectRef, what: &str) -> Result<NDArray> {
    NDArray::from_object(obj.clone()).ok_or_else(|| {
        Error::type_error(format!(
            "{what} must be a tensor, got {}",
            type_index2key(obj.type_index()).unwrap_or_default()
        ))
    })
}

/// A copy of a tensor on `dev` (synchronised when it lands on the CPU, so it can be read).
pub fn copy_to(a: &NDArray, dev: DLDevice) -> Result<NDArray> {
    let out = NDArray::empty(a.shape(), a.dtype(), dev)?;
    out.copy_from(a.tensor())?;
    let src = a.device();
    if dev.device_type == CPU && src.device_type != CPU {
        device::api(src.device_type)?.stream_sync(src, std::ptr::null_mut())?;
    }
    Ok(out)
}

/// `CopyTo` of vm.cc: tensors on another device type are copied, ADTs rebuilt with their fields
/// copied; anything else is refused.
pub(crate) fn copy_object_to(obj: &ObjectRef, dev: DLDevice) -> Result<ObjectRef> {
    if let Some(a) = NDArray::from_object(obj.clone()) {
        return Ok(if a.device().device_type != dev.device_type {
            copy_to(&a, dev)?.into_object()
        } else {
            a.into_object()
        });
    }
    if let Some(adt) = obj.downcast::<AdtObj>() {
        let fields = adt
            .fields
            .iter()
            .map(|f| match f {
                Some(o) => copy_object_to(o, dev).map(Some),
                None => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        return Ok(ObjectRef::new(AdtObj { tag: adt.tag, fields }));
    }
    Err(Error::type_error(format!(
        "VM data must be NDArray or a list of NDArray, but received: {}",
        type_index2key(obj.type_index()).unwrap_or_default()
    )))
}

fn small_cpu_tensor(shape: &[i64], t: DLDataType, bytes: &[u8]) -> Result<NDArray> {
    let a = NDArray::empty(shape, t, CPU0)?;
    a.copy_from_bytes(bytes)?;
    Ok(a)
}

/// The first element of a CPU tensor as an integer (`LoadScalarInt`).
fn scalar_of(a: &NDArray) -> Result<i64> {
    let t = a.tensor();
    if a.shape().iter().product::<i64>() < 1 {
        return Err(Error::value(format!("expected a scalar, got a tensor of shape {:?}", a.shape())));
    }
    let bits = t.dtype.bits;
    if !matches!(bits, 1 | 8 | 16 | 32 | 64) {
        return Err(Error::value(format!("Unknown scalar int type of {bits} bits")));
    }
    if t.data.is_null() {
        return Err(Error::value("scalar tensor without data"));
    }
    let p = t.data.cast::<u8>().wrapping_add(t.byte_offset as usize);
    // SAFETY: a CPU tensor with at least one element of `bits` bits (at least one byte) at
    // `data + byte_offset`, kept alive by `a`; unaligned reads tolerate any offset.
    let v = unsafe {
        match bits {
            1 => i64::from(p.read() != 0),
            8 => i64::from(p.cast::<i8>().read()),
            16 => i64::from(p.cast::<i16>().read_unaligned()),
            32 => i64::from(p.cast::<i32>().read_unaligned()),
            _ => p.cast::<i64>().read_unaligned(),
        }
    };
    Ok(v)
}

/// `ToShape`: a rank-0 tensor is the empty shape, a rank-1 int32/int64 tensor its values.
fn to_shape(a: &NDArray) -> Result<Vec<i64>> {
    match a.shape().len() {
        0 => Ok(Vec::new()),
        1 => {
            let t = a.dtype();
            let b = a.to_bytes()?;
            match (t.code, t.bits, t.lanes) {
                (0, 32, 1) => {
                    Ok(b.chunks_exact(4).map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect())
                }
                (0, 64, 1) => {
                    Ok(b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect())
                }
                _ => Err(Error::value(format!(
                    "invalid shape tensor datatype: {}",
                    crate::value::dtype::format(t).unwrap_or_default()
                ))),
            }
        }
        r => Err(Error::value(format!("shape tensor should be a k-length vector, found {r}"))),
    }
}

impl Interpreter {
    /// Runs function `func` with `args` to its return value.
    pub(crate) fn invoke(&self, st: &mut VmState, func: usize, args: Vec<ObjectRef>) -> Result<ObjectRef> {
        let _run = crate::threading::run_scope();
        st.frames.clear();
        st.regs.clear();
        let r = self.run(st, func, args);
        st.frames.clear();
        st.regs.clear();
        let v = r?;
        st.return_register = Some(v.clone());
        Ok(v)
    }

    fn push_frame(
        &self,
        st: &mut VmState,
        func: usize,
        args: Vec<ObjectRef>,
        ret_pc: usize,
        dst: Reg,
    ) -> Result<usize> {
        let f = &self.exec.functions[func];
        if args.len() != f.params.len() {
            return Err(Error::value(format!(
                "function {:?} takes {} arguments, got {}",
                f.name,
                f.params.len(),
                args.len()
            )));
        }
        if st.frames.len() >= MAX_CALL_DEPTH || st.regs.len() + f.register_file_size > MAX_STACK_REGISTERS {
            return Err(Error::value(format!(
                "VM call stack overflow: {} nested calls holding {} registers",
                st.frames.len(),
                st.regs.len()
            )));
        }
        let base = st.regs.len();
        st.regs.resize(base + f.register_file_size, None);
        for (i, a) in args.into_iter().enumerate() {
            st.regs[base + i] = Some(a);
        }
        st.frames.push(Frame { func, base, ret_pc, caller_dst: dst });
        Ok(base)
    }

    fn run(&self, st: &mut VmState, func: usize, args: Vec<ObjectRef>) -> Result<ObjectRef> {
        let mut cur = func;
        let mut pc = 0usize;
        let mut base = self.push_frame(st, func, args, 0, 0)?;
        loop {
            let f = &self.exec.functions[cur];
            let ins = &f.instructions[pc];
            let flow = self
                .step(st, base, ins)
                .map_err(|e| e.context(format!("VM function {:?}, instruction {pc} ({})", f.name, ins.name())))?;
            match flow {
                Flow::Next => pc += 1,
                // In range: jump targets were checked at load.
                Flow::Jump(off) => pc = (pc as i64 + off) as usize,
                Flow::Call { func, args, dst } => {
                    base = self.push_frame(st, func, args, pc + 1, dst).map_err(|e| {
                        e.context(format!("VM function {:?}, instruction {pc} ({})", f.name, ins.name()))
                    })?;
                    cur = func;
                    pc = 0;
                }
                Flow::Return(v) => {
                    let fr = st.frames.pop().ok_or_else(|| Error::internal("VM frame stack underflow"))?;
                    st.regs.truncate(fr.base);
                    match st.frames.last() {
                        None => return Ok(v),
                        Some(caller) => {
                            cur = caller.func;
                            base = caller.base;
                            pc = fr.ret_pc;
                            st.regs[base + fr.caller_dst as usize] = Some(v);
                        }
                    }
                }
            }
        }
    }

    fn read(st: &VmState, base: usize, r: Reg) -> Result<&ObjectRef> {
        st.regs[base + r as usize]
            .as_ref()
            .ok_or_else(|| Error::value(format!("register ${r} is read before it is written")))
    }

    fn write(st: &mut VmState, base: usize, r: Reg, v: ObjectRef) {
        st.regs[base + r as usize] = Some(v);
    }

    fn read_tensor(st: &VmState, base: usize, r: Reg, what: &str) -> Result<NDArray> {
        as_ndarray(Self::read(st, base, r)?, what)
    }

    /// `LoadScalarInt`.
    fn load_scalar_int(st: &VmState, base: usize, r: Reg) -> Result<i64> {
        let a = Self::read_tensor(st, base, r, "a scalar operand")?;
        if a.device().device_type == CPU {
            scalar_of(&a)
        } else {
            scalar_of(&copy_to(&a, CPU0)?)
        }
    }

    /// A shape tensor on the CPU (copied there from another device).
    fn shape_tensor(st: &VmState, base: usize, r: Reg) -> Result<NDArray> {
        let cpu = st.device(CPU)?;
        let a = Self::read_tensor(st, base, r, "a shape operand")?;
        if a.device().device_type == CPU {
            Ok(a)
        } else {
            copy_to(&a, cpu)
        }
    }

    fn step(&self, st: &mut VmState, base: usize, ins: &Instruction) -> Result<Flow> {
        match ins {
            Instruction::Move { from, dst } => {
                let v = Self::read(st, base, *from)?.clone();
                Self::write(st, base, *dst, v);
            }
            Instruction::Ret { result } => return Ok(Flow::Return(Self::read(st, base, *result)?.clone())),
            Instruction::Fatal => return Err(Error::tvm("VM encountered fatal error")),
            Instruction::LoadConst { index, dst } => {
                let v = self.load_const(st, *index)?;
                Self::write(st, base, *dst, v);
            }
            Instruction::LoadConsti { value, dst } => {
                let a = small_cpu_tensor(&[1], dtype(0, 64, 1), &value.to_le_bytes())?;
                Self::write(st, base, *dst, a.into_object());
            }
            Instruction::Invoke { func, args, dst } => {
                let args = args.iter().map(|&r| Self::read(st, base, r).cloned()).collect::<Result<Vec<_>>>()?;
                return Ok(Flow::Call { func: *func, args, dst: *dst });
            }
            Instruction::InvokeClosure { closure, args, dst } => {
                let obj = Self::read(st, base, *closure)?;
                let clo = obj.downcast::<VmClosureObj>().ok_or_else(|| {
                    Error::type_error(format!(
                        "InvokeClosure of a {}, not a vm.Closure",
                        type_index2key(obj.type_index()).unwrap_or_default()
                    ))
                })?;
                let func = clo.func_index;
                if func >= self.exec.functions.len() {
                    return Err(Error::value(format!("closure of unknown function {func}")));
                }
                let mut all = clo.free_vars.clone();
                for &r in args.iter() {
                    all.push(Self::read(st, base, r)?.clone());
                }
                return Ok(Flow::Call { func, args: all, dst: *dst });
            }
            Instruction::InvokePacked { packed, output_size, args } => {
                self.invoke_packed(st, base, *packed, *output_size, args)?
            }
            Instruction::GetField { object, index, dst } => {
                let obj = Self::read(st, base, *object)?;
                let adt = obj.downcast::<AdtObj>().ok_or_else(|| {
                    Error::type_error(format!(
                        "GetField of a {}, not an ADT",
                        type_index2key(obj.type_index()).unwrap_or_default()
                    ))
                })?;
                let v = adt
                    .fields
                    .get(*index)
                    .ok_or_else(|| Error::index(format!("field {index} of an ADT with {} fields", adt.fields.len())))?
                    .clone()
                    .ok_or_else(|| Error::value(format!("field {index} of the ADT is None")))?;
                Self::write(st, base, *dst, v);
            }
            Instruction::GetTag { object, dst } => {
                let obj = Self::read(st, base, *object)?;
                let adt = obj.downcast::<AdtObj>().ok_or_else(|| {
                    Error::type_error(format!(
                        "GetTag of a {}, not an ADT",
                        type_index2key(obj.type_index()).unwrap_or_default()
                    ))
                })?;
                let a = small_cpu_tensor(&[1], dtype(0, 32, 1), &adt.tag.to_le_bytes())?;
                Self::write(st, base, *dst, a.into_object());
            }
            Instruction::Goto { offset } => return Ok(Flow::Jump(*offset)),
            Instruction::If { test, target, true_offset, false_offset } => {
                // TVM compares the two scalars as int32.
                let t = Self::load_scalar_int(st, base, *test)? as i32;
                let g = Self::load_scalar_int(st, base, *target)? as i32;
                return Ok(Flow::Jump(if t == g { *true_offset } else { *false_offset }));
            }
            Instruction::AllocTensor { storage, offset, shape, dtype, dst } => {
                let t0 = st.recorder.as_ref().map(|_| std::time::Instant::now());
                let sobj = Self::read(st, base, *storage)?.clone();
                let s = StorageObj::of(&sobj).ok_or_else(|| Error::type_error("AllocTensor needs a vm.Storage"))?;
                let off = Self::load_scalar_int(st, base, *offset)?;
                let a = s.alloc_ndarray(&sobj, off, shape, *dtype)?;
                if let (Some(rec), Some(t0)) = (st.recorder.as_mut(), t0) {
                    rec.record_op(
                        "VM::AllocTensor",
                        s.device(),
                        t0,
                        Some(("Argument Shapes", Recorder::shape_string(shape, *dtype))),
                    );
                }
                Self::write(st, base, *dst, a.into_object());
            }
            Instruction::AllocTensorReg { storage, offset, shape, dtype, dst } => {
                let t0 = st.recorder.as_ref().map(|_| std::time::Instant::now());
                let dims = to_shape(&Self::shape_tensor(st, base, *shape)?)?;
                let sobj = Self::read(st, base, *storage)?.clone();
                let s = StorageObj::of(&sobj).ok_or_else(|| Error::type_error("AllocTensorReg needs a vm.Storage"))?;
                let off = Self::load_scalar_int(st, base, *offset)?;
                let a = s.alloc_ndarray(&sobj, off, &dims, *dtype)?;
                if let (Some(rec), Some(t0)) = (st.recorder.as_mut(), t0) {
                    rec.record_op(
                        "VM::AllocTensorReg",
                        s.device(),
                        t0,
                        Some(("Argument Shapes", Recorder::shape_string(&dims, *dtype))),
                    );
                }
                Self::write(st, base, *dst, a.into_object());
            }
            Instruction::AllocAdt { tag, fields, dst } => {
                let fields =
                    fields.iter().map(|&r| Self::read(st, base, r).cloned().map(Some)).collect::<Result<Vec<_>>>()?;
                Self::write(st, base, *dst, ObjectRef::new(AdtObj { tag: *tag, fields }));
            }
            Instruction::AllocClosure { func, free_vars, dst } => {
                let free_vars =
                    free_vars.iter().map(|&r| Self::read(st, base, r).cloned()).collect::<Result<Vec<_>>>()?;
                let c = ObjectRef::new(VmClosureObj { func_index: *func, free_vars });
                Self::write(st, base, *dst, c);
            }
            Instruction::AllocStorage { size, alignment, dtype_hint, device_type, dst } => {
                let t0 = st.recorder.as_ref().map(|_| std::time::Instant::now());
                let n = Self::load_scalar_int(st, base, *size)?;
                let n = usize::try_from(n).map_err(|_| Error::value(format!("negative storage size {n}")))?;
                let alloc = usize::try_from(*device_type)
                    .ok()
                    .and_then(|t| st.allocators.get(t).cloned().flatten())
                    .ok_or_else(|| {
                        Error::value(format!(
                            "Memory allocator for device type {device_type} has not been initialized: \
                             did you forget to init the VirtualMachine with that device?"
                        ))
                    })?;
                let s = StorageObj::new_object(&alloc, n, *alignment as usize, *dtype_hint)?;
                if let (Some(rec), Some(t0)) = (st.recorder.as_mut(), t0) {
                    let hint = crate::value::dtype::format(*dtype_hint).unwrap_or_default();
                    rec.record_op(
                        "VM::AllocStorage",
                        alloc.device(),
                        t0,
                        Some(("VM::Argument Shapes", format!("{hint}[{n}]"))),
                    );
                }
                Self::write(st, base, *dst, s);
            }
            Instruction::ShapeOf { tensor, dst } => {
                let a = Self::read_tensor(st, base, *tensor, "ShapeOf's operand")?;
                let bytes: Vec<u8> = a.shape().iter().flat_map(|d| d.to_le_bytes()).collect();
                let s = small_cpu_tensor(&[a.shape().len() as i64], dtype(0, 64, 1), &bytes)?;
                Self::write(st, base, *dst, s.into_object());
            }
            Instruction::ReshapeTensor { tensor, newshape, dst } => {
                let t0 = st.recorder.as_ref().map(|_| std::time::Instant::now());
                let a = Self::read_tensor(st, base, *tensor, "ReshapeTensor's operand")?;
                let s = Self::shape_tensor(st, base, *newshape)?;
                let t = s.dtype();
                if (t.code, t.bits) != (0, 64) || s.shape().len() != 1 {
                    return Err(Error::value("ReshapeTensor's shape must be a 1-D int64 tensor"));
                }
                let dims = to_shape(&s)?;
                let v = a.create_view(&dims, a.dtype())?;
                if let (Some(rec), Some(t0)) = (st.recorder.as_mut(), t0) {
                    rec.record_op("VM::ReshapeTensor", a.device(), t0, None);
                }
                Self::write(st, base, *dst, v.into_object());
            }
            Instruction::DeviceCopy { src, src_device_type, dst_device_type, dst } => {
                let t0 = st.recorder.as_ref().map(|_| std::time::Instant::now());
                let a = Self::read_tensor(st, base, *src, "DeviceCopy's operand")?;
                if a.device().device_type != *src_device_type {
                    return Err(Error::value(format!(
                        "DeviceCopy expects a tensor on device type {src_device_type}, got one on {}",
                        a.device().device_type
                    )));
                }
                let to =
                    st.device(*dst_device_type).unwrap_or(DLDevice { device_type: *dst_device_type, device_id: 0 });
                let b = copy_to(&a, to)?;
                if let (Some(rec), Some(t0)) = (st.recorder.as_mut(), t0) {
                    rec.record_op("VM::DeviceCopy", to, t0, None);
                }
                Self::write(st, base, *dst, b.into_object());
            }
        }
        Ok(Flow::Next)
    }

    fn load_const(&self, st: &mut VmState, index: usize) -> Result<ObjectRef> {
        if let Some(Some(v)) = st.const_pool.get(index) {
            return Ok(v.clone());
        }
        let t0 = st.recorder.as_ref().map(|_| std::time::Instant::now());
        let dev = st.device(self.exec.const_device_type[index])?;
        let v = copy_object_to(self.exec.constants[index].as_object(), dev)?;
        if st.const_pool.len() <= index {
            st.const_pool.resize(index + 1, None);
        }
        st.const_pool[index] = Some(v.clone());
        if let (Some(rec), Some(t0)) = (st.recorder.as_mut(), t0) {
            rec.record_op("VM::LoadConst", dev, t0, None);
        }
        Ok(v)
    }

    fn invoke_packed(
        &self,
        st: &mut VmState,
        base: usize,
        packed: usize,
        output_size: usize,
        args: &[Reg],
    ) -> Result<()> {
        let mut values: Vec<TVMValue> = Vec::with_capacity(args.len());
        let mut codes: Vec<c_int> = Vec::with_capacity(args.len());
        let mut skip = false;
        let mut first_device = None;
        let mut shapes = Vec::new();
        let recording = st.recorder.is_some();
        let n = args.len();
        let mut collect = |a: &NDArray, values: &mut Vec<TVMValue>, codes: &mut Vec<c_int>| {
            first_device.get_or_insert(a.device());
            if recording {
                shapes.push(Recorder::shape_string(a.shape(), a.dtype()));
            }
            values.push(TVMValue { v_handle: a.handle().cast() });
            codes.push(code::NDARRAY);
        };
        let mut gather = || -> Result<()> {
            for (i, &r) in args.iter().enumerate() {
                let obj = Self::read(st, base, r)?;
                if let Some(adt) = obj.downcast::<AdtObj>() {
                    for f in &adt.fields {
                        let f = f.as_ref().ok_or_else(|| Error::value("an ADT argument has a None field"))?;
                        collect(&as_ndarray(f, "a packed function argument")?, &mut values, &mut codes);
                    }
                } else {
                    let a = as_ndarray(obj, "a packed function argument")?;
                    // One empty output: nothing to compute.
                    if i == n - 1 && output_size == 1 && a.shape().contains(&0) {
                        skip = true;
                    }
                    collect(&a, &mut values, &mut codes);
                }
            }
            Ok(())
        };
        gather()?;
        if skip {
            return Ok(());
        }
        let f = &self.packed[packed];
        let dev = first_device.unwrap_or(CPU0);
        if recording {
            // Earlier work queued on the device is not this call's.
            device::api(dev.device_type)?.stream_sync(dev, std::ptr::null_mut())?;
        }
        let t0 = recording.then(std::time::Instant::now);
        {
            // SAFETY: every value is the handle of an NDArray held by a register (or by an ADT in
            // one) of the current frame, which stays alive for the call, with code 13.
            let call_args = unsafe { Args::new(&values, &codes) };
            let mut ret = Value::Null;
            f.call_args(&call_args, &mut ret)
                .map_err(|e| e.context(format!("InvokePacked {}", self.exec.primitives[packed])))?;
            if let (Some(rec), Some(t0)) = (st.recorder.as_mut(), t0) {
                device::api(dev.device_type)?.stream_sync(dev, std::ptr::null_mut())?;
                let attrs = self.exec.primitive_attrs.get(&(packed as u64));
                rec.record_packed(&self.exec.primitives[packed], dev, t0, shapes.join(", "), attrs);
            }
            Ok(())
        }
    }
}

impl ObjectBody for VmClosureObj {
    fn type_index() -> u32 {
        closure_type_index()
    }
}
