//! The Relax VM's interpreter (TVM's `VirtualMachineImpl`): an initialized machine
//! ([`Runtime`]: devices, allocators, constant and function pools) runs bytecode functions of a
//! checked [`Executable`], calls kernels and builtins through tvm-ffi function objects, and
//! closures (`relax.vm.Closure`) with itself as the first argument.
//!
//! Frames live on the Rust stack: a VM function calling a VM function recurses, as TVM's does
//! through the closure's implementation. A register file is a `Vec<Any>`; arguments are passed
//! as views of the registers, constants and pools. The machine is shared read-only once
//! initialized, so one `Runtime` may serve calls from several threads; the state TVM keeps per
//! machine (inputs, outputs, saved closures) lives in the module ([`super::vm_module`]).
//!
//! The VM pointer that bytecode passes to builtins (`%vm`) is the address of the `Runtime`;
//! builtins accept it only while that machine is running on the calling thread
//! ([`from_ctx`]), so a forged pointer is an error rather than a crash.

use super::executable::{Arg, Executable, FuncKind, Instruction, Reg};
use super::objects::{as_closure, make_closure};
use parking_lot::RwLock;
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tvm_runtime_classic::abi::DLDevice;
use tvm_runtime_classic::memory::{Allocator, AllocatorKind};
use tvm_runtime_tvm_ffi::any::{Any, TVMFFIAny};
use tvm_runtime_tvm_ffi::object::ObjectRef;
use tvm_runtime_tvm_ffi::{function, module, registry, ti, types, FfiError, FfiResult};

/// Owned values shared between threads: tvm-ffi objects have atomic reference counts, and the
/// VM never mutates a pooled value in place.
pub(crate) struct SendAnys(pub Vec<Any>);

impl SendAnys {
    /// The values.
    pub(crate) fn items(&self) -> &[Any] {
        &self.0
    }
}

// SAFETY: see the type's documentation.
unsafe impl Send for SendAnys {}
// SAFETY: as above.
unsafe impl Sync for SendAnys {}

/// `VMInstrumentReturnKind::kSkipRun`.
const INSTRUMENT_SKIP_RUN: i64 = 1;

/// How deep VM functions may call each other on one thread before the call is refused (the
/// thread's stack usually ends it first: [`tvm_runtime_classic::threading::stack::near_end`]).
const MAX_DEPTH: usize = 1 << 20;

/// What a function-pool entry is, for the dispatch loop.
enum Callee {
    /// A function object (a global, or an import's function).
    Packed,
    /// A kernel: a library's `__tvm_ffi_<name>` symbol (the pool holds its function object).
    Kernel(function::SafeCall),
    /// One of this library's builtins, called directly.
    Native(super::builtins::Native),
    /// A bytecode function of this executable (called directly, not through its closure).
    Bytecode(usize),
    /// A closure (a VM-TIR function).
    Closure,
}

/// An initialized machine: what `vm_initialization` sets up.
pub struct Runtime {
    /// The executable.
    pub exe: Arc<Executable>,
    /// The devices, the host (CPU) last.
    pub devices: Vec<DLDevice>,
    /// One allocator per device.
    pub allocators: Vec<Arc<Allocator>>,
    const_pool: SendAnys,
    func_pool: SendAnys,
    callees: Vec<Callee>,
    instrument: RwLock<Option<ObjectRef>>,
    has_instrument: AtomicBool,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // The pools go with the machine (as the Relay VM's): pooled blocks return to the device
        // now, blocks still held by live storage (returned tensors) when that storage is freed.
        for a in &self.allocators {
            a.close();
        }
    }
}

thread_local! {
    /// The machines running on this thread (innermost last).
    static ACTIVE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// Nested bytecode calls on this thread.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Marks a machine as running on this thread while alive.
pub(crate) struct ActiveGuard(());

impl ActiveGuard {
    /// Marks `rt` running until the guard drops.
    pub(crate) fn enter(rt: &Runtime) -> ActiveGuard {
        ACTIVE.with(|a| a.borrow_mut().push(rt as *const Runtime as usize));
        ActiveGuard(())
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| {
            a.borrow_mut().pop();
        });
    }
}

