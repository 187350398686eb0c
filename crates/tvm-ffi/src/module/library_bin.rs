//! `__tvm_ffi__library_bin`: modules embedded in a shared library and their import tree.
//!
//! The format and its checks are the core's ([`tvm_runtime_core::formats::library_bin`], the one parser,
//! fuzzed); this builds the modules: `_lib` is the library's own module, any other kind is made
//! by the global `ffi.Module.load_from_bytes.<kind>` (device kinds by the classic loaders).

use super::super::any::Any;
use super::super::object::ObjectRef;
use super::super::{registry, FfiError, FfiResult};
use super::{imports, payload, set_imports};
use tvm_runtime_core::formats::library_bin::LibraryBin;

/// Builds the module tree of a library binary; `lib_mod` is the library's own module.
///
/// # Safety
/// `bin` points to a library binary: 8 bytes of length, then that many bytes.
pub unsafe fn process(bin: *const u8, lib_mod: ObjectRef) -> FfiResult<ObjectRef> {
    // SAFETY: the caller passes the start of the symbol, whose first 8 bytes are the length of
    // the tree that follows it (TVM's writer and `__tvm_ffi__library_bin`'s definition).
    let data = unsafe {
        let n = u64::from_le_bytes(std::ptr::read_unaligned(bin.cast::<[u8; 8]>()));
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= isize::MAX as usize - 8)
            .ok_or_else(|| FfiError::runtime("__tvm_ffi__library_bin: its size header is impossible"))?;
        std::slice::from_raw_parts(bin.add(8), n)
    };
    parse(data, lib_mod)
}

fn parse(data: &[u8], lib_mod: ObjectRef) -> FfiResult<ObjectRef> {
    let tree = LibraryBin::parse_tree(data)?;
    let mut modules = Vec::with_capacity(tree.modules.len());
    for entry in &tree.modules {
        let Some(bytes) = entry.payload else {
            modules.push(lib_mod.clone());
            continue;
        };
        let kind = entry.kind;
        let loader_key = format!("ffi.Module.load_from_bytes.{kind}");
        let Some(loader) = registry::get(&loader_key) else {
            // Device modules (OpenCL, CUDA) come from the classic runtime's loaders.
            if let Some(m) = super::super::classic_bridge::load_from_bytes(kind, bytes) {
                modules.push(m?);
                continue;
            }
            return Err(FfiError::runtime(format!(
                "Library binary was created using {{{kind}}} but a loader of that name is not registered. \
                 Make sure to have runtime that registers {loader_key}"
            )));
        };
        let m = super::super::function::call_any(&loader, &[Any::bytes(bytes)])?;
        modules
            .push(m.into_object().map_err(|_| FfiError::type_error(format!("{loader_key} did not return a module")))?);
    }
    for (m, entry) in modules.iter().zip(&tree.modules) {
        let mut items = imports(m)?;
        items.extend(entry.imports.iter().map(|&c| modules[c].clone()));
        let p = payload(m)?;
        let mut st = p.state.lock();
        set_imports(p, &mut st, items);
    }
    // The tree has at least one module (LibraryBin::parse_tree refuses an empty one).
    Ok(modules.swap_remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_vec(out: &mut Vec<u8>, v: &[u64]) {
        out.extend((v.len() as u64).to_le_bytes());
        v.iter().for_each(|x| out.extend(x.to_le_bytes()));
    }

    #[test]
    fn a_lib_only_tree_is_the_library_module_and_garbage_is_an_error() {
        let lib = super::super::make_module(None);
        let mut b = Vec::new();
        put_vec(&mut b, &[0, 0]);
        put_vec(&mut b, &[]);
        b.extend(4u64.to_le_bytes());
        b.extend(b"_lib");
        assert!(parse(&b, lib.clone()).unwrap().same_as(&lib));
        assert!(parse(&b[..b.len() - 2], lib.clone()).is_err());
        let mut c = Vec::new();
        put_vec(&mut c, &[0, 0]);
        put_vec(&mut c, &[]);
        c.extend(3u64.to_le_bytes());
        c.extend(b"foo");
        c.extend(1u64.to_le_bytes());
        c.push(0);
        let e = parse(&c, lib.clone()).unwrap_err();
        assert!(e.message().contains("ffi.Module.load_from_bytes.foo"), "{}", e.message());
        // A cycle (which would make every lookup through the imports recurse forever) is
        // refused before any module is made.
        let mut d = Vec::new();
        put_vec(&mut d, &[0, 1, 2]);
        put_vec(&mut d, &[1, 0]);
        d.extend(4u64.to_le_bytes());
        d.extend(b"_lib");
        d.extend(3u64.to_le_bytes());
        d.extend(b"foo");
        d.extend(1u64.to_le_bytes());
        d.push(0);
        let e = parse(&d, lib).unwrap_err();
        assert!(e.message().contains("cycle"), "{}", e.message());
    }
}
