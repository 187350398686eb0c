//! oneDNN's C API (`dnnl.h`, `dnnl_types.h`), bound by hand for the functions this runtime uses
//! and opened at run time with libloading, as the GPU drivers are: `TVM_DNNL_LIBRARY` if set,
//! else `libdnnl.so.3`, `libdnnl.so.2`, `libdnnl.so`. The library is opened once, on first use,
//! and the outcome (or the error) is kept for the life of the process.
//!
//! Two generations of the API are supported, told apart by `dnnl_version()`:
//! * 2.x (Debian 12's libdnnl2 is 2.6): memory descriptors are structs that the caller owns
//!   (`dnnl_memory_desc_t`, 696 bytes), operations are described by op descriptors
//!   (`dnnl_*_desc_init`) turned into primitive descriptors by `dnnl_primitive_desc_create`;
//! * 3.x: memory descriptors are opaque handles (`dnnl_memory_desc_create_with_*`, destroyed
//!   with `dnnl_memory_desc_destroy`) and primitive descriptors are created directly
//!   (`dnnl_*_primitive_desc_create`); `dnnl_post_ops_append_eltwise` lost its scale; and the
//!   enum values below that differ ([`Consts`]).
//!
//! Every other entry point has the same C signature in both (a 2.x `const dnnl_memory_desc_t *`
//! and a 3.x `const_dnnl_memory_desc_t` are both one pointer). The constants were read from the
//! 2.6 headers and from 3.0 to 3.7's (unchanged across them); `tests/byoc.rs` checks them
//! against the installed headers.

use crate::error::{Error, Result};
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

/// `dnnl_status_t`.
pub(crate) type DnnlStatus = i32;
/// Any oneDNN object handle.
pub type Handle = *mut c_void;
/// `dnnl_dims_t`.
pub(crate) type Dims = [i64; MAX_NDIMS];

/// `DNNL_MAX_NDIMS`.
pub const MAX_NDIMS: usize = 12;
/// `dnnl_success`.
pub const SUCCESS: DnnlStatus = 0;
/// `dnnl_unimplemented`.
pub const UNIMPLEMENTED: DnnlStatus = 3;
/// `dnnl_f32`.
pub const F32: i32 = 3;
/// `dnnl_format_tag_any`.
pub const TAG_ANY: i32 = 1;
/// `dnnl_cpu` (engine kind).
pub const CPU: i32 = 1;
/// `dnnl_stream_default_flags`.
pub const STREAM_DEFAULT: u32 = 1;
/// `dnnl_forward_inference`.
pub const FORWARD_INFERENCE: i32 = 96;
/// `dnnl_convolution_direct`.
pub const CONVOLUTION_DIRECT: i32 = 1;
/// `dnnl_binary_add`.
pub const BINARY_ADD: i32 = 0x1fff0;
/// `dnnl_binary_mul`.
pub const BINARY_MUL: i32 = 0x1fff1;
/// `dnnl_use_global_stats`.
pub const USE_GLOBAL_STATS: u32 = 1;
/// `dnnl_scratchpad_mode_user`.
pub const SCRATCHPAD_USER: i32 = 1;
/// `dnnl_query_src_md`.
pub const QUERY_SRC_MD: i32 = 129;
/// `dnnl_query_weights_md`.
pub const QUERY_WEIGHTS_MD: i32 = 131;
/// `dnnl_query_dst_md`.
pub const QUERY_DST_MD: i32 = 133;
/// `dnnl_query_scratchpad_md`.
pub const QUERY_SCRATCHPAD_MD: i32 = 136;

