//! The attention kernels a paged KV cache is made with (TVM's `attn_backend.{h,cc}`), and the
//! calling convention of each: `["tirx", f]` (a TIR kernel called directly) and
//! `["flashinfer", run, plan]` (a plan step at the start of a forward pass, whose result and
//! workspaces every run then receives).

use super::aux_data::host_tensor;
use super::internal;
use tvm_runtime_classic::abi::{DLDataType, DLTensor};
use tvm_runtime_tvm_ffi::any::{Any, TVMFFIAny};
use tvm_runtime_tvm_ffi::containers::array::seq_items;
use tvm_runtime_tvm_ffi::object::ObjectRef;
use tvm_runtime_tvm_ffi::{function, string, tensor, ti, types, FfiError, FfiResult};

/// A tensor argument (a view of the caller's reference).
#[inline]
pub(crate) fn t(o: &ObjectRef) -> TVMFFIAny {
    TVMFFIAny::with_bits(o.type_index(), o.as_ptr() as u64)
}

/// An integer argument.
#[inline]
pub(crate) fn i(v: i64) -> TVMFFIAny {
    TVMFFIAny::with_bits(ti::INT, v as u64)
}

/// A float argument.
#[inline]
pub(crate) fn f(v: f64) -> TVMFFIAny {
    TVMFFIAny::with_bits(ti::FLOAT, v.to_bits())
}

/// A boolean argument.
#[inline]
pub(crate) fn b(v: bool) -> TVMFFIAny {
    TVMFFIAny::with_bits(ti::BOOL, v as u64)
}

/// Calls a kernel, naming it in its error.
pub(crate) fn call(func: &ObjectRef, what: &str, args: &[TVMFFIAny]) -> FfiResult<Any> {
    function::call(func, args).map_err(|e| FfiError::new(e.kind(), format!("{what}: {}", e.message())))
}

/// The kinds of attention kernels a cache holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Family {
    PagedPrefill,
    RaggedPrefill,
    PagedDecode,
    PagedPrefillTree,
    RaggedPrefillTree,
}

/// A plan step's result for one depth: the workspaces and the plan info the runs receive.
struct Plan {
    float_ws: ObjectRef,
    int_ws: ObjectRef,
    info: Any,
}

enum Imp {
    Tir(ObjectRef),
    FlashInfer {
        run: ObjectRef,
        plan: ObjectRef,
        plans: Vec<Option<Plan>>,
        /// Head dims of MLA's self attention, from the backend tuple (-1: the cache's).
        qk_override: i64,
        v_override: i64,
        /// MLA's compressed-KV and positional-embedding head dims (set by the plan).
        mla_ckv: i64,
        mla_kpe: i64,
    },
}

/// One attention kernel of a cache.
pub(crate) struct AttnFn {
    name: &'static str,
    imp: Imp,
}

/// The RoPE parameters of a kernel call.
#[derive(Clone, Copy)]
pub(crate) struct Rope {
    pub inline: bool,
    pub scale: f64,
    pub theta: f64,
}

/// The paged-storage arguments of a kernel call.
pub(crate) struct Paged<'a> {
    pub pages: &'a ObjectRef,
    pub page_indptr: &'a ObjectRef,
    pub page_indices: &'a ObjectRef,
    pub length_info: &'a ObjectRef,
}

fn func_of(v: &Any, what: &str, k: usize) -> FfiResult<ObjectRef> {
    v.as_object().filter(|o| o.type_index() == ti::FUNCTION).ok_or_else(|| {
        FfiError::type_error(format!("{what}: element {k} must be a function, got {}", types::type_key(v.type_index())))
    })
}

