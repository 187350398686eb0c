//! The memory layout of tvm-ffi's maps (`map_base.h`), shared by `ffi.Map` and `ffi.Dict`:
//!
//! - `MapBaseObj`: header (24), `data`, `size`, `slots` (bit 63 set: small layout), `data_deleter`.
//! - small layout: `data` points to `slots & !TAG` key/value pairs (32 bytes each), normally right
//!   after the 56-byte base (allocated in place, at least 2 of them so that the object can be
//!   switched in place to the dense layout).
//! - dense layout (80 bytes): the base, `fib_shift` (u32), `iter_list_head`, `iter_list_tail`;
//!   `data` points to blocks of 16 one-byte metas followed by 16 items (key, value, prev, next:
//!   48 bytes each).
//!
//! [`MapRaw`] is a view of a live map object; its accessors are the only raw memory accesses of
//! the map code.

use crate::any::{Any, TVMFFIAny};
use crate::object::TVMFFIObject;
use std::ffi::c_void;

/// Bit 63 of `slots`: the small layout.
pub(crate) const SMALL_TAG: u64 = 1 << 63;
/// Items in a block.
pub(crate) const BLOCK_CAP: u64 = 16;
/// Bytes of an item (key, value, prev, next).
pub(crate) const ITEM_SIZE: u64 = 48;
/// Bytes of a block.
pub(crate) const BLOCK_SIZE: u64 = BLOCK_CAP * (ITEM_SIZE + 1);
/// Meta of an empty slot.
pub(crate) const EMPTY_SLOT: u8 = 0xff;
/// Meta of a protected slot.
pub(crate) const PROTECTED_SLOT: u8 = 0xfe;
/// The end of the iteration list.
pub(crate) const INVALID: u64 = u64::MAX;
/// Bytes of the base object (header and `MapBaseObj` fields).
pub(crate) const BASE_SIZE: usize = 56;
/// Bytes of a key/value pair.
pub(crate) const KV_SIZE: usize = 32;

/// A data deleter.
pub(crate) type DataDeleter = unsafe extern "C" fn(*mut c_void);

/// The fields of `MapBaseObj` after the header.
#[repr(C)]
pub(crate) struct MapBaseCell {
    /// The storage.
    pub data: *mut c_void,
    /// Entries.
    pub size: u64,
    /// Slots, with [`SMALL_TAG`] for the small layout.
    pub slots: u64,
    /// Frees `data` when it is not in place.
    pub data_deleter: Option<DataDeleter>,
}

#[repr(C)]
struct DenseCell {
    base: MapBaseCell,
    fib_shift: u32,
    iter_list_head: u64,
    iter_list_tail: u64,
}

const _: () = assert!(std::mem::size_of::<MapBaseCell>() + 24 == BASE_SIZE);
const _: () = assert!(std::mem::size_of::<DenseCell>() + 24 == 80);

/// A view of a live map object (ours or made by C++ code).
///
/// Invariant (established by [`MapRaw::new`]): the object is live and has the layout above,
/// and nobody else touches it while the view is in use (tvm-ffi's maps are not thread safe).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MapRaw(*mut TVMFFIObject);

