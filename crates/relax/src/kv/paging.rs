//! The page and block bookkeeping of the paged KV cache (TVM's `attn_utils.h` `Block` and
//! `Sequence`, and the sequence management of `paged_kv_cache.cc`).
//!
//! K/V data lives in pages of `page_size` token slots. A sequence is a chain of blocks (the last
//! one its own, the earlier ones possibly shared with forked sequences: a common prefix); a block
//! owns a list of pages, only the last of which may be partly filled. Forking shares the parent's
//! blocks (a block referenced by a child can no longer grow), popping gives pages back, sliding
//! windows recycle the pages that fall out of the window (keeping the attention sink).
//!
//! Every operation checks what can go wrong before it changes anything, so that a refused call
//! leaves the cache as it was (TVM's runtime checks part of it midway through the change).

use super::internal;
use rustc_hash::FxHashMap as HashMap;
use tvm_runtime_tvm_ffi::FfiResult;

/// The page id a sliding-window sequence borrows until the slide frees a real page.
pub(crate) const TEMP_PAGE: i32 = -1;

/// A run of pages of one sequence, possibly shared as a prefix.
#[derive(Clone, Debug)]
pub(crate) struct Block {
    /// Its pages (only the last one may be partly filled).
    pub page_ids: Vec<i32>,
    /// Tokens held.
    pub seq_length: i32,
    /// The position of its first token in the sequence (for RoPE).
    pub start_pos: i32,
    /// The attention-sink tokens at its start that never slide out.
    pub sink_length: i32,
    /// Where the sliding window starts in its pages (0 without sliding).
    pub sliding_window_offset: i32,
    /// The block before it, or -1.
    pub parent: i32,
    /// Sequences and blocks referring to it (a block referred to more than once is frozen).
    pub ext_ref: i32,
}

impl Block {
    fn new() -> Block {
        Block {
            page_ids: Vec::new(),
            seq_length: 0,
            start_pos: 0,
            sink_length: 0,
            sliding_window_offset: 0,
            parent: -1,
            ext_ref: 0,
        }
    }

    /// The slot of in-block token `i` in the paged storage (`page * page_size + offset`).
    #[inline]
    pub(crate) fn slot(&self, i: i32, page_size: i32) -> i32 {
        let offset = if i < self.sink_length { i } else { i - self.sink_length + self.sliding_window_offset };
        self.page_ids[(offset / page_size) as usize] * page_size + offset % page_size
    }
}

/// A sequence: its last block and what it knows about itself.
#[derive(Clone, Debug)]
pub(crate) struct Sequence {
    /// The last block (the others are reached through `parent`).
    pub last_block: i32,
    /// Tokens held, over all its blocks.
    pub seq_length: i32,
    /// The sliding window size, or -1.
    pub sliding_window_size: i32,
    /// The sink size of the last block once the window slides.
    pub last_block_attn_sink_size: i32,
    /// Whether the tokens of the last forward formed a chain.
    pub is_chain: bool,
    /// The parent pointers of the uncommitted token tree.
    pub tree_parent: Vec<i32>,
    /// The depth of each node of that tree.
    pub tree_depths: Vec<i32>,
    /// Whether the accepted nodes of the last token tree were committed.
    pub committed: bool,
}

impl Sequence {
    fn new(blocks: &mut [Block], last_block: i32) -> Sequence {
        blocks[last_block as usize].ext_ref += 1;
        let mut seq_length = 0;
        let mut b = last_block;
        while b != -1 {
            seq_length += blocks[b as usize].seq_length;
            b = blocks[b as usize].parent;
        }
        Sequence {
            last_block,
            seq_length,
            sliding_window_size: -1,
            last_block_attn_sink_size: 0,
            is_chain: true,
            tree_parent: Vec::new(),
            tree_depths: Vec::new(),
            committed: true,
        }
    }
}

/// What a reservation will do to a sequence's last block (see [`Pages::plan_reserve`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reserve {
    /// Pages the block has afterwards minus pages it has now.
    pub net_pages: i64,
}

