//! `BeginForward` of the paged KV cache: the sequences of the coming forward pass become the
//! host arrays its attention kernels read (TVM's `paged_kv_cache.cc`, `GetBlockIdsOnDepth`,
//! `GetChunkedBlockIds`, `ConstructTokenTreeMask`).
//!
//! A batch is split by block depth: depth 0 holds each sequence's root block (shared prefixes
//! coalesce when their queries are adjacent), depth 1 the rest of the sequence (the blocks past
//! [`MAX_DEPTH`] are concatenated to it). Each depth gets its CSR page table, the fill of its last
//! page, its sliding-window offsets and sinks, and its RoPE offsets; the batch gets the position
//! of every new token in the paged storage and its RoPE position.
#![allow(clippy::needless_range_loop, reason = "parallel per-depth arrays, indexed as TVM does")]

use super::internal;
use super::paging::{missing, Pages};
use tvm_runtime_tvm_ffi::FfiResult;

/// The block depths kernels see (`kPagedKVCacheMaxBlockDepth`).
pub(crate) const MAX_DEPTH: usize = 2;
/// The largest token tree of one sequence (`kTreeAttnMaxTreeSize`).
pub(crate) const MAX_TREE: usize = 256;

/// The static facts of a cache that a forward pass depends on.
pub(crate) struct Config {
    pub prefill_chunk_size: i64,
    /// The cache-wide sliding window (`support_sliding_window_`).
    pub sliding: bool,
    /// Some layer is `kMHASliding`.
    pub layer_sliding: bool,
    /// The window of those layers.
    pub layer_window: i64,
    /// RoPE is applied inside the attention kernels.
    pub rope_inline: bool,
    /// Layer 0 is MLA (no token trees).
    pub mla: bool,
    /// Some kernel is FlashInfer's (with a plan step).
    pub flashinfer: bool,
    /// Query heads per KV head.
    pub gqa_group: i64,
}

/// The host arrays of one depth.
#[derive(Default)]
pub(crate) struct Depth {
    pub qo_indptr: Vec<i32>,
    pub page_indptr: Vec<i32>,
    pub page_indices: Vec<i32>,
    pub page_indptr_sw: Vec<i32>,
    pub page_indices_sw: Vec<i32>,
    pub last_page_len: Vec<i32>,
    pub sliding_window_offset: Vec<i32>,
    pub sink_size: Vec<i32>,
    pub k_rope_pos_offset: Vec<i32>,
    pub k_rope_pos_offset_sw: Vec<i32>,
    pub tree_mask: Vec<i32>,
    pub tree_mn_indptr: Vec<i32>,
}

impl Depth {
    fn clear(&mut self) {
        for v in [
            &mut self.qo_indptr,
            &mut self.page_indptr,
            &mut self.page_indices,
            &mut self.page_indptr_sw,
            &mut self.page_indices_sw,
            &mut self.last_page_len,
            &mut self.sliding_window_offset,
            &mut self.sink_size,
            &mut self.k_rope_pos_offset,
            &mut self.k_rope_pos_offset_sw,
        ] {
            v.clear();
        }
    }
}

/// The current forward pass.
#[derive(Default)]
pub(crate) struct Batch {
    /// A forward is under way (between `BeginForward` and the next one; `EndForward` keeps it).
    pub active: bool,
    pub seq_ids: Vec<i64>,
    pub lens: Vec<i32>,
    pub total: i32,
    pub depths: [Depth; MAX_DEPTH],
    pub num_depths: usize,
    pub is_chain: [bool; MAX_DEPTH],
    pub use_decode: Vec<bool>,
    pub append_before_attn: bool,
    pub is_decode: bool,
    pub k_ragged_rope_pos_offset: Vec<i32>,
    pub q_rope_position_map: Vec<i32>,
    pub append_position_map: Vec<i32>,
    /// `cur_append_lengths_indptr`.
    pub append_indptr: Vec<i32>,
    /// Scratch space of `begin`, kept to spare allocations on every step.
    scratch: Scratch,
}

#[derive(Default)]
struct Scratch {
    last_len_before: Vec<i32>,
    last_blocks: Vec<i32>,
    trace: Vec<i32>,
    on_depth: [Vec<i32>; MAX_DEPTH],
    trailing: Vec<Vec<i32>>,
    chunks: [Vec<(i32, i32)>; MAX_DEPTH],
    runs: Vec<(i32, i32)>,
}

