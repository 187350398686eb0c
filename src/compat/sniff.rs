//! Version sniffing: where an export uses something of a release that this runtime does not
//! support, or a number means different things in different releases, errors name the feature
//! and the release it came with instead of guessing.

/// What a blob entry's type key is, when this runtime has no loader for it: the feature and
/// the releases that write it.
pub fn module_kind(type_key: &str) -> Option<&'static str> {
    Some(match type_key {
        "AotExecutorFactory" | "metadata_module" => "an AOT-compiled model (TVM v0.9+)",
        "const_loader" => "the constants of BYOC external functions (TVM v0.9+; v0.8 wrote them as `metadata`)",
        "metadata" => "the constants of BYOC external functions (TVM v0.8+)",
        "VMExecutable" => "a Relay virtual machine executable (TVM v0.7+)",
        "relax.Executable" | "relax.VMExecutable" => "a Relax virtual machine executable (TVM v0.14+, Relax)",
        "static_library" => "an object file kept for linking (TVM v0.9+)",
        "cuda" | "opencl" => "device code whose runtime is not built in",
        "vulkan" => "Vulkan SPIR-V kernels (TVM v0.7+)",
        "metal" => "Metal kernels (TVM v0.7+)",
        "hip" | "rocm" => "ROCm kernels (TVM v0.7+)",
        "webgpu" => "WebGPU kernels (TVM v0.8+)",
        "hexagon" => "Hexagon DSP code (TVM v0.8+)",
        "sdaccel" | "aocl" => "FPGA bitstreams (TVM v0.5+)",
        "tensorrt" => "a TensorRT engine (BYOC, TVM v0.7+)",
        "vitis_ai" => "a Vitis AI subgraph (BYOC, TVM v0.8+)",
        "ethos-n" => "an Arm Ethos-N subgraph (BYOC, TVM v0.8-v0.18)",
        "ethos-u" => "an Arm Ethos-U subgraph (BYOC, TVM v0.9+)",
        "clml" => "an OpenCL ML (CLML) subgraph (BYOC, TVM v0.10+)",
        "coreml" => "a Core ML model (BYOC, TVM v0.7+)",
        "tflite" => "a TFLite model (TVM v0.7+)",
        "mrvl" => "a Marvell accelerator subgraph (BYOC, TVM v0.15+)",
        "onnx" => "an ONNX subgraph (TVM v0.9+)",
        k if k.ends_with("_json") => "a BYOC JSON-runtime subgraph (the runtime of that backend is not built in)",
        _ => return None,
    })
}

/// The names a device type number has had (moved to [`crate::device::names`]).
pub use crate::device::names::{history as device_type_names, history_note as device_type_note};

/// The error for a graph memory scope other than global memory: texture scopes came with TVM
/// v0.9's OpenCL texture support.
pub fn unsupported_storage_scope(scope: &str) -> crate::error::Error {
    crate::error::Error::value(format!(
        "the graph stores an entry in memory scope {scope:?}: texture memory (TVM v0.9+, OpenCL) is not \
         supported by this runtime"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_kinds_and_devices() {
        assert!(module_kind("relax.Executable").unwrap().contains("v0.14"));
        assert!(module_kind("dnnl_json").is_some());
        assert!(module_kind("library_x").is_none());
        assert!(device_type_names(14).unwrap().contains("oneapi"));
        assert!(device_type_names(99).is_none());
        assert_eq!(device_type_note(7), "");
        assert!(unsupported_storage_scope("global.texture").to_string().contains("v0.9"));
    }
}
