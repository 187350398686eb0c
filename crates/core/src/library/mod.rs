//! Model libraries as the operating system holds them, for both module loaders (the classic
//! crate's and tvm-ffi's): a `dlopen`ed shared library and its symbols ([`dso`]), one opened
//! from its bytes ([`memfd`]), the system library's symbol table ([`symbols`]), the context
//! function slots the loaders fill in them ([`slots`]) and the variable that names a library's
//! own module ([`context`]). What a library's module tree becomes is each object model's
//! business.

pub mod context;
pub mod dso;
pub mod memfd;
pub mod slots;
pub mod symbols;