/// `DNNL_ARG_SRC` (`DNNL_ARG_SRC_0`, `DNNL_ARG_FROM`).
pub const ARG_SRC: i32 = 1;
/// `DNNL_ARG_SRC_1`.
pub const ARG_SRC_1: i32 = 2;
/// `DNNL_ARG_DST` (`DNNL_ARG_TO`).
pub const ARG_DST: i32 = 17;
/// `DNNL_ARG_WEIGHTS`.
pub const ARG_WEIGHTS: i32 = 33;
/// `DNNL_ARG_BIAS`.
pub const ARG_BIAS: i32 = 41;
/// `DNNL_ARG_MEAN`.
pub const ARG_MEAN: i32 = 49;
/// `DNNL_ARG_VARIANCE`.
pub const ARG_VARIANCE: i32 = 50;
/// `DNNL_ARG_SCALE`.
pub const ARG_SCALE: i32 = 51;
/// `DNNL_ARG_SHIFT`.
pub const ARG_SHIFT: i32 = 52;
/// `DNNL_ARG_SCRATCHPAD`.
pub const ARG_SCRATCHPAD: i32 = 80;

/// Size of a 2.x `dnnl_memory_desc_t`.
pub const V2_MEMORY_DESC_BYTES: usize = 696;
/// Room for a 2.x op descriptor (the largest used, `dnnl_convolution_desc_t`, is 5,976 bytes).
pub const V2_OP_DESC_BYTES: usize = 8192;

/// The enum values that differ between the generations.
#[derive(Clone, Copy, Debug)]
pub struct Consts {
    /// `dnnl_eltwise_relu`.
    pub eltwise_relu: i32,
    /// `dnnl_use_scale`.
    pub use_scale: u32,
    /// `dnnl_use_shift`.
    pub use_shift: u32,
}

/// The 2.x values.
pub const CONSTS_V2: Consts = Consts { eltwise_relu: 31, use_scale: 8, use_shift: 16 };
/// The 3.x values.
pub(crate) const CONSTS_V3: Consts = Consts { eltwise_relu: 32, use_scale: 2, use_shift: 4 };

/// `dnnl_version_t`.
#[repr(C)]
pub struct Version {
    pub major: i32,
    pub minor: i32,
    pub patch: i32,
    pub hash: *const c_char,
    pub cpu_runtime: u32,
    pub gpu_runtime: u32,
}

/// `dnnl_exec_arg_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ExecArg {
    pub arg: i32,
    pub memory: Handle,
}

type Md = *const c_void;
type Fn0 = unsafe extern "C" fn(Handle) -> DnnlStatus;

/// Entry points with one signature in both generations.
pub struct Common {
    pub version: unsafe extern "C" fn() -> *const Version,
    pub engine_create: unsafe extern "C" fn(*mut Handle, i32, usize) -> DnnlStatus,
    pub engine_destroy: Fn0,
    pub stream_create: unsafe extern "C" fn(*mut Handle, Handle, u32) -> DnnlStatus,
    pub stream_wait: Fn0,
    pub stream_destroy: Fn0,
    pub memory_create: unsafe extern "C" fn(*mut Handle, Md, Handle, *mut c_void) -> DnnlStatus,
    pub memory_set_data_handle: unsafe extern "C" fn(Handle, *mut c_void) -> DnnlStatus,
    pub memory_destroy: Fn0,
    pub memory_desc_equal: unsafe extern "C" fn(Md, Md) -> i32,
    pub memory_desc_get_size: unsafe extern "C" fn(Md) -> usize,
    pub primitive_desc_query_md: unsafe extern "C" fn(Handle, i32, i32) -> Md,
    pub primitive_desc_destroy: Fn0,
    pub primitive_create: unsafe extern "C" fn(*mut Handle, Handle) -> DnnlStatus,
    pub primitive_execute: unsafe extern "C" fn(Handle, Handle, i32, *const ExecArg) -> DnnlStatus,
    pub primitive_destroy: Fn0,
    pub primitive_attr_create: unsafe extern "C" fn(*mut Handle) -> DnnlStatus,
    pub primitive_attr_destroy: Fn0,
    pub primitive_attr_set_post_ops: unsafe extern "C" fn(Handle, Handle) -> DnnlStatus,
    pub primitive_attr_set_scratchpad_mode: unsafe extern "C" fn(Handle, i32) -> DnnlStatus,
    pub post_ops_create: unsafe extern "C" fn(*mut Handle) -> DnnlStatus,
    pub post_ops_destroy: Fn0,
    pub reorder_primitive_desc_create: unsafe extern "C" fn(*mut Handle, Md, Handle, Md, Handle, Handle) -> DnnlStatus,
}

