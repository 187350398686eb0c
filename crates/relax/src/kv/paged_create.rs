//! `vm.builtin.paged_attention_kv_cache_create` (the 28 or 29 arguments TVM v0.27's
//! `TIRPagedKVCache` / `FlashInferPagedKVCache` pass) and the `vm.builtin.attention_kv_cache_*`
//! globals of the paged cache.

use super::*;

fn opt_func(a: Args, k: usize) -> Option<ObjectRef> {
    a.get(k)
        .filter(|v| v.type_index == ti::FUNCTION && !v.obj_ptr().is_null())
        // SAFETY: a view of a live function.
        .and_then(|v| unsafe { ObjectRef::from_borrowed(v.obj_ptr()) })
}

fn func(a: Args, k: usize, name: &str) -> FfiResult<ObjectRef> {
    opt_func(a, k).ok_or_else(|| {
        let got = a.get(k).map_or("nothing".into(), |v| types::type_key(v.type_index));
        FfiError::type_error(format!(
            "vm.builtin.paged_attention_kv_cache_create: argument {k} ({name}) must be a function, got {got}"
        ))
    })
}

fn kernel(a: Args, k: usize, family: Family, name: &'static str) -> FfiResult<Option<AttnFn>> {
    AttnFn::from_array(arg(a, k, "vm.builtin.paged_attention_kv_cache_create")?, family, name)
}

