//! cudasim: a simulated CUDA driver. Built as a shared library (soname `libcuda.so.1`) it
//! stands in for NVIDIA's driver: it exports the driver API entry points a CUDA runtime calls,
//! with their documented semantics, and runs kernels by interpreting their PTX: `cuModuleLoadData`
//! parses and checks the PTX TVM's NVPTX back end emits, `cuLaunchKernel` runs it over the
//! whole grid in warps of 32, on device memory that lives in host buffers behind addresses
//! the host cannot touch. It is test support for `tvm-runtime`, not part of the shipped
//! library; see README.md for what it supports and refuses.

pub mod driver;
pub mod exec;
pub mod libdevice;
pub mod memory;
pub mod module;
pub mod ptx;
