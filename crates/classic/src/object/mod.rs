//! TVM's object system: the 16-byte object header every object starts with, reference counting
//! through it, and the type table with TVM v0.8's static type indices.
//!
//! Every object is one heap block `[ObjectHeader][body]` made by [`ObjectRef::new`]; its header's
//! deleter is the only destruction path, so objects handed to C (and C++ code that inlines TVM's
//! IncRef/DecRef) are released the same way whoever drops the last reference.

mod containers;
mod types;

pub(crate) use containers::MapKey;
pub use containers::{AdtObj, ArrayObj, MapObj, ShapeTupleObj, StringObj};
pub use types::{derived_from, type_index2key, type_key2index};
pub(crate) use types::{dump_type_table, register_type};

use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicI32, Ordering};

/// Static type indices of TVM v0.8 (`TypeIndex`).
pub mod index {
    /// `runtime.Object`.
    pub(crate) const ROOT: u32 = 0;
    /// `runtime.Module` (all modules).
    pub const MODULE: u32 = 1;
    /// `runtime.NDArray`.
    pub const NDARRAY: u32 = 2;
    /// `runtime.String`.
    pub(crate) const STRING: u32 = 3;
    /// `Array`.
    pub const ARRAY: u32 = 4;
    /// `Map`.
    pub const MAP: u32 = 5;
    /// `runtime.ShapeTuple`.
    pub(crate) const SHAPE_TUPLE: u32 = 6;
    /// `runtime.Closure`.
    pub const CLOSURE: u32 = 7;
    /// `runtime.ADT`.
    pub const ADT: u32 = 8;
    /// First index handed out at run time.
    pub(crate) const DYNAMIC: u32 = 9;
}

/// The object header: the de-facto ABI shared with C and C++ code.
#[repr(C)]
#[derive(Debug)]
pub struct ObjectHeader {
    /// Type index of the object.
    pub type_index: u32,
    /// Reference count, used atomically.
    pub ref_counter: AtomicI32,
    /// Called once when the count drops to zero.
    pub deleter: Option<unsafe extern "C" fn(*mut ObjectHeader)>,
}

/// An object block: header followed by the body.
#[repr(C)]
pub struct ObjBox<T> {
    /// The header.
    pub header: ObjectHeader,
    /// The body.
    pub body: T,
}

/// A body type with a fixed type index.
pub trait ObjectBody: Send + Sync + Sized + 'static {
    /// The type index every object of this body has.
    fn type_index() -> u32;
}

/// Deleter of objects made by [`ObjectRef::new`].
///
/// # Safety
/// `obj` was made by `ObjectRef::alloc::<T>` and its count reached zero.
unsafe extern "C" fn delete_box<T>(obj: *mut ObjectHeader) {
    // SAFETY: per contract the block is a `Box<ObjBox<T>>` no one references any more.
    drop(unsafe { Box::from_raw(obj.cast::<ObjBox<T>>()) });
}

/// A counted reference to an object.
#[derive(Debug)]
pub struct ObjectRef(NonNull<ObjectHeader>);

// SAFETY: object bodies are `Send + Sync` (enforced by the constructors) and the count is atomic.
unsafe impl Send for ObjectRef {}
// SAFETY: as above.
unsafe impl Sync for ObjectRef {}

impl ObjectRef {
    /// Makes a new object with the body's static type index.
    pub fn new<T: ObjectBody>(body: T) -> ObjectRef {
        Self::alloc(T::type_index(), body)
    }