/// 2.x entry points (op descriptors).
pub struct V2 {
    pub memory_desc_init_by_tag: unsafe extern "C" fn(*mut c_void, i32, *const i64, i32, i32) -> DnnlStatus,
    pub memory_desc_init_by_strides: unsafe extern "C" fn(*mut c_void, i32, *const i64, i32, *const i64) -> DnnlStatus,
    #[allow(clippy::type_complexity, reason = "the C signature")]
    pub dilated_convolution_forward_desc_init: unsafe extern "C" fn(
        *mut c_void,
        i32,
        i32,
        Md,
        Md,
        Md,
        Md,
        *const i64,
        *const i64,
        *const i64,
        *const i64,
    ) -> DnnlStatus,
    pub inner_product_forward_desc_init: unsafe extern "C" fn(*mut c_void, i32, Md, Md, Md, Md) -> DnnlStatus,
    pub batch_normalization_forward_desc_init: unsafe extern "C" fn(*mut c_void, i32, Md, f32, u32) -> DnnlStatus,
    pub eltwise_forward_desc_init: unsafe extern "C" fn(*mut c_void, i32, i32, Md, f32, f32) -> DnnlStatus,
    pub binary_desc_init: unsafe extern "C" fn(*mut c_void, i32, Md, Md, Md) -> DnnlStatus,
    pub primitive_desc_create: unsafe extern "C" fn(*mut Handle, *const c_void, Handle, Handle, Handle) -> DnnlStatus,
    pub post_ops_append_eltwise: unsafe extern "C" fn(Handle, f32, i32, f32, f32) -> DnnlStatus,
}

/// 3.x entry points (direct primitive descriptors, opaque memory descriptors).
pub struct V3 {
    pub memory_desc_create_with_tag: unsafe extern "C" fn(*mut Handle, i32, *const i64, i32, i32) -> DnnlStatus,
    pub memory_desc_create_with_strides:
        unsafe extern "C" fn(*mut Handle, i32, *const i64, i32, *const i64) -> DnnlStatus,
    pub memory_desc_destroy: Fn0,
    #[allow(clippy::type_complexity, reason = "the C signature")]
    pub convolution_forward_primitive_desc_create: unsafe extern "C" fn(
        *mut Handle,
        Handle,
        i32,
        i32,
        Md,
        Md,
        Md,
        Md,
        *const i64,
        *const i64,
        *const i64,
        *const i64,
        Handle,
    ) -> DnnlStatus,
    pub inner_product_forward_primitive_desc_create:
        unsafe extern "C" fn(*mut Handle, Handle, i32, Md, Md, Md, Md, Handle) -> DnnlStatus,
    pub batch_normalization_forward_primitive_desc_create:
        unsafe extern "C" fn(*mut Handle, Handle, i32, Md, Md, f32, u32, Handle) -> DnnlStatus,
    pub eltwise_forward_primitive_desc_create:
        unsafe extern "C" fn(*mut Handle, Handle, i32, i32, Md, Md, f32, f32, Handle) -> DnnlStatus,
    pub binary_primitive_desc_create: unsafe extern "C" fn(*mut Handle, Handle, i32, Md, Md, Md, Handle) -> DnnlStatus,
    pub post_ops_append_eltwise: unsafe extern "C" fn(Handle, i32, f32, f32) -> DnnlStatus,
}

/// The generation-specific part.
pub enum Gen {
    /// oneDNN 2.x.
    V2(V2),
    /// oneDNN 3.x.
    V3(V3),
}

/// The opened library.
pub struct Lib {
    /// Where it was found.
    pub path: String,
    /// `major.minor.patch`.
    pub version: (i32, i32, i32),
    /// Common entry points.
    pub c: Common,
    /// Generation-specific entry points.
    pub gen: Gen,
    /// Enum values of this generation.
    pub k: Consts,
    _lib: libloading::Library,
}