impl MapRaw {
    /// A view of `obj`.
    ///
    /// # Safety
    /// `obj` is a live `ffi.Map` or `ffi.Dict` object with tvm-ffi's layout, used by no one else
    /// while the view is in use.
    pub unsafe fn new(obj: *mut TVMFFIObject) -> Self {
        MapRaw(obj)
    }
    /// The object.
    pub fn obj(self) -> *mut TVMFFIObject {
        self.0
    }
    fn cell(self) -> *mut DenseCell {
        // SAFETY: the fields follow the 24-byte header (invariant).
        unsafe { (self.0 as *mut u8).add(24).cast() }
    }
    /// `data`.
    pub fn data(self) -> *mut c_void {
        // SAFETY: invariant.
        unsafe { (*self.cell()).base.data }
    }
    /// Sets `data`.
    pub fn set_data(self, d: *mut c_void) {
        // SAFETY: invariant.
        unsafe { (*self.cell()).base.data = d }
    }
    /// `size`.
    pub fn size(self) -> u64 {
        // SAFETY: invariant.
        unsafe { (*self.cell()).base.size }
    }
    /// Sets `size`.
    pub(crate) fn set_size(self, n: u64) {
        // SAFETY: invariant.
        unsafe { (*self.cell()).base.size = n }
    }
    /// `slots` (tag included).
    pub(crate) fn slots_raw(self) -> u64 {
        // SAFETY: invariant.
        unsafe { (*self.cell()).base.slots }
    }
    /// Sets `slots` (tag included).
    pub(crate) fn set_slots_raw(self, n: u64) {
        // SAFETY: invariant.
        unsafe { (*self.cell()).base.slots = n }
    }
    /// The usable slots.
    pub(crate) fn num_slots(self) -> u64 {
        self.slots_raw() & !SMALL_TAG
    }
    /// Whether the map has the small layout.
    pub(crate) fn is_small(self) -> bool {
        self.slots_raw() & SMALL_TAG != 0
    }
    /// `data_deleter`.
    pub fn deleter(self) -> Option<DataDeleter> {
        // SAFETY: invariant.
        unsafe { (*self.cell()).base.data_deleter }
    }
    /// Sets `data_deleter`.
    pub(crate) fn set_deleter(self, d: Option<DataDeleter>) {
        // SAFETY: invariant.
        unsafe { (*self.cell()).base.data_deleter = d }
    }
    /// `fib_shift` (dense layout).
    pub(crate) fn fib_shift(self) -> u32 {
        // SAFETY: invariant (dense maps have 80 bytes; small ones at least 120).
        unsafe { (*self.cell()).fib_shift }
    }
    /// Sets `fib_shift`.
    pub(crate) fn set_fib_shift(self, s: u32) {
        // SAFETY: as above.
        unsafe { (*self.cell()).fib_shift = s }
    }
    /// The head of the iteration list (dense layout).
    pub fn head(self) -> u64 {
        // SAFETY: as above.
        unsafe { (*self.cell()).iter_list_head }
    }
    /// Sets it.
    pub(crate) fn set_head(self, i: u64) {
        // SAFETY: as above.
        unsafe { (*self.cell()).iter_list_head = i }
    }
    /// The tail of the iteration list (dense layout).
    pub fn tail(self) -> u64 {
        // SAFETY: as above.
        unsafe { (*self.cell()).iter_list_tail }
    }
    /// Sets it.
    pub(crate) fn set_tail(self, i: u64) {
        // SAFETY: as above.
        unsafe { (*self.cell()).iter_list_tail = i }
    }

    // ---- small layout: pairs at `data` ----

    fn kv(self, i: u64) -> *mut TVMFFIAny {
        // SAFETY: small maps hold `num_slots` pairs at `data`; callers pass i < num_slots.
        unsafe { self.data().cast::<TVMFFIAny>().add(2 * i as usize) }
    }
    /// The key of pair `i` (`i < size`).
    pub(crate) fn small_key<'a>(self, i: u64) -> &'a TVMFFIAny {
        // SAFETY: pair i < size is initialized.
        unsafe { &*self.kv(i) }
    }
    /// The value of pair `i` (`i < size`).
    pub(crate) fn small_val<'a>(self, i: u64) -> &'a TVMFFIAny {
        // SAFETY: pair i < size is initialized.
        unsafe { &*self.kv(i).add(1) }
    }
    /// Replaces the value of pair `i` (`i < size`), dropping the old one.
    pub(crate) fn small_set_val(self, i: u64, v: Any) {
        // SAFETY: pair i < size is initialized and owns its value.
        let old = unsafe { std::ptr::replace(self.kv(i).add(1), v.into_raw()) };
        // SAFETY: the old cell was owned.
        drop(unsafe { Any::from_raw(old) });
    }
    /// Writes pair `i` (`i < num_slots`, not initialized).
    pub(crate) fn small_write(self, i: u64, k: Any, v: Any) {
        // SAFETY: room for num_slots pairs.
        unsafe {
            self.kv(i).write(k.into_raw());
            self.kv(i).add(1).write(v.into_raw());
        }
    }
    /// Drops pair `i` (initialized), leaving it uninitialized.
    pub(crate) fn small_drop(self, i: u64) {
        // SAFETY: pair i is initialized and owned; it is read out once.
        unsafe {
            drop(Any::from_raw(self.kv(i).read()));
            drop(Any::from_raw(self.kv(i).add(1).read()));
        }
    }
    /// Moves pairs `from..size` one place left (over a dropped pair `from - 1`).
    pub(crate) fn small_shift_left(self, from: u64) {
        let n = self.size() - from;
        if n > 0 {
            // SAFETY: both ranges lie within the pairs; a raw move keeps ownership exact.
            unsafe { std::ptr::copy(self.kv(from), self.kv(from - 1), 2 * n as usize) }
        }
    }

    // ---- dense layout: blocks at `data` ----

