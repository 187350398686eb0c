//! The DNNL engine of one subgraph: oneDNN primitives built once from the checked operators
//! ([`Plan`], from shapes alone), an [`Instance`] of a plan with its constants, and per-call
//! contexts.
//!
//! Building ([`Plan::build`]): nodes are visited in order; each entry of the graph gets a value
//! (a buffer and a oneDNN layout). Convolutions and inner products let oneDNN choose their
//! source, weight and destination layouts (`any`); a constant weight gets a reorder to the
//! chosen layout that [`Instance::new`] runs once, into a copy the instance keeps; other inputs
//! are reordered per call when the chosen layout differs from theirs. Element-wise operators
//! work in their producer's layout. An operator whose output is a graph output writes straight
//! into the caller's buffer in plain layout; other outputs are reordered into the caller's
//! buffers at the end. No constant data is needed to build, so a plan can be built as soon as
//! the graph is loaded.
//!
//! Running ([`Instance::run`]): a call takes a context (a stream, intermediate buffers, a
//! scratchpad and one oneDNN memory per primitive argument) from a pool, or makes one, points
//! the memories that alias the caller's tensors at them, executes the primitives in order and
//! gives the context back. The primitives are shared (oneDNN primitives are re-entrant; each
//! uses the context's scratchpad), so any number of threads run the same instance at once, each
//! on its own context; nothing of a call lives in shared state.

use super::api::{BinaryAlg, ConvGeom, Dnnl, Md, Memory, Pd, Prim, Stream};
use super::ops::Op;
use super::sys::{self, ExecArg, Handle};
use crate::abi::DLTensor;
use crate::byoc::json::graph::{EntryRef, Graph, NodeKind};
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

/// 64-byte aligned, zero-initialised storage.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; 64]);

struct Buf(Vec<Block>);

impl Buf {
    fn new(bytes: usize) -> Buf {
        Buf(vec![Block([0; 64]); bytes.div_ceil(64).max(1)])
    }
    fn ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
}

/// Where a buffer's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BufKind {
    /// The caller's input tensor `i`.
    Input(usize),
    /// The caller's output tensor `i`.
    Output(usize),
    /// Constant `k` of the graph (the instance's NDArray).
    Const(usize),
    /// The instance's reordered copy made by init step `k`.
    Prepared(usize),
    /// Constant data of the plan itself (fill values), index into [`Plan::statics`].
    Static(usize),
    /// An intermediate of this many bytes, owned by each context.
    Temp(usize),
}

/// A buffer with a layout.
#[derive(Clone)]
struct Val {
    buf: usize,
    md: Arc<Md>,
}

struct Step {
    prim: Prim,
    _pd: Arc<Pd>,
    args: Vec<(i32, Val)>,
    scratch: Option<Arc<Md>>,
}

/// Constant storage: the buffers and their addresses (taken once, so that they can be read
/// without `&mut`).
#[derive(Default)]
struct Fixed {
    ptrs: Vec<*mut c_void>,
    bufs: Vec<Buf>,
    arrays: Vec<NDArray>,
}

// SAFETY: the pointers point into `bufs` and `arrays`, owned alongside and never written after
// they are filled; oneDNN only reads them.
unsafe impl Send for Fixed {}
// SAFETY: as above.
unsafe impl Sync for Fixed {}

impl Fixed {
    fn push_buf(&mut self, mut b: Buf) -> usize {
        self.ptrs.push(b.ptr());
        self.bufs.push(b);
        self.ptrs.len() - 1
    }
}

/// A reorder of a constant into the layout a primitive chose, run once per instance.
struct InitStep {
    step: Step,
    /// Bytes of the destination (`Prepared(k)` for the `k`-th init step).
    bytes: usize,
}

/// A built subgraph (shapes only; no constant data).
pub struct Plan {
    d: &'static Dnnl,
    bufs: Vec<BufKind>,
    steps: Vec<Step>,
    init: Vec<InitStep>,
    statics: Fixed,
    num_consts: usize,
    scratch_bytes: usize,
}

/// A plan with its constants, ready to run.
pub struct Instance {
    plan: Arc<Plan>,
    consts: Fixed,
    prepared: Fixed,
    pool: Mutex<Vec<Context>>,
}

