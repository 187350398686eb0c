//! The tvm-ffi object header (24 bytes) and the owning pointer over it.
//!
//! Layout and reference counting are tvm-ffi's (`TVMFFIObject` of `c_api.h`): one 64-bit
//! combined count, the strong count in the low 32 bits and the weak count in the high 32 bits. A
//! new object starts at one strong and one weak reference (the weak one is held by the strong
//! references together). The deleter is called with `Strong` when the last strong reference goes
//! (destroy the payload), with `Weak` when the last weak one goes (free the memory), or `Both`.
//! C++ code compiled against tvm-ffi's headers runs the same algorithm inline on our objects,
//! so it must stay bit for bit the same.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// `kTVMFFIObjectDeleterFlagBitMaskStrong`.
pub(crate) const DELETER_STRONG: c_int = 1;
/// `kTVMFFIObjectDeleterFlagBitMaskWeak`.
pub(crate) const DELETER_WEAK: c_int = 2;
/// Both flags.
pub(crate) const DELETER_BOTH: c_int = 3;

const STRONG_ONE: u64 = 1;
const WEAK_ONE: u64 = 1 << 32;
const BOTH_ONE: u64 = STRONG_ONE | WEAK_ONE;
const LOW_MASK: u64 = (1 << 32) - 1;

/// The deleter of an object: `flags` says which count reached zero.
pub type Deleter = unsafe extern "C" fn(obj: *mut c_void, flags: c_int);

/// `TVMFFIObject`: the common prefix of every object.
#[repr(C)]
pub struct TVMFFIObject {
    /// Strong count (low 32 bits) and weak count (high 32 bits).
    pub combined_ref_count: AtomicU64,
    /// The object's type index.
    pub type_index: i32,
    /// Zero.
    pub padding: u32,
    /// Called when a count reaches zero.
    pub deleter: Option<Deleter>,
}

const _: () = assert!(std::mem::size_of::<TVMFFIObject>() == 24);

impl TVMFFIObject {
    /// A header for a new object: one strong, one weak reference.
    pub fn new(type_index: i32, deleter: Deleter) -> Self {
        TVMFFIObject { combined_ref_count: AtomicU64::new(BOTH_ONE), type_index, padding: 0, deleter: Some(deleter) }
    }
}

/// Adds a strong reference.
///
/// # Safety
/// `obj` points to a live object.
#[inline]
pub unsafe fn inc_ref(obj: *mut TVMFFIObject) {
    // SAFETY: the caller guarantees a live object.
    unsafe { (*obj).combined_ref_count.fetch_add(STRONG_ONE, Ordering::Relaxed) };
}

/// Drops a strong reference (tvm-ffi's `Object::DecRef`).
///
/// # Safety
/// `obj` points to a live object and the caller owns one strong reference to it.
#[inline]
pub unsafe fn dec_ref(obj: *mut TVMFFIObject) {
    // SAFETY: the caller owns a strong reference, so the header is live until the deleter runs.
    unsafe {
        let before = (*obj).combined_ref_count.fetch_sub(STRONG_ONE, Ordering::Release);
        if before == BOTH_ONE {
            fence(Ordering::Acquire);
            if let Some(d) = (*obj).deleter {
                d(obj.cast(), DELETER_BOTH);
            }
        } else if before & LOW_MASK == STRONG_ONE {
            fence(Ordering::Acquire);
            if let Some(d) = (*obj).deleter {
                d(obj.cast(), DELETER_STRONG);
            }
            if (*obj).combined_ref_count.fetch_sub(WEAK_ONE, Ordering::Release) == WEAK_ONE {
                fence(Ordering::Acquire);
                if let Some(d) = (*obj).deleter {
                    d(obj.cast(), DELETER_WEAK);
                }
            }
        }
    }
}

/// The strong count of an object.
///
/// # Safety
/// `obj` points to a live object.
pub(crate) unsafe fn use_count(obj: *const TVMFFIObject) -> u32 {
    // SAFETY: the caller guarantees a live object.
    (unsafe { (*obj).combined_ref_count.load(Ordering::Relaxed) } & LOW_MASK) as u32
}

/// An owned strong reference to an object of any type.
pub struct ObjectRef(NonNull<TVMFFIObject>);

// SAFETY: tvm-ffi objects are reference counted atomically; the objects this library shares
// across threads are immutable or guard their own state.
unsafe impl Send for ObjectRef {}
// SAFETY: as above.
unsafe impl Sync for ObjectRef {}