/// Checks a forward pass against the cache without changing anything: every sequence there
/// once, lengths positive and within the prefill chunk, a valid token tree, free pages enough.
fn validate(pages: &Pages, cfg: &Config, ids: &[i64], lens: &[i64], tree: Option<&[i64]>) -> FfiResult<()> {
    if cfg.mla && tree.is_some() {
        return Err(internal("Tree attention is not supported yet for MLA"));
    }
    if ids.len() != lens.len() {
        return Err(internal(format!(
            "The seq_ids size ({}) and append_lengths size ({}) mismatch.",
            ids.len(),
            lens.len()
        )));
    }
    if ids.is_empty() {
        return Err(internal("BeginForward needs at least one sequence."));
    }
    for (&id, &len) in ids.iter().zip(lens) {
        if len <= 0 {
            return Err(internal(format!("Append with length {len} is not allowed (sequence \"{id}\").")));
        }
        pages.seq(id)?;
    }
    let total = lens.iter().fold(0i64, |a, &l| a.saturating_add(l));
    if total > cfg.prefill_chunk_size {
        return Err(internal(format!(
            "The forward appends {total} tokens, more than the prefill chunk size {} of the KV cache.",
            cfg.prefill_chunk_size
        )));
    }
    if ids.len() <= 32 {
        for (k, id) in ids.iter().enumerate() {
            if ids[..k].contains(id) {
                return Err(internal(format!("The sequence \"{id}\" appears twice in the forward.")));
            }
        }
    } else {
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        if let Some(id) = ids.iter().find(|id| !seen.insert(**id)) {
            return Err(internal(format!("The sequence \"{id}\" appears twice in the forward.")));
        }
    }
    match tree {
        Some(tree) => {
            if cfg.sliding {
                return Err(internal("Tree attention does not support sliding window."));
            }
            if cfg.rope_inline {
                return Err(internal("Tree attention does not support inline RoPE mode."));
            }
            if tree.len() as i64 != total {
                return Err(internal(format!(
                    "Invalid token tree size. The sum of \"append_lengths\" is {total} while there are {} elements in \"token_tree_parent_ptr\".",
                    tree.len()
                )));
            }
            let mut off = 0usize;
            for (i, (&id, &len)) in ids.iter().zip(lens).enumerate() {
                let seq = pages.seq(id)?;
                let old = seq.tree_parent.len();
                if old as i32 > pages.block(seq.last_block).seq_length {
                    return Err(internal("The token tree size is larger than the sequence length of the last block."));
                }
                let size = old + len as usize;
                if size > MAX_TREE {
                    return Err(internal(format!(
                        "The tree size is {size} which exceeds the maximum tree size limit {MAX_TREE}"
                    )));
                }
                for (k, &p) in tree[off..off + len as usize].iter().enumerate() {
                    let n = (old + k) as i64;
                    if p >= n || p < -1 {
                        return Err(internal(format!(
                            "Invalid token tree. The parent of node {n} in tree {i} is {p}, which is not in [-1, {n})."
                        )));
                    }
                }
                off += len as usize;
            }
        }
        None => {
            if let Some(id) = ids.iter().find(|id| !pages.seqs[id].committed) {
                return Err(internal(format!(
                    "The input batch does not form a tree, in which case the sequences in the input batch are expected to have their accepted tokens token tree nodes committed. Please invoke CommitAcceptedTokenTreeNodes for sequence {id}"
                )));
            }
        }
    }
    pages.check_pages(ids.iter().zip(lens).map(|(id, &len)| {
        let seq = &pages.seqs[id];
        pages.plan_reserve(seq, seq.seq_length + len as i32, len as i32)
    }))
}