/// The per-call state of one caller.
struct Context {
    stream: Stream,
    _temps: Vec<Buf>,
    _scratch: Buf,
    _mems: Vec<Memory>,
    args: Vec<Vec<ExecArg>>,
    /// Memories bound to the caller's tensors: (memory, input or output, index).
    io: Vec<(Handle, bool, usize)>,
}

// SAFETY: a context is used by one thread at a time (it is taken out of the pool for a call);
// its oneDNN handles may move between threads.
unsafe impl Send for Context {}

struct Builder<'a> {
    d: &'static Dnnl,
    g: &'a Graph,
    bufs: Vec<BufKind>,
    steps: Vec<Step>,
    init: Vec<InitStep>,
    statics: Fixed,
    values: Vec<Option<Val>>,
    converted: HashMap<usize, Vec<Val>>,
    /// Entries written straight into output buffer `h`.
    direct: HashMap<usize, usize>,
    ni: usize,
}

fn bad(m: impl std::fmt::Display) -> Error {
    Error::value(format!("dnnl_json: {m}"))
}

impl Builder<'_> {
    fn new_buf(&mut self, kind: BufKind) -> usize {
        self.bufs.push(kind);
        self.bufs.len() - 1
    }

    fn temp(&mut self, md: Arc<Md>) -> Val {
        let size = md.size(self.d);
        Val { buf: self.new_buf(BufKind::Temp(size)), md }
    }

    fn value(&self, e: EntryRef) -> Result<Val> {
        self.values[self.g.entry_id(e)].clone().ok_or_else(|| bad(format!("entry {e:?} is read before it is computed")))
    }

    fn is_fixed(&self, v: &Val) -> bool {
        matches!(self.bufs[v.buf], BufKind::Const(_))
    }

    fn step(&self, pd: Arc<Pd>, args: Vec<(i32, Val)>) -> Result<Step> {
        let prim = self.d.primitive(&pd)?;
        let scratch = self.d.query(&pd, sys::QUERY_SCRATCHPAD_MD).map(Arc::new);
        Ok(Step { prim, _pd: pd, args, scratch })
    }

    /// A step executing `pd` with `args`.
    fn push(&mut self, pd: Arc<Pd>, args: Vec<(i32, Val)>) -> Result<()> {
        let step = self.step(pd, args)?;
        self.steps.push(step);
        Ok(())
    }

    /// `src` copied into `dst`'s buffer in `dst`'s layout (now for constants, else per call).
    fn reorder(&mut self, src: &Val, dst: Val) -> Result<Val> {
        let attr = self.d.attr(false)?;
        let pd = self.d.reorder_pd(&src.md, &dst.md, &attr)?;
        self.push(pd, vec![(sys::ARG_SRC, src.clone()), (sys::ARG_DST, dst.clone())])?;
        Ok(dst)
    }

    /// Entry `e` in layout `md` (converted once and remembered).
    fn value_as(&mut self, e: EntryRef, md: &Arc<Md>) -> Result<Val> {
        let v = self.value(e)?;
        if v.md.same(self.d, md) {
            return Ok(v);
        }
        let eid = self.g.entry_id(e);
        if let Some(c) = self.converted.get(&eid).and_then(|l| l.iter().find(|c| c.md.same(self.d, md))) {
            return Ok(c.clone());
        }
        let out = if self.is_fixed(&v) {
            self.prepare_const(&v, md.clone())?
        } else {
            let size = md.size(self.d);
            let dst = Val { buf: self.new_buf(BufKind::Temp(size)), md: md.clone() };
            self.reorder(&v, dst)?
        };
        self.converted.entry(eid).or_default().push(out.clone());
        Ok(out)
    }

    /// A copy of a constant in layout `md`, made once per instance (an init step).
    fn prepare_const(&mut self, src: &Val, md: Arc<Md>) -> Result<Val> {
        let attr = self.d.attr(false)?;
        let pd = self.d.reorder_pd(&src.md, &md, &attr)?;
        let k = self.init.len();
        let dst = Val { buf: self.new_buf(BufKind::Prepared(k)), md: md.clone() };
        let step = self.step(pd, vec![(sys::ARG_SRC, src.clone()), (sys::ARG_DST, dst.clone())])?;
        self.init.push(InitStep { step, bytes: md.size(self.d) });
        Ok(dst)
    }

    /// Entry `e` as a dense row-major buffer viewed with `dims` (same element count).
    fn plain_view(&mut self, e: EntryRef, dims: &[i64]) -> Result<Val> {
        let md = Arc::new(self.d.plain(self.g.shape(e))?);
        let v = self.value_as(e, &md)?;
        Ok(Val { buf: v.buf, md: Arc::new(self.d.plain(dims)?) })
    }

    /// Where output `index` of node `nid` goes: the caller's buffer (plain layout) when it is a
    /// graph output, else a new intermediate with the primitive's layout.
    fn output(&mut self, nid: usize, dst: Arc<Md>) -> Val {
        let eid = self.g.entry_id(EntryRef { node: nid as u32, index: 0 });
        match self.direct.get(&eid) {
            Some(&h) => Val { buf: self.ni + h, md: dst },
            None => self.temp(dst),
        }
    }

    fn is_direct(&self, nid: usize) -> bool {
        self.direct.contains_key(&self.g.entry_id(EntryRef { node: nid as u32, index: 0 }))
    }

    fn set(&mut self, nid: usize, index: u32, v: Val) {
        let eid = self.g.entry_id(EntryRef { node: nid as u32, index });
        self.values[eid] = Some(v);
    }

    /// The layout an element-wise operator on `e` works in: plain when its output goes to the
    /// caller, else its producer's.
    fn working(&mut self, nid: usize, e: EntryRef) -> Result<Arc<Md>> {
        if self.is_direct(nid) {
            Ok(Arc::new(self.d.plain(self.g.shape(e))?))
        } else {
            Ok(self.value(e)?.md)
        }
    }

    fn conv(&mut self, nid: usize, c: &super::ops::Conv) -> Result<()> {
        let d = self.d;
        let node = &self.g.nodes[nid];
        let (data, weight) = (node.inputs[0], node.inputs[1]);
        let bias = c.bias.then(|| node.inputs[2]);
        let src_any = d.any(&[c.n, c.ic, c.ih, c.iw])?;
        let w_any = d.any(&c.weight_dims())?;
        let bias_md = if c.bias { Some(d.plain(&[c.oc])?) } else { None };
        let out = [c.n, c.oc, c.oh, c.ow];
        let dst = if self.is_direct(nid) { d.plain(&out)? } else { d.any(&out)? };
        let geom = ConvGeom {
            strides: c.strides,
            dilates: [c.dilation[0] - 1, c.dilation[1] - 1],
            pad_l: [c.pad[0], c.pad[1]],
            pad_r: [c.pad[2], c.pad[3]],
        };
        let attr = d.attr(c.relu)?;
        let pd = d.conv_pd(&src_any, &w_any, bias_md.as_ref(), &dst, &geom, &attr)?;
        let q = |what| d.query(&pd, what).map(Arc::new).ok_or_else(|| bad("the convolution has no layout"));
        let (src_md, w_md, dst_md) = (q(sys::QUERY_SRC_MD)?, q(sys::QUERY_WEIGHTS_MD)?, q(sys::QUERY_DST_MD)?);
        let src = self.value_as(data, &src_md)?;
        // The weight buffer is OIHW, which is `goihw` for groups > 1: view it with oneDNN's dims.
        let w_plain = self.plain_view(weight, &c.weight_dims())?;
        let w = if w_plain.md.same(d, &w_md) {
            w_plain
        } else if self.is_fixed(&w_plain) {
            self.prepare_const(&w_plain, w_md)?
        } else {
            let size = w_md.size(d);
            let dst = Val { buf: self.new_buf(BufKind::Temp(size)), md: w_md };
            self.reorder(&w_plain, dst)?
        };
        let out = self.output(nid, dst_md);
        let mut args = vec![(sys::ARG_SRC, src), (sys::ARG_WEIGHTS, w), (sys::ARG_DST, out.clone())];
        if let Some(b) = bias {
            args.push((sys::ARG_BIAS, self.plain_view(b, &[c.oc])?));
        }
        self.push(pd, args)?;
        self.set(nid, 0, out);
        Ok(())
    }

    fn dense(&mut self, nid: usize, s: &super::ops::Dense) -> Result<()> {
        let d = self.d;
        let node = &self.g.nodes[nid];
        let (data, weight) = (node.inputs[0], node.inputs[1]);
        let src = self.plain_view(data, &[s.m, s.k])?;
        let w_any = d.any(&[s.n, s.k])?;
        let dst_md = d.plain(&[s.m, s.n])?;
        let attr = d.attr(false)?;
        let pd = d.inner_product_pd(&src.md, &w_any, &dst_md, &attr)?;
        let w_md =
            d.query(&pd, sys::QUERY_WEIGHTS_MD).map(Arc::new).ok_or_else(|| bad("the inner product has no layout"))?;
        let w_plain = self.plain_view(weight, &[s.n, s.k])?;
        let w = if w_plain.md.same(d, &w_md) {
            w_plain
        } else if self.is_fixed(&w_plain) {
            self.prepare_const(&w_plain, w_md)?
        } else {
            let size = w_md.size(d);
            let dst = Val { buf: self.new_buf(BufKind::Temp(size)), md: w_md };
            self.reorder(&w_plain, dst)?
        };
        let out = self.output(nid, Arc::new(dst_md));
        self.push(pd, vec![(sys::ARG_SRC, src), (sys::ARG_WEIGHTS, w), (sys::ARG_DST, out.clone())])?;
        // The buffer is plain (M, N): view it with the node's shape.
        let shaped = Val { buf: out.buf, md: Arc::new(d.plain(&node.shapes[0])?) };
        self.set(nid, 0, shaped);
        Ok(())
    }

    fn batch_norm(&mut self, nid: usize, s: &super::ops::BatchNorm) -> Result<()> {
        let d = self.d;
        let node = self.g.nodes[nid].clone();
        let data = node.inputs[0];
        let md = self.working(nid, data)?;
        let attr = d.attr(false)?;
        let pd = match d.batch_norm_pd(&md, s.epsilon, s.scale, s.center, &attr) {
            Ok(pd) => pd,
            // A blocked layout oneDNN's batch normalization does not take: use plain.
            Err(_) if !self.is_direct(nid) => {
                let plain = Arc::new(d.plain(self.g.shape(data))?);
                return self.batch_norm_in(nid, s, plain, &node);
            }
            Err(e) => return Err(e),
        };
        self.batch_norm_with(nid, s, md, pd, &node)
    }

    fn batch_norm_in(
        &mut self,
        nid: usize,
        s: &super::ops::BatchNorm,
        md: Arc<Md>,
        node: &crate::byoc::json::graph::Node,
    ) -> Result<()> {
        let attr = self.d.attr(false)?;
        let pd = self.d.batch_norm_pd(&md, s.epsilon, s.scale, s.center, &attr)?;
        self.batch_norm_with(nid, s, md, pd, node)
    }

    fn batch_norm_with(
        &mut self,
        nid: usize,
        s: &super::ops::BatchNorm,
        md: Arc<Md>,
        pd: Arc<Pd>,
        node: &crate::byoc::json::graph::Node,
    ) -> Result<()> {
        let d = self.d;
        let src = self.value_as(node.inputs[0], &md)?;
        let out = self.output(nid, md.clone());
        let mut args = vec![(sys::ARG_SRC, src), (sys::ARG_DST, out.clone())];
        if s.scale {
            args.push((sys::ARG_SCALE, self.plain_view(node.inputs[1], &[s.c])?));
        }
        if s.center {
            args.push((sys::ARG_SHIFT, self.plain_view(node.inputs[2], &[s.c])?));
        }
        let mean = self.plain_view(node.inputs[3], &[s.c])?;
        let var = self.plain_view(node.inputs[4], &[s.c])?;
        args.push((sys::ARG_MEAN, mean.clone()));
        args.push((sys::ARG_VARIANCE, var.clone()));
        self.push(pd, args)?;
        self.set(nid, 0, out);
        if node.shapes.len() == 3 {
            // TVM's batch_norm also returns the moving mean and variance, unchanged.
            self.set(nid, 1, Val { buf: mean.buf, md: Arc::new(d.plain(&node.shapes[1])?) });
            self.set(nid, 2, Val { buf: var.buf, md: Arc::new(d.plain(&node.shapes[2])?) });
        }
        Ok(())
    }

    fn relu(&mut self, nid: usize) -> Result<()> {
        let data = self.g.nodes[nid].inputs[0];
        let md = self.working(nid, data)?;
        let attr = self.d.attr(false)?;
        let pd = self.d.relu_pd(&md, &attr)?;
        let src = self.value_as(data, &md)?;
        let out = self.output(nid, md.clone());
        self.push(pd, vec![(sys::ARG_SRC, src), (sys::ARG_DST, out.clone())])?;
        self.set(nid, 0, out);
        Ok(())
    }

    fn binary(&mut self, nid: usize, s: &super::ops::Binary) -> Result<()> {
        let d = self.d;
        let (ea, eb) = (self.g.nodes[nid].inputs[0], self.g.nodes[nid].inputs[1]);
        if s.a == s.b {
            // Same shape: work in the first operand's layout.
            let md = self.working(nid, ea)?;
            let a = self.value_as(ea, &md)?;
            let b = self.value_as(eb, &md)?;
            let attr = d.attr(false)?;
            let pd = d.binary_pd(s.alg, &md, &md, &md, &attr)?;
            let out = self.output(nid, md.clone());
            self.push(pd, vec![(sys::ARG_SRC, a), (sys::ARG_SRC_1, b), (sys::ARG_DST, out.clone())])?;
            self.set(nid, 0, out);
            return Ok(());
        }
        // Broadcasting, in plain layout: oneDNN broadcasts the second operand only.
        let a = self.plain_view(ea, &s.a)?;
        let b = self.plain_view(eb, &s.b)?;
        let (first, second) = if s.a == s.out {
            (a, b)
        } else if s.b == s.out {
            (b, a) // add and multiply commute
        } else {
            // Both broadcast: expand the first into the output shape (0 + a, or 1 * a) first.
            let fill = if s.alg == BinaryAlg::Add { 0f32 } else { 1f32 };
            let n: i64 = s.out.iter().product();
            let mut buf = Buf::new(n as usize * 4);
            // SAFETY: the buffer holds `n` floats (64-byte aligned, so 4-byte aligned).
            unsafe { std::slice::from_raw_parts_mut(buf.ptr().cast::<f32>(), n as usize) }.fill(fill);
            let k = self.statics.push_buf(buf);
            let base = Val { buf: self.new_buf(BufKind::Static(k)), md: Arc::new(d.plain(&s.out)?) };
            let attr = d.attr(false)?;
            let pd = d.binary_pd(s.alg, &base.md, &a.md, &base.md, &attr)?;
            let expanded = self.temp(Arc::new(d.plain(&s.out)?));
            self.push(pd, vec![(sys::ARG_SRC, base), (sys::ARG_SRC_1, a), (sys::ARG_DST, expanded.clone())])?;
            (expanded, b)
        };
        let out_md = Arc::new(d.plain(&s.out)?);
        let attr = d.attr(false)?;
        let pd = d.binary_pd(s.alg, &first.md, &second.md, &out_md, &attr)?;
        let out = self.output(nid, out_md);
        self.push(pd, vec![(sys::ARG_SRC, first), (sys::ARG_SRC_1, second), (sys::ARG_DST, out.clone())])?;
        let shaped = Val { buf: out.buf, md: Arc::new(d.plain(&self.g.nodes[nid].shapes[0])?) };
        self.set(nid, 0, shaped);
        Ok(())
    }
}