/// The library names tried, in order, when `TVM_DNNL_LIBRARY` is not set.
pub(crate) const DEFAULT_NAMES: &[&str] = &["libdnnl.so.3", "libdnnl.so.2", "libdnnl.so"];

/// The oneDNN library, opened on first use.
pub fn lib() -> Result<&'static Lib> {
    static LIB: OnceLock<std::result::Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(open).as_ref().map_err(|e| Error::tvm(e.clone()))
}

fn open() -> std::result::Result<Lib, String> {
    let env = std::env::var("TVM_DNNL_LIBRARY").ok().filter(|s| !s.is_empty());
    let names: Vec<&str> = match &env {
        Some(p) => vec![p.as_str()],
        None => DEFAULT_NAMES.to_vec(),
    };
    let mut errors = Vec::new();
    let mut found = None;
    for name in &names {
        match crate::device::open_first_library(&[name]) {
            Ok(l) => {
                found = Some((l, (*name).to_owned()));
                break;
            }
            Err(e) => errors.push(e),
        }
    }
    let (lib, path) = found.ok_or_else(|| {
        format!(
            "DNNL: cannot open oneDNN (looked for {}: {}). Install oneDNN 2.x or 3.x (Debian/Ubuntu: libdnnl2) or set \
             TVM_DNNL_LIBRARY to its path.",
            names.join(", "),
            errors.join("; ")
        )
    })?;
    let fail = |what: String| format!("DNNL: {path}: {what}");
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: the symbol is declared in oneDNN's headers with the signature of the field
            // it is assigned to (checked against the headers by the tests); the library is kept
            // alive with the pointers (in `Lib`, never unloaded).
            let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| fail(format!("missing {}: {}", $name, crate::error::source_chain(&e))))?;
            *s
        }};
    }
    let version_fn: unsafe extern "C" fn() -> *const Version = sym!("dnnl_version");
    // SAFETY: dnnl_version returns a pointer to a static struct (never NULL in any release).
    let v = unsafe { version_fn().as_ref() }.ok_or_else(|| fail("dnnl_version returned NULL".into()))?;
    let version = (v.major, v.minor, v.patch);
    let c = Common {
        version: version_fn,
        engine_create: sym!("dnnl_engine_create"),
        engine_destroy: sym!("dnnl_engine_destroy"),
        stream_create: sym!("dnnl_stream_create"),
        stream_wait: sym!("dnnl_stream_wait"),
        stream_destroy: sym!("dnnl_stream_destroy"),
        memory_create: sym!("dnnl_memory_create"),
        memory_set_data_handle: sym!("dnnl_memory_set_data_handle"),
        memory_destroy: sym!("dnnl_memory_destroy"),
        memory_desc_equal: sym!("dnnl_memory_desc_equal"),
        memory_desc_get_size: sym!("dnnl_memory_desc_get_size"),
        primitive_desc_query_md: sym!("dnnl_primitive_desc_query_md"),
        primitive_desc_destroy: sym!("dnnl_primitive_desc_destroy"),
        primitive_create: sym!("dnnl_primitive_create"),
        primitive_execute: sym!("dnnl_primitive_execute"),
        primitive_destroy: sym!("dnnl_primitive_destroy"),
        primitive_attr_create: sym!("dnnl_primitive_attr_create"),
        primitive_attr_destroy: sym!("dnnl_primitive_attr_destroy"),
        primitive_attr_set_post_ops: sym!("dnnl_primitive_attr_set_post_ops"),
        primitive_attr_set_scratchpad_mode: sym!("dnnl_primitive_attr_set_scratchpad_mode"),
        post_ops_create: sym!("dnnl_post_ops_create"),
        post_ops_destroy: sym!("dnnl_post_ops_destroy"),
        reorder_primitive_desc_create: sym!("dnnl_reorder_primitive_desc_create"),
    };
    let (gen, k) = match version.0 {
        2 => (
            Gen::V2(V2 {
                memory_desc_init_by_tag: sym!("dnnl_memory_desc_init_by_tag"),
                memory_desc_init_by_strides: sym!("dnnl_memory_desc_init_by_strides"),
                dilated_convolution_forward_desc_init: sym!("dnnl_dilated_convolution_forward_desc_init"),
                inner_product_forward_desc_init: sym!("dnnl_inner_product_forward_desc_init"),
                batch_normalization_forward_desc_init: sym!("dnnl_batch_normalization_forward_desc_init"),
                eltwise_forward_desc_init: sym!("dnnl_eltwise_forward_desc_init"),
                binary_desc_init: sym!("dnnl_binary_desc_init"),
                primitive_desc_create: sym!("dnnl_primitive_desc_create"),
                post_ops_append_eltwise: sym!("dnnl_post_ops_append_eltwise"),
            }),
            CONSTS_V2,
        ),
        3 => (
            Gen::V3(V3 {
                memory_desc_create_with_tag: sym!("dnnl_memory_desc_create_with_tag"),
                memory_desc_create_with_strides: sym!("dnnl_memory_desc_create_with_strides"),
                memory_desc_destroy: sym!("dnnl_memory_desc_destroy"),
                convolution_forward_primitive_desc_create: sym!("dnnl_convolution_forward_primitive_desc_create"),
                inner_product_forward_primitive_desc_create: sym!("dnnl_inner_product_forward_primitive_desc_create"),
                batch_normalization_forward_primitive_desc_create: sym!(
                    "dnnl_batch_normalization_forward_primitive_desc_create"
                ),
                eltwise_forward_primitive_desc_create: sym!("dnnl_eltwise_forward_primitive_desc_create"),
                binary_primitive_desc_create: sym!("dnnl_binary_primitive_desc_create"),
                post_ops_append_eltwise: sym!("dnnl_post_ops_append_eltwise"),
            }),
            CONSTS_V3,
        ),
        major => {
            return Err(fail(format!(
                "oneDNN {}.{}.{} is not supported (this runtime uses the C API of oneDNN 2.x and 3.x)",
                major, version.1, version.2
            )))
        }
    };
    Ok(Lib { path, version, c, gen, k, _lib: lib })
}

