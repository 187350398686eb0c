//! tvm-ffi's containers, with the layouts its C++ headers read and write inline.

pub mod array;
