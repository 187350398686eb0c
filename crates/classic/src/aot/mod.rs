//! Ahead-of-time compiled models (TVM v0.9-v0.19): the AOT executor, its factory and the
//! metadata module, as `relay.build(..., executor=Executor("aot"))` + `export_library` writes
//! them: a blob of `AotExecutorFactory` importing `metadata_module` importing the library
//! (`_lib`), whose `get_c_metadata()` describes the model's main function
//! `<mod_name>___tvm_main__`.

pub mod executor;
pub mod factory;
pub mod metadata;

pub use executor::AotExecutor;
pub use factory::AotExecutorFactory;
pub use metadata::{Metadata, MetadataModule};

use crate::error::Result;
use crate::module::{blob, Module};
use crate::registry::Registrar;
use crate::value::{Args, Value};

fn load_factory(a: &Args<'_>) -> Result<Value> {
    let f = blob::with_stream(a.handle(0)?, |s| AotExecutorFactory::load(s.reader()))?;
    Ok(Value::Module(Module::new(f)))
}

/// Registers the AOT globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.module.loadbinary_AotExecutorFactory", load_factory);
    // The metadata module serializes nothing: its loader reads no bytes.
    r.func("runtime.module.loadbinary_metadata_module", |_| Ok(Value::Module(Module::new(MetadataModule::default()))));
    r.func("tvm.aot_executor_factory.create", factory::create_global);
    r.func("runtime.SanitizeName", |a| {
        a.expect_len("runtime.SanitizeName", 1)?;
        Ok(Value::str(executor::sanitize_name(&a.string(0)?)?))
    });
}