    /// Makes a new object with an explicit type index (a dynamic type, or a subtype sharing a
    /// body layout).
    pub fn alloc<T: Send + Sync + 'static>(type_index: u32, body: T) -> ObjectRef {
        let b = Box::new(ObjBox {
            header: ObjectHeader { type_index, ref_counter: AtomicI32::new(1), deleter: Some(delete_box::<T>) },
            body,
        });
        ObjectRef(NonNull::from(Box::leak(b)).cast())
    }

    /// Takes over one reference held by C.
    ///
    /// # Safety
    /// `ptr` is a live object header whose reference the caller gives up.
    pub unsafe fn from_raw(ptr: *mut ObjectHeader) -> Option<ObjectRef> {
        NonNull::new(ptr).map(ObjectRef)
    }

    /// Makes a new reference from a borrowed pointer (count + 1).
    ///
    /// # Safety
    /// `ptr` is NULL or a live object header.
    pub unsafe fn from_borrowed(ptr: *mut ObjectHeader) -> Option<ObjectRef> {
        let nn = NonNull::new(ptr)?;
        // SAFETY: live per contract.
        unsafe { nn.as_ref() }.ref_counter.fetch_add(1, Ordering::Relaxed);
        Some(ObjectRef(nn))
    }

    /// Gives the reference to C.
    pub fn into_raw(self) -> *mut ObjectHeader {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    /// The header address (the object handle C sees).
    pub fn as_ptr(&self) -> *mut ObjectHeader {
        self.0.as_ptr()
    }

    fn header(&self) -> &ObjectHeader {
        // SAFETY: we hold a reference, so the block is live.
        unsafe { self.0.as_ref() }
    }

    /// The type index.
    pub fn type_index(&self) -> u32 {
        self.header().type_index
    }

    /// The current reference count (for tests).
    #[cfg(test)]
    pub(crate) fn ref_count(&self) -> i32 {
        self.header().ref_counter.load(Ordering::Relaxed)
    }

    /// The body, if this object has `T`'s type index.
    pub fn downcast<T: ObjectBody>(&self) -> Option<&T> {
        (self.type_index() == T::type_index()).then(|| {
            // SAFETY: objects with T's static index are always made by `new::<T>` in this
            // runtime, so the block is an `ObjBox<T>`, alive while `self` is.
            unsafe { &(*self.0.as_ptr().cast::<ObjBox<T>>()).body }
        })
    }

    /// The body of an object of a given index made with [`ObjectRef::alloc`]`::<T>`.
    ///
    /// # Safety
    /// Every object of `type_index` has a `T` body.
    pub unsafe fn downcast_index<T>(&self, type_index: u32) -> Option<&T> {
        (self.type_index() == type_index).then(|| {
            // SAFETY: per contract.
            unsafe { &(*self.0.as_ptr().cast::<ObjBox<T>>()).body }
        })
    }

    /// Whether two references name the same object.
    pub fn ptr_eq(&self, other: &ObjectRef) -> bool {
        self.0 == other.0
    }
}

impl Clone for ObjectRef {
    fn clone(&self) -> Self {
        self.header().ref_counter.fetch_add(1, Ordering::Relaxed);
        ObjectRef(self.0)
    }
}

impl Drop for ObjectRef {
    fn drop(&mut self) {
        if self.header().ref_counter.fetch_sub(1, Ordering::Release) == 1 {
            fence(Ordering::Acquire);
            if let Some(del) = self.header().deleter {
                // SAFETY: the count reached zero: we held the last reference.
                unsafe { del(self.0.as_ptr()) };
            }
        }
    }
}

/// Decrements an object's count through its header (the C path of `TVMObjectFree`).
///
/// # Safety
/// `ptr` is NULL or a live object header whose reference the caller gives up.
pub unsafe fn release_raw(ptr: *mut ObjectHeader) {
    // SAFETY: per contract.
    drop(unsafe { ObjectRef::from_raw(ptr) });
}

/// Increments an object's count through its header.
///
/// # Safety
/// `ptr` is NULL or a live object header.
pub unsafe fn retain_raw(ptr: *mut ObjectHeader) {
    // SAFETY: per contract.
    if let Some(r) = unsafe { ObjectRef::from_borrowed(ptr) } {
        r.into_raw();
    }
}

const _: () = assert!(std::mem::size_of::<ObjectHeader>() == 16);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    struct Probe(Arc<AtomicUsize>);
    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn deleter_runs_once_at_zero() {
        let n = Arc::new(AtomicUsize::new(0));
        let o = ObjectRef::alloc(index::DYNAMIC, Probe(n.clone()));
        let raw = o.clone().into_raw();
        assert_eq!(o.ref_count(), 2);
        // SAFETY: `raw` holds one reference.
        unsafe { retain_raw(raw) };
        // SAFETY: as above, twice.
        unsafe { release_raw(raw) };
        // SAFETY: as above.
        unsafe { release_raw(raw) };
        assert_eq!(n.load(Ordering::SeqCst), 0);
        drop(o);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}
