//! `ffi.Map` and `ffi.Dict`: tvm-ffi's hash map (`map_base.h`) step for step: the small layout
//! (up to 4 pairs, linear search, insertion order) and the dense layout (power-of-two slots in
//! blocks of 16, Fibonacci hashing, chains through 126 jump distances, an iteration list in
//! insertion order), with the same growth rules. C++ code compiled against the headers reads,
//! iterates and inserts into our maps inline, and we into theirs.

use super::hash::{equal_raw, hash_raw};
use super::map_raw::*;
use crate::any::{Any, TVMFFIAny};
use crate::object::{dec_ref, make_inplace_object, ObjBox, ObjectRef, TVMFFIObject};
use crate::{ti, FfiError, FfiResult};
use std::ffi::c_void;

const SMALL_INIT: u64 = 2;
const SMALL_MAX: u64 = 4;
const MAX_LOAD: f64 = 0.99;
const NUM_JUMPS: usize = 126;

#[rustfmt::skip]
const NEXT_PROBE: [u64; NUM_JUMPS] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    21, 28, 36, 45, 55, 66, 78, 91, 105, 120,
    136, 153, 171, 190, 210, 231, 253, 276, 300, 325,
    351, 378, 406, 435, 465, 496, 528, 561, 595, 630,
    666, 703, 741, 780, 820, 861, 903, 946, 990, 1035,
    1081, 1128, 1176, 1225, 1275, 1326, 1378, 1431, 1485, 1540,
    1596, 1653, 1711, 1770, 1830, 1891, 1953, 2016, 2080, 2145,
    2211, 2278, 2346, 2415, 2485, 2556, 2628,
    8515, 19110, 42778, 96141, 216153,
    486591, 1092981, 2458653, 5532801, 12442566,
    27993903, 62983476, 141717030, 318844378, 717352503,
    1614057336, 3631522476, 8170957530, 18384510628, 41364789378,
    93070452520, 209408356380, 471168559170, 1060128894105, 2385289465695,
    5366898840628, 12075518705635, 27169915244790, 61132312065111, 137547689707000,
    309482283181501, 696335127828753, 1566753995631385, 3525196511162271, 7931691992677701,
    17846306936293605, 40154190677507445, 90346928918121501, 203280589587557251,
    457381325854679626, 1029107982097042876, 2315492959180353330, 5209859154120846435,
];

#[inline]
fn probe(meta_low: u8) -> u64 {
    NEXT_PROBE.get(meta_low as usize).copied().unwrap_or(0)
}

#[inline]
fn fib_hash(h: u64, shift: u32) -> u64 {
    11_400_714_819_323_198_485u64.wrapping_mul(h) >> shift
}

/// `CalcTableSize`: (fib_shift, slots) for at least `cap` entries.
fn calc_table_size(cap: u64) -> (u32, u64) {
    let mut shift = 64u32;
    let mut slots = 1u64;
    let mut c = cap;
    while c != 0 {
        shift -= 1;
        slots <<= 1;
        c >>= 1;
    }
    if slots < cap * 2 {
        (shift - 1, slots << 1)
    } else {
        (shift, slots)
    }
}

fn view(o: &ObjectRef) -> MapRaw {
    // SAFETY: callers only pass map or dict objects they hold.
    unsafe { MapRaw::new(o.as_ptr()) }
}

// ---------------------------------------------------------------- object creation and teardown

/// The teardown of every map object we allocate (`~SmallMapBaseObj` / `~DenseMapBaseObj`): the
/// object may have been switched in place to the dense layout by C++ code.
unsafe fn drop_map(obj: *mut ObjBox<MapBaseCell>) {
    // SAFETY: called once by the deleter of a map object.
    let m = unsafe { MapRaw::new(obj.cast()) };
    if m.is_small() {
        small_clear(m);
        if let Some(d) = m.deleter() {
            // SAFETY: the storage's own deleter, called once.
            unsafe { d(m.data()) };
            m.set_slots_raw(0);
            m.set_data(std::ptr::null_mut());
            m.set_deleter(None);
        }
    } else {
        dense_clear(m);
        release_memory(m);
    }
}

/// `SmallMapBaseObj::Empty`: room for `max(n, 2)` pairs in place.
fn small_empty(type_index: i32, n: u64) -> ObjectRef {
    let n = n.max(SMALL_INIT);
    make_inplace_object(
        type_index,
        n as usize * KV_SIZE,
        |tail| MapBaseCell { data: tail.cast(), size: 0, slots: n | SMALL_TAG, data_deleter: None },
        Some(drop_map),
    )
}

