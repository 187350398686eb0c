//! `ffi.Array` (immutable, copy-on-write in C++): the header, `TVMFFISeqCell` (`data`, `size`,
//! `capacity`, `data_deleter`), then the `TVMFFIAny` elements in place (`data` points to them).

use crate::any::Any;
use crate::object::{make_inplace_object, ObjBox, ObjectRef};
use crate::ti;
use std::ffi::c_void;

/// `TVMFFISeqCell`.
#[repr(C)]
pub struct TVMFFISeqCell {
    /// The elements (`TVMFFIAny` cells).
    pub data: *mut c_void,
    /// How many.
    pub size: i64,
    /// Room for how many.
    pub capacity: i64,
    /// Frees `data` when it is not in place (null for in-place storage).
    pub data_deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

unsafe fn drop_elements(obj: *mut ObjBox<TVMFFISeqCell>) {
    // SAFETY: called once by the deleter; the cell's `size` elements are owned values.
    unsafe {
        let cell = &mut (*obj).payload;
        let items = cell.data.cast::<Any>();
        for i in 0..cell.size.max(0) as usize {
            std::ptr::drop_in_place(items.add(i));
        }
        cell.size = 0;
        if let Some(d) = cell.data_deleter {
            d(cell.data);
        }
    }
}

/// Makes a sequence object (`ffi.Array`, or another type index with the same in-place layout)
/// holding `items`, with room for `capacity` (at least `items.len()`).
pub(crate) fn make_seq(type_index: i32, items: Vec<Any>, capacity: usize) -> ObjectRef {
    let n = items.len();
    let cap = capacity.max(n);
    make_inplace_object(
        type_index,
        cap * std::mem::size_of::<Any>(),
        |tail| {
            let dst = tail.cast::<Any>();
            for (i, it) in items.into_iter().enumerate() {
                // SAFETY: the tail has room for `cap >= n` cells.
                unsafe { dst.add(i).write(it) };
            }
            TVMFFISeqCell { data: tail.cast(), size: n as i64, capacity: cap as i64, data_deleter: None }
        },
        Some(drop_elements),
    )
}

/// Makes an `ffi.Array`.
pub fn make_array(items: Vec<Any>) -> ObjectRef {
    let n = items.len();
    make_seq(ti::ARRAY, items, n)
}

/// The elements of a sequence object (`ffi.Array` or `ffi.List`, whoever made it).
pub fn seq_items(o: &ObjectRef) -> &[Any] {
    debug_assert!(o.type_index() == ti::ARRAY || o.type_index() == ti::LIST);
    // SAFETY: sequences hold a TVMFFISeqCell after the header whose `data` has `size` owned cells.
    unsafe {
        let cell = o.payload::<TVMFFISeqCell>();
        if cell.size <= 0 || cell.data.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(cell.data.cast::<Any>(), cell.size as usize)
    }
}