impl AttnFn {
    /// `Convert*Func`: an empty tuple is no kernel; `["tirx", f]` (or TVM v0.2x's `"tir"`) a TIR
    /// kernel; `["flashinfer", run, plan]` FlashInfer's (ragged prefill also takes MLA's
    /// `qk_head_dim, v_head_dim` after them); anything else an error.
    pub(crate) fn parse(items: &[Any], family: Family, name: &'static str) -> FfiResult<Option<AttnFn>> {
        let Some(first) = items.first() else { return Ok(None) };
        // SAFETY: an owned value is a valid view.
        let backend =
            unsafe { string::view_str_bytes(first.raw()) }
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .ok_or_else(|| FfiError::type_error(format!("{name}: the first element must be the backend name")))?;
        let imp = match backend.as_str() {
            "tirx" | "tir" => {
                if items.len() != 2 {
                    return Err(internal(format!(
                        "{name}: a \"{backend}\" kernel is [\"{backend}\", function], got {} elements",
                        items.len()
                    )));
                }
                Imp::Tir(func_of(&items[1], name, 1)?)
            }
            "flashinfer" => {
                let ok = items.len() == 3 || (family == Family::RaggedPrefill && items.len() == 5);
                if !ok || matches!(family, Family::PagedPrefillTree | Family::RaggedPrefillTree) {
                    return Err(internal(format!(
                        "{name}: FlashInfer kernels are [\"flashinfer\", run, plan] (tree attention has none), got {} elements",
                        items.len()
                    )));
                }
                let dim = |k: usize| {
                    items[k].as_i64().ok_or_else(|| FfiError::type_error(format!("{name}: element {k} must be an int")))
                };
                let (qk_override, v_override) = if items.len() == 5 { (dim(3)?, dim(4)?) } else { (-1, -1) };
                Imp::FlashInfer {
                    run: func_of(&items[1], name, 1)?,
                    plan: func_of(&items[2], name, 2)?,
                    plans: Vec::new(),
                    qk_override,
                    v_override,
                    mla_ckv: -1,
                    mla_kpe: -1,
                }
            }
            other => {
                return Err(internal(format!(
                    "{name}: unknown attention backend \"{other}\" (expected \"tirx\" or \"flashinfer\")"
                )))
            }
        };
        Ok(Some(AttnFn { name, imp }))
    }