/// The pages, blocks and sequences of one cache.
pub(crate) struct Pages {
    pub page_size: i32,
    pub num_total_pages: i32,
    /// Sliding windows per sequence (the cache-wide `support_sliding_window`).
    pub sliding: bool,
    /// Some layer slides on its own (`kMHASliding`): sequences may still enable a window.
    pub layer_sliding: bool,
    pub free_pages: Vec<i32>,
    pub blocks: Vec<Block>,
    pub free_blocks: Vec<i32>,
    pub seqs: HashMap<i64, Sequence>,
}

/// `The sequence "id" cannot be found in KV cache.`
pub(crate) fn missing(id: i64) -> tvm_runtime_tvm_ffi::FfiError {
    internal(format!("The sequence \"{id}\" cannot be found in KV cache."))
}

impl Pages {
    pub(crate) fn new(page_size: i32, num_total_pages: i32, sliding: bool, layer_sliding: bool) -> Pages {
        let mut p = Pages {
            page_size,
            num_total_pages,
            sliding,
            layer_sliding,
            free_pages: Vec::with_capacity(num_total_pages as usize),
            blocks: Vec::new(),
            free_blocks: Vec::new(),
            seqs: HashMap::default(),
        };
        p.clear();
        p
    }

    /// Drops every sequence; all pages become free (the highest id is handed out last).
    pub(crate) fn clear(&mut self) {
        self.seqs.clear();
        self.free_pages.clear();
        self.free_pages.extend((0..self.num_total_pages).rev());
        self.blocks.clear();
        self.free_blocks.clear();
    }

    pub(crate) fn seq(&self, id: i64) -> FfiResult<&Sequence> {
        self.seqs.get(&id).ok_or_else(|| missing(id))
    }

    #[inline]
    pub(crate) fn block(&self, i: i32) -> &Block {
        &self.blocks[i as usize]
    }

    #[inline]
    fn block_mut(&mut self, i: i32) -> &mut Block {
        &mut self.blocks[i as usize]
    }

    /// `GetFreeBlock`: a reset block from the free list, or a new one.
    fn new_block(&mut self) -> i32 {
        if let Some(i) = self.free_blocks.pop() {
            self.blocks[i as usize] = Block::new();
            return i;
        }
        self.blocks.push(Block::new());
        (self.blocks.len() - 1) as i32
    }

    /// A free page (the caller checked there is one).
    fn take_page(&mut self) -> FfiResult<i32> {
        self.free_pages.pop().ok_or_else(|| internal("The KV cache is full. No page can be allocated."))
    }

    /// The blocks of a sequence from its root to its last block.
    pub(crate) fn trace(&self, seq: &Sequence) -> Vec<i32> {
        let mut t = Vec::with_capacity(4);
        self.trace_into(seq, &mut t);
        t
    }

    /// [`Pages::trace`] into `t` (cleared first).
    pub(crate) fn trace_into(&self, seq: &Sequence, t: &mut Vec<i32>) {
        t.clear();
        let mut b = seq.last_block;
        while b != -1 {
            t.push(b);
            b = self.block(b).parent;
        }
        t.reverse();
    }

    /// The storage slot of every token of a sequence, in order.
    pub(crate) fn positions(&self, seq: &Sequence) -> Vec<i32> {
        let mut out = Vec::with_capacity(seq.seq_length.max(0) as usize);
        for b in self.trace(seq) {
            let block = self.block(b);
            out.extend((0..block.seq_length).map(|i| block.slot(i, self.page_size)));
        }
        out
    }

    pub(crate) fn add_sequence(&mut self, id: i64) -> FfiResult<()> {
        if self.seqs.contains_key(&id) {
            return Err(internal(format!("The sequence \"{id}\" is already in the KV cache.")));
        }
        let b = self.new_block();
        let seq = Sequence::new(&mut self.blocks, b);
        self.seqs.insert(id, seq);
        Ok(())
    }