fn create(a: Args) -> FfiResult<Any> {
    let what = "vm.builtin.paged_attention_kv_cache_create";
    check(a.len() == 28 || a.len() == 29, || format!("Invalid number of KV cache constructor args: {}", a.len()))?;
    let config = shape(a, 0, what)?;
    check(config.len() == 5 || config.len() == 6, || {
        "KV cache config must contain five legacy fields and an optional per-layer sliding window size.".into()
    })?;
    let layer_indptr = shape(a, 1, what)?;
    check(layer_indptr.len() == 2, || {
        format!(
            "{what}: the layer partition {layer_indptr:?} must have two entries (one group: this runtime has no Disco)"
        )
    })?;
    let (layer_begin, layer_end) = (layer_indptr[0], layer_indptr[1]);
    let num_layers = layer_end - layer_begin;
    let (qo, kv, qk, vd) = (int(a, 2, what)?, int(a, 3, what)?, int(a, 4, what)?, int(a, 5, what)?);
    check(qo > 0 && kv > 0 && qk > 0 && vd > 0 && qo % kv == 0, || {
        format!("{what}: invalid heads/head dims (query heads {qo}, KV heads {kv}, qk dim {qk}, v dim {vd})")
    })?;
    let kinds: Vec<AttnKind> = shape(a, 6, what)?
        .into_iter()
        .map(|k| match k {
            0 => Ok(AttnKind::Mha),
            1 => Ok(AttnKind::Mla),
            2 => Ok(AttnKind::Linear),
            3 => Ok(AttnKind::MhaSliding),
            _ => Err(internal(format!("{what}: unknown attention kind {k}"))),
        })
        .collect::<FfiResult<_>>()?;
    check(layer_begin >= 0 && num_layers > 0 && layer_end as usize <= kinds.len(), || {
        format!("{what}: layers {layer_begin}..{layer_end} do not fit the {} attention kinds", kinds.len())
    })?;
    let kv_transfer = tvm_runtime_tvm_ffi::any::view_as_bool(arg(a, 7, what)?)
        .ok_or_else(|| FfiError::type_error(format!("{what}: argument 7 (enable_kv_transfer) must be a bool")))?;
    if kv_transfer {
        return Err(internal(
            "KV transfer (disaggregation) needs NVSHMEM (runtime.disco.nvshmem.*), which this runtime does not have",
        ));
    }
    let rope_mode = match int(a, 8, what)? {
        0 => RopeMode::None,
        1 => RopeMode::Normal,
        2 => RopeMode::Inline,
        m => return Err(internal(format!("{what}: unknown RoPE mode {m}"))),
    };
    let (rotary_scale, rotary_theta) = (float(a, 9, what)?, float(a, 10, what)?);
    let rope_ext_factors = a.get(11).filter(|v| v.type_index == ti::TENSOR).and_then(|_| tensor(a, 11, what).ok());
    let init = tensor(a, 12, what)?;
    let (dtype, device) = (dl(&init).dtype, dl(&init).device);
    let k = Kernels {
        transpose_append_mha: opt_func(a, 13),
        transpose_append_mla: opt_func(a, 14),
        prefill_ragged: kernel(a, 15, Family::RaggedPrefill, "f_attention_prefill_ragged")?,
        prefill: kernel(a, 16, Family::PagedPrefill, "f_attention_prefill")?,
        decode: kernel(a, 17, Family::PagedDecode, "f_attention_decode")?,
        prefill_sw: kernel(a, 18, Family::PagedPrefill, "f_attention_prefill_sliding_window")?,
        decode_sw: kernel(a, 19, Family::PagedDecode, "f_attention_decode_sliding_window")?,
        tree_paged: kernel(a, 20, Family::PagedPrefillTree, "f_attention_prefill_with_tree_mask_paged_kv")?,
        tree_ragged: kernel(a, 21, Family::RaggedPrefillTree, "f_attention_prefill_with_tree_mask")?,
        mla_prefill: kernel(a, 22, Family::PagedPrefill, "f_mla_prefill")?,
        merge: {
            let m = object_of(a, 23, ti::ARRAY, what)?;
            let fs = seq_items(&m)
                .iter()
                .map(|x| x.as_object().filter(|o| o.type_index() == ti::FUNCTION))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| FfiError::type_error(format!("{what}: argument 23 must be an Array of functions")))?;
            check(!fs.is_empty(), || "Merge inplace function is not defined.".into())?;
            fs
        },
        split_rotary: func(a, 24, "f_split_rotary")?,
        copy_single_page: func(a, 25, "f_copy_single_page")?,
        debug_get_kv: func(a, 26, "f_debug_get_kv")?,
        compact_copy: func(a, 27, "f_compact_copy")?,
    };

    let (reserved, capacity, chunk, page_size) = (config[0], config[1], config[2], config[3]);
    let support_sliding = config[4] != 0;
    let layer_window = config.get(5).copied().unwrap_or(1024);
    check(layer_window > 0, || "Per-layer sliding window size must be positive.".into())?;
    check(reserved > 0 && capacity >= 0 && chunk > 0 && page_size > 0 && page_size <= i32::MAX as i64, || {
        format!("{what}: invalid cache config {config:?}")
    })?;
    let mut num_pages = (capacity + page_size - 1) / page_size + 1;
    if support_sliding {
        num_pages += reserved * 2;
    }
    check(num_pages <= i32::MAX as i64 && capacity <= i32::MAX as i64, || {
        format!("{what}: {num_pages} pages are too many")
    })?;
    let layer_sliding = kinds.contains(&AttnKind::MhaSliding);
    let sliding = support_sliding && !layer_sliding;
    if kinds.contains(&AttnKind::Mla) {
        check(!sliding, || "Sliding window not supported yet for MLA".into())?;
    }
    let rope_mode = if support_sliding && rope_mode != RopeMode::None { RopeMode::Inline } else { rope_mode };
    if rope_ext_factors.is_some() {
        check(rope_mode == RopeMode::Normal, || {
            "The RoPE mode must be normal to support RoPE extension factors.".into()
        })?;
    }
    let flashinfer = [
        &k.prefill,
        &k.prefill_ragged,
        &k.decode,
        &k.prefill_sw,
        &k.decode_sw,
        &k.tree_ragged,
        &k.tree_paged,
        &k.mla_prefill,
    ]
    .iter()
    .any(|x| x.as_ref().is_some_and(|x| x.is_flashinfer()));

    let mut pages = Vec::with_capacity(num_layers as usize);
    for l in 0..num_layers {
        let shape: Vec<i64> = match kinds[(layer_begin + l) as usize] {
            AttnKind::Mha | AttnKind::MhaSliding => vec![num_pages, 2, kv, page_size, qk],
            AttnKind::Mla => vec![num_pages, page_size, qk],
            AttnKind::Linear => vec![reserved, kv, qk, vd],
        };
        pages.push(ten::empty(&shape, dtype, device)?);
    }
    let has_mha = kinds.iter().any(|k| matches!(k, AttnKind::Mha | AttnKind::MhaSliding));
    let (temp_q, temp_k, temp_v) = if has_mha {
        (
            Some(ten::empty(&[chunk, qo, qk], dtype, device)?),
            Some(ten::empty(&[chunk, kv, qk], dtype, device)?),
            Some(ten::empty(&[chunk, kv, vd], dtype, device)?),
        )
    } else {
        (None, None, None)
    };
    let (mut int_ws, mut int_pinned_ws, mut float_ws) = (Vec::new(), Vec::new(), None);
    if flashinfer {
        let host = DLDevice { device_type: if device.device_type == 2 { 3 } else { 1 }, device_id: 0 };
        for _ in 0..=MAX_DEPTH {
            int_ws.push(ten::empty(&[INT_WORKSPACE], U8, device)?);
            int_pinned_ws.push(ten::empty(&[INT_WORKSPACE], U8, host)?);
        }
        float_ws = Some(ten::empty(&[FLOAT_WORKSPACE], U8, device)?);
    }
    let state = State {
        cfg: Config {
            prefill_chunk_size: chunk,
            sliding,
            layer_sliding,
            layer_window,
            rope_inline: rope_mode == RopeMode::Inline,
            mla: kinds[0] == AttnKind::Mla,
            flashinfer,
            gqa_group: qo / kv,
        },
        num_layers,
        layer_begin,
        num_qo_heads: qo,
        num_kv_heads: kv,
        qk_head_dim: qk,
        v_head_dim: vd,
        attn_kinds: kinds,
        rope_mode,
        rotary_scale,
        rotary_theta,
        rope_ext_factors,
        dtype,
        device,
        pages,
        paging: Pages::new(page_size as i32, num_pages as i32, sliding, layer_sliding),
        batch: Batch::default(),
        generation: 0,
        batch_generation: u64::MAX,
        dirty: false,
        aux: Aux::new(device),
        compact_aux: Aux::new(device),
        views: Views::default(),
        temp_q,
        temp_k,
        temp_v,
        temp_o: ten::empty(&[chunk, qo, vd], dtype, device)?,
        temp_lse: ten::empty(&[chunk, qo], F32, device)?,
        merged_lse: ten::empty(&[chunk, qo], F32, device)?,
        int_ws,
        int_pinned_ws,
        float_ws,
        k,
    };
    Ok(Any::object(make_object(paged_kv_cache_index(), PagedKvCache(Guarded::new(state)))))
}

