//! One runtime for every classic TVM release (v0.8-v0.19): the globals that later releases
//! added and that runtime-only clients or exported modules call, the module property masks,
//! and what changed between releases (module kinds are named by `module::kinds`, device
//! numbers by `device::names`).
//!
//! What changed from v0.8 to v0.19 for exports and runtime-only clients, and where this
//! runtime handles it (the README's compatibility table summarises the same):
//!
//! | change (release) | where |
//! |---|---|
//! | `TVMAPISetLastPythonError`, `TVMGetLastPythonError`, `TVMDropLastPythonError`, `TVMGetLastBacktrace`, `TVMThrowLastError` (v0.14) | `tvm_runtime::classic_api::error_api`, `crate::error` |
//! | `TVMBackendRegisterEnvCAPI` gets `Py_IncRef`, `Py_DecRef`, `PyGILState_*` (v0.14) | `crate::backend_env` |
//! | `kTVMArgBool = 15` (v0.18; v0.8's `kTVMExtBegin`) | `crate::value::code::BOOL` |
//! | `runtime.TVMArrayAllocWithScope(ShapeTuple, dtype, dev, scope)` (v0.9; v0.8 passed a pointer and ndim) | `crate::globals::device` |
//! | `runtime.RPCTimeEvaluator` with 10 (v0.9), 11 (v0.10) and 12 (v0.14) arguments (v0.8: 8) | `crate::executor::time_eval` |
//! | `runtime.SystemLib(prefix)` (v0.12) | `crate::module::system_lib` |
//! | graph executor: `get_input_info`, `get_output_info`, `get_output(name)`, `name:i` output keys; factory `get_graph_params`; debug `run_individual` in bytes, `run_individual_node`, `debug_get_output(node)` (v0.9-v0.12) | `crate::executor::graph` |
//! | AOT executor, `AotExecutorFactory`, `metadata_module` (v0.9) | `crate::aot` |
//! | `runtime.Array` / `runtime.Map` take strings (v0.9) | `crate::globals::containers` |
//! | `runtime.ModuleGetPropertyMask`, `ModuleImplementsFunction`, `ModuleGetFormat`, `ModuleClearImports`, `ModuleGetFunction`, `NumThreads`, `SaveParamsToFile`, `LoadParamsFromFile`, `TVMArrayCreateView`, `ModuleLoadStaticLibrary`, `loadbinary_static_library` (v0.9-v0.15) | here |
//! | `const_loader` / `metadata` (BYOC constants) | `crate::byoc` (another subsystem) |
//!
//! Object type indices: 0-6 (`runtime.Object` .. `runtime.ShapeTuple`) are the same in every
//! release; from 7 on releases differ (v0.8: Closure 7, ADT 8; v0.18: PackedFunc 7, DiscoDRef
//! 8, RPCObjectRef 9, Closure 10, ADT 11). Every Python package of v0.8-v0.19 resolves types
//! by key (`TVMObjectTypeKey2Index`), never by number, so this runtime keeps v0.8's numbers
//! (which C++ code compiled against v0.8's headers has built in) and registers the later
//! releases' keys as dynamic types.

pub mod modules;

use crate::registry::Registrar;

/// Registers the globals of later releases.
pub fn register(r: &mut Registrar<'_>) {
    modules::register(r);
    for (key, parent) in [
        ("runtime.PackedFunc", "runtime.Object"),
        ("runtime.disco.DRef", "runtime.Object"),
        ("runtime.RPCObjectRef", "runtime.Object"),
    ] {
        crate::object::register_type(key, parent);
    }
}
