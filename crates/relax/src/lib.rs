//! TVM v0.22-v0.27 (Relax) exports: the parsers the Relax VM stands on.
//!
//! - [`format`]: `__tvm_ffi__library_bin`, the module tree a v0.22+ shared library carries (which
//!   modules, of which kind, importing which);
//! - [`executable`]: the `relax.VMExecutable` module's bytes (function table, constants,
//!   bytecode), checked at load so that an interpreter never meets a bad index;
//! - [`text`]: its `as_text` and `stats` strings, as TVM prints them.
//!
//! - [`vm`]: the interpreter, over tvm-ffi objects ([`objects`]: storage and closures);
//! - [`builtins`]: the `vm.builtin.*` globals the compiler emits; [`kv_cache`] and [`sampling`]:
//!   those TVM offers language models (`lm_support.cc`); [`kv`]: the paged KV cache and the RNN
//!   state of LLMs and state-space models (`vm.builtin.kv_state_*` & co.); [`tensor_cache`]: weights from a
//!   `tensor-cache.json` folder; [`py_func`]: host functions for `R.call_py_func`;
//! - [`vm_module`]: the `relax.VMExecutable` and `relax.VirtualMachine` modules and the loader
//!   `ffi.Module.load_from_bytes.relax.VMExecutable` that `__tvm_ffi__library_bin` calls.
//!
//! The parsers are pure, safe Rust over byte slices.

#![warn(unreachable_pub)]

pub mod builtins;
pub mod classic;
pub mod executable;
/// `__tvm_ffi__library_bin`, now part of the core: [`tvm_runtime_classic::module::library_bin`].
pub use tvm_runtime_classic::module::library_bin as format;
pub mod kv;
pub(crate) mod kv_cache;
pub mod objects;
pub(crate) mod py_func;
pub mod sampling;
pub mod tensor_cache;
pub mod text;
pub mod vm;
pub mod vm_module;

/// Adds the Relax VM's globals to the tvm-ffi registry.
pub fn register(b: &mut tvm_runtime_tvm_ffi::registry::Builder) {
    builtins::register(b);
    kv_cache::register(b);
    kv::register(b);
    sampling::register(b);
    tensor_cache::register(b);
    py_func::register(b);
    vm_module::register(b);
}

#[cfg(test)]
mod tests;

/// The unit tests of this crate run with its globals, the tvm-ffi crate's and the classic
/// crate's installed, as the library's face installs them when it loads.
#[cfg(test)]
#[used]
#[link_section = ".init_array"]
static INSTALL_FOR_TESTS: extern "C" fn() = {
    extern "C" fn run() {
        fn classic(r: &mut tvm_runtime_classic::registry::Registrar<'_>) {
            tvm_runtime_classic::globals::register_builtins(r);
            classic::register(r);
        }
        fn tvm_ffi(b: &mut tvm_runtime_tvm_ffi::registry::Builder) {
            tvm_runtime_tvm_ffi::globals::register_all(b);
            register(b);
        }
        tvm_runtime_classic::registry::install_builtins(classic);
        tvm_runtime_tvm_ffi::registry::install_builtins(tvm_ffi);
    }
    run
};