/// `DenseMapBaseObj::Empty`.
fn dense_empty(type_index: i32, fib_shift: u32, n_slots: u64) -> ObjectRef {
    let n_blocks = n_slots.div_ceil(BLOCK_CAP);
    let data = alloc_blocks(n_blocks);
    let o = make_inplace_object(
        type_index,
        24,
        |_| MapBaseCell { data, size: 0, slots: n_slots, data_deleter: Some(free_data) },
        Some(drop_map),
    );
    let m = view(&o);
    m.set_fib_shift(fib_shift);
    m.set_head(INVALID);
    m.set_tail(INVALID);
    o
}

/// An empty map of `type_index` (`ffi.Map` or `ffi.Dict`).
pub fn empty(type_index: i32) -> ObjectRef {
    small_empty(type_index, SMALL_INIT)
}

fn small_clear(m: MapRaw) {
    for i in 0..m.size() {
        m.small_drop(i);
    }
    m.set_size(0);
}

fn dense_clear(m: MapRaw) {
    if m.data().is_null() {
        m.set_size(0);
        return;
    }
    for idx in 0..m.num_slots().div_ceil(BLOCK_CAP) * BLOCK_CAP {
        let meta = m.meta(idx);
        if meta != PROTECTED_SLOT && meta != EMPTY_SLOT {
            m.set_meta(idx, EMPTY_SLOT);
            m.dense_drop(idx);
        }
    }
    m.set_size(0);
    m.set_head(INVALID);
    m.set_tail(INVALID);
}

fn release_memory(m: MapRaw) {
    if !m.data().is_null() {
        if let Some(d) = m.deleter() {
            // SAFETY: the storage's own deleter, called once.
            unsafe { d(m.data()) };
        }
    }
    m.set_data(std::ptr::null_mut());
    m.set_deleter(None);
    m.set_slots_raw(0);
    m.set_size(0);
    m.set_fib_shift(63);
}

/// `InplaceSmallMapDeleterFromData`: the storage of a small map is in place in another map
/// object, 56 bytes before; freeing the storage drops that object.
unsafe extern "C" fn inplace_small_deleter(data: *mut c_void) {
    // SAFETY: installed only by `inplace_switch_to` with the reference it leaked.
    unsafe { dec_ref((data as *mut u8).sub(BASE_SIZE).cast::<TVMFFIObject>()) }
}

// ---------------------------------------------------------------- iteration

/// The first position (`begin()`).
pub fn begin(m: MapRaw) -> u64 {
    if m.is_small() {
        0
    } else {
        m.head()
    }
}

/// The end position (`end()`).
pub fn end(m: MapRaw) -> u64 {
    if m.is_small() {
        m.size()
    } else {
        INVALID
    }
}

/// The position after `i` (`operator++`).
pub(crate) fn advance(m: MapRaw, i: u64) -> u64 {
    if m.is_small() {
        if i + 1 < m.size() {
            i + 1
        } else {
            m.size()
        }
    } else if i == INVALID {
        i
    } else {
        m.next(i)
    }
}

/// The key and value at a valid position (not `end`).
pub fn entry<'a>(m: MapRaw, i: u64) -> (&'a TVMFFIAny, &'a TVMFFIAny) {
    if m.is_small() {
        (m.small_key(i), m.small_val(i))
    } else {
        (m.dense_key(i), m.dense_val(i))
    }
}

/// Whether `i` is a valid position of `m` (what a stale iterator needs checked).
pub fn valid(m: MapRaw, i: u64) -> bool {
    if m.is_small() {
        i < m.size()
    } else {
        i != INVALID && i < m.num_slots() && !matches!(m.meta(i), EMPTY_SLOT | PROTECTED_SLOT)
    }
}

// ---------------------------------------------------------------- lookup

