//! Module globals that belong to the loaders: `runtime.module.loadfile_so`, `runtime.SystemLib`,
//! the blob-stream functions of the loader protocol (see [`super::blob`]) and
//! `runtime.ModuleFromFunctions`. (`runtime.ModuleLoadFromFile`, `ModuleGetImport`, ... live
//! in `crate::globals::library`.)

use super::{blob, dso, system_lib, FunctionModule, Module};
use crate::error::{Error, Result};
use crate::registry::Registrar;
use crate::value::{Args, Value};

fn byte_count(a: &Args<'_>, i: usize) -> Result<usize> {
    let n = a.i64(i)?;
    usize::try_from(n).map_err(|_| Error::value(format!("byte count {n} is negative")))
}

/// Registers the globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.module.loadfile_so", |a| {
        a.expect_at_least("runtime.module.loadfile_so", 1)?;
        Ok(Value::Module(dso::load(&a.string(0)?)?))
    });
    // `runtime.SystemLib()` (v0.8) or `runtime.SystemLib(prefix)` (v0.13+).
    r.func("runtime.SystemLib", |a| {
        let prefix = if a.is_empty() { String::new() } else { a.string(0)? };
        Ok(Value::Module(system_lib::system_lib_prefixed(&prefix)?))
    });
    r.func("runtime.module.blob_stream_read", |a| {
        a.expect_len("runtime.module.blob_stream_read", 2)?;
        let n = byte_count(a, 1)?;
        blob::with_stream(a.handle(0)?, |s| Ok(Value::bytes(s.read_bytes(n)?.to_vec())))
    });
    r.func("runtime.module.blob_stream_skip", |a| {
        a.expect_len("runtime.module.blob_stream_skip", 2)?;
        let n = byte_count(a, 1)?;
        blob::with_stream(a.handle(0)?, |s| s.read_bytes(n).map(|_| Value::Null))
    });
    r.func("runtime.ModuleFromFunctions", |a| {
        a.expect_at_least("runtime.ModuleFromFunctions", 1)?;
        let type_key = a.string(0)?;
        if a.len() % 2 != 1 {
            return Err(Error::value(
                "runtime.ModuleFromFunctions expects a type key followed by (name, function) pairs",
            ));
        }
        let mut m = FunctionModule::new(type_key);
        for i in (1..a.len()).step_by(2) {
            let f = a.func(i + 1)?.ok_or_else(|| Error::value(format!("argument {}: function is None", i + 1)))?;
            m.add(a.string(i)?, f);
        }
        Ok(Value::Module(Module::new(m)))
    });
}
