//! `relax.vm.PagedAttentionKVCache` (TVM's `PagedAttentionKVCacheObj`): K/V pages per layer,
//! the sequences over them ([`super::paging`]), the current forward pass ([`super::forward`]) and
//! its arrays on the device ([`super::aux_data`]), and the attention calls that run the kernels
//! the cache was made with ([`super::backend`]).
#![allow(clippy::needless_range_loop, reason = "parallel per-depth arrays, indexed as TVM does")]

use super::aux_data::{Aux, Slot, I32};
use super::backend::{call, i, t, AttnFn, Family, Paged, Rope};
use super::forward::{self, Batch, Config, MAX_DEPTH};
use super::paging::{missing, Pages};
use super::{arg, attention_kv_cache_index, float, int, internal, object_of, shape, tensor, Args, Guarded, KvState};
use std::sync::OnceLock;
use tvm_runtime_classic::abi::{DLDataType, DLDevice, DLTensor};
use tvm_runtime_tvm_ffi::any::Any;
use tvm_runtime_tvm_ffi::containers::array::{make_array, seq_items};
use tvm_runtime_tvm_ffi::object::{make_object, ObjectRef};
use tvm_runtime_tvm_ffi::registry::Builder;
use tvm_runtime_tvm_ffi::{tensor as ten, ti, types, FfiError, FfiResult};

/// `relax.vm.PagedAttentionKVCache`.
pub fn paged_kv_cache_index() -> i32 {
    static I: OnceLock<i32> = OnceLock::new();
    *I.get_or_init(|| {
        types::get_or_alloc_index("relax.vm.PagedAttentionKVCache", -1, 3, 0, false, attention_kv_cache_index())
            .unwrap_or_else(|e| panic!("registering relax.vm.PagedAttentionKVCache: {}", e.message()))
    })
}

/// The attention kinds of layers (`AttnKind`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AttnKind {
    Mha = 0,
    Mla = 1,
    Linear = 2,
    MhaSliding = 3,
}

/// `RoPEMode`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RopeMode {
    None = 0,
    Normal = 1,
    Inline = 2,
}

const F32: DLDataType = DLDataType { code: 2, bits: 32, lanes: 1 };
const U8: DLDataType = DLDataType { code: 1, bits: 8, lanes: 1 };
const INT_WORKSPACE: i64 = 8 * 1024 * 1024;
const FLOAT_WORKSPACE: i64 = 768 * 1024 * 1024;

/// The kernels a cache was made with.
struct Kernels {
    transpose_append_mha: Option<ObjectRef>,
    transpose_append_mla: Option<ObjectRef>,
    compact_copy: ObjectRef,
    prefill_ragged: Option<AttnFn>,
    prefill: Option<AttnFn>,
    decode: Option<AttnFn>,
    prefill_sw: Option<AttnFn>,
    decode_sw: Option<AttnFn>,
    tree_paged: Option<AttnFn>,
    tree_ragged: Option<AttnFn>,
    mla_prefill: Option<AttnFn>,
    merge: Vec<ObjectRef>,
    split_rotary: ObjectRef,
    copy_single_page: ObjectRef,
    debug_get_kv: ObjectRef,
}

/// The device views of the current forward's arrays.
#[derive(Default)]
struct Views {
    q_rope: Option<ObjectRef>,
    qo_indptr: [Option<ObjectRef>; MAX_DEPTH],
    page_indptr: [Option<ObjectRef>; MAX_DEPTH],
    page_indices: [Option<ObjectRef>; MAX_DEPTH],
    page_indptr_sw: [Option<ObjectRef>; MAX_DEPTH],
    page_indices_sw: [Option<ObjectRef>; MAX_DEPTH],
    length_info: [Option<ObjectRef>; MAX_DEPTH],
    length_info_sw: [Option<ObjectRef>; MAX_DEPTH],
    k_rope: [Option<ObjectRef>; MAX_DEPTH],
    k_rope_sw: [Option<ObjectRef>; MAX_DEPTH],
    tree_mask: [Option<ObjectRef>; MAX_DEPTH],
    tree_mn_indptr: [Option<ObjectRef>; MAX_DEPTH],
    append_indptr: Option<ObjectRef>,
    k_ragged_rope: Option<ObjectRef>,
    append_position: Option<ObjectRef>,
    temp_o: Option<ObjectRef>,
    temp_lse: Option<ObjectRef>,
    merged_lse: Option<ObjectRef>,
    /// Entries in `page_indices` per depth (a depth without pages has no cross attention).
    num_page_indices: [usize; MAX_DEPTH],
}

