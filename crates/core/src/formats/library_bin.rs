//! `__tvm_ffi__library_bin`: the serialized module tree of a TVM v0.22+ export.
//!
//! # Where it lives
//!
//! `export_library` of TVM v0.22 and later (tvm-ffi's module system) links into the shared library
//! a read-only data symbol `__tvm_ffi__library_bin` (v0.21 spelled it `__tvm_ffi_library_bin`,
//! one underscore; v0.20 and earlier carried `__tvm_dev_mblob` of the classic runtime, which
//! the classic crate's `module::blob` reads). When present, tvm-ffi's `CreateLibraryModule` rebuilds the module
//! tree from it; without it the library is one plain library module. A system library embeds the
//! same bytes and hands them over at start-up instead.
//!
//! Beside it a library carries its kernels as `__tvm_ffi_<name>` functions
//! ([`FUNCTION_PREFIX`]), and only the runtime slots its kernels use ([`CONTEXT_SYMBOLS`]), plus
//! `__tvm_ffi__library_ctx` when a kernel looks functions up through the module's imports: of the
//! v0.27 fixtures, `mlp_dyn` has the two workspace slots, `topk` (whose kernels call
//! `tvm.contrib.sort.*`) `__TVMFFIFunctionCall`, `__TVMFFIEnvModLookupFromImports`,
//! `__TVMFFIHandleInitOnce` and the context, the others none.
//!
//! # Layout
//!
//! Every number is little-endian; a `str` is a u64 byte count then the bytes (no terminator); a
//! `vec<u64>` is a u64 count then the values.
//!
//! ```text
//! nbytes        u64                 bytes that follow (the symbol is 8 + nbytes long)
//! indptr        vec<u64>            import tree, CSR row pointers: one per module, plus one
//! children      vec<u64>            import tree, CSR column indices (module indices)
//! then for each of the len(indptr) - 1 modules, in index order:
//!   kind        str                 "_lib", or the module's kind, e.g. "relax.VMExecutable"
//!   payload     str                 only when kind != "_lib": what the module's SaveToBytes gave
//! ```
//!
//! Module `i` imports `children[indptr[i]..indptr[i + 1]]`, in that order. Module 0 is the root
//! that loading returns. `"_lib"` marks where the shared library itself (its `__tvm_ffi_<name>`
//! kernels) sits in the tree: TVM's serializer merges every compiled-in module into that one
//! slot. Any other kind is rebuilt by the global function `ffi.Module.load_from_bytes.<kind>`
//! (v0.27 registers it for `relax.VMExecutable`, and the device runtimes for their kinds, e.g.
//! `cuda`, `opencl`, `metal`, `vulkan`).
//!
//! A v0.27 Relax export holds two modules: `relax.VMExecutable` at index 0 (the root) importing
//! the `_lib` at index 1, i.e. `indptr = [0, 1, 1]`, `children = [1]`.
//!
//! # Checks
//!
//! TVM's reader trusts the bytes beyond a bounds check per read. [`LibraryBin::parse`] also
//! refuses what TVM's writer never produces and what would make the tree unsound: a length
//! past the end, an empty tree, row pointers that do not start at 0 or disagree with the child
//! count, more than one `_lib`, an empty or non-UTF-8 kind, bytes left over after the last
//! module, and every import tree [`super::import_tree::check`] refuses (indices out of range,
//! cycles, modules nobody imports, chains too deep), the same checks as the classic blob's.

use crate::error::{Error, Result};
use crate::io::{Reader, Writer};

/// The symbol that holds the serialized tree (tvm-ffi 0.1, TVM v0.22 and later).
pub const LIBRARY_BIN_SYMBOL: &str = "__tvm_ffi__library_bin";
/// The symbol tvm-ffi points at the library module (`void*`, written on load).
pub const LIBRARY_CTX_SYMBOL: &str = "__tvm_ffi__library_ctx";
/// The kind that stands for the shared library itself.
pub const LIB_KIND: &str = "_lib";
/// The kind of a Relax VM executable.
pub const VM_EXECUTABLE_KIND: &str = "relax.VMExecutable";