/// `GetChunkedBlockIds`: the (block, query count) runs of one depth, adjacent queries on one
/// block coalesced unless the batch is a decode whose coalescing would not pay, and whether the
/// depth uses the decode kernel.
#[allow(clippy::too_many_arguments, reason = "TVM's inputs and two reused buffers")]
fn chunk(
    blocks: &[i32],
    lens: &[i32],
    coalesce: bool,
    pages: &Pages,
    is_decode: bool,
    out: &mut Vec<(i32, i32)>,
    runs: &mut Vec<(i32, i32)>,
) -> bool {
    let npages = |b: i32| if b == -1 { 0 } else { pages.block(b).page_ids.len() as i64 };
    let uncoalesced: i64 = blocks.iter().map(|&b| npages(b)).sum();
    let mut coalesced_pages = 0i64;
    runs.clear();
    for (&b, &len) in blocks.iter().zip(lens) {
        match runs.last_mut() {
            Some(last) if last.0 == b => last.1 += len,
            _ => {
                coalesced_pages += npages(b);
                runs.push((b, len));
            }
        }
    }
    let ratio = if coalesced_pages > 0 { uncoalesced as f64 / coalesced_pages as f64 } else { 0.0 };
    let use_decode = is_decode && ratio < 32.0;
    out.clear();
    if use_decode || !coalesce {
        out.extend(blocks.iter().copied().zip(lens.iter().copied()));
    } else {
        out.extend_from_slice(runs);
    }
    use_decode
}

fn layer_window_offset(len: i64, window: i64, ps: i64) -> i32 {
    if len <= window {
        0
    } else {
        ((len - window) % ps) as i32
    }
}

fn layer_window_pages(len: i64, window: i64, ps: i64) -> i32 {
    if len == 0 {
        return 0;
    }
    ((layer_window_offset(len, window, ps) as i64 + len.min(window) + ps - 1) / ps) as i32
}