/// The machine a `%vm` pointer names, if that machine is running on this thread.
///
/// The reference is valid for the duration of the builtin call that received the pointer: the
/// running call holds the machine.
#[inline]
pub(crate) fn from_ctx<'a>(v: &TVMFFIAny, what: &str) -> FfiResult<&'a Runtime> {
    let p = match v.type_index {
        ti::OPAQUE_PTR => v.bits() as usize,
        t => {
            return Err(FfiError::type_error(format!(
                "{what}: the first argument must be the VM context pointer, got {}",
                types::type_key(t)
            )))
        }
    };
    if p == 0 || !ACTIVE.with(|a| a.borrow().iter().rev().any(|&x| x == p)) {
        return Err(FfiError::value(format!(
            "{what}: {p:#x} is not a virtual machine running on this thread (builtins that take the VM \
             are called by the VM's bytecode)"
        )));
    }
    // SAFETY: `p` is the address of a Runtime that a call on this thread's stack holds (it is
    // registered in ACTIVE only for the duration of that call).
    Ok(unsafe { &*(p as *const Runtime) })
}

#[inline]
fn vm_ptr(rt: &Runtime) -> TVMFFIAny {
    TVMFFIAny::with_bits(ti::OPAQUE_PTR, rt as *const Runtime as u64)
}

/// Builds a machine: allocators, constants on the first device, and the function pool (the
/// kernels from `imports`, else globals; closures for the VM functions).
pub fn init(
    exe: Arc<Executable>,
    constants: &[Any],
    imports: &[ObjectRef],
    devices: Vec<(DLDevice, i64)>,
) -> FfiResult<Runtime> {
    if devices.is_empty() {
        return Err(FfiError::value("vm_initialization: at least one device is required"));
    }
    let mut devs = Vec::new();
    let mut allocators = Vec::new();
    for (d, kind) in devices {
        let kind = AllocatorKind::from_code(kind)?;
        allocators.push(Allocator::new(d, kind)?);
        devs.push(d);
    }
    let mut const_pool = Vec::with_capacity(constants.len());
    for c in constants {
        const_pool.push(convert_to_device(c, devs[0])?);
    }
    let mut func_pool = Vec::with_capacity(exe.functions.len());
    let mut callees = Vec::with_capacity(exe.functions.len());
    for (i, f) in exe.functions.iter().enumerate() {
        match f.kind {
            FuncKind::Packed => {
                let mut found = None;
                for m in imports {
                    if let Some(g) = module::get_function(m, &f.name, true)? {
                        found = Some(g);
                        break;
                    }
                }
                let from_imports = found.is_some();
                let g = found.or_else(|| registry::get(&f.name)).ok_or_else(|| {
                    FfiError::runtime(format!(
                        "Error: Cannot find ffi::Function {} in either Relax VM kernel library, or in TVM runtime \
                         ffi::Function registry, or in global Relax functions of the VM executable",
                        f.name
                    ))
                })?;
                let callee = match (function::symbol_of(&g), from_imports) {
                    (Some(sym), _) => Callee::Kernel(sym),
                    (None, false) => super::builtins::native(&f.name, &g).map_or(Callee::Packed, Callee::Native),
                    (None, true) => Callee::Packed,
                };
                func_pool.push(Any::object(g));
                callees.push(callee);
            }
            FuncKind::Vm => {
                func_pool.push(Any::object(make_closure(&f.name, bytecode_impl(i))));
                callees.push(Callee::Bytecode(i));
            }
            FuncKind::VmTir => {
                func_pool.push(Any::object(make_closure(&f.name, vmtir_impl(&exe, i, imports)?)));
                callees.push(Callee::Closure);
            }
        }
    }
    Ok(Runtime {
        exe,
        devices: devs,
        allocators,
        const_pool: SendAnys(const_pool),
        func_pool: SendAnys(func_pool),
        callees,
        instrument: RwLock::new(None),
        has_instrument: AtomicBool::new(false),
    })
}

/// The implementation of a bytecode function's closure: `(vm, args...)`.
fn bytecode_impl(fidx: usize) -> ObjectRef {
    function::from_fn(move |args| {
        let (ctx, rest) = args.split_first().ok_or_else(|| FfiError::value("a VM closure needs the VM argument"))?;
        from_ctx(ctx, "VM closure")?.invoke_bytecode(fidx, rest)
    })
}