    /// Reads an `Array` argument into a kernel.
    pub(crate) fn from_array(v: &TVMFFIAny, family: Family, name: &'static str) -> FfiResult<Option<AttnFn>> {
        if v.type_index != ti::ARRAY && v.type_index != ti::LIST {
            return Err(FfiError::type_error(format!(
                "{name}: expected an Array (the kernel tuple), got {}",
                types::type_key(v.type_index)
            )));
        }
        // SAFETY: a view of a live array.
        let arr = unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }
            .ok_or_else(|| FfiError::value(format!("{name}: NULL array")))?;
        AttnFn::parse(seq_items(&arr), family, name)
    }

    pub(crate) fn is_flashinfer(&self) -> bool {
        matches!(self.imp, Imp::FlashInfer { .. })
    }

    fn plan(&self, depth: usize) -> FfiResult<(&Plan, &ObjectRef)> {
        match &self.imp {
            Imp::FlashInfer { plans, run, .. } => plans
                .get(depth)
                .and_then(|p| p.as_ref())
                .map(|p| (p, run))
                .ok_or_else(|| internal(format!("{}: FlashInfer's plan did not run for depth {depth}", self.name))),
            Imp::Tir(_) => Err(internal("not a FlashInfer kernel")),
        }
    }

    fn store_plan(&mut self, depth: usize, p: Plan) {
        if let Imp::FlashInfer { plans, .. } = &mut self.imp {
            if plans.len() <= depth {
                plans.resize_with(depth + 1, || None);
            }
            plans[depth] = Some(p);
        }
    }

    /// Paged prefill, multi-head.
    #[allow(clippy::too_many_arguments, reason = "the kernel's own arguments")]
    pub(crate) fn paged_prefill_mha(
        &self,
        depth: usize,
        q: &ObjectRef,
        qo_indptr: &ObjectRef,
        p: &Paged,
        q_rope: &ObjectRef,
        k_rope: &ObjectRef,
        causal: bool,
        rope: Rope,
        sm_scale: f64,
        out: &ObjectRef,
        lse: &ObjectRef,
    ) -> FfiResult<()> {
        match &self.imp {
            Imp::Tir(func) => call(
                func,
                self.name,
                &[
                    t(q),
                    t(qo_indptr),
                    t(p.pages),
                    t(p.page_indptr),
                    t(p.page_indices),
                    t(p.length_info),
                    t(k_rope),
                    t(q_rope),
                    t(out),
                    t(lse),
                    i(causal as i64),
                    i(rope.inline as i64),
                    f(rope.scale),
                    f(rope.theta),
                    f(sm_scale),
                ],
            )
            .map(drop),
            Imp::FlashInfer { .. } => {
                let (plan, run) = self.plan(depth)?;
                let (kv_k, kv_v) = (kv_half(p.pages, 0)?, kv_half(p.pages, 1)?);
                let zs = [
                    zero_offset(qo_indptr)?,
                    zero_offset(p.page_indptr)?,
                    zero_offset(p.page_indices)?,
                    zero_offset(p.length_info)?,
                ];
                call(
                    run,
                    self.name,
                    &[
                        t(&plan.float_ws),
                        t(&plan.int_ws),
                        *plan.info.raw(),
                        t(q),
                        t(&kv_k),
                        t(&kv_v),
                        t(&zs[0]),
                        t(&zs[1]),
                        t(&zs[2]),
                        t(&zs[3]),
                        t(out),
                        t(lse),
                        i(causal as i64),
                        i(1),
                        i(-1),
                        b(false),
                        f(sm_scale),
                        f(1.0 / rope.scale),
                        f(1.0 / rope.theta),
                    ],
                )
                .map(drop)
            }
        }
    }

    /// Paged prefill, multi-head latent attention.
    #[allow(clippy::too_many_arguments, reason = "the kernel's own arguments")]
    pub(crate) fn paged_prefill_mla(
        &self,
        depth: usize,
        q: &ObjectRef,
        qo_indptr: &ObjectRef,
        p: &Paged,
        causal: bool,
        sm_scale: f64,
        out: &ObjectRef,
        lse: &ObjectRef,
    ) -> FfiResult<()> {
        match &self.imp {
            Imp::Tir(func) => call(
                func,
                self.name,
                &[
                    t(q),
                    t(qo_indptr),
                    t(p.pages),
                    t(p.page_indptr),
                    t(p.page_indices),
                    t(p.length_info),
                    t(out),
                    t(lse),
                    i(causal as i64),
                    f(sm_scale),
                ],
            )
            .map(drop),
            Imp::FlashInfer { mla_ckv, mla_kpe, .. } => {
                let (plan, run) = self.plan(depth)?;
                if *mla_ckv < 0 {
                    return Err(internal("MLA head dims are unset; BeginForward must run before MLA."));
                }
                // SAFETY: live tensors.
                let (qd, pd) = unsafe { (tensor::dltensor(q.as_ptr()), tensor::dltensor(p.pages.as_ptr())) };
                let heads = dim(qd, 1)?;
                let page_size = dim(pd, 1)?;
                let parts = [
                    slice_last(q, 0, *mla_ckv)?,
                    slice_last(q, *mla_ckv, *mla_kpe)?,
                    slice_last(p.pages, 0, *mla_ckv)?,
                    slice_last(p.pages, *mla_ckv, *mla_kpe)?,
                    zero_offset(p.page_indices)?,
                ];
                call(
                    run,
                    self.name,
                    &[
                        t(&plan.float_ws),
                        t(&plan.int_ws),
                        *plan.info.raw(),
                        t(&parts[0]),
                        t(&parts[1]),
                        t(&parts[2]),
                        t(&parts[3]),
                        t(&parts[4]),
                        t(out),
                        t(lse),
                        i(causal as i64),
                        i(heads),
                        i(page_size),
                        f(sm_scale),
                        b(false),
                    ],
                )
                .map(drop)
            }
        }
    }

    /// Ragged prefill (the new tokens attending to each other).
    #[allow(clippy::too_many_arguments, reason = "the kernel's own arguments")]
    pub(crate) fn ragged_mha(
        &self,
        q: &ObjectRef,
        k: &ObjectRef,
        v: &ObjectRef,
        indptr: &ObjectRef,
        q_rope: &ObjectRef,
        k_rope: &ObjectRef,
        causal: bool,
        rope: Rope,
        sm_scale: f64,
        out: &ObjectRef,
        lse: &ObjectRef,
    ) -> FfiResult<()> {
        match &self.imp {
            Imp::Tir(func) => call(
                func,
                self.name,
                &[
                    t(q),
                    t(indptr),
                    t(k),
                    t(v),
                    t(indptr),
                    t(q_rope),
                    t(k_rope),
                    t(out),
                    t(lse),
                    i(causal as i64),
                    i(rope.inline as i64),
                    f(rope.scale),
                    f(rope.theta),
                    f(sm_scale),
                ],
            )
            .map(drop),
            Imp::FlashInfer { .. } => {
                let (plan, run) = self.plan(0)?;
                let z = zero_offset(indptr)?;
                call(
                    run,
                    self.name,
                    &[
                        t(&plan.float_ws),
                        t(&plan.int_ws),
                        *plan.info.raw(),
                        t(q),
                        t(k),
                        t(v),
                        t(&z),
                        t(&z),
                        t(out),
                        t(lse),
                        i(causal as i64),
                        i(0),
                        i(-1),
                        b(false),
                        f(sm_scale),
                        f(1.0 / rope.scale),
                        f(1.0 / rope.theta),
                    ],
                )
                .map(drop)
            }
        }
    }

    /// Paged decode (one query per sequence).
    #[allow(clippy::too_many_arguments, reason = "the kernel's own arguments")]
    pub(crate) fn decode_mha(
        &self,
        depth: usize,
        q: &ObjectRef,
        p: &Paged,
        k_rope: &ObjectRef,
        q_rope: &ObjectRef,
        rope: Rope,
        sm_scale: f64,
        out: &ObjectRef,
        lse: &ObjectRef,
    ) -> FfiResult<()> {
        match &self.imp {
            Imp::Tir(func) => call(
                func,
                self.name,
                &[
                    t(q),
                    t(p.pages),
                    t(p.page_indptr),
                    t(p.page_indices),
                    t(p.length_info),
                    t(k_rope),
                    t(q_rope),
                    t(out),
                    t(lse),
                    i(rope.inline as i64),
                    f(rope.scale),
                    f(rope.theta),
                    f(sm_scale),
                ],
            )
            .map(drop),
            Imp::FlashInfer { .. } => {
                let (plan, run) = self.plan(depth)?;
                let (kv_k, kv_v) = (kv_half(p.pages, 0)?, kv_half(p.pages, 1)?);
                let zs = [zero_offset(p.page_indptr)?, zero_offset(p.page_indices)?, zero_offset(p.length_info)?];
                call(
                    run,
                    self.name,
                    &[
                        t(&plan.float_ws),
                        t(&plan.int_ws),
                        *plan.info.raw(),
                        t(q),
                        t(&kv_k),
                        t(&kv_v),
                        t(&zs[0]),
                        t(&zs[1]),
                        t(&zs[2]),
                        t(out),
                        t(lse),
                        i(1),
                        i(-1),
                        b(false),
                        f(sm_scale),
                        f(1.0 / rope.scale),
                        f(1.0 / rope.theta),
                    ],
                )
                .map(drop)
            }
        }
    }

    /// Paged prefill under a token-tree mask.
    #[allow(clippy::too_many_arguments, reason = "the kernel's own arguments")]
    pub(crate) fn paged_tree_mha(
        &self,
        q: &ObjectRef,
        qo_indptr: &ObjectRef,
        p: &Paged,
        k_rope: &ObjectRef,
        q_rope: &ObjectRef,
        mn_indptr: &ObjectRef,
        mask: &ObjectRef,
        rope: Rope,
        sm_scale: f64,
        out: &ObjectRef,
        lse: &ObjectRef,
    ) -> FfiResult<()> {
        let Imp::Tir(func) = &self.imp else {
            return Err(internal("MHA computation is not supported by the current backend"));
        };
        call(
            func,
            self.name,
            &[
                t(q),
                t(qo_indptr),
                t(p.pages),
                t(p.page_indptr),
                t(p.page_indices),
                t(p.length_info),
                t(k_rope),
                t(q_rope),
                t(out),
                t(lse),
                i(rope.inline as i64),
                f(rope.scale),
                f(rope.theta),
                f(sm_scale),
                t(mn_indptr),
                t(mask),
            ],
        )
        .map(drop)
    }

    /// Ragged prefill under a token-tree mask.
    #[allow(clippy::too_many_arguments, reason = "the kernel's own arguments")]
    pub(crate) fn ragged_tree_mha(
        &self,
        q: &ObjectRef,
        k: &ObjectRef,
        v: &ObjectRef,
        indptr: &ObjectRef,
        q_rope: &ObjectRef,
        mn_indptr: &ObjectRef,
        mask: &ObjectRef,
        rope: Rope,
        sm_scale: f64,
        out: &ObjectRef,
        lse: &ObjectRef,
    ) -> FfiResult<()> {
        let Imp::Tir(func) = &self.imp else {
            return Err(internal("MHA computation is not supported by the current backend"));
        };
        call(
            func,
            self.name,
            &[
                t(q),
                t(indptr),
                t(k),
                t(v),
                t(indptr),
                t(q_rope),
                t(mn_indptr),
                t(mask),
                t(out),
                t(lse),
                i(rope.inline as i64),
                f(rope.scale),
                f(rope.theta),
                f(sm_scale),
            ],
        )
        .map(drop)
    }

    /// FlashInfer's plan for a paged prefill at `depth` (MHA or MLA).
    #[allow(clippy::too_many_arguments, reason = "the plan's own arguments")]
    pub(crate) fn plan_paged_prefill(
        &mut self,
        depth: usize,
        ws: (&ObjectRef, &ObjectRef, &ObjectRef),
        qo_indptr: &[i32],
        page_indptr: &[i32],
        last_page_len: &[i32],
        total_qo: i64,
        page_size: i64,
        heads: (i64, i64),
        dims: (i64, i64),
        mla: bool,
    ) -> FfiResult<()> {
        let Imp::FlashInfer { plan, mla_ckv, mla_kpe, .. } = &mut self.imp else { return Ok(()) };
        let batch = qo_indptr.len().saturating_sub(1);
        let kv_len: Vec<i32> = (0..batch)
            .map(|k| {
                let n = page_indptr[k + 1] - page_indptr[k];
                if n != 0 {
                    (n - 1) * page_size as i32 + last_page_len[k]
                } else {
                    0
                }
            })
            .collect();
        let (qo_t, pi_t, kl_t) = (host_tensor(qo_indptr)?, host_tensor(page_indptr)?, host_tensor(&kv_len)?);
        let info = if mla {
            *mla_ckv = dims.1;
            *mla_kpe = dims.0 - dims.1;
            call(
                plan,
                self.name,
                &[t(ws.0), t(ws.1), t(ws.2), t(&qo_t), t(&pi_t), t(&kl_t), i(heads.0), i(dims.1), b(false)],
            )?
        } else {
            call(
                plan,
                self.name,
                &[
                    t(ws.0),
                    t(ws.1),
                    t(ws.2),
                    t(&qo_t),
                    t(&pi_t),
                    t(&kl_t),
                    i(total_qo),
                    i(batch as i64),
                    i(heads.0),
                    i(heads.1),
                    i(page_size),
                    b(false),
                    i(dims.0),
                    i(dims.1),
                    b(false),
                    i(-1),
                    i(-1),
                    b(false),
                    i(0),
                ],
            )?
        };
        let info = plan_info(info, self.name)?;
        self.store_plan(depth, Plan { float_ws: ws.0.clone(), int_ws: ws.1.clone(), info });
        Ok(())
    }

    /// FlashInfer's plan for the ragged prefill.
    #[allow(clippy::too_many_arguments, reason = "the plan's own arguments")]
    pub(crate) fn plan_ragged(
        &mut self,
        ws: (&ObjectRef, &ObjectRef, &ObjectRef),
        indptr: &[i32],
        heads: (i64, i64),
        dims: (i64, i64),
        causal: bool,
    ) -> FfiResult<()> {
        let Imp::FlashInfer { plan, qk_override, v_override, .. } = &self.imp else { return Ok(()) };
        let (mut qo_heads, mut kv_heads) = heads;
        let (mut qk, mut v) = dims;
        if *qk_override >= 0 {
            qk = *qk_override;
        }
        if *v_override >= 0 {
            v = *v_override;
            kv_heads = qo_heads;
        }
        qo_heads = qo_heads.max(0);
        let batch = indptr.len().saturating_sub(1);
        let kv_len: Vec<i32> = (0..batch).map(|k| indptr[k + 1] - indptr[k]).collect();
        let total = indptr.last().copied().unwrap_or(0) as i64;
        let (qo_t, kl_t) = (host_tensor(indptr)?, host_tensor(&kv_len)?);
        let info = call(
            plan,
            self.name,
            &[
                t(ws.0),
                t(ws.1),
                t(ws.2),
                t(&qo_t),
                t(&qo_t),
                t(&kl_t),
                i(total),
                i(batch as i64),
                i(qo_heads),
                i(kv_heads),
                i(1),
                b(false),
                i(qk),
                i(v),
                b(causal),
                i(-1),
                i(-1),
                b(false),
                i(0),
            ],
        )?;
        let info = plan_info(info, self.name)?;
        self.store_plan(0, Plan { float_ws: ws.0.clone(), int_ws: ws.1.clone(), info });
        Ok(())
    }

    /// FlashInfer's plan for a paged decode at `depth`.
    #[allow(clippy::too_many_arguments, reason = "the plan's own arguments")]
    pub(crate) fn plan_decode(
        &mut self,
        depth: usize,
        ws: (&ObjectRef, &ObjectRef, &ObjectRef),
        page_indptr: &[i32],
        batch: i64,
        page_size: i64,
        heads: (i64, i64),
        dims: (i64, i64),
        dtypes: (DLDataType, DLDataType),
    ) -> FfiResult<()> {
        let Imp::FlashInfer { plan, .. } = &self.imp else { return Ok(()) };
        // SAFETY: a live tensor.
        let device = unsafe { tensor::dltensor(ws.0.as_ptr()) }.device;
        let (eq, ekv) = (tensor::empty(&[0], dtypes.0, device)?, tensor::empty(&[0], dtypes.1, device)?);
        let pi_t = host_tensor(page_indptr)?;
        let info = call(
            plan,
            self.name,
            &[
                t(ws.0),
                t(ws.1),
                t(ws.2),
                t(&pi_t),
                i(batch),
                i(heads.0),
                i(heads.1),
                i(page_size),
                b(false),
                i(-1),
                f(0.0),
                i(dims.0),
                i(dims.1),
                t(&eq),
                t(&ekv),
            ],
        )?;
        let info = plan_info(info, self.name)?;
        self.store_plan(depth, Plan { float_ws: ws.0.clone(), int_ws: ws.1.clone(), info });
        Ok(())
    }
}