fn v(o: &Option<ObjectRef>) -> FfiResult<&ObjectRef> {
    o.as_ref().ok_or_else(|| internal("the auxiliary arrays of the forward are not on the device"))
}

struct State {
    cfg: Config,
    num_layers: i64,
    layer_begin: i64,
    num_qo_heads: i64,
    num_kv_heads: i64,
    qk_head_dim: i64,
    v_head_dim: i64,
    attn_kinds: Vec<AttnKind>,
    rope_mode: RopeMode,
    rotary_scale: f64,
    rotary_theta: f64,
    rope_ext_factors: Option<ObjectRef>,
    dtype: DLDataType,
    device: DLDevice,
    pages: Vec<ObjectRef>,
    paging: Pages,
    batch: Batch,
    /// Bumped by every change of the sequences: attention needs the forward of the current one.
    generation: u64,
    batch_generation: u64,
    dirty: bool,
    aux: Aux,
    compact_aux: Aux,
    views: Views,
    temp_q: Option<ObjectRef>,
    temp_k: Option<ObjectRef>,
    temp_v: Option<ObjectRef>,
    temp_o: ObjectRef,
    temp_lse: ObjectRef,
    merged_lse: ObjectRef,
    /// FlashInfer's workspaces: integer ones (ragged, depth 0, depth 1; device and host) and
    /// the float one.
    int_ws: Vec<ObjectRef>,
    int_pinned_ws: Vec<ObjectRef>,
    float_ws: Option<ObjectRef>,
    k: Kernels,
}

/// The payload of a cache object.
pub(crate) struct PagedKvCache(Guarded<State>);

/// The cache behind an object, if it is one.
pub(crate) fn as_cache(o: &ObjectRef) -> Option<&PagedKvCache> {
    // SAFETY: objects of this type index are made by `create` with this payload.
    (o.type_index() == paged_kv_cache_index()).then(|| unsafe { o.payload::<PagedKvCache>() })
}

fn dl(o: &ObjectRef) -> &DLTensor {
    // SAFETY: callers pass tensors (checked at the boundary or made here).
    unsafe { ten::dltensor(o.as_ptr()) }
}

fn dims(o: &ObjectRef) -> FfiResult<&[i64]> {
    Ok(tvm_runtime_classic::device::tensor_shape(dl(o))?)
}

/// A view of the first elements of `o` with `shape` and `o`'s dtype (`CreateView`).
fn view(o: &ObjectRef, shape: &[i64], what: &str) -> FfiResult<ObjectRef> {
    let d = dl(o);
    let need = super::super::objects::data_size(shape, d.dtype)?;
    let have = super::super::objects::data_size(dims(o)?, d.dtype)?;
    if need > have {
        return Err(internal(format!("{what}: a view of {shape:?} does not fit the buffer of {:?}", dims(o)?)));
    }
    Ok(ten::in_owner(o.clone(), d.data, d.byte_offset, shape, d.dtype, d.device))
}

fn check(cond: bool, msg: impl FnOnce() -> String) -> FfiResult<()> {
    if cond {
        Ok(())
    } else {
        Err(internal(msg()))
    }
}

impl State {
    fn local_layer(&self, layer: i64, what: &str) -> FfiResult<usize> {
        let local = layer - self.layer_begin;
        check(local >= 0 && local < self.num_layers && (layer as usize) < self.attn_kinds.len(), || {
            format!(
                "{what}: layer {layer} is out of range (the cache holds layers {}..{})",
                self.layer_begin,
                self.layer_begin + self.num_layers
            )
        })?;
        Ok(local as usize)
    }

    fn check_dtype(&self, o: &ObjectRef, name: &str, what: &str) -> FfiResult<()> {
        let d = dl(o).dtype;
        check(d == self.dtype, || {
            format!(
                "{what}: {name} has dtype {}, the KV cache holds {}",
                tvm_runtime_tvm_ffi::dtype::format(d).unwrap_or_default(),
                tvm_runtime_tvm_ffi::dtype::format(self.dtype).unwrap_or_default()
            )
        })
    }