/// The implementation of a VM-TIR function's closure: its compiled `__vmtir__<name>` runs over
/// an AnyList register file (arguments first, the result right after them).
fn vmtir_impl(exe: &Executable, fidx: usize, imports: &[ObjectRef]) -> FfiResult<ObjectRef> {
    let f = &exe.functions[fidx];
    let sym = format!("__vmtir__{}", f.name);
    let mut found = None;
    for m in imports {
        if let Some(g) = module::get_function(m, &sym, true)? {
            found = Some(g);
            break;
        }
    }
    let tir = found.ok_or_else(|| {
        FfiError::runtime(format!("Cannot find underlying compiled tirx function of VMTIRFunc {}", f.name))
    })?;
    let (name, num_args, regs) = (f.name.clone(), f.num_args as usize, f.register_file_size as usize);
    if regs < num_args + 1 {
        return Err(FfiError::value(format!("VM-TIR function {name} has {regs} registers for {num_args} arguments")));
    }
    Ok(function::from_fn(move |args| {
        let (ctx, rest) = args.split_first().ok_or_else(|| FfiError::value("a VM closure needs the VM argument"))?;
        let rt = from_ctx(ctx, &name)?;
        if rest.len() != num_args {
            return Err(FfiError::value(format!("Function {name} expects {num_args} arguments")));
        }
        let mut reg_file: Vec<Any> = Vec::with_capacity(regs);
        for a in rest {
            // SAFETY: the caller's arguments are valid views.
            reg_file.push(unsafe { Any::from_view(a) }?);
        }
        reg_file.resize_with(regs, Any::none);
        let call_args = [
            *ctx,
            TVMFFIAny::with_bits(ti::OPAQUE_PTR, reg_file.as_mut_ptr() as u64),
            TVMFFIAny::with_bits(ti::OPAQUE_PTR, rt.const_pool.0.as_ptr() as u64),
            TVMFFIAny::with_bits(ti::OPAQUE_PTR, rt.func_pool.0.as_ptr() as u64),
        ];
        function::call(&tir, &call_args)?;
        Ok(std::mem::take(&mut reg_file[num_args]))
    }))
}

/// `ConvertObjectToDevice`: tensors not on `dev` are copied there, arrays element by element;
/// everything else is kept.
pub(crate) fn convert_to_device(v: &Any, dev: DLDevice) -> FfiResult<Any> {
    let Some(o) = v.as_object() else { return Ok(v.clone()) };
    if o.type_index() == ti::TENSOR {
        // SAFETY: a live tensor.
        let t = unsafe { tvm_runtime_tvm_ffi::tensor::dltensor(o.as_ptr()) };
        if t.device.device_type == dev.device_type && t.device.device_id == dev.device_id {
            return Ok(v.clone());
        }
        return Ok(Any::object(copy_tensor_to(t, dev)?));
    }
    if o.type_index() == ti::ARRAY {
        let items = tvm_runtime_tvm_ffi::containers::array::seq_items(&o)
            .iter()
            .map(|a| convert_to_device(a, dev))
            .collect::<FfiResult<Vec<_>>>()?;
        return Ok(Any::object(tvm_runtime_tvm_ffi::containers::array::make_array(items)));
    }
    Ok(v.clone())
}

pub use tvm_runtime_tvm_ffi::tensor::copy_tensor_to;

/// `ConvertArgToDevice`: like [`convert_to_device`], and a `DLTensor*` is always copied into a
/// tensor of the machine's.
pub(crate) fn convert_arg_to_device(v: &TVMFFIAny, dev: DLDevice) -> FfiResult<Any> {
    if v.type_index == ti::DLTENSOR_PTR {
        let p = v.bits() as *const tvm_runtime_classic::abi::DLTensor;
        // SAFETY: a DLTensor* view points to a valid tensor (or is null).
        let t = unsafe { p.as_ref() }.ok_or_else(|| FfiError::value("a DLTensor* argument is NULL"))?;
        return Ok(Any::object(copy_tensor_to(t, dev)?));
    }
    // SAFETY: the caller's arguments are valid views.
    let a = unsafe { Any::from_view(v) }?;
    convert_to_device(&a, dev)
}

impl Runtime {
    /// The `%vm` value.
    pub fn ctx(&self) -> TVMFFIAny {
        vm_ptr(self)
    }

    /// The pool entry of function `i` (a function or a closure).
    pub(crate) fn pooled_function(&self, i: usize) -> &Any {
        &self.func_pool.0[i]
    }

