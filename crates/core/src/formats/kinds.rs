//! What a module type key is, for errors about an export this runtime cannot load: the feature
//! and the releases that write it (version sniffing: name it, never guess).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_kinds() {
        assert!(module_kind("relax.Executable").unwrap().contains("v0.14"));
        assert!(module_kind("dnnl_json").is_some());
        assert!(module_kind("library_x").is_none());
    }
}