    fn check_dims(&self, o: &ObjectRef, name: &str, want: &[Option<i64>], what: &str) -> FfiResult<()> {
        let s = dims(o)?;
        let ok = s.len() == want.len()
            && s.iter().zip(want).all(|(a, w)| match w {
                Some(w) => a == w,
                None => true,
            });
        check(ok, || {
            let w: Vec<String> = want.iter().map(|x| x.map_or("_".into(), |x| x.to_string())).collect();
            format!("{what}: {name} has shape {s:?}, expected ({})", w.join(", "))
        })
    }

    fn total(&self) -> i64 {
        self.batch.total as i64
    }

    /// The forward's arrays must be current.
    fn ready(&mut self, what: &str) -> FfiResult<()> {
        check(self.batch.active && self.batch_generation == self.generation, || {
            format!("{what}: no forward pass is in progress (call vm.builtin.kv_state_begin_forward after changing sequences)")
        })?;
        self.sync()
    }

    /// `ComputeStreamWaitForCopyStream`: the arrays to the device, then FlashInfer's plans.
    fn sync(&mut self) -> FfiResult<()> {
        if !self.dirty {
            return Ok(());
        }
        self.sync_aux()?;
        self.kernel_begin_forward()?;
        self.dirty = false;
        Ok(())
    }

    /// `SyncAuxArrayToDevice`, in TVM's order of arrays.
    fn sync_aux(&mut self) -> FfiResult<()> {
        let b = &self.batch;
        let nd = b.num_depths;
        let (lsw, sliding) = (self.cfg.layer_sliding, self.cfg.sliding);
        let total = b.total as usize;
        check(b.append_position_map.len() == total && b.q_rope_position_map.len() == total, || {
            "the forward's position maps do not match its length".into()
        })?;
        let a = &mut self.aux;
        a.reset();
        let q_rope = a.push(&b.q_rope_position_map);
        let mut slots = [[Slot::default(); 12]; MAX_DEPTH];
        for d in 0..nd {
            slots[d][0] = a.push(&b.depths[d].qo_indptr);
        }
        for d in 0..nd {
            slots[d][1] = a.push(&b.depths[d].page_indptr);
        }
        for d in 0..nd {
            slots[d][2] = a.push(&b.depths[d].page_indices);
        }
        if lsw {
            for d in 0..nd {
                slots[d][3] = a.push(&b.depths[d].page_indptr_sw);
            }
            for d in 0..nd {
                slots[d][4] = a.push(&b.depths[d].page_indices_sw);
            }
        }
        for d in 0..nd {
            let x = &b.depths[d];
            slots[d][5] = if !sliding {
                a.push(&x.last_page_len)
            } else {
                a.push_rows(&[&x.last_page_len, &x.sliding_window_offset, &x.sink_size])
            };
            if lsw {
                slots[d][6] = a.push_rows(&[&x.last_page_len, &x.sliding_window_offset, &x.sink_size]);
            }
        }
        for d in 0..nd {
            slots[d][7] = a.push(&b.depths[d].k_rope_pos_offset);
            if lsw {
                slots[d][8] = a.push(&b.depths[d].k_rope_pos_offset_sw);
            }
        }
        let append_indptr = a.push(&b.append_indptr);
        let k_ragged = a.push(&b.k_ragged_rope_pos_offset);
        let append_pos = a.push(&b.append_position_map);
        // The KV-transfer maps (no transfer here: -1 for each token), kept for TVM's layout.
        a.push_fill(-1, total);
        a.push_fill(-1, total);
        for d in 0..nd {
            if !b.is_chain[d] {
                slots[d][9] = a.push(&b.depths[d].tree_mask);
                slots[d][10] = a.push(&b.depths[d].tree_mn_indptr);
            }
        }
        let buf = a.commit()?;
        let w = &mut self.views;
        w.q_rope = Some(a.view(&buf, q_rope));
        for d in 0..nd {
            let s = &slots[d];
            w.qo_indptr[d] = Some(a.view(&buf, s[0]));
            w.page_indptr[d] = Some(a.view(&buf, s[1]));
            w.page_indices[d] = Some(a.view(&buf, s[2]));
            w.num_page_indices[d] = b.depths[d].page_indices.len();
            if lsw {
                w.page_indptr_sw[d] = Some(a.view(&buf, s[3]));
                w.page_indices_sw[d] = Some(a.view(&buf, s[4]));
                w.length_info_sw[d] = Some(a.view(&buf, s[6]));
                w.k_rope_sw[d] = Some(a.view(&buf, s[8]));
            }
            w.length_info[d] = Some(a.view(&buf, s[5]));
            w.k_rope[d] = Some(a.view(&buf, s[7]));
            if !b.is_chain[d] {
                let n = b.depths[d].tree_mask.len() as i64 / 2;
                w.tree_mask[d] = Some(a.view_shaped(&buf, s[9], &[n, 2]));
                w.tree_mn_indptr[d] = Some(a.view(&buf, s[10]));
            }
        }
        w.append_indptr = Some(a.view(&buf, append_indptr));
        w.k_ragged_rope = Some(a.view(&buf, k_ragged));
        w.append_position = Some(a.view(&buf, append_pos));
        let (n, qo, vd) = (total as i64, self.num_qo_heads, self.v_head_dim);
        w.temp_o = Some(view(&self.temp_o, &[n, qo, vd], "the attention output buffer")?);
        w.temp_lse = Some(view(&self.temp_lse, &[n, qo], "the attention LSE buffer")?);
        w.merged_lse = Some(view(&self.merged_lse, &[n, qo], "the attention LSE buffer")?);
        Ok(())
    }