    /// Sets (or clears) the instrument called around every call instruction.
    pub(crate) fn set_instrument(&self, f: Option<ObjectRef>) {
        self.has_instrument.store(f.is_some(), Ordering::Release);
        *self.instrument.write() = f;
    }

    /// `InvokeClosurePacked`: a function is called with `args`, a closure with the VM first.
    pub fn invoke_closure(&self, callee: &ObjectRef, args: &[TVMFFIAny]) -> FfiResult<Any> {
        if callee.type_index() == ti::FUNCTION {
            return function::call(callee, args);
        }
        let clo = as_closure(callee).ok_or_else(|| {
            FfiError::type_error(format!(
                "Function expects a closure or ffi::Function, got {}",
                types::type_key(callee.type_index())
            ))
        })?;
        let mut all = Vec::with_capacity(args.len() + 1);
        all.push(vm_ptr(self));
        all.extend_from_slice(args);
        function::call(&clo.imp, &all)
    }

    /// `InvokeBytecode`: runs bytecode function `fidx` with views of its arguments.
    #[inline]
    pub(crate) fn invoke_bytecode(&self, fidx: usize, args: &[TVMFFIAny]) -> FfiResult<Any> {
        let f = self.exe.functions.get(fidx).ok_or_else(|| FfiError::index(format!("no function {fidx}")))?;
        if f.kind != FuncKind::Vm {
            return Err(FfiError::value(format!("{} is a {} function, not bytecode", f.name, f.kind.name())));
        }
        if args.len() as i64 != f.num_args {
            let names =
                if f.param_names.is_empty() { String::new() } else { format!(" ({})", f.param_names.join(", ")) };
            return Err(FfiError::value(format!(
                "Invoking function {} expects {} arguments{names}, but {} arguments were provided.",
                f.name,
                f.num_args,
                args.len()
            )));
        }
        let depth = DEPTH.with(|d| d.get());
        if depth >= MAX_DEPTH || tvm_runtime_classic::threading::stack::near_end() {
            return Err(FfiError::new(
                "RecursionError",
                format!(
                    "VM function {}: maximum recursion depth exceeded ({depth} nested VM calls on this thread; \
                     at most {MAX_DEPTH}, and as many as the thread's stack holds)",
                    f.name
                ),
            ));
        }
        DEPTH.with(|d| d.set(depth + 1));
        struct Leave;
        impl Drop for Leave {
            fn drop(&mut self) {
                DEPTH.with(|d| d.set(d.get() - 1));
            }
        }
        let _leave = Leave;
        let mut regs: Vec<Any> = Vec::with_capacity(f.register_file_size as usize);
        for a in args {
            // SAFETY: the caller's arguments are valid views.
            regs.push(unsafe { Any::from_view(a) }?);
        }
        regs.resize_with(f.register_file_size as usize, Any::none);
        self.run(fidx, f.start_instr as usize, &mut regs)
    }

    #[inline]
    fn read(&self, regs: &[Any], r: Reg) -> TVMFFIAny {
        match r {
            Reg::R(i) => *regs[i].raw(),
            Reg::Void => TVMFFIAny::NONE,
            Reg::Vm => vm_ptr(self),
        }
    }

    fn run(&self, fidx: usize, start: usize, regs: &mut [Any]) -> FfiResult<Any> {
        let code = &self.exe.instructions;
        let mut pc = start;
        // Slot 0 holds the VM for closures; packed functions get the rest.
        let mut call_args: Vec<TVMFFIAny> = Vec::with_capacity(8);
        loop {
            // The executable was checked at load: every pc stays inside the function, every
            // register, constant and function index is in range.
            match &code[pc] {
                Instruction::Call { dst, func, args } => {
                    call_args.clear();
                    call_args.push(vm_ptr(self));
                    for a in args {
                        call_args.push(match *a {
                            Arg::Register(r) => self.read(regs, r),
                            Arg::Immediate(v) => TVMFFIAny::with_bits(ti::INT, v as u64),
                            Arg::ConstIdx(c) => *self.const_pool.0[c].raw(),
                            Arg::FuncIdx(g) => *self.func_pool.0[g].raw(),
                        });
                    }
                    let ret = if self.has_instrument.load(Ordering::Acquire) {
                        self.call_instrumented(*func, &call_args)
                    } else {
                        self.call_pooled(*func, &call_args)
                    }
                    .map_err(|e| self.locate(e, fidx, pc, *func))?;
                    if let Reg::R(i) = dst {
                        regs[*i] = ret;
                    }
                    pc += 1;
                }
                Instruction::Ret { result } => {
                    return Ok(match *result {
                        Reg::R(i) => std::mem::take(&mut regs[i]),
                        Reg::Void => Any::none(),
                        Reg::Vm => Any::opaque_ptr(self as *const Runtime as *mut c_void),
                    });
                }
                Instruction::Goto { offset } => pc = (pc as i64 + offset) as usize,
                Instruction::If { cond, false_offset } => {
                    let c = self.read(regs, *cond);
                    let v = tvm_runtime_tvm_ffi::any::view_as_i64(&c).ok_or_else(|| {
                        FfiError::type_error(format!(
                            "VM function {}: the If condition {cond} holds {}, not an integer",
                            self.exe.functions[fidx].name,
                            types::type_key(c.type_index)
                        ))
                    })?;
                    pc = if v != 0 { pc + 1 } else { (pc as i64 + false_offset) as usize };
                }
            }
        }
    }