    /// Frees the blocks only this sequence uses (pages back to the free list) and releases its
    /// reference to the first shared one.
    pub(crate) fn remove_sequence(&mut self, id: i64) -> FfiResult<()> {
        let seq = self.seqs.remove(&id).ok_or_else(|| missing(id))?;
        let mut b = seq.last_block;
        while b != -1 && self.block(b).ext_ref == 1 {
            let block = std::mem::replace(&mut self.blocks[b as usize], Block::new());
            self.free_pages.extend_from_slice(&block.page_ids);
            self.free_blocks.push(b);
            b = block.parent;
        }
        if b != -1 {
            self.block_mut(b).ext_ref -= 1;
        }
        Ok(())
    }

    /// Forks `child` off `parent` at `fork_pos` (-1: the end). Pages up to the last full page
    /// before the fork are shared; the partly used page at the fork, if any, is copied to a new
    /// page of the child by `copy(src_page, dst_page, tokens)` before anything else changes.
    pub(crate) fn fork(
        &mut self,
        parent_id: i64,
        child_id: i64,
        fork_pos: i64,
        copy: &mut dyn FnMut(i32, i32, i32) -> FfiResult<()>,
    ) -> FfiResult<()> {
        let parent = self
            .seqs
            .get(&parent_id)
            .ok_or_else(|| internal(format!("The parent sequence \"{parent_id}\" cannot be found in KV cache.")))?;
        if self.seqs.contains_key(&child_id) {
            return Err(internal(format!("The child sequence \"{child_id}\" is already in the KV cache.")));
        }
        if fork_pos < -1 {
            return Err(internal(format!(
                "The forked position should be non-negative, or -1 for last position as default (got {fork_pos})."
            )));
        }
        if fork_pos > parent.seq_length as i64 {
            return Err(internal(format!(
                "The forked position {fork_pos} should not exceed the total length {} of parent sequence \"{parent_id}\".",
                parent.seq_length
            )));
        }
        if !parent.committed {
            return Err(internal(
                "The parent sequence's token tree computed in the last round of forward has not been committed with accepted nodes.",
            ));
        }
        let fork_pos = if fork_pos == -1 { parent.seq_length } else { fork_pos as i32 };
        if parent.sliding_window_size != -1 {
            let sink = parent.seq_length - self.block(parent.last_block).seq_length + parent.last_block_attn_sink_size;
            if fork_pos > sink {
                return Err(internal(format!(
                    "The parent sequence \"{parent_id}\" is enabled with sliding window and thus only can be forked within sink size = {sink}. But the forked position = {fork_pos}."
                )));
            }
        }
        let ps = self.page_size;
        let in_page = fork_pos % ps;
        let (parent_last, parent_len) = (parent.last_block, parent.seq_length);
        let parent_trace = self.trace(parent);
        // A fork inside a page copies that page's head to a page of the child: do it first.
        let mut child_page = None;
        if in_page > 0 {
            let (fb, in_block) = self.fork_point(&parent_trace, fork_pos)?;
            let src = self.block(fb).page_ids[((in_block - in_page) / ps) as usize];
            let dst = self.take_page()?;
            if let Err(e) = copy(src, dst, in_page) {
                self.free_pages.push(dst);
                return Err(e);
            }
            child_page = Some(dst);
        }
        if fork_pos == parent_len && in_page == 0 && self.block(parent_last).seq_length > 0 {
            // The parent goes on in a new empty block, the shared one stays frozen.
            let nb = self.new_block();
            let start = parent_len;
            let b = self.block_mut(nb);
            b.start_pos = start;
            b.parent = parent_last;
            b.ext_ref = 1;
            self.seqs.get_mut(&parent_id).expect("checked above").last_block = nb;
        }
        let child = self.new_block();
        let trace = self.trace(self.seqs.get(&parent_id).expect("checked above"));
        let (fb, in_block) = self.fork_point(&trace, fork_pos)?;
        let moved = (in_block - in_page) / ps;
        if moved == 0 {
            let pb = self.block(fb).parent;
            if pb != -1 {
                self.block_mut(pb).ext_ref += 1;
            }
            self.block_mut(child).parent = pb;
        } else {
            // Split the forked block: its leading pages become a new shared parent block.
            let nb = self.new_block();
            let moved_offset = moved * ps;
            let head: Vec<i32> = self.block_mut(fb).page_ids.drain(..moved as usize).collect();
            let (fb_parent, fb_start) = (self.block(fb).parent, self.block(fb).start_pos);
            {
                let b = self.block_mut(nb);
                b.parent = fb_parent;
                b.ext_ref = 2;
                b.page_ids = head;
                b.start_pos = fb_start;
                b.seq_length = moved_offset;
            }
            {
                let f = self.block_mut(fb);
                f.parent = nb;
                f.start_pos += moved_offset;
                f.seq_length -= moved_offset;
            }
            self.block_mut(child).parent = nb;
            let p = self.seqs.get_mut(&parent_id).expect("checked above");
            if p.sliding_window_size != -1 && fb == p.last_block {
                p.last_block_attn_sink_size -= moved_offset;
            }
        }
        {
            let c = self.block_mut(child);
            c.start_pos = fork_pos - in_page;
            c.seq_length = in_page;
            c.page_ids.extend(child_page);
        }
        let seq = Sequence::new(&mut self.blocks, child);
        self.seqs.insert(child_id, seq);
        Ok(())
    }

