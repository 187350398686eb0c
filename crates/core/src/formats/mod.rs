//! The serialized forms of a model library that need no object model to read: tvm-ffi's
//! `__tvm_ffi__library_bin` ([`library_bin`], the one parser of it), the import tree both it and
//! the classic `__tvm_dev_mblob` carry ([`import_tree`], one check for both), the truncation
//! check of an ELF file before it is opened ([`elf`]), what a module type key is when no loader
//! takes it ([`kinds`]), and NDArray records and params blobs, read as views ([`params`]). The
//! classic blob, whose entries only their loaders can delimit, is read by the classic crate.

pub mod elf;
pub mod import_tree;
pub mod kinds;
pub mod library_bin;
pub mod params;
