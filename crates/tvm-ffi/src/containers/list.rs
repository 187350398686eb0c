//! `ffi.List` (mutable sequence, `list.h`): the header and `TVMFFISeqCell` (`data`, `size`,
//! `capacity`, `data_deleter`), the `TVMFFIAny` elements in separately allocated storage. The
//! storage is `malloc`ed (what `::operator new` is), so C++ code growing one of our lists (it
//! allocates with `::operator new` and frees the old storage with the list's `data_deleter`) and
//! we growing theirs stay compatible.

use super::array::TVMFFISeqCell;
use crate::any::Any;
use crate::object::{make_object, ObjectRef};
use crate::{ti, FfiError, FfiResult};
use std::ffi::c_void;

/// `ListObj::kInitSize`.
const INIT_SIZE: usize = 4;

#[repr(C)]
struct ListPayload(TVMFFISeqCell);

impl Drop for ListPayload {
    fn drop(&mut self) {
        let c = &mut self.0;
        let items = c.data.cast::<Any>();
        for i in 0..c.size.max(0) as usize {
            // SAFETY: the first `size` cells are owned values; each is dropped once.
            unsafe { std::ptr::drop_in_place(items.add(i)) };
        }
        c.size = 0;
        if let Some(d) = c.data_deleter {
            // SAFETY: the storage's own deleter.
            unsafe { d(c.data) };
        }
    }
}

unsafe extern "C" fn raw_data_deleter(p: *mut c_void) {
    // SAFETY: list storage comes from malloc (ours) or ::operator new (C++), both free()-able.
    unsafe { libc::free(p) }
}

fn alloc_cells(n: usize) -> *mut c_void {
    if n == 0 {
        return std::ptr::null_mut();
    }
    let bytes = n.checked_mul(16).expect("list capacity");
    // SAFETY: plain allocation, checked below.
    let p = unsafe { libc::malloc(bytes) };
    if p.is_null() {
        std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align(bytes, 16).expect("layout"));
    }
    p
}

/// A mutable view of a live list object (ours or C++'s).
struct ListRaw(*mut TVMFFISeqCell);

impl ListRaw {
    fn of(o: &ObjectRef) -> FfiResult<ListRaw> {
        if o.type_index() != ti::LIST {
            return Err(FfiError::type_error(format!(
                "expected ffi.List, got {}",
                crate::types::type_key(o.type_index())
            )));
        }
        // SAFETY: a list holds its TVMFFISeqCell right after the 24-byte header.
        Ok(ListRaw(unsafe { (o.as_ptr() as *mut u8).add(24).cast() }))
    }
    fn cell(&mut self) -> &mut TVMFFISeqCell {
        // SAFETY: the object is live (the caller holds it) and lists are not shared across
        // threads while mutated (as in tvm-ffi).
        unsafe { &mut *self.0 }
    }
    fn size(&self) -> usize {
        // SAFETY: as in `cell`.
        unsafe { (*self.0).size }.max(0) as usize
    }
    fn cells(&self) -> *mut Any {
        // SAFETY: as in `cell`.
        unsafe { (*self.0).data.cast() }
    }
    fn slice(&mut self) -> &mut [Any] {
        if self.size() == 0 || self.cells().is_null() {
            return &mut [];
        }
        // SAFETY: `size` owned cells at `data`.
        unsafe { std::slice::from_raw_parts_mut(self.cells(), self.size()) }
    }
    /// `ListObj::Reserve`.
    fn reserve(&mut self, n: usize) {
        let c = self.cell();
        if n as i64 <= c.capacity {
            return;
        }
        let new = alloc_cells(n);
        if c.size > 0 {
            // SAFETY: moving `size` cells bitwise keeps ownership exact.
            unsafe { std::ptr::copy_nonoverlapping(c.data.cast::<Any>(), new.cast::<Any>(), c.size as usize) };
        }
        if let Some(d) = c.data_deleter {
            // SAFETY: the old storage's own deleter; its cells were moved out.
            unsafe { d(c.data) };
        }
        c.data = new;
        c.data_deleter = Some(raw_data_deleter);
        c.capacity = n as i64;
    }
    /// `List::EnsureCapacity`.
    fn ensure_capacity(&mut self, extra: usize) {
        let c = self.cell();
        if c.capacity >= c.size + extra as i64 {
            return;
        }
        let cap = (c.capacity as usize * 2).max(c.size as usize + extra);
        self.reserve(cap);
    }
    fn push(&mut self, v: Any) {
        self.ensure_capacity(1);
        let (cells, n) = (self.cells(), self.size());
        // SAFETY: capacity > size after ensure_capacity.
        unsafe { cells.add(n).write(v) };
        self.cell().size += 1;
    }
}