    /// Errors of the VM's own making name the function and instruction; a callee's error is
    /// passed through as it is (its message is the callee's).
    fn locate(&self, e: FfiError, _fidx: usize, _pc: usize, _func: usize) -> FfiError {
        e
    }

    /// Calls pool entry `func` with `call_args` (slot 0 is the VM).
    #[inline]
    fn call_pooled(&self, func: usize, call_args: &[TVMFFIAny]) -> FfiResult<Any> {
        match self.callees[func] {
            Callee::Packed => {
                let f = self.func_pool.0[func].raw().obj_ptr();
                // SAFETY: packed entries are live function objects the pool holds; the views
                // point into registers, constants and pools that outlive the call.
                unsafe { function::call_raw(f, &call_args[1..]) }
            }
            Callee::Kernel(sym) => {
                let args = &call_args[1..];
                let mut out = TVMFFIAny::NONE;
                // SAFETY: the pool holds the function object that keeps the symbol's library
                // loaded; a kernel takes views and writes an owned value, with a NULL self handle
                // as TVM's library module passes.
                let rc = unsafe { sym(std::ptr::null_mut(), args.as_ptr(), args.len() as i32, &mut out) };
                if rc != 0 {
                    return Err(FfiError::take_raised(rc));
                }
                // SAFETY: on success the kernel wrote an owned value.
                Ok(unsafe { Any::from_raw(out) })
            }
            Callee::Native(f) => f(&call_args[1..]),
            Callee::Bytecode(i) => self.invoke_bytecode(i, &call_args[1..]),
            Callee::Closure => {
                let o = self.func_pool.0[func].as_object().expect("closure entries are objects");
                let clo = as_closure(&o).expect("closure entries are closures");
                function::call(&clo.imp, call_args)
            }
        }
    }

    /// The call with the instrument around it: `instrument(func, name, before, ret, args...)`
    /// before and after; a `kSkipRun` answer skips the call. Data-type arguments reach the
    /// instrument as strings, as in TVM.
    fn call_instrumented(&self, func: usize, call_args: &[TVMFFIAny]) -> FfiResult<Any> {
        let Some(instr) = self.instrument.read().clone() else { return self.call_pooled(func, call_args) };
        let name = Any::string(&self.exe.functions[func].name);
        let mut keep = Vec::new();
        let mut iargs = vec![*self.func_pool.0[func].raw(), *name.raw(), *Any::bool(true).raw(), TVMFFIAny::NONE];
        for a in &call_args[1..] {
            if a.type_index == ti::DATA_TYPE {
                // SAFETY: the union is read as the variant the type index names.
                let s = Any::string(&tvm_runtime_tvm_ffi::dtype::format(unsafe { a.v.v_dtype })?);
                iargs.push(*s.raw());
                keep.push(s);
            } else {
                iargs.push(*a);
            }
        }
        let rv = function::call(&instr, &iargs)?;
        if rv.as_i64() == Some(INSTRUMENT_SKIP_RUN) {
            return Ok(Any::none());
        }
        let ret = self.call_pooled(func, call_args)?;
        iargs[2] = *Any::bool(false).raw();
        iargs[3] = *ret.raw();
        function::call(&instr, &iargs)?;
        Ok(ret)
    }
}