/// The cache of argument 0 (any `relax.vm.AttentionKVCache`; only the paged one exists here).
fn cache<'a>(a: Args, what: &str, o: &'a mut Option<ObjectRef>) -> FfiResult<&'a PagedKvCache> {
    let c = object_of(a, 0, attention_kv_cache_index(), what)?;
    let c = o.insert(c);
    as_cache(c).ok_or_else(|| {
        FfiError::type_error(format!("{what}: {} is not a paged KV cache", types::type_key(c.type_index())))
    })
}

fn with<R>(a: Args, what: &str, f: impl FnOnce(&mut State) -> FfiResult<R>) -> FfiResult<R> {
    let mut keep = None;
    cache(a, what, &mut keep)?.with(what, f)
}

fn register_queries(b: &mut Builder) {
    b.add("vm.builtin.attention_kv_cache_empty", |a| {
        with(a, "vm.builtin.attention_kv_cache_empty", |s| {
            let p = &s.paging;
            Ok(Any::bool(
                p.seqs.is_empty()
                    && p.free_blocks.len() == p.blocks.len()
                    && p.free_pages.len() == p.num_total_pages as usize,
            ))
        })
    });
    b.add("vm.builtin.attention_kv_cache_get_num_available_pages", |a| {
        with(a, "vm.builtin.attention_kv_cache_get_num_available_pages", |s| {
            Ok(Any::int(s.paging.free_pages.len() as i64))
        })
    });
    b.add("vm.builtin.attention_kv_cache_get_total_sequence_length", |a| {
        with(a, "vm.builtin.attention_kv_cache_get_total_sequence_length", |s| {
            Ok(Any::int(s.paging.seqs.values().map(|q| q.seq_length as i64).sum::<i64>() as i32 as i64))
        })
    });
    b.add("vm.builtin.attention_kv_cache_get_query_positions", |a| {
        let what = "vm.builtin.attention_kv_cache_get_query_positions";
        with(a, what, |s| {
            s.ready(what)?;
            Ok(Any::object(v(&s.views.q_rope)?.clone()))
        })
    });
    b.add("vm.builtin.attention_kv_cache_enable_sliding_window_for_seq", |a| {
        let what = "vm.builtin.attention_kv_cache_enable_sliding_window_for_seq";
        let (id, window, sink) = (int(a, 1, what)?, int(a, 2, what)?, int(a, 3, what)?);
        with(a, what, |s| {
            s.paging.enable_sliding_window(id, window, sink)?;
            s.generation += 1;
            Ok(Any::none())
        })
    });
    b.add("vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes", |a| {
        let what = "vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes";
        let (ids, leaves) = (shape(a, 1, what)?, shape(a, 2, what)?);
        with(a, what, |s| s.commit(&ids, &leaves).map(|()| Any::none()))
    });
    b.add("vm.builtin.attention_kv_cache_debug_get_kv", |a| {
        let what = "vm.builtin.attention_kv_cache_debug_get_kv";
        let (id, start, end) = (int(a, 1, what)?, int(a, 2, what)?, int(a, 3, what)?);
        let outs = [tensor(a, 4, what)?, tensor(a, 5, what)?];
        with(a, what, |s| s.debug_get_kv(id, start, end, &outs, false).map(|()| Any::none()))
    });
    b.add("vm.builtin.attention_kv_cache_debug_get_kv_mla", |a| {
        let what = "vm.builtin.attention_kv_cache_debug_get_kv_mla";
        let (id, start, end) = (int(a, 1, what)?, int(a, 2, what)?, int(a, 3, what)?);
        let outs = [tensor(a, 4, what)?];
        with(a, what, |s| s.debug_get_kv(id, start, end, &outs, true).map(|()| Any::none()))
    });
    for name in ["vm.builtin.kv_cache_disagg_prepare_recv", "vm.builtin.kv_cache_disagg_mark_send"] {
        b.add(name, |a| {
            let what = "vm.builtin.kv_cache_disagg_*";
            with(a, what, |_| {
                Err(internal(
                    "KV cache disaggregation needs NVSHMEM (KV transfer between devices), which this runtime does not have",
                ))
            })
        });
    }
}

