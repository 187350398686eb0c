//! Owned oneDNN objects over [`sys`]: the process-wide CPU engine, memory descriptors, primitive
//! descriptors for the operators of the DNNL JSON runtime (in both API generations), primitives,
//! memories, streams and attributes. Every handle is destroyed when its owner drops.
//!
//! Thread safety (oneDNN's documented model): engines, primitive descriptors and primitives may
//! be used from any number of threads at once (primitives are executed concurrently with
//! different memories; every primitive here uses a user-provided scratchpad, so no hidden
//! per-primitive state is shared). Memories and streams are used by one thread at a time: they
//! live in per-call contexts.

use super::sys::{self, ExecArg, Gen, Handle, Lib, MAX_NDIMS};
use crate::error::{Error, Result};
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

/// The library and its CPU engine.
pub struct Dnnl {
    /// Entry points.
    pub lib: &'static Lib,
    engine: Handle,
}

// SAFETY: a oneDNN engine is thread-safe (shared by primitives created on any thread); it is
// created once and never destroyed.
unsafe impl Send for Dnnl {}
// SAFETY: as above.
unsafe impl Sync for Dnnl {}

/// oneDNN, opened and with its engine made, on first use.
pub fn dnnl() -> Result<&'static Dnnl> {
    static D: OnceLock<std::result::Result<Dnnl, String>> = OnceLock::new();
    D.get_or_init(|| {
        let lib = sys::lib().map_err(|e| e.to_string())?;
        let mut engine = std::ptr::null_mut();
        // SAFETY: valid out-pointer; engine kind CPU, index 0.
        let s = unsafe { (lib.c.engine_create)(&mut engine, sys::CPU, 0) };
        lib.check(s, || "creating the CPU engine".into()).map_err(|e| e.to_string())?;
        if lib.omp_spins() {
            crate::threading::share_cpus_with_spinning_team();
        }
        Ok(Dnnl { lib, engine })
    })
    .as_ref()
    .map_err(|e| Error::from_foreign(e.clone()))
}

fn dims_array(dims: &[i64]) -> Result<sys::Dims> {
    if dims.len() > MAX_NDIMS {
        return Err(Error::value(format!("DNNL: {} dimensions (oneDNN supports at most {MAX_NDIMS})", dims.len())));
    }
    let mut a = [0i64; MAX_NDIMS];
    a[..dims.len()].copy_from_slice(dims);
    Ok(a)
}

/// Who keeps a memory descriptor alive.
enum Keep {
    /// A 2.x descriptor in our own storage.
    V2(#[allow(dead_code, reason = "owns the storage `ptr` points into")] Box<[u64; 128]>),
    /// A 3.x descriptor handle.
    V3(Handle),
    /// A descriptor owned by a primitive descriptor.
    Pd(#[allow(dead_code, reason = "keeps the owner alive")] Arc<Pd>),
}

/// A memory descriptor.
pub struct Md {
    ptr: *const c_void,
    keep: Keep,
    dims: Vec<i64>,
}

// SAFETY: a memory descriptor is immutable after creation; oneDNN only reads it.
unsafe impl Send for Md {}
// SAFETY: as above.
unsafe impl Sync for Md {}

impl Drop for Md {
    fn drop(&mut self) {
        if let Keep::V3(h) = self.keep {
            if let Ok(d) = dnnl() {
                if let Gen::V3(v3) = &d.lib.gen {
                    // SAFETY: a descriptor we created and still own.
                    unsafe { (v3.memory_desc_destroy)(h) };
                }
            }
        }
    }
}

impl Md {
    /// The raw descriptor pointer for C calls.
    pub fn raw(&self) -> *const c_void {
        self.ptr
    }

    /// The logical dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// Bytes a memory of this descriptor needs.
    pub fn size(&self, d: &Dnnl) -> usize {
        // SAFETY: a live descriptor.
        unsafe { (d.lib.c.memory_desc_get_size)(self.ptr) }
    }

    /// Whether two descriptors describe the same layout.
    pub fn same(&self, d: &Dnnl, other: &Md) -> bool {
        // SAFETY: live descriptors.
        std::ptr::eq(self.ptr, other.ptr) || unsafe { (d.lib.c.memory_desc_equal)(self.ptr, other.ptr) } != 0
    }
}

/// A primitive descriptor.
pub struct Pd(Handle);

// SAFETY: primitive descriptors are immutable after creation and may be queried from any thread.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}

impl Drop for Pd {
    fn drop(&mut self) {
        if let Ok(d) = dnnl() {
            // SAFETY: a descriptor we own.
            unsafe { (d.lib.c.primitive_desc_destroy)(self.0) };
        }
    }
}

/// A primitive.
pub struct Prim(Handle);

// SAFETY: oneDNN primitives may be executed from several threads at once (with different
// memories and, here, user scratchpads).
unsafe impl Send for Prim {}
// SAFETY: as above.
unsafe impl Sync for Prim {}

impl Drop for Prim {
    fn drop(&mut self) {
        if let Ok(d) = dnnl() {
            // SAFETY: a primitive we own.
            unsafe { (d.lib.c.primitive_destroy)(self.0) };
        }
    }
}

/// A memory object (one thread at a time).
pub struct Memory(Handle);

// SAFETY: a memory object may move between threads; contexts use it from one thread at a time.
unsafe impl Send for Memory {}

impl Drop for Memory {
    fn drop(&mut self) {
        if let Ok(d) = dnnl() {
            // SAFETY: a memory we own.
            unsafe { (d.lib.c.memory_destroy)(self.0) };
        }
    }
}

impl Memory {
    /// The handle.
    pub fn raw(&self) -> Handle {
        self.0
    }
}

/// A stream (one thread at a time).
pub struct Stream(Handle);

// SAFETY: as for memories.
unsafe impl Send for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Ok(d) = dnnl() {
            // SAFETY: a stream we own.
            unsafe { (d.lib.c.stream_destroy)(self.0) };
        }
    }
}