impl Plan {
    /// Builds the primitives of `g` (operators checked by [`super::ops::analyze`]) from its
    /// shapes.
    pub fn build(d: &'static Dnnl, g: &Graph, ops: &[Option<Op>]) -> Result<Plan> {
        let ni = g.input_entries.len();
        let no = g.heads.len();
        let mut b = Builder {
            d,
            g,
            bufs: Vec::new(),
            steps: Vec::new(),
            init: Vec::new(),
            statics: Fixed::default(),
            values: vec![None; g.num_entries()],
            converted: HashMap::new(),
            direct: HashMap::new(),
            ni,
        };
        for i in 0..ni {
            b.new_buf(BufKind::Input(i));
        }
        for h in 0..no {
            b.new_buf(BufKind::Output(h));
        }
        for (i, &e) in g.input_entries.iter().enumerate() {
            let v = Val { buf: i, md: Arc::new(d.plain(g.shape(e))?) };
            b.values[g.entry_id(e)] = Some(v);
        }
        for (k, &nid) in g.const_nodes.iter().enumerate() {
            let e = EntryRef { node: nid, index: 0 };
            let buf = b.new_buf(BufKind::Const(k));
            b.values[g.entry_id(e)] = Some(Val { buf, md: Arc::new(d.plain(g.shape(e))?) });
        }
        for (h, &e) in g.heads.iter().enumerate() {
            let eid = g.entry_id(e);
            if g.nodes[e.node as usize].kind == NodeKind::Kernel && e.index == 0 && !b.direct.contains_key(&eid) {
                b.direct.insert(eid, h);
            }
        }
        for (nid, op) in ops.iter().enumerate() {
            let Some(op) = op else { continue };
            let r = match op {
                Op::Conv(c) => b.conv(nid, c),
                Op::Dense(s) => b.dense(nid, s),
                Op::BatchNorm(s) => b.batch_norm(nid, s),
                Op::Relu => b.relu(nid),
                Op::Binary(s) => b.binary(nid, s),
            };
            r.map_err(|e| e.context(format_args!("node {nid} ({})", g.nodes[nid].name)))?;
        }
        // Outputs not written in place: copy (reorder) them into the caller's buffers.
        for (h, &e) in g.heads.iter().enumerate() {
            let v = b.value(e)?;
            if v.buf != ni + h {
                let dst = Val { buf: ni + h, md: Arc::new(d.plain(g.shape(e))?) };
                b.reorder(&v, dst)?;
            }
        }
        let scratch_bytes = b
            .steps
            .iter()
            .chain(b.init.iter().map(|i| &i.step))
            .filter_map(|s| s.scratch.as_ref())
            .map(|m| m.size(d))
            .max()
            .unwrap_or(0);
        Ok(Plan {
            d,
            bufs: b.bufs,
            steps: b.steps,
            init: b.init,
            statics: b.statics,
            num_consts: g.const_nodes.len(),
            scratch_bytes,
        })
    }
}

