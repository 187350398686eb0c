//! The loaders of device code in a TVM v0.20+ library binary (`opencl`, `cuda` entries of
//! `__tvm_ffi__library_bin`): the format, the function map with `arg_extra_tags`, the code, as
//! [`crate::device::kernel::read_payload_tagged`] reads them. The GPU back ends are crates above
//! this one: the library's face installs their loaders here when it loads, and the tvm-ffi
//! module loader finds them by kind. A kind nothing installed has no loader.

use super::Module;
use crate::device::kernel::FunctionMap;
use crate::error::Result;
use parking_lot::RwLock;

/// Makes a module of one kind from its format, function map and code.
pub type Loader = fn(fmt: String, fmap: FunctionMap, code: Vec<u8>) -> Result<Module>;

static LOADERS: RwLock<Vec<(&'static str, Loader)>> = RwLock::new(Vec::new());

/// Installs the loader of `kind` (a later install of the same kind replaces it).
pub fn install(kind: &'static str, load: Loader) {
    let mut l = LOADERS.write();
    l.retain(|(k, _)| *k != kind);
    l.push((kind, load));
}

/// The loader installed for `kind`.
pub fn loader(kind: &str) -> Option<Loader> {
    LOADERS.read().iter().find(|(k, _)| *k == kind).map(|(_, f)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn loaders_are_found_by_kind_once_installed() {
        fn refuse(fmt: String, fmap: FunctionMap, code: Vec<u8>) -> Result<Module> {
            Err(Error::value(format!("{fmt} {} {}", fmap.len(), code.len())))
        }
        assert!(loader("mtest_kind").is_none());
        install("mtest_kind", refuse);
        install("mtest_kind", refuse);
        let load = loader("mtest_kind").unwrap();
        let e = load("ptx".into(), FunctionMap::new(), vec![1, 2]).err().unwrap();
        assert_eq!(e.to_string(), "ValueError: ptx 0 2");
        assert_eq!(LOADERS.read().iter().filter(|(k, _)| *k == "mtest_kind").count(), 1);
    }
}