    /// `KernelBeginForward`: FlashInfer's plans (TIR kernels have none).
    fn kernel_begin_forward(&mut self) -> FfiResult<()> {
        if self.float_ws.is_none() {
            return Ok(());
        }
        let range = &self.attn_kinds[self.layer_begin as usize..(self.layer_begin + self.num_layers) as usize];
        let (mha, mla) = (range.contains(&AttnKind::Mha), range.contains(&AttnKind::Mla));
        let fws = self.float_ws.clone().expect("checked above");
        let heads = (self.num_qo_heads, self.num_kv_heads);
        let dims = (self.qk_head_dim, self.v_head_dim);
        let b = &self.batch;
        let ps = self.paging.page_size as i64;
        for (is_mla, on) in [(false, mha), (true, mla)] {
            if !on {
                continue;
            }
            if !b.append_before_attn && b.is_chain[0] {
                if let Some(r) = self.k.prefill_ragged.as_mut().filter(|r| r.is_flashinfer()) {
                    r.plan_ragged(
                        (&fws, &self.int_ws[0], &self.int_pinned_ws[0]),
                        &b.append_indptr,
                        heads,
                        dims,
                        true,
                    )?;
                }
            }
            for d in 0..b.num_depths {
                if b.depths[d].page_indices.is_empty() {
                    continue;
                }
                check(!(self.cfg.sliding && (is_mla || self.cfg.layer_sliding)), || {
                    "Kernel BeginForward doesn't support sliding window.".into()
                })?;
                let ws = (&fws, &self.int_ws[d + 1], &self.int_pinned_ws[d + 1]);
                let x = &b.depths[d];
                if !is_mla && b.use_decode[d] {
                    if let Some(k) = self.k.decode.as_mut().filter(|k| k.is_flashinfer()) {
                        let n = b.seq_ids.len() as i64;
                        k.plan_decode(d, ws, &x.page_indptr, n, ps, heads, dims, (self.dtype, self.dtype))?;
                    }
                } else {
                    let k = if is_mla { self.k.mla_prefill.as_mut() } else { self.k.prefill.as_mut() };
                    if let Some(k) = k.filter(|k| k.is_flashinfer()) {
                        let total = *b.append_indptr.last().unwrap_or(&0) as i64;
                        k.plan_paged_prefill(
                            d,
                            ws,
                            &x.qo_indptr,
                            &x.page_indptr,
                            &x.last_page_len,
                            total,
                            ps,
                            heads,
                            dims,
                            is_mla,
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    fn rope(&self, sliding_layer: bool) -> Rope {
        let inline = self.rope_mode == RopeMode::Inline;
        if sliding_layer {
            Rope { inline, scale: 1.0, theta: 10000.0 }
        } else {
            Rope { inline, scale: self.rotary_scale, theta: self.rotary_theta }
        }
    }

    /// `MHASelfAttnInternal`: the new tokens with each other.
    #[allow(clippy::too_many_arguments, reason = "TVM's internal attention step")]
    fn self_attn(
        &self,
        q: &ObjectRef,
        k: &ObjectRef,
        vv: &ObjectRef,
        o: &ObjectRef,
        lse: &ObjectRef,
        sm: f64,
        mla: bool,
    ) -> FfiResult<()> {
        let w = &self.views;
        let rope = if mla { Rope { inline: false, ..self.rope(false) } } else { self.rope(false) };
        if self.batch.is_chain[0] || mla {
            check(self.batch.is_chain[0], || "Tree attn not able for MLA for now.".into())?;
            let f =
                self.k.prefill_ragged.as_ref().ok_or_else(|| internal("the ragged prefill kernel is not defined"))?;
            f.ragged_mha(q, k, vv, v(&w.append_indptr)?, v(&w.q_rope)?, v(&w.k_ragged_rope)?, true, rope, sm, o, lse)
        } else {
            let f = self
                .k
                .tree_ragged
                .as_ref()
                .ok_or_else(|| internal("Function \"f_attention_prefill_with_tree_mask_\" is not defined."))?;
            f.ragged_tree_mha(
                q,
                k,
                vv,
                v(&w.append_indptr)?,
                v(&w.q_rope)?,
                v(&w.tree_mn_indptr[0])?,
                v(&w.tree_mask[0])?,
                rope,
                sm,
                o,
                lse,
            )
        }
    }

    /// `MHACrossAttnInternal` / `MLACrossAttnInternal`: the queries with the cached pages, one
    /// kernel per depth, merged into `o`/`lse`. Whether anything was computed.
    #[allow(clippy::too_many_arguments, reason = "TVM's internal attention step")]
    fn cross_attn(
        &self,
        local: usize,
        q: &ObjectRef,
        o: &ObjectRef,
        lse: &ObjectRef,
        sm: f64,
        mut first: bool,
        causal: bool,
    ) -> FfiResult<bool> {
        let kind = self.attn_kinds[local + self.layer_begin as usize];
        let w = &self.views;
        let b = &self.batch;
        let sliding_fn = self.cfg.sliding || kind == AttnKind::MhaSliding;
        let (prefill, decode) =
            if sliding_fn { (&self.k.prefill_sw, &self.k.decode_sw) } else { (&self.k.prefill, &self.k.decode) };
        let mut computed = false;
        for d in 0..b.num_depths {
            if w.num_page_indices[d] == 0 {
                continue;
            }
            let (out, l) = if first { (o, lse) } else { (v(&w.temp_o)?, v(&w.temp_lse)?) };
            let pages = &self.pages[local];
            if kind == AttnKind::Mla {
                check(b.is_chain[d], || "Tree attn not able for MLA for now.".into())?;
                let f = self.k.mla_prefill.as_ref().ok_or_else(|| internal("the MLA prefill kernel is not defined"))?;
                let p = Paged {
                    pages,
                    page_indptr: v(&w.page_indptr[d])?,
                    page_indices: v(&w.page_indices[d])?,
                    length_info: v(&w.length_info[d])?,
                };
                f.paged_prefill_mla(d, q, v(&w.qo_indptr[d])?, &p, false, sm, out, l)?;
            } else {
                let sliding_layer = kind == AttnKind::MhaSliding;
                let (p, k_rope) = if sliding_layer {
                    let p = Paged {
                        pages,
                        page_indptr: v(&w.page_indptr_sw[d])?,
                        page_indices: v(&w.page_indices_sw[d])?,
                        length_info: v(&w.length_info_sw[d])?,
                    };
                    (p, v(&w.k_rope_sw[d])?)
                } else {
                    let p = Paged {
                        pages,
                        page_indptr: v(&w.page_indptr[d])?,
                        page_indices: v(&w.page_indices[d])?,
                        length_info: v(&w.length_info[d])?,
                    };
                    (p, v(&w.k_rope[d])?)
                };
                let rope = self.rope(sliding_layer);
                let q_rope = v(&w.q_rope)?;
                if b.append_before_attn && !b.is_chain[d] {
                    let f = self
                        .k
                        .tree_paged
                        .as_ref()
                        .ok_or_else(|| internal("the tree-attention kernel is not defined"))?;
                    f.paged_tree_mha(
                        q,
                        v(&w.qo_indptr[d])?,
                        &p,
                        k_rope,
                        q_rope,
                        v(&w.tree_mn_indptr[d])?,
                        v(&w.tree_mask[d])?,
                        rope,
                        sm,
                        out,
                        l,
                    )?;
                } else if b.use_decode[d] {
                    let f = decode.as_ref().ok_or_else(|| internal("the decode kernel is not defined"))?;
                    f.decode_mha(d, q, &p, k_rope, q_rope, rope, sm, out, l)?;
                } else {
                    let f = prefill.as_ref().ok_or_else(|| internal("the prefill kernel is not defined"))?;
                    f.paged_prefill_mha(d, q, v(&w.qo_indptr[d])?, &p, q_rope, k_rope, causal, rope, sm, out, l)?;
                }
            }
            if !first {
                call(&self.k.merge[0], "f_merge_inplace", &[t(o), t(lse), t(v(&w.temp_o)?), t(v(&w.temp_lse)?)])?;
            } else {
                first = false;
            }
            computed = true;
        }
        Ok(computed)
    }

    /// `AttentionInternal`.
    fn attention(
        &self,
        layer: i64,
        q: &ObjectRef,
        k: &ObjectRef,
        vv: &ObjectRef,
        o: &ObjectRef,
        sm: f64,
    ) -> FfiResult<()> {
        let local = self.local_layer(layer, "attention")?;
        let merged = v(&self.views.merged_lse)?;
        let mut first = true;
        if !self.batch.append_before_attn {
            first = false;
            self.self_attn(q, k, vv, o, merged, sm, false)?;
        }
        let causal = !self.batch.append_before_attn && self.attn_kinds[layer as usize] == AttnKind::MhaSliding;
        let cross = self.cross_attn(local, q, o, merged, sm, first, causal)?;
        check(!first || cross, || "Both self-attention and cross-attention are not computed.".into())
    }

    fn attention_with_fused_qkv(&mut self, layer: i64, qkv: &ObjectRef, o: &ObjectRef, sm: f64) -> FfiResult<()> {
        let what = "vm.builtin.attention_kv_cache_attention_with_fused_qkv";
        let local = self.local_layer(layer, what)?;
        self.check_dtype(qkv, "qkv_data", what)?;
        self.check_dtype(o, "o_data", what)?;
        let kind = self.attn_kinds[layer as usize];
        check(matches!(kind, AttnKind::Mha | AttnKind::MhaSliding), || {
            format!("{what}: layer {layer} is not an MHA layer")
        })?;
        let (qo, kv, dh) = (self.num_qo_heads, self.num_kv_heads, self.qk_head_dim);
        self.check_dims(qkv, "qkv_data", &[None, Some(qo + 2 * kv), Some(dh)], what)?;
        let n = dims(qkv)?[0];
        self.check_dims(o, "o_data", &[Some(n), Some(qo), Some(dh)], what)?;
        self.ready(what)?;
        let total = self.total();
        check(total <= n, || format!("{what}: qkv_data has {n} rows, the forward has {total} tokens"))?;
        let tq = self.temp_q.as_ref().ok_or_else(|| internal("no query buffer (no MHA layer)"))?;
        let q = view(tq, &[total, qo, dh], what)?;
        let k = view(self.temp_k.as_ref().expect("made with temp_q"), &[total, kv, dh], what)?;
        let vv = view(self.temp_v.as_ref().expect("made with temp_q"), &[total, kv, dh], what)?;
        let (qkv_v, o_v) = if total != n {
            (view(qkv, &[total, qo + 2 * kv, dh], what)?, view(o, &[total, qo, dh], what)?)
        } else {
            (qkv.clone(), o.clone())
        };
        let q_rope = v(&self.views.q_rope)?;
        let last = match &self.rope_ext_factors {
            None => i((self.rope_mode == RopeMode::Normal) as i64),
            Some(e) => t(e),
        };
        call(&self.k.split_rotary, "f_split_rotary", &[t(&qkv_v), t(q_rope), t(&q), t(&k), t(&vv), last])?;
        let append =
            self.k.transpose_append_mha.as_ref().ok_or_else(|| internal("f_transpose_append_mha is not defined"))?;
        let pos = v(&self.views.append_position)?;
        let pages = &self.pages[local];
        if self.batch.append_before_attn {
            call(append, "f_transpose_append", &[t(pages), t(&k), t(&vv), t(pos)])?;
        }
        self.attention(layer, &q, &k, &vv, &o_v, sm)?;
        if !self.batch.append_before_attn {
            call(append, "f_transpose_append", &[t(pages), t(&k), t(&vv), t(pos)])?;
        }
        Ok(())
    }

    fn debug_get_kv(&self, id: i64, start: i64, end: i64, outs: &[ObjectRef], mla: bool) -> FfiResult<()> {
        let what = "vm.builtin.attention_kv_cache_debug_get_kv";
        let seq = self.paging.seq(id)?;
        check(start >= 0, || format!("DebugGetKV does not accept negative start_pos {start}"))?;
        check(end <= seq.seq_length as i64, || "DebugGetKV does not accept out-of-range end_pos".into())?;
        check(start < end, || "DebugGetKV does not accept \"start_pos >= end_pos\"".into())?;
        for o in outs {
            if mla {
                self.check_dims(
                    o,
                    "kv_data",
                    &[Some(self.num_layers), Some(end - start), Some(self.qk_head_dim)],
                    what,
                )?;
            } else {
                self.check_dims(
                    o,
                    "k_data/v_data",
                    &[Some(self.num_layers), Some(end - start), Some(self.num_kv_heads), Some(self.qk_head_dim)],
                    what,
                )?;
            }
        }
        let want = if mla { AttnKind::Mla } else { AttnKind::Mha };
        for layer in 0..self.num_layers as usize {
            check(self.attn_kinds.get(layer) == Some(&want), || {
                format!(
                    "Only {} layers are supported for DebugGetKV{}",
                    if mla { "MLA" } else { "MHA" },
                    if mla { "MLA" } else { "" }
                )
            })?;
        }
        let positions = self.paging.positions(seq);
        let map = ten::empty(&[end - start], I32, self.device)?;
        let part = &positions[start as usize..end as usize];
        tvm_runtime_tvm_ffi::runtime_api::copy_from_bytes(dl(&map), part.as_ptr().cast(), part.len() * 4)?;
        for (layer, pages) in self.pages.iter().enumerate() {
            let mut a = vec![t(pages), t(&map)];
            a.extend(outs.iter().map(t));
            a.push(i(layer as i64));
            call(&self.k.debug_get_kv, "f_debug_get_kv", &a)?;
        }
        Ok(())
    }

    /// `CommitAcceptedTokenTreeNodes`.
    fn commit(&mut self, ids: &[i64], leaves: &[i64]) -> FfiResult<()> {
        check(ids.len() == leaves.len(), || "The given seq_ids and leaf_indices have different size.".into())?;
        check(self.batch.active && ids == self.batch.seq_ids.as_slice(), || {
            format!("the sequences to commit {ids:?} are not those of the last forward {:?}", self.batch.seq_ids)
        })?;
        let mut any_tree = false;
        for (&id, &leaf) in ids.iter().zip(leaves) {
            let s = self.paging.seq(id)?;
            any_tree |= !s.is_chain;
            check(leaf == -1 || !s.committed, || {
                format!("The accepted nodes of sequence {id} are already committed.")
            })?;
            check(leaf >= -1, || format!("Invalid tree index {leaf} which is less than -1"))?;
            check(leaf < s.tree_parent.len() as i64, || {
                format!(
                    "Invalid tree index {leaf} which is larger than or equals to the append length {} of the sequence",
                    s.tree_parent.len()
                )
            })?;
        }
        let b = &self.batch;
        let mut pops = Vec::with_capacity(ids.len());
        let (mut indptr, mut src, mut dst) = (vec![0i32], Vec::new(), Vec::new());
        for (k, (&id, &leaf)) in ids.iter().zip(leaves).enumerate() {
            let s = &self.paging.seqs[&id];
            let accepted = if leaf == -1 { 0 } else { s.tree_depths[leaf as usize] + 1 };
            pops.push(b.lens[k] - accepted);
            if leaf == -1 {
                indptr.push(*indptr.last().expect("starts with 0"));
                continue;
            }
            let mut path = Vec::new();
            let mut node = leaf as i32;
            while node != -1 {
                path.push(node);
                node = s.tree_parent[node as usize];
            }
            check(path.len() as i32 == accepted, || "the accepted path does not match the tree depth".into())?;
            let mut dst_pos: Vec<i32> = (0..path.len() as i32).rev().collect();
            while !path.is_empty() && path.last() == dst_pos.last() {
                path.pop();
                dst_pos.pop();
            }
            let base = b.append_indptr[k] as usize;
            for (&sp, &dp) in path.iter().rev().zip(dst_pos.iter().rev()) {
                let at = |p: i32| {
                    b.append_position_map
                        .get(base + p as usize)
                        .copied()
                        .ok_or_else(|| internal(format!("tree node {p} of sequence {id} is outside the last forward")))
                };
                src.push(at(sp)?);
                dst.push(at(dp)?);
            }
            indptr.push(indptr.last().expect("starts with 0") + path.len() as i32);
        }
        if any_tree && !src.is_empty() {
            let a = &mut self.compact_aux;
            a.reset();
            let s_indptr = a.push(&indptr);
            let s_pos = a.push_rows(&[&src, &dst]);
            let buf = a.commit()?;
            let (vi, vp) = (a.view(&buf, s_indptr), a.view(&buf, s_pos));
            let n = b.seq_ids.len() as i64;
            for pages in &self.pages {
                call(&self.k.compact_copy, "f_compact_copy", &[t(pages), t(&vi), t(&vp), i(n)])?;
            }
        }
        for (&id, &n) in ids.iter().zip(&pops) {
            self.paging.popn(id, n as i64, &mut |_, _, _| Err(internal("popping a committed token tree forked")))?;
            let s = self.paging.seqs.get_mut(&id).ok_or_else(|| missing(id))?;
            s.committed = true;
            s.tree_parent.clear();
            s.tree_depths.clear();
        }
        self.generation += 1;
        self.dirty = true;
        Ok(())
    }

    /// `CopySinglePage` for every layer.
    fn copy_page(pages: &[ObjectRef], k: &ObjectRef, src: i32, dst: i32, len: i32) -> FfiResult<()> {
        for p in pages {
            call(k, "f_copy_single_page", &[t(p), i(src as i64), i(dst as i64), i(len as i64)])?;
        }
        Ok(())
    }
}

impl PagedKvCache {
    fn with<R>(&self, what: &str, f: impl FnOnce(&mut State) -> FfiResult<R>) -> FfiResult<R> {
        self.0.with(what, f)
    }
}

impl KvState for PagedKvCache {
    fn clear(&self) -> FfiResult<()> {
        self.with("vm.builtin.kv_state_clear", |s| {
            s.paging.clear();
            s.batch.active = false;
            s.generation += 1;
            s.dirty = false;
            Ok(())
        })
    }
    fn add_sequence(&self, id: i64) -> FfiResult<()> {
        self.with("vm.builtin.kv_state_add_sequence", |s| {
            s.paging.add_sequence(id)?;
            s.generation += 1;
            s.dirty = true;
            Ok(())
        })
    }
    fn remove_sequence(&self, id: i64) -> FfiResult<()> {
        self.with("vm.builtin.kv_state_remove_sequence", |s| {
            s.paging.remove_sequence(id)?;
            s.generation += 1;
            s.dirty = true;
            Ok(())
        })
    }
    fn fork_sequence(&self, parent: i64, child: i64, pos: i64) -> FfiResult<()> {
        self.with("vm.builtin.kv_state_fork_sequence", |s| {
            let (pages, k) = (&s.pages, &s.k.copy_single_page);
            s.paging.fork(parent, child, pos, &mut |src, dst, len| State::copy_page(pages, k, src, dst, len))?;
            s.generation += 1;
            s.dirty = true;
            Ok(())
        })
    }
    fn popn(&self, id: i64, n: i64) -> FfiResult<()> {
        self.with("vm.builtin.kv_state_popn", |s| {
            let (pages, k) = (&s.pages, &s.k.copy_single_page);
            s.paging.popn(id, n, &mut |src, dst, len| State::copy_page(pages, k, src, dst, len))?;
            s.generation += 1;
            s.dirty = true;
            Ok(())
        })
    }
    fn begin_forward(&self, ids: &[i64], lens: &[i64], tree: Option<&[i64]>) -> FfiResult<()> {
        self.with("vm.builtin.kv_state_begin_forward", |s| {
            forward::begin(&mut s.paging, &s.cfg, &mut s.batch, ids, lens, tree)?;
            s.generation += 1;
            s.batch_generation = s.generation;
            s.dirty = true;
            Ok(())
        })
    }
    fn end_forward(&self) -> FfiResult<()> {
        Ok(())
    }
}

#[path = "paged_create.rs"]
mod create;

/// Registers the attention globals and `vm.builtin.paged_attention_kv_cache_create`.
pub fn register(b: &mut Builder) {
    create::register(b);
}