impl Instance {
    /// Binds a plan to its constants (in `const_nodes` order, shapes and dtypes checked by the
    /// JSON runtime base): runs the plan's constant reorders once.
    pub fn new(plan: Arc<Plan>, consts: Vec<NDArray>) -> Result<Instance> {
        let d = plan.d;
        if consts.len() != plan.num_consts {
            return Err(bad(format!("{} constants given, {} needed", consts.len(), plan.num_consts)));
        }
        let mut fixed = Fixed::default();
        for (k, a) in consts.into_iter().enumerate() {
            let t = a.tensor();
            if t.device.device_type != 1 || !crate::device::is_contiguous(t) {
                return Err(bad(format!("constant {k} is not a compact CPU array")));
            }
            // SAFETY: a CPU array of the checked shape; the offset stays inside its allocation.
            fixed.ptrs.push(unsafe { t.data.cast::<u8>().add(t.byte_offset as usize) }.cast::<c_void>());
            fixed.arrays.push(a);
        }
        let mut prepared = Fixed::default();
        for i in &plan.init {
            prepared.push_buf(Buf::new(i.bytes));
        }
        let inst = Instance { plan, consts: fixed, prepared, pool: Mutex::new(Vec::new()) };
        if !inst.plan.init.is_empty() {
            let stream = d.stream()?;
            let mut scratch = Buf::new(inst.plan.scratch_bytes);
            for i in &inst.plan.init {
                let (_mems, args) = inst.memories(&i.step, &[], &mut scratch)?;
                // SAFETY: the memories are bound to the constants, the prepared copies and the
                // scratchpad, each of its descriptor's size.
                unsafe { d.execute(&i.step.prim, &stream, &args)? };
            }
            d.wait(&stream)?;
        }
        Ok(inst)
    }