/// The text of a status.
pub(crate) fn status_name(s: DnnlStatus) -> &'static str {
    match s {
        0 => "success",
        1 => "out of memory",
        2 => "invalid arguments",
        3 => "unimplemented",
        4 => "iterator ends",
        5 => "runtime error",
        6 => "not required",
        _ => "unknown status",
    }
}

impl Lib {
    /// `major.minor.patch` and the CPU threading runtime.
    pub fn describe(&self) -> String {
        // SAFETY: a static struct, see `open`.
        let v = unsafe { &*(self.c.version)() };
        let hash = if v.hash.is_null() {
            String::new()
        } else {
            // SAFETY: a static NUL-terminated string when not NULL.
            unsafe { CStr::from_ptr(v.hash) }.to_string_lossy().into_owned()
        };
        let rt = match v.cpu_runtime {
            0 => "none",
            1 => "sequential",
            2 => "OpenMP",
            4 => "TBB",
            8 => "threadpool",
            _ => "other",
        };
        format!("oneDNN {}.{}.{} ({hash}, CPU runtime {rt}) from {}", v.major, v.minor, v.patch, self.path)
    }

    /// True when oneDNN runs on OpenMP and its threads busy-wait between parallel regions (GNU
    /// OpenMP's default unless `OMP_WAIT_POLICY=passive`).
    pub(crate) fn omp_spins(&self) -> bool {
        // SAFETY: a static struct, see `open`.
        let v = unsafe { &*(self.c.version)() };
        let passive = std::env::var("OMP_WAIT_POLICY").is_ok_and(|p| p.eq_ignore_ascii_case("passive"));
        v.cpu_runtime == 2 && !passive
    }

    /// Turns a status into a result.
    pub fn check(&self, s: DnnlStatus, what: impl FnOnce() -> String) -> Result<()> {
        if s == SUCCESS {
            Ok(())
        } else {
            Err(Error::tvm(format!("DNNL: {} failed: {} (status {s})", what(), status_name(s))))
        }
    }
}