/// Starts a forward pass: checks it, then updates the sequences, reserves their pages (sliding
/// their windows) and fills `b`.
pub(crate) fn begin(
    pages: &mut Pages,
    cfg: &Config,
    b: &mut Batch,
    ids: &[i64],
    lens: &[i64],
    tree: Option<&[i64]>,
) -> FfiResult<()> {
    validate(pages, cfg, ids, lens, tree)?;
    let n = ids.len();
    let ps = pages.page_size;
    b.active = true;
    b.seq_ids.clear();
    b.seq_ids.extend_from_slice(ids);
    b.lens.clear();
    b.lens.extend(lens.iter().map(|&l| l as i32));
    b.total = b.lens.iter().sum();
    b.append_indptr.clear();
    b.append_indptr.push(0);
    let mut acc = 0;
    for &l in &b.lens {
        acc += l;
        b.append_indptr.push(acc);
    }

    // The sequences grow by their append lengths.
    let mut sc = std::mem::take(&mut b.scratch);
    let Scratch { last_len_before, last_blocks, trace, on_depth, trailing, chunks, runs } = &mut sc;
    b.k_ragged_rope_pos_offset.clear();
    b.is_decode = true;
    last_len_before.clear();
    last_blocks.clear();
    for (&id, &len) in ids.iter().zip(&b.lens) {
        let s = pages.seqs.get_mut(&id).ok_or_else(|| missing(id))?;
        let uncommitted = if s.committed { 0 } else { s.tree_parent.len() as i32 };
        b.k_ragged_rope_pos_offset.push(s.seq_length - uncommitted);
        s.seq_length += len;
        last_blocks.push(s.last_block);
        if len != 1 {
            b.is_decode = false;
        }
    }
    last_len_before.extend(last_blocks.iter().map(|&lb| pages.block(lb).seq_length));

    // `GetBlockIdsOnDepth`.
    let mut num_depths = 0usize;
    for blocks in on_depth.iter_mut() {
        blocks.clear();
    }
    let mut deep = false;
    for (i, &id) in ids.iter().enumerate() {
        pages.trace_into(&pages.seqs[&id], trace);
        num_depths = num_depths.max(trace.len().min(MAX_DEPTH));
        for (d, blocks) in on_depth.iter_mut().enumerate() {
            blocks.push(trace.get(d).copied().unwrap_or(-1));
        }
        if trace.len() > MAX_DEPTH {
            if !deep {
                trailing.clear();
                trailing.resize(n, Vec::new());
                deep = true;
            }
            trailing[i] = trace[MAX_DEPTH..].to_vec();
        }
    }
    if !deep {
        trailing.clear();
        trailing.resize(n, Vec::new());
    }
    b.num_depths = num_depths;
    b.use_decode.clear();
    for d in 0..num_depths {
        let dec = chunk(&on_depth[d], &b.lens, d != MAX_DEPTH - 1, pages, b.is_decode, &mut chunks[d], runs);
        b.use_decode.push(dec);
    }
    if num_depths == MAX_DEPTH && chunks[MAX_DEPTH - 1].len() != n {
        return Err(internal("the deepest blocks of a forward did not stay one per sequence"));
    }
    b.append_before_attn = !cfg.sliding && *b.use_decode.last().expect("at least one depth");
    if cfg.flashinfer && cfg.gqa_group >= 4 {
        b.use_decode.iter_mut().for_each(|u| *u = false);
    }
    if ids.iter().any(|id| !pages.seqs[id].committed) {
        b.append_before_attn = true;
    }

    match tree {
        Some(tree) => tree_mask(pages, b, ids, tree, on_depth, trailing, last_blocks),
        None => {
            for id in ids {
                let s = pages.seqs.get_mut(id).expect("validated");
                s.is_chain = true;
                s.tree_parent.clear();
                s.tree_depths.clear();
            }
            b.is_chain = [true; MAX_DEPTH];
        }
    }

    if b.append_before_attn {
        for (&id, &len) in ids.iter().zip(&b.lens) {
            pages.reserve(id, len)?;
        }
    }
    let (lsw, window, psl) = (cfg.layer_sliding, cfg.layer_window, ps as i64);
    for d in 0..num_depths {
        let a = &mut b.depths[d];
        a.clear();
        a.qo_indptr.push(0);
        a.page_indptr.push(0);
        a.page_indptr_sw.push(0);
        for (i, &(bid, qlen)) in chunks[d].iter().enumerate() {
            a.qo_indptr.push(a.qo_indptr.last().copied().unwrap_or(0) + qlen);
            if bid == -1 {
                a.page_indptr.push(*a.page_indptr.last().expect("starts with 0"));
                a.page_indptr_sw.push(*a.page_indptr_sw.last().expect("starts with 0"));
                a.last_page_len.push(0);
                a.sliding_window_offset.push(0);
                a.sink_size.push(0);
                a.k_rope_pos_offset.push(0);
                a.k_rope_pos_offset_sw.push(0);
                continue;
            }
            let first = pages.block(bid);
            let mut num_pages = first.page_ids.len() as i32;
            let mut total_len = first.seq_length;
            let mut last = first;
            a.page_indices.extend_from_slice(&first.page_ids);
            if d == MAX_DEPTH - 1 {
                for &t in &trailing[i] {
                    let tb = pages.block(t);
                    a.page_indices.extend_from_slice(&tb.page_ids);
                    num_pages += tb.page_ids.len() as i32;
                    total_len += tb.seq_length;
                    last = tb;
                }
            }
            a.page_indptr.push(a.page_indptr.last().expect("starts with 0") + num_pages);
            let sw_pages = num_pages.min(layer_window_pages(total_len as i64, window, psl));
            a.page_indptr_sw.push(a.page_indptr_sw.last().expect("starts with 0") + sw_pages);
            let from = a.page_indices.len() - sw_pages as usize;
            let tail: Vec<i32> = a.page_indices[from..].to_vec();
            a.page_indices_sw.extend_from_slice(&tail);
            a.last_page_len.push(if total_len == 0 {
                0
            } else {
                (total_len - last.sink_length + last.sliding_window_offset - 1) % ps + 1
            });
            a.sliding_window_offset.push(if lsw {
                layer_window_offset(total_len as i64, window, psl)
            } else {
                last.sliding_window_offset
            });
            a.sink_size.push(last.sink_length);
            a.k_rope_pos_offset.push(first.start_pos);
            if lsw {
                a.k_rope_pos_offset_sw.push((first.start_pos as i64 + total_len as i64 - window).max(0) as i32);
            }
        }
    }
    if !b.append_before_attn {
        for (&id, &len) in ids.iter().zip(&b.lens) {
            pages.reserve(id, len)?;
        }
    }

    // Where each new token goes, and its RoPE position.
    b.q_rope_position_map.clear();
    b.append_position_map.clear();
    for (i, &id) in ids.iter().enumerate() {
        let len = b.lens[i];
        let seq = &pages.seqs[&id];
        let block = pages.block(seq.last_block);
        let tree_off = seq.tree_parent.len() as i64 - len as i64;
        for pos in 0..len {
            b.q_rope_position_map.push(if seq.tree_depths.is_empty() {
                b.k_ragged_rope_pos_offset[i] + pos
            } else {
                if tree_off < 0 {
                    return Err(internal("the token tree is shorter than the append"));
                }
                b.k_ragged_rope_pos_offset[i] + seq.tree_depths[tree_off as usize + pos as usize]
            });
            let pos_in_block = block.seq_length - len + pos;
            b.append_position_map.push(if last_len_before[i] + pos < block.sink_length {
                block.slot(last_len_before[i] + pos, ps)
            } else if pos_in_block < block.sink_length {
                -1
            } else {
                block.slot(pos_in_block, ps)
            });
        }
    }
    b.scratch = sc;
    Ok(())
}