    /// The address of buffer `buf` (caller buffers: NULL, bound per call; temporaries: from
    /// `temps`).
    fn address(&self, buf: usize, temps: &[*mut c_void]) -> *mut c_void {
        match self.plan.bufs[buf] {
            BufKind::Temp(_) => temps[buf],
            BufKind::Const(k) => self.consts.ptrs[k],
            BufKind::Prepared(k) => self.prepared.ptrs[k],
            BufKind::Static(k) => self.plan.statics.ptrs[k],
            BufKind::Input(_) | BufKind::Output(_) => std::ptr::null_mut(),
        }
    }

    /// One memory per argument of `step` (and the scratchpad).
    fn memories(&self, step: &Step, temps: &[*mut c_void], scratch: &mut Buf) -> Result<(Vec<Memory>, Vec<ExecArg>)> {
        let d = self.plan.d;
        let mut mems = Vec::with_capacity(step.args.len() + 1);
        let mut args = Vec::with_capacity(step.args.len() + 1);
        for (arg, v) in &step.args {
            // SAFETY: temporaries, constants and prepared copies hold their descriptors' sizes and
            // outlive the memory's use; caller buffers are NULL until a call binds them.
            let m = unsafe { d.memory(&v.md, self.address(v.buf, temps))? };
            args.push(ExecArg { arg: *arg, memory: m.raw() });
            mems.push(m);
        }
        if let Some(smd) = &step.scratch {
            // SAFETY: the scratchpad holds the largest step's size and outlives the memory's use.
            let m = unsafe { d.memory(smd, scratch.ptr())? };
            args.push(ExecArg { arg: sys::ARG_SCRATCHPAD, memory: m.raw() });
            mems.push(m);
        }
        Ok((mems, args))
    }