/// One module of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleEntry<'a> {
    /// `_lib` or the module kind.
    pub kind: &'a str,
    /// The module's serialized bytes (`None` for `_lib`).
    pub payload: Option<&'a [u8]>,
    /// Indices of the modules it imports, in import order.
    pub imports: Vec<usize>,
}

impl ModuleEntry<'_> {
    /// Whether this is the placeholder for the shared library.
    pub(crate) fn is_lib(&self) -> bool {
        self.payload.is_none()
    }
}

/// A parsed `__tvm_ffi__library_bin`: the modules (views into the input) and their imports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryBin<'a> {
    /// The modules by index; index 0 is the root.
    pub modules: Vec<ModuleEntry<'a>>,
}

fn bad(detail: impl std::fmt::Display) -> Error {
    Error::value(format!("invalid {LIBRARY_BIN_SYMBOL}: {detail}"))
}

impl<'a> LibraryBin<'a> {
    /// Parses the symbol's bytes: the u64 size then the tree. `symbol` may run past the end of
    /// the tree (a caller that only knows where the symbol starts may pass more); it must hold
    /// all of it.
    pub fn parse(symbol: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(symbol, LIBRARY_BIN_SYMBOL);
        let nbytes = r.u64().map_err(|e| e.context("the size header"))?;
        let n = usize::try_from(nbytes)
            .ok()
            .filter(|&n| n <= r.remaining())
            .ok_or_else(|| bad(format!("the size header says {nbytes} bytes, only {} follow", r.remaining())))?;
        Self::parse_tree(&symbol[8..8 + n])
    }

    /// Parses the tree alone (what follows the size header; exactly `nbytes` long).
    pub fn parse_tree(tree: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(tree, LIBRARY_BIN_SYMBOL);
        let indptr = r.vec_u64().map_err(|e| e.context("the import tree's row pointers"))?;
        let children = r.vec_u64().map_err(|e| e.context("the import tree's child indices"))?;
        if indptr.len() < 2 {
            return Err(bad(format!("the import tree has {} row pointers, a tree needs at least 2", indptr.len())));
        }
        let count = indptr.len() - 1;
        if indptr[0] != 0 {
            return Err(bad(format!("the import tree's first row pointer is {}, expected 0", indptr[0])));
        }
        if indptr[count] != children.len() as u64 {
            return Err(bad(format!(
                "the import tree's last row pointer is {}, but there are {} child indices",
                indptr[count],
                children.len()
            )));
        }
        // Every module needs at least its kind (8 bytes): bound the count before allocating.
        if count > r.remaining() / 8 {
            return Err(bad(format!("{count} modules cannot fit in the {} bytes left", r.remaining())));
        }
        let mut modules = Vec::with_capacity(count);
        let mut lib_at = None;
        for i in 0..count {
            let kind_bytes = r.str_bytes().map_err(|e| e.context(format!("module {i}'s kind")))?;
            let kind = std::str::from_utf8(kind_bytes).map_err(|_| bad(format!("module {i}'s kind is not UTF-8")))?;
            if kind.is_empty() {
                return Err(bad(format!("module {i}'s kind is empty")));
            }
            let payload = if kind == LIB_KIND {
                if let Some(j) = lib_at.replace(i) {
                    return Err(bad(format!("modules {j} and {i} are both {LIB_KIND}")));
                }
                None
            } else {
                Some(r.str_bytes().map_err(|e| e.context(format!("module {i} ({kind})'s bytes")))?)
            };
            modules.push(ModuleEntry { kind, payload, imports: Vec::new() });
        }
        if r.remaining() != 0 {
            return Err(bad(format!("{} bytes left over after the last module", r.remaining())));
        }
        let kinds: Vec<&str> = modules.iter().map(|m| m.kind).collect();
        let imports = super::import_tree::check(count, &indptr, &children, &kinds)
            .map_err(|e| e.context(format!("invalid {LIBRARY_BIN_SYMBOL}")))?;
        for (m, imports) in modules.iter_mut().zip(imports) {
            m.imports = imports;
        }
        Ok(LibraryBin { modules })
    }