/// Primitive attributes (user scratchpad, optional ReLU post-op).
pub struct Attr(Handle);

impl Drop for Attr {
    fn drop(&mut self) {
        if let Ok(d) = dnnl() {
            // SAFETY: attributes we own.
            unsafe { (d.lib.c.primitive_attr_destroy)(self.0) };
        }
    }
}

/// The algorithm of a binary primitive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryAlg {
    /// `add`.
    Add,
    /// `multiply`.
    Mul,
}

/// A convolution's geometry, in oneDNN's conventions (dilation 0 = dense).
pub(crate) struct ConvGeom {
    /// Strides (h, w).
    pub strides: [i64; 2],
    /// Dilations minus one (h, w).
    pub dilates: [i64; 2],
    /// Padding before (top, left).
    pub pad_l: [i64; 2],
    /// Padding after (bottom, right).
    pub pad_r: [i64; 2],
}

impl Dnnl {
    fn check(&self, s: sys::DnnlStatus, what: impl FnOnce() -> String) -> Result<()> {
        self.lib.check(s, what)
    }

    fn new_md(&self, dims: &[i64], layout: Result<&[i64], i32>) -> Result<Md> {
        let a = dims_array(dims)?;
        let n = dims.len() as i32;
        let what = || format!("a memory descriptor for {dims:?}");
        match &self.lib.gen {
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V2(v2) => {
                let mut buf = Box::new([0u64; 128]);
                let p = buf.as_mut_ptr().cast::<c_void>();
                // SAFETY: `buf` (1 KiB) holds a 2.x descriptor (696 bytes); dims/strides arrays
                // hold MAX_NDIMS entries.
                let s = unsafe {
                    match layout {
                        Ok(strides) => {
                            (v2.memory_desc_init_by_strides)(p, n, a.as_ptr(), sys::F32, dims_array(strides)?.as_ptr())
                        }
                        Err(tag) => (v2.memory_desc_init_by_tag)(p, n, a.as_ptr(), sys::F32, tag),
                    }
                };
                self.check(s, what)?;
                Ok(Md { ptr: p, keep: Keep::V2(buf), dims: dims.to_vec() })
            }
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V3(v3) => {
                let mut h = std::ptr::null_mut();
                // SAFETY: valid out-pointer; arrays of MAX_NDIMS entries.
                let s = unsafe {
                    match layout {
                        Ok(strides) => (v3.memory_desc_create_with_strides)(
                            &mut h,
                            n,
                            a.as_ptr(),
                            sys::F32,
                            dims_array(strides)?.as_ptr(),
                        ),
                        Err(tag) => (v3.memory_desc_create_with_tag)(&mut h, n, a.as_ptr(), sys::F32, tag),
                    }
                };
                self.check(s, what)?;
                Ok(Md { ptr: h, keep: Keep::V3(h), dims: dims.to_vec() })
            }
        }
    }