fn oob(i: i64, n: usize) -> FfiError {
    FfiError::index(format!("Index {i} out of bounds {n}"))
}

/// Makes an `ffi.List` holding `items` (capacity `max(4, len)`, as the `ffi.List` global).
pub fn make_list(items: Vec<Any>) -> ObjectRef {
    let cap = items.len().max(INIT_SIZE);
    let o = make_object(
        ti::LIST,
        ListPayload(TVMFFISeqCell {
            data: alloc_cells(cap),
            size: 0,
            capacity: cap as i64,
            data_deleter: Some(raw_data_deleter),
        }),
    );
    let mut l = ListRaw::of(&o).expect("a list");
    for it in items {
        l.push(it);
    }
    o
}

/// The number of elements.
pub(crate) fn list_size(o: &ObjectRef) -> FfiResult<usize> {
    Ok(ListRaw::of(o)?.size())
}

/// The element at `i` (a copy).
pub(crate) fn list_get(o: &ObjectRef, i: i64) -> FfiResult<Any> {
    let mut l = ListRaw::of(o)?;
    let n = l.size();
    usize::try_from(i).ok().and_then(|u| l.slice().get(u)).cloned().ok_or_else(|| oob(i, n))
}

/// Sets the element at `i`.
pub(crate) fn list_set(o: &ObjectRef, i: i64, v: Any) -> FfiResult<()> {
    let mut l = ListRaw::of(o)?;
    let n = l.size();
    let slot = usize::try_from(i).ok().and_then(|u| l.slice().get_mut(u)).ok_or_else(|| oob(i, n))?;
    let old = std::mem::replace(slot, v);
    drop(old);
    Ok(())
}

/// Appends.
pub(crate) fn list_append(o: &ObjectRef, v: Any) -> FfiResult<()> {
    ListRaw::of(o)?.push(v);
    Ok(())
}

/// Inserts `items` at `idx` (`0 <= idx <= size`).
pub(crate) fn list_insert(o: &ObjectRef, idx: i64, items: Vec<Any>) -> FfiResult<()> {
    let mut l = ListRaw::of(o)?;
    if items.is_empty() {
        return Ok(());
    }
    let count = items.len();
    l.ensure_capacity(count);
    let sz = l.size();
    if idx < 0 || idx as usize > sz {
        return Err(FfiError::index(format!("Index {idx} out of bounds [0, {sz}]")));
    }
    let at = idx as usize;
    // SAFETY: capacity >= size + count; the tail moves bitwise (ownership kept) and the gap is
    // filled with the new cells.
    unsafe {
        let base = l.cells();
        std::ptr::copy(base.add(at), base.add(at + count), sz - at);
        for (j, it) in items.into_iter().enumerate() {
            base.add(at + j).write(it);
        }
    }
    l.cell().size += count as i64;
    Ok(())
}

/// Erases `[first, last)`.
pub(crate) fn list_erase_range(o: &ObjectRef, first: i64, last: i64) -> FfiResult<()> {
    let mut l = ListRaw::of(o)?;
    if first == last {
        return Ok(());
    }
    let sz = l.size();
    if first < 0 || last > sz as i64 || first >= last {
        return Err(FfiError::index(format!("Erase range [{first}, {last}) out of bounds {sz}")));
    }
    let (f, t) = (first as usize, last as usize);
    l.slice()[f..].rotate_left(t - f);
    let removed: Vec<Any> = (0..t - f)
        .map(|_| {
            l.cell().size -= 1;
            let (cells, n) = (l.cells(), l.size());
            // SAFETY: the cell at the old end is owned and now outside `size`: read once.
            unsafe { cells.add(n).read() }
        })
        .collect();
    drop(removed);
    Ok(())
}

