//! `ffi.Array` (immutable, copy-on-write in C++): the header, `TVMFFISeqCell` (`data`, `size`,
//! `capacity`, `data_deleter`), then the `TVMFFIAny` elements in place (`data` points to them).

use crate::any::{Any, TVMFFIAny};
use crate::error::FfiResult;
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

/// Makes an `ffi.Array` of owned copies of `views` (`Any::from_view`), written in place: no
/// vector in between. A view that does not convert is an error, and the elements converted
/// before it go with the object.
///
/// # Safety
/// Every view is valid (as `Any::from_view` requires).
pub(crate) unsafe fn make_array_from_views(views: &[TVMFFIAny]) -> FfiResult<ObjectRef> {
    let n = views.len();
    let mut failed = None;
    let o = make_inplace_object(
        ti::ARRAY,
        n * std::mem::size_of::<Any>(),
        |tail| {
            let dst = tail.cast::<Any>();
            let mut size = 0;
            for v in views {
                // SAFETY: valid views (the caller's contract).
                match unsafe { Any::from_view(v) } {
                    // SAFETY: the tail has room for `n` cells, `size < n`.
                    Ok(x) => unsafe { dst.add(size).write(x) },
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
                size += 1;
            }
            TVMFFISeqCell { data: tail.cast(), size: size as i64, capacity: n as i64, data_deleter: None }
        },
        Some(drop_elements),
    );
    match failed {
        None => Ok(o),
        Some(e) => Err(e),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::make_object;

    #[test]
    fn arrays_from_views_convert_in_place_and_leave_nothing_behind_on_error() {
        let held = make_object(ti::OBJECT, ());
        let s = Any::string("a string long enough to be an object");
        // Views borrow: `held` and `s` keep what they point to alive.
        let views = [*Any::int(7).raw(), TVMFFIAny::with_bits(ti::OBJECT, held.as_ptr() as u64), *s.raw()];
        // SAFETY: views of live values.
        let a = unsafe { make_array_from_views(&views) }.unwrap();
        let items = seq_items(&a);
        assert_eq!((items.len(), items[0].as_i64()), (3, Some(7)));
        assert_eq!(items[2].as_str(), Some("a string long enough to be an object"));
        assert_eq!(held.use_count(), 2, "`held` and the array");
        drop(a);
        // A NULL object after a live one: an error, and the live one's reference goes back.
        let before = held.use_count();
        let null_obj = TVMFFIAny::with_bits(ti::STR, 0);
        let views = [TVMFFIAny::with_bits(ti::OBJECT, held.as_ptr() as u64), null_obj];
        // SAFETY: views of live values and a NULL object cell (refused).
        let e = unsafe { make_array_from_views(&views) }.unwrap_err();
        assert!(e.message().contains("NULL object"), "{}", e.message());
        assert_eq!(held.use_count(), before);
    }
}
