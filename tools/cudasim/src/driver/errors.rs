//! `CUresult` values, with the names and strings `cuGetErrorName` / `cuGetErrorString` give.

/// A driver result.
pub type CUresult = std::ffi::c_int;

macro_rules! codes {
    ($( $name:ident = $v:literal, $text:literal; )*) => {
        $(
            #[doc = $text]
            pub const $name: CUresult = $v;
        )*
        /// Name and string of a code.
        pub fn describe(code: CUresult) -> Option<(&'static std::ffi::CStr, &'static std::ffi::CStr)> {
            match code {
                $( $v => Some((
                    // SAFETY: the literal has one NUL, at its end.
                    unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
                    // SAFETY: as above.
                    unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!($text, "\0").as_bytes()) },
                )), )*
                _ => None,
            }
        }
        /// Every code (for tests).
        pub const ALL: &[(CUresult, &str)] = &[ $( ($v, stringify!($name)), )* ];
    };
}

codes! {
    CUDA_SUCCESS = 0, "no error";
    CUDA_ERROR_INVALID_VALUE = 1, "invalid argument";
    CUDA_ERROR_OUT_OF_MEMORY = 2, "out of memory";
    CUDA_ERROR_NOT_INITIALIZED = 3, "initialization error";
    CUDA_ERROR_DEINITIALIZED = 4, "driver shutting down";
    CUDA_ERROR_STUB_LIBRARY = 34, "CUDA driver is a stub library";
    CUDA_ERROR_NO_DEVICE = 100, "no CUDA-capable device is detected";
    CUDA_ERROR_INVALID_DEVICE = 101, "invalid device ordinal";
    CUDA_ERROR_INVALID_IMAGE = 200, "device kernel image is invalid";
    CUDA_ERROR_INVALID_CONTEXT = 201, "invalid device context";
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209, "no kernel image is available for execution on the device";
    CUDA_ERROR_INVALID_PTX = 218, "a PTX JIT compilation failed";
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222, "the provided PTX was compiled with an unsupported toolchain.";
    CUDA_ERROR_INVALID_SOURCE = 300, "device kernel image is invalid";
    CUDA_ERROR_FILE_NOT_FOUND = 301, "file not found";
    CUDA_ERROR_INVALID_HANDLE = 400, "invalid resource handle";
    CUDA_ERROR_NOT_FOUND = 500, "named symbol not found";
    CUDA_ERROR_NOT_READY = 600, "device not ready";
    CUDA_ERROR_ILLEGAL_ADDRESS = 700, "an illegal memory access was encountered";
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701, "too many resources requested for launch";
    CUDA_ERROR_LAUNCH_TIMEOUT = 702, "the launch timed out and was terminated";
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705, "peer access has not been enabled";
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709, "context is destroyed";
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715, "an illegal instruction was encountered";
    CUDA_ERROR_MISALIGNED_ADDRESS = 716, "misaligned address";
    CUDA_ERROR_LAUNCH_FAILED = 719, "unspecified launch failure";
    CUDA_ERROR_NOT_SUPPORTED = 801, "operation not supported";
    CUDA_ERROR_UNKNOWN = 999, "unknown error";
}