    fn block(self, idx: u64) -> *mut u8 {
        // SAFETY: dense maps hold ceil(slots / 16) blocks; callers pass idx < slots.
        unsafe { self.data().cast::<u8>().add(((idx / BLOCK_CAP) * BLOCK_SIZE) as usize) }
    }
    fn item(self, idx: u64) -> *mut u8 {
        // SAFETY: as above; the item sits after the 16 metas.
        unsafe { self.block(idx).add((BLOCK_CAP + (idx % BLOCK_CAP) * ITEM_SIZE) as usize) }
    }
    /// The meta of slot `idx`.
    pub fn meta(self, idx: u64) -> u8 {
        // SAFETY: idx < slots.
        unsafe { *self.block(idx).add((idx % BLOCK_CAP) as usize) }
    }
    /// Sets the meta of slot `idx`.
    pub(crate) fn set_meta(self, idx: u64, m: u8) {
        // SAFETY: idx < slots.
        unsafe { *self.block(idx).add((idx % BLOCK_CAP) as usize) = m }
    }
    /// The key of an occupied slot.
    pub(crate) fn dense_key<'a>(self, idx: u64) -> &'a TVMFFIAny {
        // SAFETY: occupied slots hold an initialized item.
        unsafe { &*self.item(idx).cast::<TVMFFIAny>() }
    }
    /// The value of an occupied slot.
    pub(crate) fn dense_val<'a>(self, idx: u64) -> &'a TVMFFIAny {
        // SAFETY: as above.
        unsafe { &*self.item(idx).cast::<TVMFFIAny>().add(1) }
    }
    /// Replaces the value of an occupied slot, dropping the old one.
    pub(crate) fn dense_set_val(self, idx: u64, v: Any) {
        // SAFETY: occupied slots own their value.
        let old = unsafe { std::ptr::replace(self.item(idx).cast::<TVMFFIAny>().add(1), v.into_raw()) };
        // SAFETY: the old cell was owned.
        drop(unsafe { Any::from_raw(old) });
    }
    fn link(self, idx: u64, which: usize) -> *mut u64 {
        // SAFETY: prev and next follow the two cells of the item.
        unsafe { self.item(idx).add(32 + 8 * which).cast() }
    }
    /// `prev` of a slot's item.
    pub fn prev(self, idx: u64) -> u64 {
        // SAFETY: within the item.
        unsafe { self.link(idx, 0).read_unaligned() }
    }
    /// Sets `prev`.
    pub(crate) fn set_prev(self, idx: u64, v: u64) {
        // SAFETY: within the item.
        unsafe { self.link(idx, 0).write_unaligned(v) }
    }
    /// `next` of a slot's item.
    pub fn next(self, idx: u64) -> u64 {
        // SAFETY: within the item.
        unsafe { self.link(idx, 1).read_unaligned() }
    }
    /// Sets `next`.
    pub(crate) fn set_next(self, idx: u64, v: u64) {
        // SAFETY: within the item.
        unsafe { self.link(idx, 1).write_unaligned(v) }
    }
    /// Writes a new item (links reset) into a free slot.
    pub(crate) fn dense_write(self, idx: u64, k: TVMFFIAny, v: TVMFFIAny) {
        // SAFETY: the slot's item storage is free; the cells' ownership moves in.
        unsafe {
            let p = self.item(idx).cast::<TVMFFIAny>();
            p.write(k);
            p.add(1).write(v);
        }
        self.set_prev(idx, INVALID);
        self.set_next(idx, INVALID);
    }
    /// Reads an item's cells out (ownership moves to the caller; the slot must then be treated
    /// as free).
    pub(crate) fn dense_take(self, idx: u64) -> (TVMFFIAny, TVMFFIAny) {
        // SAFETY: an occupied slot's cells are initialized.
        unsafe {
            let p = self.item(idx).cast::<TVMFFIAny>();
            (p.read(), p.add(1).read())
        }
    }
    /// Drops an occupied slot's cells.
    pub(crate) fn dense_drop(self, idx: u64) {
        let (k, v) = self.dense_take(idx);
        // SAFETY: the cells were owned by the slot.
        unsafe {
            drop(Any::from_raw(k));
            drop(Any::from_raw(v));
        }
    }
}

/// Allocates `n_blocks` dense blocks with every meta empty (freed by [`free_data`]).
pub(crate) fn alloc_blocks(n_blocks: u64) -> *mut c_void {
    let bytes = (n_blocks * BLOCK_SIZE).max(1) as usize;
    // SAFETY: plain allocation; checked for null below.
    let p = unsafe { libc::malloc(bytes) }.cast::<u8>();
    if p.is_null() {
        std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align(bytes, 16).expect("layout"));
    }
    for b in 0..n_blocks {
        // SAFETY: each block starts with 16 meta bytes inside the allocation.
        unsafe { std::ptr::write_bytes(p.add((b * BLOCK_SIZE) as usize), EMPTY_SLOT, BLOCK_CAP as usize) };
    }
    p.cast()
}

/// The data deleter of storage this library allocates with `malloc` (what `::operator delete`
/// is too, so C++ code may free it or hand us its own).
///
/// # Safety
/// `p` is null or was allocated with `malloc` and is not used afterwards.
pub(crate) unsafe extern "C" fn free_data(p: *mut c_void) {
    // SAFETY: by contract.
    unsafe { libc::free(p) }
}