    /// A dense row-major float32 descriptor (a scalar is `[1]`).
    pub fn plain(&self, dims: &[i64]) -> Result<Md> {
        let dims: Vec<i64> = if dims.is_empty() { vec![1] } else { dims.to_vec() };
        let mut strides = vec![1i64; dims.len()];
        for k in (0..dims.len().saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * dims[k + 1].max(1);
        }
        self.new_md(&dims, Ok(&strides))
    }

    /// A float32 descriptor whose layout the primitive chooses (`format_tag::any`).
    pub fn any(&self, dims: &[i64]) -> Result<Md> {
        self.new_md(dims, Err(sys::TAG_ANY))
    }

    /// Descriptor `what` of a primitive descriptor (`None` if it has none / is empty).
    pub fn query(&self, pd: &Arc<Pd>, what: i32) -> Option<Md> {
        // SAFETY: a live primitive descriptor; the result (if any) lives as long as it.
        let p = unsafe { (self.lib.c.primitive_desc_query_md)(pd.0, what, 0) };
        if p.is_null() {
            return None;
        }
        let md = Md { ptr: p, keep: Keep::Pd(pd.clone()), dims: Vec::new() };
        (md.size(self) > 0).then_some(md)
    }

    /// Attributes: user-managed scratchpad and, if asked, a ReLU post-op.
    pub fn attr(&self, relu: bool) -> Result<Attr> {
        let c = &self.lib.c;
        let mut h = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        self.check(unsafe { (c.primitive_attr_create)(&mut h) }, || "creating attributes".into())?;
        let attr = Attr(h);
        // SAFETY: live attributes.
        let s = unsafe { (c.primitive_attr_set_scratchpad_mode)(attr.0, sys::SCRATCHPAD_USER) };
        self.check(s, || "setting the scratchpad mode".into())?;
        if relu {
            let mut po = std::ptr::null_mut();
            // SAFETY: valid out-pointer.
            self.check(unsafe { (c.post_ops_create)(&mut po) }, || "creating post-ops".into())?;
            let relu_alg = self.lib.k.eltwise_relu;
            // SAFETY: live post-ops; relu with alpha = beta = 0 (and scale 1 in 2.x).
            let s = unsafe {
                match &self.lib.gen {
                    Gen::V2(v2) => (v2.post_ops_append_eltwise)(po, 1.0, relu_alg, 0.0, 0.0),
                    Gen::V3(v3) => (v3.post_ops_append_eltwise)(po, relu_alg, 0.0, 0.0),
                }
            };
            // SAFETY: live attributes and post-ops (copied into the attributes).
            let s2 = if s == sys::SUCCESS { unsafe { (c.primitive_attr_set_post_ops)(attr.0, po) } } else { s };
            // SAFETY: post-ops we own, no longer needed.
            unsafe { (c.post_ops_destroy)(po) };
            self.check(s2, || "adding a ReLU post-op".into())?;
        }
        Ok(attr)
    }

    /// 2.x: an op descriptor filled by `init`, then the primitive descriptor.
    fn pd_v2(
        &self,
        v2: &sys::V2,
        attr: &Attr,
        what: &dyn Fn() -> String,
        init: impl FnOnce(*mut c_void) -> sys::DnnlStatus,
    ) -> Result<Arc<Pd>> {
        let mut op = vec![0u64; sys::V2_OP_DESC_BYTES / 8];
        self.check(init(op.as_mut_ptr().cast()), || format!("describing {}", what()))?;
        let mut pd = std::ptr::null_mut();
        // SAFETY: an initialised op descriptor, live attributes and engine; no hint.
        let s = unsafe {
            (v2.primitive_desc_create)(&mut pd, op.as_ptr().cast(), attr.0, self.engine, std::ptr::null_mut())
        };
        self.check(s, || format!("creating {}", what()))?;
        Ok(Arc::new(Pd(pd)))
    }

    fn pd_v3(&self, what: &dyn Fn() -> String, create: impl FnOnce(*mut Handle) -> sys::DnnlStatus) -> Result<Arc<Pd>> {
        let mut pd = std::ptr::null_mut();
        self.check(create(&mut pd), || format!("creating {}", what()))?;
        Ok(Arc::new(Pd(pd)))
    }