fn plan_info(v: Any, name: &str) -> FfiResult<Any> {
    if v.type_index() != ti::ARRAY {
        return Err(FfiError::type_error(format!(
            "{name}: FlashInfer's plan must return an Array of ints, got {}",
            types::type_key(v.type_index())
        )));
    }
    Ok(v)
}

fn dim(d: &DLTensor, k: usize) -> FfiResult<i64> {
    tvm_runtime_classic::device::tensor_shape(d)?
        .get(k)
        .copied()
        .ok_or_else(|| FfiError::value(format!("a tensor of {} dimensions has no dimension {k}", d.ndim)))
}

fn elem_bytes(d: &DLTensor) -> u64 {
    (d.dtype.bits as u64 * d.dtype.lanes as u64).div_ceil(8)
}

/// A strided view over `source`'s memory (zero byte offset: FlashInfer reads `data` as is).
fn strided_view(
    source: &ObjectRef,
    d: &DLTensor,
    data_offset: u64,
    shape: &[i64],
    strides: &[i64],
) -> FfiResult<ObjectRef> {
    let mut shape = shape.to_vec();
    let mut strides = strides.to_vec();
    let proto = DLTensor {
        // SAFETY: an offset inside the source tensor's memory (computed from its own extent).
        data: unsafe { (d.data as *mut u8).add((d.byte_offset + data_offset) as usize) }.cast(),
        device: d.device,
        ndim: shape.len() as i32,
        dtype: d.dtype,
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset: 0,
    };
    // SAFETY: `source` is a live tensor; `proto` a valid DLTensor for the call's duration.
    unsafe { tensor::create_view(source.as_ptr(), &proto) }
}

