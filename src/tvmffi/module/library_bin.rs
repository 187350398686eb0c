//! `__tvm_ffi__library_bin`: modules embedded in a shared library and their import tree.
//!
//! Layout (little endian): `<nbytes: u64>` then `nbytes` bytes holding
//! `<indptr: vec<u64>> <child_indices: vec<u64>>` (the import tree, CSR) and, per module,
//! `<kind: str>` followed by `<bytes: str>` unless the kind is `_lib` (the library's own module).
//! A `vec` or `str` is a u64 count and the items. Modules of other kinds are made by the global
//! `ffi.Module.load_from_bytes.<kind>`.

use super::super::any::Any;
use super::super::object::ObjectRef;
use super::super::{registry, FfiError, FfiResult};
use super::{imports, payload, set_imports};

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn bad() -> FfiError {
        FfiError::runtime("__tvm_ffi__library_bin is truncated or malformed")
    }
    fn bytes(&mut self, n: usize) -> FfiResult<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(Self::bad)?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u64(&mut self) -> FfiResult<u64> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().expect("8 bytes")))
    }
    fn count(&mut self) -> FfiResult<usize> {
        usize::try_from(self.u64()?).map_err(|_| Self::bad())
    }
    fn vec(&mut self) -> FfiResult<Vec<u64>> {
        let n = self.count()?;
        if n > self.data.len() / 8 {
            return Err(Self::bad());
        }
        (0..n).map(|_| self.u64()).collect()
    }
    fn str(&mut self) -> FfiResult<&[u8]> {
        let n = self.count()?;
        self.bytes(n)
    }
}

/// Builds the module tree of a library binary; `lib_mod` is the library's own module.
///
/// # Safety
/// `bin` points to a library binary: 8 bytes of length, then that many bytes.
pub unsafe fn process(bin: *const u8, lib_mod: ObjectRef) -> FfiResult<ObjectRef> {
    // SAFETY: by contract.
    let data = unsafe {
        let n = u64::from_le_bytes(std::ptr::read_unaligned(bin.cast::<[u8; 8]>()));
        let n = usize::try_from(n).map_err(|_| Reader::bad())?;
        std::slice::from_raw_parts(bin.add(8), n)
    };
    parse(data, lib_mod)
}

fn parse(data: &[u8], lib_mod: ObjectRef) -> FfiResult<ObjectRef> {
    let mut r = Reader { data, pos: 0 };
    let indptr = r.vec()?;
    let children = r.vec()?;
    let n = indptr.len().checked_sub(1).ok_or_else(Reader::bad)?;
    let mut modules = Vec::with_capacity(n);
    for _ in 0..n {
        let kind = String::from_utf8_lossy(r.str()?).into_owned();
        if kind == "_lib" {
            modules.push(lib_mod.clone());
            continue;
        }
        let bytes = r.str()?;
        let loader_key = format!("ffi.Module.load_from_bytes.{kind}");
        let Some(loader) = registry::get(&loader_key) else {
            // Device modules (OpenCL, CUDA) come from the classic runtime's loaders.
            if let Some(m) = super::super::classic_bridge::load_from_bytes(&kind, bytes) {
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
    for (i, m) in modules.iter().enumerate() {
        let (lo, hi) = (indptr[i] as usize, indptr[i + 1] as usize);
        if lo > hi || hi > children.len() {
            return Err(Reader::bad());
        }
        let mut items = imports(m)?;
        for &c in &children[lo..hi] {
            items.push(modules.get(c as usize).ok_or_else(Reader::bad)?.clone());
        }
        let p = payload(m)?;
        let mut st = p.state.lock();
        set_imports(p, &mut st, items);
    }
    modules.into_iter().next().ok_or_else(Reader::bad)
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
        let e = parse(&c, lib).unwrap_err();
        assert!(e.message().contains("ffi.Module.load_from_bytes.foo"), "{}", e.message());
    }
}