    /// The root module (index 0).
    pub fn root(&self) -> &ModuleEntry<'a> {
        &self.modules[0]
    }

    /// The index of the `_lib` placeholder, if any.
    pub fn lib_index(&self) -> Option<usize> {
        self.modules.iter().position(ModuleEntry::is_lib)
    }

    /// The modules of one kind, with their indices.
    pub fn of_kind<'s>(&'s self, kind: &'s str) -> impl Iterator<Item = (usize, &'s ModuleEntry<'a>)> + 's {
        self.modules.iter().enumerate().filter(move |(_, m)| m.kind == kind)
    }

    /// Serializes the tree as TVM does, size header included (the symbol's bytes).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::default();
        let mut indptr = vec![0u64];
        let mut children = Vec::new();
        for m in &self.modules {
            children.extend(m.imports.iter().map(|&c| c as u64));
            indptr.push(children.len() as u64);
        }
        w.vec_u64(&indptr);
        w.vec_u64(&children);
        for m in &self.modules {
            w.str_bytes(m.kind.as_bytes());
            if let Some(p) = m.payload {
                w.str_bytes(p);
            }
        }
        let mut out = Vec::with_capacity(8 + w.buf.len());
        out.extend_from_slice(&(w.buf.len() as u64).to_le_bytes());
        out.extend_from_slice(&w.buf);
        out
    }
}

/// The `void*` slots a compiled library may define, which loading fills with the runtime's own
/// functions (tvm-ffi's context symbols, registered by TVM's runtime through
/// `TVMFFIEnvModRegisterContextSymbol`, written into every library opened as a module): kernels
/// call back into the runtime through them. A library defines only the slots its kernels use.
/// `__TVMBackendGetFuncFromEnv` is v0.25's lookup slot (v0.26+ use
/// `__TVMFFIEnvModLookupFromImports` and `__TVMFFIHandleInitOnce`); it takes the same arguments.
pub const CONTEXT_SYMBOLS: [&str; 9] = [
    "__TVMFFIFunctionCall",
    "__TVMFFIErrorSetRaisedFromCStr",
    "__TVMFFIEnvModLookupFromImports",
    "__TVMFFIHandleInitOnce",
    "__TVMBackendAllocWorkspace",
    "__TVMBackendFreeWorkspace",
    "__TVMBackendParallelLaunch",
    "__TVMBackendParallelBarrier",
    "__TVMBackendGetFuncFromEnv",
];
/// Prefix of a library function's symbol: function `name` is `__tvm_ffi_<name>`, a
/// `TVMFFISafeCallType` (a VM-TIR function `f` is the library function `__vmtir__f`).
pub const FUNCTION_PREFIX: &str = "__tvm_ffi_";
/// Prefix of the symbol of a function's metadata getter (`__tvm_ffi__metadata_<name>`).
pub const METADATA_PREFIX: &str = "__tvm_ffi__metadata_";
/// Prefix of the symbol of a function's doc getter (`__tvm_ffi__doc_<name>`).
pub const DOC_PREFIX: &str = "__tvm_ffi__doc_";

/// One defined symbol of an ELF file's symbol tables.
struct ElfSym<'a> {
    name: &'a [u8],
    /// Its bytes in the file (`None` for `.bss` or out-of-file symbols).
    bytes: Option<&'a [u8]>,
}