fn register_attention(b: &mut Builder) {
    b.add("vm.builtin.attention_kv_cache_attention_with_fused_qkv", |a| {
        let what = "vm.builtin.attention_kv_cache_attention_with_fused_qkv";
        let (layer, sm) = (int(a, 1, what)?, float(a, 2, what)?);
        let (qkv, o) = (tensor(a, 3, what)?, tensor(a, 4, what)?);
        with(a, what, |s| s.attention_with_fused_qkv(layer, &qkv, &o, sm).map(|()| Any::none()))
    });
    b.add("vm.builtin.attention_kv_cache_self_attention", |a| {
        let what = "vm.builtin.attention_kv_cache_self_attention";
        let (layer, sm) = (int(a, 1, what)?, float(a, 2, what)?);
        let ts =
            [tensor(a, 3, what)?, tensor(a, 4, what)?, tensor(a, 5, what)?, tensor(a, 6, what)?, tensor(a, 7, what)?];
        with(a, what, |s| {
            s.local_layer(layer, what)?;
            for (x, name) in ts[..4].iter().zip(["q_data", "k_data", "v_data", "o_data"]) {
                s.check_dtype(x, name, what)?;
                s.check_dims(x, name, &[Some(s.total()), None, None], what)?;
            }
            s.ready(what)?;
            let mla = s.attn_kinds[layer as usize] != AttnKind::Mha;
            s.self_attn(&ts[0], &ts[1], &ts[2], &ts[3], &ts[4], sm, mla).map(|()| Any::none())
        })
    });
    b.add("vm.builtin.attention_kv_cache_cross_attention", |a| {
        let what = "vm.builtin.attention_kv_cache_cross_attention";
        let (layer, sm) = (int(a, 1, what)?, float(a, 2, what)?);
        let (q, o, lse) = (tensor(a, 3, what)?, tensor(a, 4, what)?, tensor(a, 5, what)?);
        with(a, what, |s| {
            let local = s.local_layer(layer, what)?;
            s.check_dtype(&q, "q_data", what)?;
            s.check_dtype(&o, "o_data", what)?;
            let n = Some(s.total());
            s.check_dims(&q, "q_data", &[n, Some(s.num_qo_heads), Some(s.qk_head_dim)], what)?;
            s.check_dims(&o, "o_data", &[n, Some(s.num_qo_heads), Some(s.v_head_dim)], what)?;
            s.ready(what)?;
            s.cross_attn(local, &q, &o, &lse, sm, true, false).map(|_| Any::none())
        })
    });
    b.add("vm.builtin.attention_kv_cache_attention_with_shared_kv", |a| {
        let what = "vm.builtin.attention_kv_cache_attention_with_shared_kv";
        let (layer, sm) = (int(a, 1, what)?, float(a, 2, what)?);
        let ts = [tensor(a, 3, what)?, tensor(a, 4, what)?, tensor(a, 5, what)?, tensor(a, 6, what)?];
        with(a, what, |s| {
            s.local_layer(layer, what)?;
            check(matches!(s.attn_kinds[layer as usize], AttnKind::Mha | AttnKind::MhaSliding), || {
                "Querying K/V from another logical layer is only supported for MHA caches.".into()
            })?;
            let n = Some(s.total());
            let (qo, kv, qk, vd) =
                (Some(s.num_qo_heads), Some(s.num_kv_heads), Some(s.qk_head_dim), Some(s.v_head_dim));
            for (x, name, want) in [
                (&ts[0], "q_data", [n, qo, qk]),
                (&ts[1], "current_k_data", [n, kv, qk]),
                (&ts[2], "current_v_data", [n, kv, vd]),
                (&ts[3], "o_data", [n, qo, vd]),
            ] {
                s.check_dtype(x, name, what)?;
                s.check_dims(x, name, &want, what)?;
            }
            s.ready(what)?;
            s.attention(layer, &ts[0], &ts[1], &ts[2], &ts[3], sm).map(|()| Any::none())
        })
    });
    b.add("vm.builtin.attention_kv_cache_append_mla_kv", |a| {
        let what = "vm.builtin.attention_kv_cache_append_mla_kv";
        let layer = int(a, 1, what)?;
        let kv = tensor(a, 2, what)?;
        with(a, what, |s| {
            let local = s.local_layer(layer, what)?;
            s.check_dtype(&kv, "kv_data", what)?;
            check(s.attn_kinds[layer as usize] == AttnKind::Mla, || {
                format!("{what}: layer {layer} is not an MLA layer")
            })?;
            s.check_dims(&kv, "kv_data", &[None, Some(s.qk_head_dim)], what)?;
            let total = s.total();
            check(dims(&kv)?[0] <= total, || {
                format!("{what}: kv_data has more rows than the forward's {total} tokens")
            })?;
            s.ready(what)?;
            let f =
                s.k.transpose_append_mla.as_ref().ok_or_else(|| internal("f_transpose_append_mla is not defined"))?;
            call(f, "f_transpose_append_mla", &[t(&s.pages[local]), t(&kv), t(v(&s.views.append_position)?)])?;
            Ok(())
        })?;
        // SAFETY: argument 0 is a live cache (checked above).
        Ok(Any::object(unsafe { ObjectRef::from_borrowed(a[0].obj_ptr()) }.expect("checked")))
    });
    b.add("vm.builtin.attention_kv_cache_merge_attn_output_inplace", |a| {
        let what = "vm.builtin.attention_kv_cache_merge_attn_output_inplace";
        let ts = [tensor(a, 1, what)?, tensor(a, 2, what)?, tensor(a, 3, what)?, tensor(a, 4, what)?];
        with(a, what, |s| {
            let m = s.k.merge.get(1).ok_or_else(|| internal("The general attention merge function is not defined."))?;
            call(m, "f_merge_inplace", &[t(&ts[0]), t(&ts[1]), t(&ts[2]), t(&ts[3])])?;
            Ok(Any::object(make_array(vec![Any::object(ts[0].clone()), Any::object(ts[1].clone())])))
        })
    });
}

pub(super) fn register(b: &mut Builder) {
    b.add("vm.builtin.paged_attention_kv_cache_create", create);
    register_queries(b);
    register_attention(b);
}
