//! Only the C API is exported: `nm -D --defined-only` on the shared library lists exactly the
//! functions of TVM's two headers, `TVMArrayGetTypeIndex` and the two half-float helpers that
//! TVM v0.8's runtime also exports, and the `dnnl_*` kernels of TVM's DNNL runtime — no Rust symbols.

use std::path::PathBuf;
use std::process::Command;

const HEADER_FUNCTIONS: [&str; 52] = [
    "TVMAPISetLastError",
    "TVMGetLastError",
    "TVMModLoadFromFile",
    "TVMModImport",
    "TVMModGetFunction",
    "TVMModFree",
    "TVMFuncFree",
    "TVMFuncCall",
    "TVMCFuncSetReturn",
    "TVMCbArgToReturn",
    "TVMFuncCreateFromCFunc",
    "TVMFuncRegisterGlobal",
    "TVMFuncGetGlobal",
    "TVMFuncListGlobalNames",
    "TVMFuncRemoveGlobal",
    "TVMArrayAlloc",
    "TVMArrayFree",
    "TVMArrayCopyFromBytes",
    "TVMArrayCopyToBytes",
    "TVMArrayCopyFromTo",
    "TVMArrayFromDLPack",
    "TVMArrayToDLPack",
    "TVMDLManagedTensorCallDeleter",
    "TVMStreamCreate",
    "TVMStreamFree",
    "TVMSetStream",
    "TVMSynchronize",
    "TVMStreamStreamSynchronize",
    "TVMObjectGetTypeIndex",
    "TVMObjectTypeKey2Index",
    "TVMObjectTypeIndex2Key",
    "TVMObjectRetain",
    "TVMObjectFree",
    "TVMByteArrayFree",
    "TVMDeviceAllocDataSpace",
    "TVMDeviceAllocDataSpaceWithScope",
    "TVMDeviceFreeDataSpace",
    "TVMDeviceCopyDataFromTo",
    "TVMObjectDerivedFrom",
    "TVMBackendGetFuncFromEnv",
    "TVMBackendRegisterSystemLibSymbol",
    "TVMBackendAllocWorkspace",
    "TVMBackendFreeWorkspace",
    "TVMBackendRegisterEnvCAPI",
    "TVMBackendParallelLaunch",
    "TVMBackendParallelBarrier",
    "TVMBackendRunOnce",
    // Added to c_runtime_api.h by TVM v0.14 (called by the Python packages of v0.14..v0.19).
    "TVMAPISetLastPythonError",
    "TVMGetLastPythonError",
    "TVMDropLastPythonError",
    "TVMGetLastBacktrace",
    "TVMThrowLastError",
];

const EXTRA: [&str; 3] = ["TVMArrayGetTypeIndex", "__gnu_f2h_ieee", "__gnu_h2f_ieee"];

/// TVM v0.20+'s runtime C functions that compiled VM-TIR code (`exec_mode="compiled"`) imports
/// (v0.27's `c_backend_api.h`).
const ANYLIST: [&str; 3] =
    ["TVMBackendAnyListMoveFromPackedReturn", "TVMBackendAnyListResetItem", "TVMBackendAnyListSetPackedArg"];

/// The DNNL kernels that C-source BYOC libraries import (TVM's `dnnl_kernel.h`; not in a public
/// header, as in TVM).
const DNNL_KERNELS: [&str; 7] = [
    "dnnl_conv2d",
    "dnnl_fused_conv2d_relu",
    "dnnl_fused_conv2d_bias_relu",
    "dnnl_dense",
    "dnnl_relu",
    "dnnl_bn",
    "dnnl_binary_op",
];

fn library() -> PathBuf {
    if let Some(p) = std::env::var_os("TVM_RT_LIB") {
        return p.into();
    }
    // The test binary lives in target/<profile>/deps; the cdylib one level up.
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().and_then(|d| d.parent()).expect("target dir").join("libtvm_runtime.so")
}