fn small_find(m: MapRaw, key: &TVMFFIAny) -> FfiResult<Option<u64>> {
    for i in 0..m.size() {
        if equal_raw(m.small_key(i), key)? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn is_head(m: MapRaw, idx: u64) -> bool {
    m.meta(idx) & 0x80 == 0
}

/// `idx` moved by `off` slots, wrapping around: the dense layout's slot count is a power of
/// two (`CalcTableSize`, and tvm-ffi's own maps alike), so a mask does what a division would
/// (and keeps any index in range even if it were not).
#[inline]
fn wrap_slot(m: MapRaw, idx: u64, off: u64) -> u64 {
    debug_assert!(m.num_slots().is_power_of_two());
    idx.wrapping_add(off) & m.num_slots().wrapping_sub(1)
}

#[inline]
fn next_in_chain(m: MapRaw, idx: u64, meta: u8) -> Option<u64> {
    let off = probe(meta & 0x7f);
    (off != 0).then(|| wrap_slot(m, idx, off))
}

fn has_next(m: MapRaw, idx: u64) -> bool {
    probe(m.meta(idx) & 0x7f) != 0
}

fn dense_search(m: MapRaw, key: &TVMFFIAny) -> FfiResult<Option<u64>> {
    if m.size() == 0 || m.num_slots() == 0 {
        return Ok(None);
    }
    let mut idx = fib_hash(hash_raw(key)?, m.fib_shift());
    if !is_head(m, idx) {
        return Ok(None);
    }
    loop {
        if equal_raw(key, m.dense_key(idx))? {
            return Ok(Some(idx));
        }
        match next_in_chain(m, idx, m.meta(idx)) {
            Some(n) => idx = n,
            None => return Ok(None),
        }
    }
}

/// The position of `key` (`find`), if present.
#[inline]
pub fn find(m: MapRaw, key: &TVMFFIAny) -> FfiResult<Option<u64>> {
    if m.is_small() {
        small_find(m, key)
    } else {
        dense_search(m, key)
    }
}

// ---------------------------------------------------------------- dense insertion

fn set_jump(m: MapRaw, idx: u64, jump: u8) {
    m.set_meta(idx, (m.meta(idx) & 0x80) | jump);
}

fn is_full(m: MapRaw) -> bool {
    (m.size() + 1) as f64 > m.num_slots() as f64 * MAX_LOAD
}

fn iter_list_unlink(m: MapRaw, idx: u64) {
    let (prev, next) = (m.prev(idx), m.next(idx));
    if prev == INVALID {
        m.set_head(next);
    } else {
        m.set_next(prev, next);
    }
    if next == INVALID {
        m.set_tail(prev);
    } else {
        m.set_prev(next, prev);
    }
}

fn iter_list_push_back(m: MapRaw, idx: u64) {
    m.set_prev(idx, m.tail());
    m.set_next(idx, INVALID);
    if m.tail() != INVALID {
        m.set_next(m.tail(), idx);
    }
    if m.head() == INVALID {
        m.set_head(idx);
    }
    m.set_tail(idx);
}

fn iter_list_replace(m: MapRaw, src: u64, dst: u64) {
    m.set_prev(dst, m.prev(src));
    m.set_next(dst, m.next(src));
    let (prev, next) = (m.prev(dst), m.next(dst));
    if prev == INVALID {
        m.set_head(dst);
    } else {
        m.set_next(prev, dst);
    }
    if next == INVALID {
        m.set_tail(dst);
    } else {
        m.set_prev(next, dst);
    }
}

fn find_prev(m: MapRaw, idx: u64) -> FfiResult<u64> {
    let mut next = fib_hash(hash_raw(m.dense_key(idx))?, m.fib_shift());
    let mut prev = next;
    let mut steps = 0u64;
    loop {
        match next_in_chain(m, next, m.meta(next)) {
            Some(n) if n != idx => {
                prev = n;
                next = n;
            }
            Some(_) => return Ok(prev),
            None => return Err(FfiError::new("InternalError", "corrupted map chain")),
        }
        steps += 1;
        if steps > m.num_slots() {
            return Err(FfiError::new("InternalError", "corrupted map chain"));
        }
    }
}

fn next_empty(m: MapRaw, idx: u64) -> Option<(u8, u64)> {
    (1..NUM_JUMPS).find_map(|j| {
        let c = wrap_slot(m, idx, NEXT_PROBE[j]);
        (m.meta(c) == EMPTY_SLOT).then_some((j as u8, c))
    })
}

fn new_item(m: MapRaw, idx: u64, meta: u8, key: &Any) {
    m.set_meta(idx, meta);
    m.dense_write(idx, key.clone().into_raw(), TVMFFIAny::NONE);
}

/// `TrySpareListHead`.
fn try_spare_list_head(m: MapRaw, target: u64, key: &Any) -> FfiResult<Option<u64>> {
    let mut r = target;
    let mut w = find_prev(m, target)?;
    let mut is_first = true;
    loop {
        let Some((jump, empty)) = next_empty(m, w) else { return Ok(None) };
        let (k, v) = m.dense_take(r);
        m.set_meta(empty, 0x80);
        m.dense_write(empty, k, v);
        iter_list_replace(m, r, empty);
        let r_meta = m.meta(r);
        m.set_meta(r, if is_first { PROTECTED_SLOT } else { EMPTY_SLOT });
        is_first = false;
        set_jump(m, w, jump);
        w = empty;
        match next_in_chain(m, r, r_meta) {
            Some(n) => r = n,
            None => break,
        }
    }
    new_item(m, target, 0, key);
    m.set_size(m.size() + 1);
    Ok(Some(target))
}

/// `TryInsert`: the slot now holding `key` (its value None when new; unlinked from the
/// iteration list when it was there), or None when the table must grow.
fn try_insert(m: MapRaw, key: &Any) -> FfiResult<Option<u64>> {
    if m.slots_raw() == 0 {
        return Ok(None);
    }
    let idx = fib_hash(hash_raw(key.raw())?, m.fib_shift());
    if m.meta(idx) == EMPTY_SLOT {
        new_item(m, idx, 0, key);
        m.set_size(m.size() + 1);
        return Ok(Some(idx));
    }
    if !is_head(m, idx) {
        return if is_full(m) { Ok(None) } else { try_spare_list_head(m, idx, key) };
    }
    let mut iter = idx;
    let mut next = Some(idx);
    while let Some(n) = next {
        if equal_raw(key.raw(), m.dense_key(n))? {
            iter_list_unlink(m, n);
            return Ok(Some(n));
        }
        iter = n;
        next = next_in_chain(m, n, m.meta(n));
    }
    if is_full(m) {
        return Ok(None);
    }
    let Some((jump, empty)) = next_empty(m, iter) else { return Ok(None) };
    new_item(m, empty, 0x80, key);
    set_jump(m, iter, jump);
    m.set_size(m.size() + 1);
    Ok(Some(empty))
}

/// `DenseMapBaseObj::InsertMaybeReHash`.
fn dense_insert(map: &ObjectRef, k: Any, v: Any) -> FfiResult<Option<ObjectRef>> {
    let m = view(map);
    if let Some(i) = try_insert(m, &k)? {
        m.dense_set_val(i, v);
        iter_list_push_back(m, i);
        return Ok(None);
    }
    if m.is_small() {
        return Err(FfiError::new("InternalError", "dense insertion into a small map"));
    }
    // Grow: re-insert everything in iteration order into a table twice the size.
    let mut p = dense_empty(map.type_index(), m.fib_shift().wrapping_sub(1), m.num_slots() * 2);
    let mut idx = m.head();
    while idx != INVALID {
        let (ok, ov) = entry(m, idx);
        // SAFETY: the map's cells are owned values; these are copies (the originals are dropped
        // with the old storage below).
        let (ok, ov) = unsafe { (Any::from_view(ok)?, Any::from_view(ov)?) };
        if let Some(r) = dense_insert(&p, ok, ov)? {
            p = r;
        }
        idx = m.next(idx);
    }
    if let Some(r) = dense_insert(&p, k, v)? {
        p = r;
    }
    dense_clear(m);
    release_memory(m);
    Ok(Some(p))
}

// ---------------------------------------------------------------- small insertion

fn small_from_items(type_index: i32, n: u64, items: Vec<(Any, Any)>) -> ObjectRef {
    let o = small_empty(type_index, n.max(items.len() as u64));
    let m = view(&o);
    for (k, v) in items {
        m.small_write(m.size(), k, v);
        m.set_size(m.size() + 1);
    }
    o
}

fn small_items(m: MapRaw) -> FfiResult<Vec<(Any, Any)>> {
    (0..m.size())
        .map(|i| {
            // SAFETY: owned cells of the map; copies.
            unsafe { Ok((Any::from_view(m.small_key(i))?, Any::from_view(m.small_val(i))?)) }
        })
        .collect()
}

/// `SmallMapBaseObj::InsertMaybeReHash`.
fn small_insert(map: &ObjectRef, k: Any, v: Any) -> FfiResult<Option<ObjectRef>> {
    let m = view(map);
    if let Some(i) = small_find(m, k.raw())? {
        m.small_set_val(i, v);
        return Ok(None);
    }
    if m.size() < m.num_slots() {
        m.small_write(m.size(), k, v);
        m.set_size(m.size() + 1);
        return Ok(None);
    }
    let next = (m.num_slots() * 2).clamp(SMALL_INIT, SMALL_MAX);
    if next <= m.num_slots() {
        return Err(FfiError::new("InternalError", "small map cannot grow"));
    }
    let new_map = small_from_items(map.type_index(), next, small_items(m)?);
    Ok(Some(small_insert(&new_map, k, v)?.unwrap_or(new_map)))
}

/// `MapBaseObj::InsertMaybeReHash`: inserts or replaces; a new map object when the storage had
/// to be rebuilt (the old one keeps its entries in the small case, is emptied in the dense one).
pub(crate) fn insert_maybe_rehash(map: &ObjectRef, k: Any, v: Any) -> FfiResult<Option<ObjectRef>> {
    let m = view(map);
    if !m.is_small() {
        return dense_insert(map, k, v);
    }
    let n = m.num_slots();
    if n < SMALL_MAX || (n == SMALL_MAX && m.size() < n) {
        return small_insert(map, k, v);
    }
    if n == SMALL_MAX {
        let new_map = create_from_range(map.type_index(), small_items(m)?)?;
        return Ok(Some(dense_insert(&new_map, k, v)?.unwrap_or(new_map)));
    }
    Ok(None)
}

/// `MapBaseObj::CreateFromRange`.
pub(crate) fn create_from_range(type_index: i32, items: Vec<(Any, Any)>) -> FfiResult<ObjectRef> {
    let cap = items.len() as u64;
    if cap < SMALL_MAX {
        if cap < 2 {
            return Ok(small_from_items(type_index, cap, items));
        }
        let mut obj = small_empty(type_index, cap);
        for (k, v) in items {
            if let Some(r) = small_insert(&obj, k, v)? {
                obj = r;
            }
        }
        return Ok(obj);
    }
    let (shift, slots) = calc_table_size(cap);
    let mut obj = dense_empty(type_index, shift, slots);
    for (k, v) in items {
        if let Some(r) = dense_insert(&obj, k, v)? {
            obj = r;
        }
    }
    Ok(obj)
}

/// `MapBaseObj::CopyFrom`: a copy with the same layout (slots, positions, order).
pub fn copy_from(type_index: i32, from: &ObjectRef) -> FfiResult<ObjectRef> {
    let f = view(from);
    if f.is_small() {
        return Ok(small_from_items(type_index, f.size(), small_items(f)?));
    }
    let p = dense_empty(type_index, f.fib_shift(), f.num_slots());
    let m = view(&p);
    for idx in 0..f.num_slots().div_ceil(BLOCK_CAP) * BLOCK_CAP {
        let meta = f.meta(idx);
        if meta == PROTECTED_SLOT {
            return Err(FfiError::new("InternalError", "copying a map with a protected slot"));
        }
        m.set_meta(idx, meta);
        if meta != EMPTY_SLOT {
            // SAFETY: owned cells of the source; copies.
            let (k, v) = unsafe { (Any::from_view(f.dense_key(idx))?, Any::from_view(f.dense_val(idx))?) };
            m.dense_write(idx, k.into_raw(), v.into_raw());
            m.set_prev(idx, f.prev(idx));
            m.set_next(idx, f.next(idx));
        }
    }
    m.set_size(f.size());
    m.set_head(f.head());
    m.set_tail(f.tail());
    Ok(p)
}

/// `MapBaseObj::InplaceSwitchTo`: `this` takes over `other`'s storage (what `ffi.Dict` does when
/// an insertion rebuilt the storage: the dict object keeps its identity).
pub(crate) fn inplace_switch_to(this: &ObjectRef, other: ObjectRef) -> FfiResult<()> {
    let t = view(this);
    let o = view(&other);
    if t.is_small() {
        small_clear(t);
        if let Some(d) = t.deleter() {
            // SAFETY: the storage's own deleter, called once.
            unsafe { d(t.data()) };
            t.set_slots_raw(0);
            t.set_data(std::ptr::null_mut());
            t.set_deleter(None);
        }
        if o.is_small() {
            t.set_size(o.size());
            t.set_slots_raw(o.slots_raw());
            t.set_data(o.data());
            if let Some(d) = o.deleter() {
                t.set_deleter(Some(d));
                o.set_deleter(None);
            } else {
                t.set_deleter(Some(inplace_small_deleter));
                // The storage lives in `other`: its reference now belongs to the deleter.
                let _ = other.clone().into_raw();
            }
            o.set_data(std::ptr::null_mut());
            o.set_size(0);
            o.set_slots_raw(0);
            return Ok(());
        }
    } else {
        dense_clear(t);
        release_memory(t);
        if o.is_small() {
            return Err(FfiError::new("InternalError", "switching a dense map to a small one"));
        }
    }
    t.set_size(o.size());
    t.set_slots_raw(o.slots_raw());
    t.set_data(o.data());
    t.set_deleter(o.deleter());
    t.set_fib_shift(o.fib_shift());
    t.set_head(o.head());
    t.set_tail(o.tail());
    o.set_data(std::ptr::null_mut());
    o.set_deleter(None);
    o.set_size(0);
    o.set_slots_raw(0);
    Ok(())
}

// ---------------------------------------------------------------- erase / clear

fn dense_erase(m: MapRaw, idx: u64) -> FfiResult<()> {
    if !has_next(m, idx) {
        if !is_head(m, idx) {
            let p = find_prev(m, idx)?;
            set_jump(m, p, 0);
        }
        m.set_size(m.size() - 1);
        iter_list_unlink(m, idx);
        m.dense_drop(idx);
        m.set_meta(idx, EMPTY_SLOT);
    } else {
        m.set_size(m.size() - 1);
        let mut prev = idx;
        let mut last = next_in_chain(m, idx, m.meta(idx)).unwrap_or(idx);
        while has_next(m, last) {
            prev = last;
            last = next_in_chain(m, last, m.meta(last)).unwrap_or(last);
        }
        iter_list_unlink(m, idx);
        m.dense_drop(idx);
        // The last entry of the chain moves into the erased slot (its links follow).
        let (k, v) = m.dense_take(last);
        m.dense_write(idx, k, v);
        iter_list_replace(m, last, idx);
        m.set_meta(last, EMPTY_SLOT);
        set_jump(m, prev, 0);
    }
    Ok(())
}

/// Erases the entry at a valid position.
pub(crate) fn erase_at(m: MapRaw, i: u64) -> FfiResult<()> {
    if m.is_small() {
        if i >= m.size() {
            return Ok(());
        }
        m.small_drop(i);
        m.small_shift_left(i + 1);
        m.set_size(m.size() - 1);
        Ok(())
    } else if i != INVALID && i <= m.num_slots() {
        dense_erase(m, i)
    } else {
        Ok(())
    }
}

/// `clear()`: drops every entry, keeps the storage.
pub fn clear(m: MapRaw) {
    if m.is_small() {
        small_clear(m)
    } else {
        dense_clear(m)
    }
}

// ---------------------------------------------------------------- the Rust API

fn check_map(o: &ObjectRef) -> FfiResult<MapRaw> {
    match o.type_index() {
        ti::MAP | ti::DICT => Ok(view(o)),
        t => Err(FfiError::type_error(format!("expected ffi.Map or ffi.Dict, got {}", crate::types::type_key(t)))),
    }
}

/// Builds an `ffi.Map` the way the `ffi.Map` global does (insertions in order, later duplicates
/// replace earlier values).
pub fn make_map(items: Vec<(Any, Any)>) -> FfiResult<ObjectRef> {
    build(ti::MAP, items)
}

/// Builds an `ffi.Dict` the way the `ffi.Dict` global does.
pub fn make_dict(items: Vec<(Any, Any)>) -> FfiResult<ObjectRef> {
    build(ti::DICT, items)
}

fn build(type_index: i32, items: Vec<(Any, Any)>) -> FfiResult<ObjectRef> {
    let mut m = empty(type_index);
    for (k, v) in items {
        if let Some(n) = insert_maybe_rehash(&m, k, v)? {
            if type_index == ti::DICT {
                inplace_switch_to(&m, n)?;
            } else {
                m = n;
            }
        }
    }
    Ok(m)
}

/// The number of entries of a map or dict.
pub fn map_size(o: &ObjectRef) -> FfiResult<u64> {
    Ok(check_map(o)?.size())
}

/// The value of `key` (looked up with `AnyHash`/`AnyEqual`), if present.
pub fn map_get(o: &ObjectRef, key: &Any) -> FfiResult<Option<Any>> {
    map_get_raw(o, key.raw())
}

/// [`map_get`] with the key as a cell (an owned value's or an argument's, as [`Any::from_view`]
/// would keep it: no raw strings).
#[inline]
pub(crate) fn map_get_raw(o: &ObjectRef, key: &TVMFFIAny) -> FfiResult<Option<Any>> {
    let m = check_map(o)?;
    match find(m, key)? {
        // SAFETY: owned cell of the map; a copy.
        Some(i) => Ok(Some(unsafe { Any::from_view(entry(m, i).1)? })),
        None => Ok(None),
    }
}

/// The entries of a map or dict in iteration order (copies).
pub fn map_items(o: &ObjectRef) -> FfiResult<Vec<(Any, Any)>> {
    let m = check_map(o)?;
    let mut out = Vec::with_capacity(m.size() as usize);
    let (mut i, e) = (begin(m), end(m));
    while i != e {
        let (k, v) = entry(m, i);
        // SAFETY: owned cells of the map; copies.
        out.push(unsafe { (Any::from_view(k)?, Any::from_view(v)?) });
        i = advance(m, i);
    }
    Ok(out)
}

/// Sets `key` in a dict in place (`Dict::Set`).
pub fn dict_set(o: &ObjectRef, key: Any, value: Any) -> FfiResult<()> {
    check_map(o)?;
    if let Some(n) = insert_maybe_rehash(o, key, value)? {
        inplace_switch_to(o, n)?;
    }
    Ok(())
}

/// `Map::Set` (copy on write): `map` becomes a map with `key` set (the same object when this is
/// its only reference).
pub fn map_set(map: &mut ObjectRef, key: Any, value: Any) -> FfiResult<()> {
    check_map(map)?;
    if map.use_count() > 1 {
        *map = copy_from(map.type_index(), map)?;
    }
    if let Some(n) = insert_maybe_rehash(map, key, value)? {
        *map = n;
    }
    Ok(())
}

/// Erases `key` from a dict (or a map this code owns alone); whether it was there.
pub(crate) fn map_erase(o: &ObjectRef, key: &Any) -> FfiResult<bool> {
    let m = check_map(o)?;
    match find(m, key.raw())? {
        Some(i) => erase_at(m, i).map(|_| true),
        None => Ok(false),
    }
}

/// Empties a dict.
pub(crate) fn map_clear(o: &ObjectRef) -> FfiResult<()> {
    clear(check_map(o)?);
    Ok(())
}

/// A map view of a map or dict object held by the caller, for position-based iteration
/// ([`begin`], [`end`], [`advance`], [`entry`]).
pub(crate) fn raw_view(o: &ObjectRef) -> FfiResult<MapRaw> {
    check_map(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(o: &ObjectRef) -> Vec<i64> {
        map_items(o).unwrap().iter().map(|(k, _)| k.as_i64().unwrap()).collect()
    }

    #[test]
    fn table_sizes_match_the_header() {
        assert_eq!(calc_table_size(4), (61, 8));
        assert_eq!(calc_table_size(5), (60, 16));
        assert_eq!(calc_table_size(8), (60, 16));
        assert_eq!(calc_table_size(100), (56, 256));
    }

    #[test]
    fn small_then_dense_keeps_insertion_order() {
        for n in [0i64, 1, 3, 4, 5, 17, 200, 1000] {
            let items = (0..n).map(|i| (Any::int(i * 7919 % 1009), Any::int(i))).collect();
            let m = make_map(items).unwrap();
            assert_eq!(map_size(&m).unwrap(), n as u64);
            assert_eq!(view(&m).is_small(), n <= 4, "n = {n}");
            let expect: Vec<i64> = (0..n).map(|i| i * 7919 % 1009).collect();
            assert_eq!(keys(&m), expect);
            for i in 0..n {
                let v = map_get(&m, &Any::int(i * 7919 % 1009)).unwrap().unwrap();
                assert_eq!(v.as_i64(), Some(i));
            }
            assert!(map_get(&m, &Any::int(-1)).unwrap().is_none());
        }
    }

    #[test]
    fn duplicates_replace_and_strings_match_across_forms() {
        let m = make_map(vec![
            (Any::string("a"), Any::int(1)),
            (Any::string("a-long-string-key"), Any::int(2)),
            (Any::string("a"), Any::int(3)),
        ])
        .unwrap();
        assert_eq!(map_size(&m).unwrap(), 2);
        let big = Any::object(crate::string::make_bytes_object(b"a", false));
        assert_eq!(map_get(&m, &big).unwrap().unwrap().as_i64(), Some(3));
    }

    #[test]
    fn dense_lookups_compare_by_value_across_forms() {
        // Enough keys for the dense layout and chains of several probes.
        let mut items: Vec<(Any, Any)> = (0..3000).map(|i| (Any::string(&format!("k{i}")), Any::int(i))).collect();
        items.push((Any::string("a-long-string-key"), Any::int(-1)));
        items.push((Any::int(1), Any::int(-2)));
        let m = make_map(items).unwrap();
        assert!(!view(&m).is_small());
        assert!(view(&m).num_slots().is_power_of_two());
        for i in (0..3000).step_by(7) {
            let small = Any::string(&format!("k{i}"));
            assert_eq!(small.type_index(), ti::SMALL_STR);
            assert_eq!(map_get(&m, &small).unwrap().unwrap().as_i64(), Some(i));
            // The same text as a heap string object finds the small key.
            let heap = Any::object(crate::string::make_bytes_object(format!("k{i}").as_bytes(), false));
            assert_eq!(map_get(&m, &heap).unwrap().unwrap().as_i64(), Some(i));
        }
        let long = Any::object(crate::string::make_bytes_object(b"a-long-string-key", false));
        assert_eq!(map_get(&m, &long).unwrap().unwrap().as_i64(), Some(-1));
        assert_eq!(map_get(&m, &Any::int(1)).unwrap().unwrap().as_i64(), Some(-2));
        // Same bits, other type: not the int key; bytes are not strings.
        assert!(map_get(&m, &Any::bool(true)).unwrap().is_none());
        assert!(map_get(&m, &Any::bytes(b"k1")).unwrap().is_none());
        assert!(map_get(&m, &Any::string("k3000")).unwrap().is_none());
    }

    #[test]
    fn dict_mutates_in_place_and_erases() {
        let d = make_dict(vec![]).unwrap();
        let ptr = d.as_ptr();
        for i in 0..100 {
            dict_set(&d, Any::int(i), Any::int(i * 2)).unwrap();
        }
        assert_eq!(d.as_ptr(), ptr);
        assert_eq!(map_size(&d).unwrap(), 100);
        for i in (0..100).step_by(3) {
            assert!(map_erase(&d, &Any::int(i)).unwrap());
        }
        assert!(!map_erase(&d, &Any::int(0)).unwrap());
        let expect: Vec<i64> = (0..100).filter(|i| i % 3 != 0).collect();
        assert_eq!(keys(&d), expect);
        for i in 0..100 {
            assert_eq!(map_get(&d, &Any::int(i)).unwrap().is_some(), i % 3 != 0);
        }
        map_clear(&d).unwrap();
        assert_eq!(map_size(&d).unwrap(), 0);
        dict_set(&d, Any::int(5), Any::int(6)).unwrap();
        assert_eq!(keys(&d), vec![5]);
    }

    #[test]
    fn custom_any_hash_and_equal_hooks_are_used() {
        use crate::{function, object::make_object, types};
        let t = types::get_or_alloc_index("test.containers.AllEqual", -1, 1, 0, false, ti::OBJECT).unwrap();
        let hash = Any::object(function::from_fn(|_| Ok(Any::int(42))));
        let eq = Any::object(function::from_fn(|_| Ok(Any::bool(true))));
        types::register_attr(t, "__any_hash__", hash.raw()).unwrap();
        types::register_attr(t, "__any_equal__", eq.raw()).unwrap();
        let a = Any::object(make_object(t, 0u64));
        let b = Any::object(make_object(t, 1u64));
        assert_eq!(super::super::hash::any_hash(&a).unwrap(), super::super::hash::stable_hash_combine(t as u64, 42));
        assert!(super::super::hash::any_equal(&a, &b).unwrap());
        // distinct objects, one key: the second insertion replaces the first's value
        let items = (0..6).map(|i| (Any::object(make_object(t, i as u64)), Any::int(i))).collect();
        let m = make_map(items).unwrap();
        assert_eq!(map_size(&m).unwrap(), 1);
        assert_eq!(map_get(&m, &a).unwrap().unwrap().as_i64(), Some(5));
        // plain objects compare by identity
        let p = Any::object(make_object(ti::OBJECT, ()));
        let q = Any::object(make_object(ti::OBJECT, ()));
        let m = make_map(vec![(p.clone(), Any::int(1)), (q.clone(), Any::int(2))]).unwrap();
        assert_eq!(map_size(&m).unwrap(), 2);
        assert_eq!(map_get(&m, &q).unwrap().unwrap().as_i64(), Some(2));
    }

    #[test]
    fn values_are_released() {
        let v = Any::object(crate::string::make_bytes_object(b"payload-payload", false));
        let o = v.as_object().unwrap();
        {
            let items = (0..50).map(|i| (Any::int(i), v.clone())).collect();
            let m = make_map(items).unwrap();
            assert_eq!(o.use_count(), 52);
            let mut m2 = m.clone();
            map_set(&mut m2, Any::int(1000), Any::int(0)).unwrap();
            assert!(!m2.same_as(&m));
            assert_eq!(o.use_count(), 102);
        }
        assert_eq!(o.use_count(), 2);
    }
}