    fn new_context(&self) -> Result<Context> {
        let plan = &*self.plan;
        let stream = plan.d.stream()?;
        let mut temps = Vec::new();
        let mut ptrs = vec![std::ptr::null_mut(); plan.bufs.len()];
        for (i, kind) in plan.bufs.iter().enumerate() {
            if let BufKind::Temp(n) = *kind {
                let mut b = Buf::new(n);
                ptrs[i] = b.ptr();
                temps.push(b);
            }
        }
        let mut scratch = Buf::new(plan.scratch_bytes);
        let mut all_mems = Vec::new();
        let mut args = Vec::with_capacity(plan.steps.len());
        let mut io = Vec::new();
        for step in &plan.steps {
            let (mems, a) = self.memories(step, &ptrs, &mut scratch)?;
            for ((_, v), m) in step.args.iter().zip(&mems) {
                match plan.bufs[v.buf] {
                    BufKind::Input(i) => io.push((m.raw(), true, i)),
                    BufKind::Output(i) => io.push((m.raw(), false, i)),
                    _ => {}
                }
            }
            all_mems.extend(mems);
            args.push(a);
        }
        Ok(Context { stream, _temps: temps, _scratch: scratch, _mems: all_mems, args, io })
    }
    /// Runs on the caller's tensors (shapes and dtypes checked by the JSON runtime base).
    pub fn run(&self, inputs: &[&DLTensor], outputs: &[&DLTensor]) -> Result<()> {
        let data = |t: &DLTensor, what: &str, i: usize| -> Result<*mut c_void> {
            if t.device.device_type != 1 {
                return Err(bad(format!(
                    "{what} {i} is on device type {}; the DNNL runtime needs CPU tensors",
                    t.device.device_type
                )));
            }
            if !crate::device::is_contiguous(t) {
                return Err(bad(format!("{what} {i} is not compact row-major")));
            }
            Ok(t.data.cast::<u8>().wrapping_add(t.byte_offset as usize).cast())
        };
        let ins = inputs.iter().enumerate().map(|(i, t)| data(t, "input", i)).collect::<Result<Vec<_>>>()?;
        let outs = outputs.iter().enumerate().map(|(i, t)| data(t, "output", i)).collect::<Result<Vec<_>>>()?;
        let popped = self.pool.lock().pop();
        let ctx = match popped {
            Some(c) => c,
            None => self.new_context()?,
        };
        let result = self.run_in(&ctx, &ins, &outs);
        self.pool.lock().push(ctx);
        result
    }

    fn run_in(&self, ctx: &Context, ins: &[*mut c_void], outs: &[*mut c_void]) -> Result<()> {
        let d = self.plan.d;
        for &(mem, is_input, i) in &ctx.io {
            let p = if is_input { ins[i] } else { outs[i] };
            // SAFETY: the memory belongs to this context, which only this call uses; the
            // caller's tensor has the entry's shape (checked), so its size.
            unsafe { d.set_data(mem, p)? };
        }
        for (step, args) in self.plan.steps.iter().zip(&ctx.args) {
            // SAFETY: the context's memories, bound to its own buffers, the plan's constants
            // and the caller's tensors, each of its descriptor's size.
            unsafe { d.execute(&step.prim, &ctx.stream, args)? };
        }
        d.wait(&ctx.stream)
    }
}