    /// The block of `trace` holding position `pos` and the in-block offset there (the blocks
    /// before the last are whole pages).
    fn fork_point(&self, trace: &[i32], pos: i32) -> FfiResult<(i32, i32)> {
        let mut off = pos;
        for (k, &b) in trace.iter().enumerate() {
            let len = self.block(b).seq_length;
            if k + 1 < trace.len() {
                if len <= 0 || len % self.page_size != 0 {
                    return Err(internal(format!("block {b} of a forked sequence is not whole pages ({len} tokens)")));
                }
                if len <= off {
                    off -= len;
                    continue;
                }
            }
            return Ok((b, off));
        }
        Err(internal("forking a sequence without blocks"))
    }

    /// Drops the last `n` tokens of a sequence. Blocks only it uses shrink; when the cut reaches
    /// a shared block, the sequence is re-made as a fork of itself at the new length.
    pub(crate) fn popn(
        &mut self,
        id: i64,
        n: i64,
        copy: &mut dyn FnMut(i32, i32, i32) -> FfiResult<()>,
    ) -> FfiResult<()> {
        let seq = self.seqs.get(&id).ok_or_else(|| missing(id))?;
        if n < 0 {
            return Err(internal(format!("The length of popping {n} cannot be negative.")));
        }
        if n > seq.seq_length as i64 {
            return Err(internal(format!(
                "The sequence only has length {}, while the length of pop is {n} which exceeds the whole sequence length.",
                seq.seq_length
            )));
        }
        if n == 0 {
            return Ok(());
        }
        let mut n = n as i32;
        // Check first that the fork at the end (if any) finds the page it may need.
        {
            let (mut rest, mut freed, mut b) = (n, 0usize, seq.last_block);
            while b != -1 && self.block(b).ext_ref == 1 {
                let block = self.block(b);
                if rest > block.seq_length {
                    rest -= block.seq_length;
                    freed += block.page_ids.len();
                    b = block.parent;
                    continue;
                }
                rest = 0;
                break;
            }
            if rest > 0 {
                let temp = -1 - id;
                if self.seqs.contains_key(&temp) {
                    return Err(internal(format!("popn needs the temporary sequence id {temp}, which is in use")));
                }
                let new_len = seq.seq_length - n;
                if new_len % self.page_size != 0 && self.free_pages.len() + freed == 0 {
                    return Err(internal("The KV cache is full. No page can be allocated."));
                }
            }
        }
        let mut b = seq.last_block;
        let ps = self.page_size;
        while b != -1 && self.block(b).ext_ref == 1 {
            let len = self.block(b).seq_length;
            if n > len {
                n -= len;
                let block = std::mem::replace(&mut self.blocks[b as usize], Block::new());
                self.free_pages.extend_from_slice(&block.page_ids);
                self.free_blocks.push(b);
                b = block.parent;
                let s = self.seqs.get_mut(&id).expect("checked above");
                s.seq_length -= len;
                s.last_block = b;
                continue;
            }
            let block = &mut self.blocks[b as usize];
            let keep = ((len - n + ps - 1) / ps) as usize;
            while block.page_ids.len() > keep {
                let p = block.page_ids.pop().expect("non-empty");
                self.free_pages.push(p);
            }
            block.seq_length -= n;
            self.seqs.get_mut(&id).expect("checked above").seq_length -= n;
            n = 0;
            break;
        }
        if n > 0 {
            let temp = -1 - id;
            let len = self.seqs[&id].seq_length;
            self.fork(id, temp, (len - n) as i64, copy)?;
            self.remove_sequence(id)?;
            let s = self.seqs.remove(&temp).expect("forked above");
            self.seqs.insert(id, s);
        }
        Ok(())
    }

