//! Unit tests of the page bookkeeping and of a forward pass's arrays (no kernels: the page
//! copies of forks are recorded).

use super::forward::{begin, Batch, Config};
use super::paging::Pages;

fn cfg(sliding: bool) -> Config {
    Config {
        prefill_chunk_size: 512,
        sliding,
        layer_sliding: false,
        layer_window: 1024,
        rope_inline: false,
        mla: false,
        flashinfer: false,
        gqa_group: 2,
    }
}

/// Appends `len` tokens to each of `ids` (a forward without kernels).
fn append(p: &mut Pages, ids: &[i64], lens: &[i64]) -> Batch {
    let mut b = Batch::default();
    begin(p, &cfg(p.sliding), &mut b, ids, lens, None).unwrap();
    b
}

fn no_copy(_: i32, _: i32, _: i32) -> tvm_runtime_tvm_ffi::FfiResult<()> {
    panic!("no page copy expected")
}

#[test]
fn add_remove_frees_everything() {
    let mut p = Pages::new(16, 10, false, false);
    p.add_sequence(0).unwrap();
    assert!(p.add_sequence(0).is_err());
    append(&mut p, &[0], &[40]);
    assert_eq!(p.free_pages.len(), 7);
    p.remove_sequence(0).unwrap();
    assert_eq!(p.free_pages.len(), 10);
    assert!(p.remove_sequence(0).unwrap_err().message().contains("\"0\" cannot be found"));
}

#[test]
fn a_forward_writes_the_page_table_and_positions() {
    let mut p = Pages::new(4, 10, false, false);
    p.add_sequence(7).unwrap();
    p.add_sequence(8).unwrap();
    let b = append(&mut p, &[7, 8], &[5, 2]);
    // Prefill: arrays before the pages are reserved (empty page tables), then 2 + 1 pages.
    assert!(!b.append_before_attn);
    assert_eq!(b.depths[0].qo_indptr, [0, 5, 7]);
    assert_eq!(b.depths[0].page_indptr, [0, 0, 0]);
    assert_eq!(b.q_rope_position_map, [0, 1, 2, 3, 4, 0, 1]);
    // Pages are handed out from id 0 up.
    assert_eq!(b.append_position_map, [0, 1, 2, 3, 4, 8, 9]);
    let b = append(&mut p, &[7, 8], &[1, 1]);
    // Decode: the pages are reserved first, and the page table includes the new token.
    assert!(b.append_before_attn && b.use_decode == [true]);
    assert_eq!(b.depths[0].page_indptr, [0, 2, 3]);
    assert_eq!(b.depths[0].page_indices, [0, 1, 2]);
    assert_eq!(b.depths[0].last_page_len, [2, 3]);
    assert_eq!(b.append_position_map, [5, 10]);
    assert_eq!(b.q_rope_position_map, [5, 2]);
}

#[test]
fn fork_inside_a_page_copies_it_and_shares_the_rest() {
    let mut p = Pages::new(4, 20, false, false);
    p.add_sequence(0).unwrap();
    append(&mut p, &[0], &[10]); // 3 pages
    let mut copies = Vec::new();
    p.fork(0, 1, 6, &mut |s, d, n| {
        copies.push((s, d, n));
        Ok(())
    })
    .unwrap();
    // Pages 0 (tokens 0-3) shared; page 1 (4-7) has the fork point: 2 tokens copied to a new page.
    assert_eq!(copies, [(1, 3, 2)]);
    assert_eq!(p.seq(1).unwrap().seq_length, 6);
    assert_eq!(p.free_pages.len(), 16);
    // Both go on: the child in its copied page, the parent in its own block.
    let b = append(&mut p, &[1, 0], &[1, 1]);
    assert_eq!(b.num_depths, 2);
    assert_eq!(b.depths[0].page_indices, [0, 0], "the shared prefix block, once per sequence");
    assert_eq!(b.depths[1].page_indices, [3, 1, 2]);
    assert_eq!(b.append_position_map, [3 * 4 + 2, 2 * 4 + 2]);
    p.remove_sequence(0).unwrap();
    p.remove_sequence(1).unwrap();
    assert_eq!(p.free_pages.len(), 20);
    assert!(p.blocks.len() == p.free_blocks.len());
}

