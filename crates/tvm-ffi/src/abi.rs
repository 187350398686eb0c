//! The cells of `c_api.h` that the Rust core does not otherwise spell out: declared here so that
//! the generated header has them with tvm-ffi's names and layouts.

use std::ffi::c_void;

/// `TVMFFIShapeCell`: what follows the header of an `ffi.Shape`.
#[repr(C)]
pub struct TVMFFIShapeCell {
    /// The dimensions.
    pub data: *const i64,
    /// How many.
    pub size: usize,
}

/// `TVMFFIOpaqueObjectCell`: what follows the header of an opaque object (a frontend's object).
#[repr(C)]
pub struct TVMFFIOpaqueObjectCell {
    /// The frontend's handle.
    pub handle: *mut c_void,
}

/// `TVMFFIObjectAllocHeader`: what a custom allocator puts before an object's space.
#[repr(C)]
pub struct TVMFFIObjectAllocHeader {
    /// Frees the space.
    pub delete_space: Option<unsafe extern "C" fn(ptr: *mut c_void)>,
}
