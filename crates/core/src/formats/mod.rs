//! The serialized forms of a model library that need no object model to read: tvm-ffi's
//! `__tvm_ffi__library_bin` ([`library_bin`], the one parser of it), the import tree both it and
//! the classic `__tvm_dev_mblob` carry ([`import_tree`], one check for both), the truncation
//! check of an ELF file before it is opened ([`elf`]) and what a module type key is when no
//! loader takes it ([`kinds`]). The classic blob and params files, which make classic objects,
//! are read by the classic crate on these.

pub mod elf;
pub mod import_tree;
pub mod kinds;
pub mod library_bin;