    /// A forward-inference convolution.
    pub(crate) fn conv_pd(
        &self,
        src: &Md,
        w: &Md,
        bias: Option<&Md>,
        dst: &Md,
        g: &ConvGeom,
        attr: &Attr,
    ) -> Result<Arc<Pd>> {
        let what = || format!("a convolution of {:?} with weights {:?}", src.dims(), w.dims());
        let b = bias.map_or(std::ptr::null(), Md::raw);
        let arr = |x: [i64; 2]| dims_array(&x);
        let (st, di, pl, pr) = (arr(g.strides)?, arr(g.dilates)?, arr(g.pad_l)?, arr(g.pad_r)?);
        match &self.lib.gen {
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V2(v2) => self.pd_v2(v2, attr, &what, |op| unsafe {
                (v2.dilated_convolution_forward_desc_init)(
                    op,
                    sys::FORWARD_INFERENCE,
                    sys::CONVOLUTION_DIRECT,
                    src.raw(),
                    w.raw(),
                    b,
                    dst.raw(),
                    st.as_ptr(),
                    di.as_ptr(),
                    pl.as_ptr(),
                    pr.as_ptr(),
                )
            }),
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V3(v3) => self.pd_v3(&what, |pd| unsafe {
                (v3.convolution_forward_primitive_desc_create)(
                    pd,
                    self.engine,
                    sys::FORWARD_INFERENCE,
                    sys::CONVOLUTION_DIRECT,
                    src.raw(),
                    w.raw(),
                    b,
                    dst.raw(),
                    st.as_ptr(),
                    di.as_ptr(),
                    pl.as_ptr(),
                    pr.as_ptr(),
                    attr.0,
                )
            }),
        }
    }

    /// A forward-inference inner product without bias.
    pub(crate) fn inner_product_pd(&self, src: &Md, w: &Md, dst: &Md, attr: &Attr) -> Result<Arc<Pd>> {
        let what = || format!("an inner product of {:?} with weights {:?}", src.dims(), w.dims());
        let null = std::ptr::null();
        match &self.lib.gen {
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V2(v2) => self.pd_v2(v2, attr, &what, |op| unsafe {
                (v2.inner_product_forward_desc_init)(op, sys::FORWARD_INFERENCE, src.raw(), w.raw(), null, dst.raw())
            }),
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V3(v3) => self.pd_v3(&what, |pd| unsafe {
                (v3.inner_product_forward_primitive_desc_create)(
                    pd,
                    self.engine,
                    sys::FORWARD_INFERENCE,
                    src.raw(),
                    w.raw(),
                    null,
                    dst.raw(),
                    attr.0,
                )
            }),
        }
    }

    /// A forward-inference batch normalization with global statistics (dst has src's layout).
    pub(crate) fn batch_norm_pd(
        &self,
        data: &Md,
        epsilon: f32,
        scale: bool,
        shift: bool,
        attr: &Attr,
    ) -> Result<Arc<Pd>> {
        let what = || format!("a batch normalization of {:?}", data.dims());
        let k = self.lib.k;
        let flags = sys::USE_GLOBAL_STATS | if scale { k.use_scale } else { 0 } | if shift { k.use_shift } else { 0 };
        match &self.lib.gen {
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V2(v2) => self.pd_v2(v2, attr, &what, |op| unsafe {
                (v2.batch_normalization_forward_desc_init)(op, sys::FORWARD_INFERENCE, data.raw(), epsilon, flags)
            }),
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V3(v3) => self.pd_v3(&what, |pd| unsafe {
                (v3.batch_normalization_forward_primitive_desc_create)(
                    pd,
                    self.engine,
                    sys::FORWARD_INFERENCE,
                    data.raw(),
                    data.raw(),
                    epsilon,
                    flags,
                    attr.0,
                )
            }),
        }
    }

    /// A forward-inference ReLU (dst has src's layout).
    pub(crate) fn relu_pd(&self, data: &Md, attr: &Attr) -> Result<Arc<Pd>> {
        let what = || format!("a ReLU of {:?}", data.dims());
        let alg = self.lib.k.eltwise_relu;
        match &self.lib.gen {
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V2(v2) => self.pd_v2(v2, attr, &what, |op| unsafe {
                (v2.eltwise_forward_desc_init)(op, sys::FORWARD_INFERENCE, alg, data.raw(), 0.0, 0.0)
            }),
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V3(v3) => self.pd_v3(&what, |pd| unsafe {
                (v3.eltwise_forward_primitive_desc_create)(
                    pd,
                    self.engine,
                    sys::FORWARD_INFERENCE,
                    alg,
                    data.raw(),
                    data.raw(),
                    0.0,
                    0.0,
                    attr.0,
                )
            }),
        }
    }