/// Calls `visit` with each defined symbol of an ELF64 little-endian file's `.dynsym` and
/// `.symtab` until it returns `true`; stops early on a malformed table. Every offset is checked.
fn elf_walk<'a>(file: &'a [u8], mut visit: impl FnMut(ElfSym<'a>) -> bool) {
    let u16_at = |o: usize| file.get(o..o.checked_add(2)?).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| file.get(o..o.checked_add(4)?).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let u64_at = |o: usize| {
        let b = file.get(o..o.checked_add(8)?)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    };
    let mut walk = || -> Option<()> {
        if file.get(..6)? != b"\x7fELF\x02\x01" {
            return None;
        }
        let shoff = usize::try_from(u64_at(0x28)?).ok()?;
        let shentsize = usize::from(u16_at(0x3A)?);
        let shnum = usize::from(u16_at(0x3C)?);
        if shentsize < 64 {
            return None;
        }
        // (type, addr, offset, size, link, entsize)
        let section = |i: usize| -> Option<(u32, u64, usize, usize, usize, usize)> {
            let o = shoff.checked_add(i.checked_mul(shentsize)?)?;
            Some((
                u32_at(o.checked_add(4)?)?,
                u64_at(o.checked_add(0x10)?)?,
                usize::try_from(u64_at(o.checked_add(0x18)?)?).ok()?,
                usize::try_from(u64_at(o.checked_add(0x20)?)?).ok()?,
                usize::try_from(u32_at(o.checked_add(0x28)?)?).ok()?,
                usize::try_from(u64_at(o.checked_add(0x38)?)?).ok()?,
            ))
        };
        for si in 0..shnum {
            let (ty, _, off, size, link, entsize) = section(si)?;
            if !(ty == 2 || ty == 11) || entsize < 24 {
                continue;
            }
            let (_, _, str_off, str_size, _, _) = section(link)?;
            let strtab = file.get(str_off..str_off.checked_add(str_size)?)?;
            for k in 0..size / entsize {
                let e = off.checked_add(k.checked_mul(entsize)?)?;
                let st_name = usize::try_from(u32_at(e)?).ok()?;
                let shndx = usize::from(u16_at(e.checked_add(6)?)?);
                let value = u64_at(e.checked_add(8)?)?;
                let sym_size = usize::try_from(u64_at(e.checked_add(16)?)?).ok()?;
                let rest = strtab.get(st_name..)?;
                let name = &rest[..rest.iter().position(|&b| b == 0)?];
                if name.is_empty() || shndx == 0 || shndx >= 0xFF00 || shndx >= shnum {
                    continue;
                }
                let (sty, addr, soff, _, _, _) = section(shndx)?;
                let bytes = if sty == 8 {
                    None // SHT_NOBITS
                } else {
                    value
                        .checked_sub(addr)
                        .and_then(|d| usize::try_from(d).ok())
                        .and_then(|d| soff.checked_add(d))
                        .and_then(|start| file.get(start..start.checked_add(sym_size)?))
                };
                if visit(ElfSym { name, bytes }) {
                    return Some(());
                }
            }
        }
        Some(())
    };
    let _ = walk();
}

/// The bytes of a defined symbol in an ELF64 little-endian shared library (`.dynsym` or
/// `.symtab`), read from the file without loading it. `None` when the file is no such ELF, the
/// symbol is absent or undefined, or it has no file bytes (`.bss`).
pub fn elf_symbol<'a>(file: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let mut found = None;
    elf_walk(file, |s| {
        if s.name == name.as_bytes() {
            found = s.bytes;
            return true;
        }
        false
    });
    found
}

/// The names of the defined symbols of an ELF64 little-endian file (both tables, so a name may
/// appear twice), in table order; empty when the file is no such ELF.
pub fn elf_symbol_names(file: &[u8]) -> Vec<&str> {
    let mut out = Vec::new();
    elf_walk(file, |s| {
        if let Ok(n) = std::str::from_utf8(s.name) {
            out.push(n);
        }
        false
    });
    out
}