/// Erases the element at `i`.
pub(crate) fn list_erase(o: &ObjectRef, i: i64) -> FfiResult<()> {
    let n = list_size(o)?;
    if i < 0 || i as usize >= n {
        return Err(oob(i, n));
    }
    list_erase_range(o, i, i + 1)
}

/// Removes every element (keeps the storage).
pub(crate) fn list_clear(o: &ObjectRef) -> FfiResult<()> {
    let n = list_size(o)? as i64;
    list_erase_range(o, 0, n)
}

/// Reverses in place.
pub(crate) fn list_reverse(o: &ObjectRef) -> FfiResult<()> {
    ListRaw::of(o)?.slice().reverse();
    Ok(())
}

/// Grows the capacity to at least `n`.
pub(crate) fn list_reserve(o: &ObjectRef, n: i64) -> FfiResult<()> {
    ListRaw::of(o)?.reserve(n.max(0) as usize);
    Ok(())
}

/// The capacity.
#[cfg(test)]
pub(crate) fn list_capacity(o: &ObjectRef) -> FfiResult<usize> {
    Ok(ListRaw::of(o)?.cell().capacity.max(0) as usize)
}

/// Copies of the elements.
pub fn list_items(o: &ObjectRef) -> FfiResult<Vec<Any>> {
    Ok(ListRaw::of(o)?.slice().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(o: &ObjectRef) -> Vec<i64> {
        list_items(o).unwrap().iter().map(|a| a.as_i64().unwrap()).collect()
    }

    #[test]
    fn list_operations() {
        let l = make_list(vec![Any::int(1), Any::int(2)]);
        assert_eq!(list_capacity(&l).unwrap(), 4);
        for i in 3..=10 {
            list_append(&l, Any::int(i)).unwrap();
        }
        assert_eq!(list_capacity(&l).unwrap(), 16);
        assert_eq!(ints(&l), (1..=10).collect::<Vec<_>>());
        list_insert(&l, 0, vec![Any::int(0)]).unwrap();
        list_insert(&l, 11, vec![Any::int(11), Any::int(12)]).unwrap();
        assert_eq!(ints(&l), (0..=12).collect::<Vec<_>>());
        list_erase_range(&l, 2, 5).unwrap();
        assert_eq!(ints(&l), vec![0, 1, 5, 6, 7, 8, 9, 10, 11, 12]);
        list_erase(&l, 0).unwrap();
        list_reverse(&l).unwrap();
        assert_eq!(ints(&l), vec![12, 11, 10, 9, 8, 7, 6, 5, 1]);
        assert_eq!(list_get(&l, 20).unwrap_err().message(), "Index 20 out of bounds 9");
        assert_eq!(list_insert(&l, 20, vec![Any::int(0)]).unwrap_err().message(), "Index 20 out of bounds [0, 9]");
        assert_eq!(list_erase_range(&l, 5, 20).unwrap_err().kind(), "IndexError");
        list_set(&l, 0, Any::string("x")).unwrap();
        assert_eq!(list_get(&l, 0).unwrap().as_str(), Some("x"));
        list_clear(&l).unwrap();
        assert_eq!(list_size(&l).unwrap(), 0);
    }

    #[test]
    fn elements_are_released() {
        let v = Any::object(crate::string::make_bytes_object(b"payload-payload", false));
        let o = v.as_object().unwrap();
        let l = make_list(vec![v.clone(), v.clone()]);
        list_append(&l, v.clone()).unwrap();
        assert_eq!(o.use_count(), 5);
        list_erase(&l, 1).unwrap();
        assert_eq!(o.use_count(), 4);
        drop(l);
        assert_eq!(o.use_count(), 2);
    }
}