    /// `EnableSlidingWindowForSeq`.
    pub(crate) fn enable_sliding_window(&mut self, id: i64, window: i64, sink: i64) -> FfiResult<()> {
        if !(self.sliding || self.layer_sliding) {
            return Err(internal("The KV cache does not support sliding window."));
        }
        let seq = self.seqs.get(&id).ok_or_else(|| missing(id))?;
        if sink < 0 {
            return Err(internal("The specified attention sink size is expected to be non negative"));
        }
        if window <= 0 {
            return Err(internal("The specified sliding window size should be positive."));
        }
        if sink >= window {
            return Err(internal("The attn sink size should be less than the sliding window size."));
        }
        if window > i32::MAX as i64 {
            return Err(internal(format!("The sliding window size {window} is too large.")));
        }
        if seq.sliding_window_size != -1 {
            return Err(internal("A sequence cannot be enabled twice for sliding window."));
        }
        let prefix = seq.seq_length - self.block(seq.last_block).seq_length;
        let seq = self.seqs.get_mut(&id).expect("checked above");
        seq.last_block_attn_sink_size = (sink as i32 - prefix).max(0);
        seq.sliding_window_size = window as i32;
        Ok(())
    }

    /// What appending `len` tokens to sequence `seq` (`new_len` long with them) does to its last
    /// block's page count, with the slide of its window; refuses what the append cannot do (a
    /// frozen block, a window that breaks its invariants).
    pub(crate) fn plan_reserve(&self, seq: &Sequence, new_len: i32, len: i32) -> FfiResult<Reserve> {
        let ps = self.page_size;
        let block = self.block(seq.last_block);
        if len <= 0 {
            return Err(internal("Append with length 0 is not allowed."));
        }
        if block.ext_ref != 1 {
            return Err(internal(format!(
                "The block is {}-time referenced by other blocks, thus cannot accept new KV values.",
                block.ext_ref - 1
            )));
        }
        let cur = block.page_ids.len() as i64;
        let tgt = (block.seq_length - block.sink_length + block.sliding_window_offset + len + ps - 1) / ps;
        let mut removed = 0i64;
        if seq.sliding_window_size != -1 && self.sliding && new_len > seq.sliding_window_size {
            let slide = new_len - seq.sliding_window_size;
            let (sink, offset) = if seq.last_block_attn_sink_size > 0 && block.sink_length == 0 {
                (seq.last_block_attn_sink_size, seq.last_block_attn_sink_size)
            } else {
                (block.sink_length, block.sliding_window_offset)
            };
            let sink_pages = (sink + ps - 1) / ps;
            let after = (offset + slide) / ps;
            removed = (after - sink_pages).max(0) as i64;
            let new_len = block.seq_length + len - slide;
            let new_offset = (after - removed as i32) * ps + (offset + slide) % ps;
            if new_len < sink
                || new_offset < sink
                || (new_offset + (new_len - sink) + ps - 1) / ps != tgt - removed as i32
            {
                return Err(internal(format!(
                    "the sliding window of this sequence (window {}, sink {sink}) cannot take {len} more tokens in its last block of {} tokens",
                    seq.sliding_window_size, block.seq_length
                )));
            }
        }
        Ok(Reserve { net_pages: tgt as i64 - cur - removed })
    }