    /// A binary add or multiply (src1 may broadcast).
    pub(crate) fn binary_pd(&self, alg: BinaryAlg, a: &Md, b: &Md, dst: &Md, attr: &Attr) -> Result<Arc<Pd>> {
        let what = || format!("a binary {alg:?} of {:?} and {:?}", a.dims(), b.dims());
        let alg = match alg {
            BinaryAlg::Add => sys::BINARY_ADD,
            BinaryAlg::Mul => sys::BINARY_MUL,
        };
        match &self.lib.gen {
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V2(v2) => {
                // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
                // arrays of MAX_NDIMS entries, as the C function expects.
                self.pd_v2(v2, attr, &what, |op| unsafe { (v2.binary_desc_init)(op, alg, a.raw(), b.raw(), dst.raw()) })
            }
            // SAFETY: live descriptors and attributes, an op-descriptor buffer (2.x), and
            // arrays of MAX_NDIMS entries, as the C function expects.
            Gen::V3(v3) => self.pd_v3(&what, |pd| unsafe {
                (v3.binary_primitive_desc_create)(pd, self.engine, alg, a.raw(), b.raw(), dst.raw(), attr.0)
            }),
        }
    }

    /// A reorder (layout conversion or copy).
    pub(crate) fn reorder_pd(&self, src: &Md, dst: &Md, attr: &Attr) -> Result<Arc<Pd>> {
        let mut pd = std::ptr::null_mut();
        // SAFETY: live descriptors, attributes and engine.
        let s = unsafe {
            (self.lib.c.reorder_primitive_desc_create)(&mut pd, src.raw(), self.engine, dst.raw(), self.engine, attr.0)
        };
        self.check(s, || format!("creating a reorder of {:?}", src.dims()))?;
        Ok(Arc::new(Pd(pd)))
    }

    /// The primitive of a descriptor.
    pub fn primitive(&self, pd: &Pd) -> Result<Prim> {
        let mut p = std::ptr::null_mut();
        // SAFETY: a live primitive descriptor.
        self.check(unsafe { (self.lib.c.primitive_create)(&mut p, pd.0) }, || "creating a primitive".into())?;
        Ok(Prim(p))
    }

    /// A memory over `data` (not owned; NULL is set later with [`Dnnl::set_data`]).
    ///
    /// # Safety
    /// `data` is NULL or holds the descriptor's size for as long as the memory is used.
    pub unsafe fn memory(&self, md: &Md, data: *mut c_void) -> Result<Memory> {
        let mut m = std::ptr::null_mut();
        // SAFETY: a live descriptor and engine; `data` per contract (DNNL_MEMORY_NONE if NULL).
        let s = unsafe { (self.lib.c.memory_create)(&mut m, md.raw(), self.engine, data) };
        self.check(s, || "creating a memory".into())?;
        Ok(Memory(m))
    }

    /// Points a memory at another buffer.
    ///
    /// # Safety
    /// `mem` is a live memory handle used by this thread only, and `data` holds at least the
    /// size of its descriptor while it is used.
    pub unsafe fn set_data(&self, mem: Handle, data: *mut c_void) -> Result<()> {
        // SAFETY: per contract.
        let s = unsafe { (self.lib.c.memory_set_data_handle)(mem, data) };
        self.check(s, || "binding a buffer".into())
    }

    /// A stream on the engine.
    pub fn stream(&self) -> Result<Stream> {
        let mut h = std::ptr::null_mut();
        // SAFETY: valid out-pointer, live engine.
        let s = unsafe { (self.lib.c.stream_create)(&mut h, self.engine, sys::STREAM_DEFAULT) };
        self.check(s, || "creating a stream".into())?;
        Ok(Stream(h))
    }

    /// Executes a primitive on a stream.
    ///
    /// # Safety
    /// The memories in `args` are live, used by this thread only, and bound to buffers of their
    /// descriptors' sizes.
    pub unsafe fn execute(&self, p: &Prim, s: &Stream, args: &[ExecArg]) -> Result<()> {
        // SAFETY: per contract.
        let st = unsafe { (self.lib.c.primitive_execute)(p.0, s.0, args.len() as i32, args.as_ptr()) };
        self.check(st, || "executing a primitive".into())
    }

    /// Waits for a stream.
    pub fn wait(&self, s: &Stream) -> Result<()> {
        // SAFETY: a live stream.
        self.check(unsafe { (self.lib.c.stream_wait)(s.0) }, || "waiting for a stream".into())
    }
}