fn compact(shape: &[i64]) -> Vec<i64> {
    tensor::compact_strides(shape)
}

/// `ZeroByteOffsetView`.
fn zero_offset(o: &ObjectRef) -> FfiResult<ObjectRef> {
    // SAFETY: a live tensor.
    let d = unsafe { tensor::dltensor(o.as_ptr()) };
    if d.byte_offset == 0 {
        return Ok(o.clone());
    }
    let shape = tvm_runtime_classic::device::tensor_shape(d)?.to_vec();
    strided_view(o, d, 0, &shape, &compact(&shape))
}

/// `PagedKVCacheView`: the K (0) or V (1) half of `(pages, 2, heads, page_size, dim)`.
fn kv_half(pages: &ObjectRef, which: i64) -> FfiResult<ObjectRef> {
    // SAFETY: a live tensor.
    let d = unsafe { tensor::dltensor(pages.as_ptr()) };
    let s = tvm_runtime_classic::device::tensor_shape(d)?;
    if s.len() != 5 || s[1] != 2 {
        return Err(internal("FlashInfer needs pages of layout (num_pages, 2, heads, page_size, dim)"));
    }
    let inner = s[2] * s[3] * s[4];
    strided_view(
        pages,
        d,
        (which * inner) as u64 * elem_bytes(d),
        &[s[0], s[2], s[3], s[4]],
        &[2 * inner, s[3] * s[4], s[4], 1],
    )
}

/// `SliceLastDimView`: `[start, start + len)` of the last dimension.
fn slice_last(o: &ObjectRef, start: i64, len: i64) -> FfiResult<ObjectRef> {
    // SAFETY: a live tensor.
    let d = unsafe { tensor::dltensor(o.as_ptr()) };
    let mut shape = tvm_runtime_classic::device::tensor_shape(d)?.to_vec();
    let strides = if d.strides.is_null() {
        compact(&shape)
    } else {
        // SAFETY: a DLTensor's strides hold `ndim` values.
        unsafe { std::slice::from_raw_parts(d.strides, shape.len()) }.to_vec()
    };
    let last = shape.len().checked_sub(1).ok_or_else(|| internal("slicing a 0-d tensor"))?;
    if start < 0 || len < 0 || start + len > shape[last] {
        return Err(internal(format!("slice [{start}, {}) of a last dimension of {}", start + len, shape[last])));
    }
    shape[last] = len;
    strided_view(o, d, (start * strides[last]) as u64 * elem_bytes(d), &shape, &strides)
}