    /// `ReserveAppendLengthInSeq`: pages for `len` more tokens in the last block of sequence
    /// `id`, then the window's slide. [`Pages::plan_reserve`] said it fits.
    pub(crate) fn reserve(&mut self, id: i64, len: i32) -> FfiResult<()> {
        let ps = self.page_size;
        let seq = self.seqs.get(&id).ok_or_else(|| missing(id))?;
        let bi = seq.last_block;
        let borrow = seq.sliding_window_size != -1 && self.sliding;
        let (cur, tgt) = {
            let b = self.block(bi);
            (b.page_ids.len() as i32, (b.seq_length - b.sink_length + b.sliding_window_offset + len + ps - 1) / ps)
        };
        for _ in cur..tgt {
            let p = if self.free_pages.is_empty() && borrow { TEMP_PAGE } else { self.take_page()? };
            self.blocks[bi as usize].page_ids.push(p);
        }
        self.blocks[bi as usize].seq_length += len;
        self.slide(id)?;
        if self.sliding {
            for k in 0..self.blocks[bi as usize].page_ids.len() {
                if self.blocks[bi as usize].page_ids[k] == TEMP_PAGE {
                    let p = self.take_page()?;
                    self.blocks[bi as usize].page_ids[k] = p;
                }
            }
        }
        Ok(())
    }

    /// `SlideWindowForSequence`: frees the pages past the sink that fell out of the window.
    fn slide(&mut self, id: i64) -> FfiResult<()> {
        let ps = self.page_size;
        let seq = self.seqs.get_mut(&id).ok_or_else(|| missing(id))?;
        if seq.sliding_window_size == -1 || !self.sliding || seq.seq_length <= seq.sliding_window_size {
            return Ok(());
        }
        let slide = seq.seq_length - seq.sliding_window_size;
        let block = &mut self.blocks[seq.last_block as usize];
        if seq.last_block_attn_sink_size > 0 && block.sink_length == 0 {
            block.sink_length = seq.last_block_attn_sink_size;
            block.sliding_window_offset = seq.last_block_attn_sink_size;
        }
        let sink_pages = ((block.sink_length + ps - 1) / ps) as usize;
        let mut after = (block.sliding_window_offset + slide) / ps;
        let start_in_page = (block.sliding_window_offset + slide) % ps;
        while after as usize > sink_pages {
            let p = block.page_ids.remove(sink_pages);
            if p != TEMP_PAGE {
                self.free_pages.push(p);
            }
            after -= 1;
        }
        seq.seq_length = seq.sliding_window_size;
        block.seq_length -= slide;
        block.sliding_window_offset = after * ps + start_in_page;
        Ok(())
    }

    /// Checks that the pages the reservations ask for (in batch order) are there.
    pub(crate) fn check_pages(&self, plans: impl Iterator<Item = FfiResult<Reserve>>) -> FfiResult<()> {
        let mut free = self.free_pages.len() as i64;
        let mut need = 0i64;
        for r in plans {
            let r = r?;
            free -= r.net_pages;
            need += r.net_pages.max(0);
            if free < 0 {
                return Err(internal(format!(
                    "The KV cache is full. No page can be allocated: the forward needs {need} more pages, {} are free.",
                    self.free_pages.len()
                )));
            }
        }
        Ok(())
    }
}