impl ObjectRef {
    /// Takes over a strong reference.
    ///
    /// # Safety
    /// `ptr` is a live object whose one strong reference the caller hands over.
    #[inline]
    pub unsafe fn from_raw(ptr: *mut TVMFFIObject) -> Option<Self> {
        NonNull::new(ptr).map(ObjectRef)
    }
    /// Adds a strong reference to a borrowed object.
    ///
    /// # Safety
    /// `ptr` is a live object (or null).
    #[inline]
    pub unsafe fn from_borrowed(ptr: *mut TVMFFIObject) -> Option<Self> {
        let p = NonNull::new(ptr)?;
        // SAFETY: live by contract.
        unsafe { inc_ref(p.as_ptr()) };
        Some(ObjectRef(p))
    }
    /// Gives up the reference without dropping it.
    #[inline]
    pub fn into_raw(self) -> *mut TVMFFIObject {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
    /// The header pointer.
    #[inline]
    pub fn as_ptr(&self) -> *mut TVMFFIObject {
        self.0.as_ptr()
    }
    /// The object's type index.
    #[inline]
    pub fn type_index(&self) -> i32 {
        // SAFETY: we hold a strong reference.
        unsafe { (*self.0.as_ptr()).type_index }
    }
    /// Its strong count.
    pub(crate) fn use_count(&self) -> u32 {
        // SAFETY: we hold a strong reference.
        unsafe { use_count(self.0.as_ptr()) }
    }
    /// Whether two references name the same object.
    #[inline]
    pub fn same_as(&self, other: &ObjectRef) -> bool {
        self.0 == other.0
    }
    /// The payload that follows the header, as a `T`.
    ///
    /// # Safety
    /// The object's layout after the header is a `T` (its type index says so).
    #[inline]
    pub unsafe fn payload<T>(&self) -> &T {
        // SAFETY: by contract the bytes after the 24-byte header hold a T.
        unsafe { &*(self.0.as_ptr() as *const u8).add(24).cast::<T>() }
    }
    /// Whether the object is an instance of `type_index` (itself or a descendant).
    pub fn is_instance(&self, type_index: i32) -> bool {
        super::types::is_instance(self.type_index(), type_index)
    }
}

impl Clone for ObjectRef {
    #[inline]
    fn clone(&self) -> Self {
        // SAFETY: we hold a strong reference.
        unsafe { inc_ref(self.0.as_ptr()) };
        ObjectRef(self.0)
    }
}

impl Drop for ObjectRef {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own one strong reference.
        unsafe { dec_ref(self.0.as_ptr()) }
    }
}

impl std::fmt::Debug for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Object({}@{:p})", super::types::type_key(self.type_index()), self.0)
    }
}

/// An object made by this library: the header followed by a Rust payload.
#[repr(C)]
pub struct ObjBox<T> {
    /// The header.
    pub header: TVMFFIObject,
    /// What follows it.
    pub payload: T,
}

unsafe extern "C" fn obj_box_deleter<T>(obj: *mut c_void, flags: c_int) {
    let p = obj.cast::<ObjBox<T>>();
    if flags & DELETER_STRONG != 0 {
        // SAFETY: the strong count reached zero: the payload is dropped exactly once.
        unsafe { std::ptr::drop_in_place(std::ptr::addr_of_mut!((*p).payload)) };
    }
    if flags & DELETER_WEAK != 0 {
        // SAFETY: the memory came from `alloc` below with this layout; no reference remains.
        unsafe { std::alloc::dealloc(p.cast(), std::alloc::Layout::new::<ObjBox<T>>()) };
    }
}

/// Makes an object of `type_index` holding `payload` right after the header. (Not a call of
/// [`make_object_with`]: that one is inline, and every object allocation of the library would
/// then be inlined into its caller, 22 KB more code.)
pub fn make_object<T>(type_index: i32, payload: T) -> ObjectRef {
    let p = alloc_obj_box::<T>();
    // SAFETY: freshly allocated memory of the right layout.
    unsafe {
        p.write(ObjBox { header: TVMFFIObject::new(type_index, obj_box_deleter::<T>), payload });
        ObjectRef(NonNull::new_unchecked(p.cast()))
    }
}

/// [`make_object`] with the payload made once the memory is there, so that it can be written
/// in place (no copy through the stack: for payloads made on hot paths, e.g. a DLPack import).
#[inline]
pub(crate) fn make_object_with<T>(type_index: i32, payload: impl FnOnce() -> T) -> ObjectRef {
    let p = alloc_obj_box::<T>();
    // SAFETY: freshly allocated memory of the right layout.
    unsafe {
        p.write(ObjBox { header: TVMFFIObject::new(type_index, obj_box_deleter::<T>), payload: payload() });
        ObjectRef(NonNull::new_unchecked(p.cast()))
    }
}

/// Uninitialised memory for an `ObjBox<T>` (freed by `obj_box_deleter::<T>`).
#[inline]
fn alloc_obj_box<T>() -> *mut ObjBox<T> {
    let layout = std::alloc::Layout::new::<ObjBox<T>>();
    // SAFETY: the layout has a non-zero size (the header).
    let p = unsafe { std::alloc::alloc(layout) }.cast::<ObjBox<T>>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    p
}