/// `ConstructTokenTreeMask`: appends the new tree nodes to each sequence and writes, per depth,
/// each node's preorder interval (the mask) and the CSR offsets of the masks.
#[allow(clippy::too_many_arguments, reason = "the depth tables of one forward")]
fn tree_mask(
    pages: &mut Pages,
    b: &mut Batch,
    ids: &[i64],
    tree: &[i64],
    on_depth: &[Vec<i32>; MAX_DEPTH],
    trailing: &[Vec<i32>],
    last_blocks: &[i32],
) {
    let n = ids.len();
    for d in 0..b.num_depths {
        b.is_chain = [true; MAX_DEPTH];
        let mut chain = true;
        let in_depth: Vec<bool> = (0..n)
            .map(|i| {
                !b.append_before_attn
                    || on_depth[d][i] == last_blocks[i]
                    || (d + 1 == MAX_DEPTH && !trailing[i].is_empty())
            })
            .collect();
        let a = &mut b.depths[d];
        a.tree_mn_indptr.clear();
        a.tree_mask.clear();
        a.tree_mn_indptr.push(0);
        let mut off = 0usize;
        for i in 0..n {
            let len = b.lens[i] as usize;
            let prev = *a.tree_mn_indptr.last().expect("starts with 0");
            if !in_depth[i] {
                a.tree_mn_indptr.push(prev);
                off += len;
                continue;
            }
            let s = pages.seqs.get_mut(&ids[i]).expect("validated");
            s.tree_parent.extend(tree[off..off + len].iter().map(|&p| p as i32));
            off += len;
            a.tree_mn_indptr.push(prev + s.tree_parent.len() as i32);
        }
        for i in 0..n {
            if !in_depth[i] {
                continue;
            }
            let s = pages.seqs.get_mut(&ids[i]).expect("validated");
            s.is_chain = true;
            s.committed = false;
            let size = s.tree_parent.len();
            let mut depth = Vec::with_capacity(size);
            let mut children: Vec<Vec<usize>> = vec![Vec::new(); size];
            let mut roots = Vec::new();
            for (node, &p) in s.tree_parent.iter().enumerate() {
                if p != node as i32 - 1 {
                    s.is_chain = false;
                    chain = false;
                }
                if p == -1 {
                    depth.push(0);
                    roots.push(node);
                } else {
                    depth.push(depth[p as usize] + 1);
                    children[p as usize].push(node);
                }
            }
            let mut order = vec![(0i32, 0i32); size];
            let mut next = 0i32;
            for r in roots {
                preorder(r, &children, &mut order, &mut next);
            }
            for &(first, end) in &order {
                a.tree_mask.push(first);
                a.tree_mask.push(end);
            }
            s.tree_depths = depth;
        }
        b.is_chain[d] = chain;
        if !b.append_before_attn {
            break;
        }
    }
}

/// Numbers the subtree of `node` in preorder; each node gets `[its number, past its subtree)`.
fn preorder(node: usize, children: &[Vec<usize>], order: &mut [(i32, i32)], next: &mut i32) -> i32 {
    order[node].0 = *next;
    *next += 1;
    let mut end = order[node].0 + 1;
    for &c in &children[node] {
        end = end.max(preorder(c, children, order, next));
    }
    order[node].1 = end;
    end
}
