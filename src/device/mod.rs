//! Devices: the classic crate's (the core's device API, kernel metadata, the driver opener;
//! re-exported here) and the back ends above it: CUDA and OpenCL (crates `tvm-runtime-cuda`,
//! `tvm-runtime-opencl`, re-exported as `cuda` and `opencl`), and the RPC device API of remote
//! device types.
//!
//! The core finds a back end only once it is installed: [`install_back_ends`] installs every
//! back end this build has; the library runs it when it is loaded (`crate::init`).

#[cfg(feature = "cuda")]
pub use tvm_runtime_cuda as cuda;
#[cfg(feature = "opencl")]
pub use tvm_runtime_opencl as opencl;

pub use tvm_runtime_classic::device::*;

/// Installs the device APIs of this build's back ends in the core, and the loaders of their code
/// in a v0.20+ library binary (idempotent).
pub(crate) fn install_back_ends() {
    #[cfg(feature = "cuda")]
    {
        install(CUDA, &cuda::api::CUDA_API);
        install(CUDA_HOST, &cuda::api::CUDA_API);
        crate::module::device_code::install("cuda", cuda::load_tagged);
    }
    #[cfg(feature = "opencl")]
    {
        install(OPENCL, &opencl::api::OPENCL_API);
        crate::module::device_code::install("opencl", opencl::load_tagged);
    }
    #[cfg(feature = "rpc")]
    install_remote(crate::rpc::device_api());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_ends_are_installed_at_load() {
        // Installed before main by the constructor: nothing here installs them.
        #[cfg(feature = "rpc")]
        {
            // RPC devices go to the RPC device API, which needs a live session.
            let rpc = get_api(200, false).unwrap().unwrap();
            let e = rpc.set_device(device_of(200, 0)).unwrap_err().to_string();
            assert!(e.contains("RPC session 0 is closed or does not exist"), "{e}");
        }
        #[cfg(feature = "cuda")]
        assert!(get_api(CUDA, false).unwrap().is_some() && get_api(CUDA_HOST, false).unwrap().is_some());
        #[cfg(feature = "opencl")]
        assert!(get_api(OPENCL, false).unwrap().is_some());
        #[cfg(not(feature = "cuda"))]
        assert!(get_api(CUDA, true).unwrap().is_none());
    }
}