/// The tvm-ffi C ABI (apache-tvm-ffi 0.1.15's `c_api.h` and `extra/c_env_api.h`): the exports of
/// the wheel's `libtvm_ffi.so`, all 50 of them.
const TVM_FFI_FUNCTIONS: [&str; 50] = [
    "TVMFFIAnyViewToOwnedAny",
    "TVMFFIBacktrace",
    "TVMFFIBigIntFromByteArray",
    "TVMFFIBigIntGetContentByteArray",
    "TVMFFIBytesFromByteArray",
    "TVMFFIDataTypeFromString",
    "TVMFFIDataTypeToString",
    "TVMFFIEnvCheckSignals",
    "TVMFFIEnvGetDLPackManagedTensorAllocator",
    "TVMFFIEnvGetStream",
    "TVMFFIEnvModLookupFromImports",
    "TVMFFIEnvModRegisterContextSymbol",
    "TVMFFIEnvModRegisterSystemLibSymbol",
    "TVMFFIEnvRegisterCAPI",
    "TVMFFIEnvSetDLPackManagedTensorAllocator",
    "TVMFFIEnvSetStream",
    "TVMFFIEnvTensorAlloc",
    "TVMFFIErrorCreate",
    "TVMFFIErrorCreateWithCauseAndExtraContext",
    "TVMFFIErrorMoveFromRaised",
    "TVMFFIErrorSetRaised",
    "TVMFFIErrorSetRaisedFromCStr",
    "TVMFFIErrorSetRaisedFromCStrParts",
    "TVMFFIFunctionCall",
    "TVMFFIFunctionCreate",
    "TVMFFIFunctionGetGlobal",
    "TVMFFIFunctionSetGlobal",
    "TVMFFIFunctionSetGlobalFromMethodInfo",
    "TVMFFIGetCustomAllocator",
    "TVMFFIGetTypeAttrColumn",
    "TVMFFIGetTypeInfo",
    "TVMFFIGetVersion",
    "TVMFFIHandleDeinitOnce",
    "TVMFFIHandleInitOnce",
    "TVMFFIObjectCreateOpaque",
    "TVMFFIObjectDecRef",
    "TVMFFIObjectIncRef",
    "TVMFFISetCustomAllocator",
    "TVMFFIStringFromByteArray",
    "TVMFFITensorCreateUnsafeView",
    "TVMFFITensorFromDLPack",
    "TVMFFITensorFromDLPackVersioned",
    "TVMFFITensorToDLPack",
    "TVMFFITensorToDLPackVersioned",
    "TVMFFITypeGetOrAllocIndex",
    "TVMFFITypeKeyToIndex",
    "TVMFFITypeRegisterAttr",
    "TVMFFITypeRegisterField",
    "TVMFFITypeRegisterMetadata",
    "TVMFFITypeRegisterMethod",
];

#[test]
fn exports_exactly_the_c_api() {
    let lib = library();
    assert!(lib.exists(), "{} not built: run `cargo build` first, or set TVM_RT_LIB", lib.display());
    let out = Command::new("nm").args(["-D", "--defined-only"]).arg(&lib).output().expect("nm runs");
    assert!(out.status.success());
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
        .collect();
    got.sort();
    let mut want: Vec<String> = HEADER_FUNCTIONS
        .iter()
        .chain(EXTRA.iter())
        .chain(ANYLIST.iter())
        .chain(DNNL_KERNELS.iter())
        .chain(TVM_FFI_FUNCTIONS.iter())
        .map(|s| (*s).to_owned())
        .collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn no_link_time_gpu_dependencies() {
    let out = Command::new("readelf").arg("-d").arg(library()).output().expect("readelf runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = text.lines().filter(|l| l.contains("(NEEDED)")).collect();
    assert!(!needed.is_empty(), "readelf -d lists the NEEDED entries");
    for l in &needed {
        for gpu in ["libcuda", "libcudart", "libnvrtc", "libOpenCL"] {
            assert!(!l.contains(gpu), "{l}");
        }
    }
}

#[test]
fn soname_is_tvms() {
    let out = Command::new("readelf").arg("-d").arg(library()).output().expect("readelf runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Library soname: [libtvm_runtime.so]"), "{text}");
    // An auxiliary filter of libtvm_ffi.so, looked for beside it first (see build.rs).
    assert!(text.contains("Auxiliary library: [libtvm_ffi.so]"), "{text}");
    assert!(text.contains("Library runpath: [$ORIGIN]"), "{text}");
}
