//! The Relay virtual machine of TVM v0.8 (`src/runtime/vm/`): executables made
//! by `relay.vm.compile` (one `.so` from `exe.mod.export_library`, or `exe.save()`'s bytecode
//! plus the kernel library), and the VirtualMachine that runs them, with dynamic shapes,
//! control flow and ADT results.
//!
//! - [`bytecode`]: the instructions, their serialized fields and text form;
//! - [`executable`]: the serialized executable, read with everything checked, and written back;
//! - [`text`]: `get_bytecode`, `get_constants`, `get_stats`;
//! - [`memory`]: naive and pooled allocators, `vm.Storage` objects;
//! - [`interpreter`]: frames, registers and the opcodes;
//! - [`profiler`]: the profiling VM's report;
//! - [`module`]: the `VMExecutable` and `VirtualMachine` modules and their functions.

pub mod bytecode;
pub mod executable;
pub mod interpreter;
pub mod memory;
pub mod module;
pub mod profiler;
pub mod text;

use crate::error::{Error, Result};
use crate::io::Reader;
use crate::module::Module;
use crate::registry::Registrar;
use crate::value::{Args, Value};
use executable::Executable;
use module::{executable_of, ExecutableModule, VirtualMachine};

/// Reads the one length-prefixed string of a blob entry or file and loads it.
fn load_framed(r: &mut Reader<'_>) -> Result<Module> {
    let code = r.str_bytes().map_err(|e| e.context("VMExecutable: the executable's bytes"))?;
    Ok(Module::new(ExecutableModule::new(Executable::load(code)?)))
}

fn index_arg(a: &Args<'_>, n: usize, what: &str) -> Result<usize> {
    let i = a.i64(1)?;
    usize::try_from(i)
        .ok()
        .filter(|&i| i < n)
        .ok_or_else(|| Error::index(format!("{what} index {i} out of range ({n})")))
}

/// Registers the VM globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.module.loadbinary_VMExecutable", |a| {
        a.expect_at_least("runtime.module.loadbinary_VMExecutable", 1)?;
        crate::module::blob::with_stream(a.handle(0)?, |s| load_framed(s.reader())).map(Value::Module)
    });
    r.func("runtime.module.loadfile_VMExecutable", |a| {
        a.expect_at_least("runtime.module.loadfile_VMExecutable", 1)?;
        let path = a.string(0)?;
        let bytes = std::fs::read(&path).map_err(|e| Error::value(format!("cannot read {path}: {e}")))?;
        let mut r = Reader::new(&bytes, "VMExecutable file");
        let m = load_framed(&mut r)?;
        if r.remaining() != 0 {
            return Err(Error::value(format!("{path}: {} unexpected bytes after the executable", r.remaining())));
        }
        Ok(Value::Module(m))
    });
    r.func("runtime.Load_Executable", |a| {
        a.expect_len("runtime.Load_Executable", 2)?;
        let code = a.bytes(0)?;
        let lib = a.module(1)?.ok_or_else(|| Error::value("the provided library can not be null"))?;
        let m = Module::new(ExecutableModule::new(Executable::load(&code)?));
        m.import(lib)?;
        Ok(Value::Module(m))
    });
    r.func("runtime.GetNumOfGlobals", |a| {
        let m = a.module(0)?.ok_or_else(|| Error::value("expected a VMExecutable module"))?;
        Ok(Value::Int(executable_of(&m)?.executable().globals.len() as i64))
    });
    r.func("runtime.GetGlobalFields", |a| {
        let m = a.module(0)?.ok_or_else(|| Error::value("expected a VMExecutable module"))?;
        let e = executable_of(&m)?.executable();
        Ok(Value::str(e.globals[index_arg(a, e.globals.len(), "global")?].clone()))
    });
    r.func("runtime.GetNumOfPrimitives", |a| {
        let m = a.module(0)?.ok_or_else(|| Error::value("expected a VMExecutable module"))?;
        Ok(Value::Int(executable_of(&m)?.executable().primitives.len() as i64))
    });
    r.func("runtime.GetPrimitiveFields", |a| {
        let m = a.module(0)?.ok_or_else(|| Error::value("expected a VMExecutable module"))?;
        let e = executable_of(&m)?.executable();
        Ok(Value::str(e.primitives[index_arg(a, e.primitives.len(), "primitive")?].clone()))
    });
    r.func("runtime._VirtualMachine", |a| {
        let m = a.module(0)?.ok_or_else(|| Error::value("The virtual machine executable has not been defined yet."))?;
        Ok(Value::Module(Module::new(VirtualMachine::new(&m, false)?)))
    });
    r.func("runtime._VirtualMachineDebug", |a| {
        let m = a.module(0)?.ok_or_else(|| Error::value("The virtual machine executable has not been defined yet."))?;
        Ok(Value::Module(Module::new(VirtualMachine::new(&m, true)?)))
    });
}