/// An object with one pointer-sized word before its header: where C++ keeps the vtable
/// pointer of a polymorphic class whose base is `Object` (`ModuleObj`), so that C++ code can
/// call virtual methods on an object made here.
#[repr(C)]
struct Prefixed<T> {
    word: *const c_void,
    obj: ObjBox<T>,
}

unsafe extern "C" fn prefixed_deleter<T>(obj: *mut c_void, flags: c_int) {
    // SAFETY: `obj` is the `obj` field of a `Prefixed<T>` made by make_prefixed_object, whose
    // offset is one word (asserted there).
    let base = unsafe { obj.cast::<u8>().sub(std::mem::size_of::<usize>()) }.cast::<Prefixed<T>>();
    if flags & DELETER_STRONG != 0 {
        // SAFETY: the strong count reached zero: the payload is dropped exactly once.
        unsafe { std::ptr::drop_in_place(std::ptr::addr_of_mut!((*base).obj.payload)) };
    }
    if flags & DELETER_WEAK != 0 {
        // SAFETY: allocated below with this layout; no reference remains.
        unsafe { std::alloc::dealloc(base.cast(), std::alloc::Layout::new::<Prefixed<T>>()) };
    }
}

/// The deleter of the objects [`make_prefixed_object`] makes with payload `T` (which tells
/// them apart from objects made elsewhere, e.g. by C++ code, of the same type index).
pub(crate) fn prefixed_deleter_of<T>() -> Deleter {
    prefixed_deleter::<T>
}

/// Makes an object of `type_index` holding `payload`, with `word` stored right before the header.
pub(crate) fn make_prefixed_object<T>(type_index: i32, word: *const c_void, payload: T) -> ObjectRef {
    const { assert!(std::mem::offset_of!(Prefixed<T>, obj) == std::mem::size_of::<usize>()) };
    let layout = std::alloc::Layout::new::<Prefixed<T>>();
    // SAFETY: the layout has a non-zero size (the header).
    let p = unsafe { std::alloc::alloc(layout) }.cast::<Prefixed<T>>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: freshly allocated memory of the right layout; the handle is the `obj` field.
    unsafe {
        p.write(Prefixed {
            word,
            obj: ObjBox { header: TVMFFIObject::new(type_index, prefixed_deleter::<T>), payload },
        });
        ObjectRef(NonNull::new_unchecked(std::ptr::addr_of_mut!((*p).obj).cast()))
    }
}

/// Makes an object whose payload is `head` followed by `tail_bytes` bytes of trailing storage
/// (aligned to 8), for the inline-array objects of tvm-ffi (strings, shapes, arrays). `init`
/// fills the payload and the tail; `drop_tail` runs before the memory is freed.
pub(crate) fn make_inplace_object<T>(
    type_index: i32,
    tail_bytes: usize,
    init: impl FnOnce(*mut u8) -> T,
    drop_tail: Option<unsafe fn(*mut ObjBox<T>)>,
) -> ObjectRef {
    // The tail lives after the object; the drop hook sits before the header, out of the ABI's way.
    let head = std::mem::size_of::<ObjBox<T>>().next_multiple_of(8);
    let prefix = 16usize;
    let size = prefix + head + tail_bytes;
    let layout = std::alloc::Layout::from_size_align(size, 16).expect("object size");
    // SAFETY: non-zero size.
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    unsafe extern "C" fn deleter<T>(obj: *mut c_void, flags: c_int) {
        let p = obj.cast::<ObjBox<T>>();
        // SAFETY: the prefix before the header was written by make_inplace_object.
        unsafe {
            let base = (obj as *mut u8).sub(16);
            if flags & DELETER_STRONG != 0 {
                let hook = *base.cast::<Option<unsafe fn(*mut ObjBox<T>)>>();
                if let Some(h) = hook {
                    h(p);
                }
                std::ptr::drop_in_place(std::ptr::addr_of_mut!((*p).payload));
            }
            if flags & DELETER_WEAK != 0 {
                let size = *base.add(8).cast::<usize>();
                std::alloc::dealloc(base, std::alloc::Layout::from_size_align_unchecked(size, 16));
            }
        }
    }
    // SAFETY: `base` is a fresh block of `size` bytes; the prefix holds the hook and the size, the
    // object starts 16 bytes in (16-aligned), its tail `head` bytes after that.
    unsafe {
        base.cast::<Option<unsafe fn(*mut ObjBox<T>)>>().write(drop_tail);
        base.add(8).cast::<usize>().write(size);
        let obj = base.add(prefix).cast::<ObjBox<T>>();
        let tail = base.add(prefix + head);
        let payload = init(tail);
        obj.write(ObjBox { header: TVMFFIObject::new(type_index, deleter::<T>), payload });
        ObjectRef(NonNull::new_unchecked(obj.cast()))
    }
}