#[test]
fn fork_at_the_end_of_whole_pages_copies_nothing() {
    let mut p = Pages::new(4, 20, false, false);
    p.add_sequence(0).unwrap();
    append(&mut p, &[0], &[8]);
    p.fork(0, 1, -1, &mut no_copy).unwrap();
    assert_eq!(p.free_pages.len(), 18);
    append(&mut p, &[0, 1], &[1, 1]);
    assert_eq!(p.free_pages.len(), 16);
}

#[test]
fn popn_shrinks_and_refork_on_shared_blocks() {
    let mut p = Pages::new(4, 20, false, false);
    p.add_sequence(0).unwrap();
    append(&mut p, &[0], &[10]);
    p.popn(0, 3, &mut no_copy).unwrap();
    assert_eq!(p.seq(0).unwrap().seq_length, 7);
    assert_eq!(p.free_pages.len(), 18);
    assert!(p.popn(0, 8, &mut no_copy).unwrap_err().message().contains("exceeds"));
    p.fork(0, 1, 4, &mut no_copy).unwrap();
    // Popping 0 into the shared prefix re-forks it at the new length (2 tokens, a page copy).
    let mut copies = 0;
    p.popn(0, 5, &mut |_, _, n| {
        assert_eq!(n, 2);
        copies += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(copies, 1);
    assert_eq!(p.seq(0).unwrap().seq_length, 2);
    assert_eq!(p.seq(1).unwrap().seq_length, 4);
}

#[test]
fn refused_forwards_change_nothing() {
    let mut p = Pages::new(16, 3, false, false);
    p.add_sequence(0).unwrap();
    p.add_sequence(1).unwrap();
    let mut b = Batch::default();
    let c = cfg(false);
    let before = (p.free_pages.clone(), p.seq(0).unwrap().seq_length);
    for (ids, lens) in [
        (&[0i64, 1][..], &[40i64, 20][..]),
        (&[0, 0][..], &[1, 1][..]),
        (&[0, 9][..], &[1, 1][..]),
        (&[0][..], &[0][..]),
        (&[0][..], &[600][..]),
        (&[][..], &[][..]),
    ] {
        assert!(begin(&mut p, &c, &mut b, ids, lens, None).is_err(), "{ids:?} {lens:?}");
        assert_eq!((p.free_pages.clone(), p.seq(0).unwrap().seq_length), before);
    }
    // A refused fork (no free page for the partial copy) changes nothing either.
    begin(&mut p, &c, &mut b, &[0], &[47], None).unwrap();
    assert_eq!(p.free_pages.len(), 0);
    assert!(p.fork(0, 2, 5, &mut no_copy).is_err());
    assert_eq!(p.seqs.len(), 2);
    p.fork(0, 2, 16, &mut no_copy).unwrap();
}

#[test]
fn sliding_windows_recycle_pages() {
    let mut p = Pages::new(4, 12, true, false);
    p.add_sequence(0).unwrap();
    p.enable_sliding_window(0, 8, 2).unwrap();
    assert!(p.enable_sliding_window(0, 8, 2).is_err());
    for _ in 0..30 {
        append(&mut p, &[0], &[1]);
    }
    let s = p.seq(0).unwrap();
    assert_eq!(s.seq_length, 8, "the window");
    let block = p.block(s.last_block);
    assert_eq!(block.sink_length, 2);
    // Sink page + pages covering the 6 window tokens: at most 1 + 3.
    assert!(block.page_ids.len() <= 4, "{:?}", block.page_ids);
    assert_eq!(p.free_pages.len(), 12 - block.page_ids.len());
}

#[test]
fn token_trees_are_checked() {
    let mut p = Pages::new(16, 10, false, false);
    p.add_sequence(0).unwrap();
    append(&mut p, &[0], &[4]);
    let mut b = Batch::default();
    let c = cfg(false);
    assert!(begin(&mut p, &c, &mut b, &[0], &[3], Some(&[-1, 2, 0])).is_err(), "a parent after its child");
    assert!(begin(&mut p, &c, &mut b, &[0], &[3], Some(&[-1, 0])).is_err(), "too few parents");
    assert_eq!(p.seq(0).unwrap().seq_length, 4);
    begin(&mut p, &c, &mut b, &[0], &[3], Some(&[-1, 0, 0])).unwrap();
    assert_eq!(b.depths[0].tree_mask, [0, 3, 1, 2, 2, 3]);
    assert_eq!(b.q_rope_position_map, [4, 5, 5]);
    assert!(!b.is_chain[0]);
    // An uncommitted tree refuses a chain forward.
    assert!(begin(&mut p, &c, &mut b, &[0], &[1], None).is_err());
}
