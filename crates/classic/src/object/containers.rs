//! Container objects: String, Array, Map, ShapeTuple and ADT.
//!
//! `StringObj` and `ShapeTupleObj` are the body layout of TVM's C++ classes (`{data, size}`
//! after the header), and this runtime reads them only through those two fields, so a String or
//! ShapeTuple made by C++ code (TVM's C++ headers, or ours in `include/tvm/runtime/`) is read
//! like one made here; objects made here keep their storage behind the two fields. `ArrayObj`
//! starts with the same `{data, size}` view of its elements, which C++ code reads in place.

use super::{index, ObjectBody, ObjectRef};
use indexmap::IndexMap;
use std::ffi::c_char;

/// `runtime.String`: immutable bytes, `data` NUL-terminated, `size` excluding the NUL. This is
/// the part every String object has, whoever made it (TVM's C++ `StringObj` layout).
#[repr(C)]
pub struct StringObj {
    data: *const c_char,
    size: u64,
}

/// A String made by this runtime: the shared part, then the storage it points into.
#[repr(C)]
struct OwnedString {
    head: StringObj,
    storage: Box<[u8]>,
}

// SAFETY: a String's bytes are never mutated after construction, whoever made it.
unsafe impl Send for StringObj {}
// SAFETY: as above.
unsafe impl Sync for StringObj {}
// SAFETY: `head` points into `storage`, which is never mutated after construction.
unsafe impl Send for OwnedString {}
// SAFETY: as above.
unsafe impl Sync for OwnedString {}

impl ObjectBody for StringObj {
    fn type_index() -> u32 {
        index::STRING
    }
}

impl StringObj {
    /// A new String object holding `bytes`.
    pub fn new_object(bytes: &[u8]) -> ObjectRef {
        let mut v = Vec::with_capacity(bytes.len() + 1);
        v.extend_from_slice(bytes);
        v.push(0);
        let storage = v.into_boxed_slice();
        let head = StringObj { data: storage.as_ptr().cast(), size: bytes.len() as u64 };
        ObjectRef::alloc(index::STRING, OwnedString { head, storage })
    }
    /// The bytes (without the trailing NUL).
    pub fn as_bytes(&self) -> &[u8] {
        if self.size == 0 || self.data.is_null() {
            return &[];
        }
        // SAFETY: every String object (made here, or by C++ code following TVM's layout) keeps
        // `size` readable bytes at `data`, unchanged for as long as the object lives, which
        // `&self` guarantees for the returned lifetime.
        unsafe { std::slice::from_raw_parts(self.data.cast::<u8>(), self.size as usize) }
    }
    /// The text, lossily decoded.
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }
}

/// `runtime.ShapeTuple`: `size` dimensions at `data` (TVM's C++ `ShapeTupleObj` layout).
#[repr(C)]
pub struct ShapeTupleObj {
    data: *const i64,
    size: u64,
}

/// A ShapeTuple made by this runtime: the shared part, then its storage.
#[repr(C)]
struct OwnedShapeTuple {
    head: ShapeTupleObj,
    storage: Box<[i64]>,
}

// SAFETY: the dimensions are never mutated after construction, whoever made the object.
unsafe impl Send for ShapeTupleObj {}
// SAFETY: as above.
unsafe impl Sync for ShapeTupleObj {}
// SAFETY: `head` points into `storage`, never mutated after construction.
unsafe impl Send for OwnedShapeTuple {}
// SAFETY: as above.
unsafe impl Sync for OwnedShapeTuple {}

impl ObjectBody for ShapeTupleObj {
    fn type_index() -> u32 {
        index::SHAPE_TUPLE
    }
}

impl ShapeTupleObj {
    /// A new ShapeTuple object.
    pub fn new_object(dims: Vec<i64>) -> ObjectRef {
        let storage = dims.into_boxed_slice();
        let head = ShapeTupleObj { data: storage.as_ptr(), size: storage.len() as u64 };
        ObjectRef::alloc(index::SHAPE_TUPLE, OwnedShapeTuple { head, storage })
    }
    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        if self.size == 0 || self.data.is_null() {
            return &[];
        }
        // SAFETY: every ShapeTuple object keeps `size` aligned dimensions at `data`, unchanged
        // while it lives (see `StringObj::as_bytes`).
        unsafe { std::slice::from_raw_parts(self.data, self.size as usize) }
    }
}

/// `Array`: a sequence of objects (None elements allowed). `data`/`size` view `items` (never
/// changed after construction) for C++ code, which reads the elements in place.
#[repr(C)]
pub struct ArrayObj {
    data: *const Option<ObjectRef>,
    size: u64,
    /// The elements.
    pub items: Vec<Option<ObjectRef>>,
}

// SAFETY: `data` points into `items`, which is never mutated once the object exists (objects
// are only reachable through shared references); the elements are `Send + Sync`.
unsafe impl Send for ArrayObj {}
// SAFETY: as above.
unsafe impl Sync for ArrayObj {}

impl ObjectBody for ArrayObj {
    fn type_index() -> u32 {
        index::ARRAY
    }
}

impl ArrayObj {
    /// A new Array object.
    pub fn new_object(items: Vec<Option<ObjectRef>>) -> ObjectRef {
        ObjectRef::new(ArrayObj { data: items.as_ptr(), size: items.len() as u64, items })
    }
}

/// How a Map compares keys: String keys by content, every other key by identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MapKey {
    /// A String key.
    Str(Vec<u8>),
    /// Any other object, by address.
    Ptr(usize),
}

impl MapKey {
    /// The comparison key of an object.
    pub fn of(obj: &ObjectRef) -> MapKey {
        match obj.downcast::<StringObj>() {
            Some(s) => MapKey::Str(s.as_bytes().to_vec()),
            None => MapKey::Ptr(obj.as_ptr() as usize),
        }
    }
}

/// `Map`: insertion-ordered map of objects to objects.
pub struct MapObj {
    /// Entries: comparison key -> (key object, value).
    pub entries: IndexMap<MapKey, (ObjectRef, Option<ObjectRef>)>,
}

impl ObjectBody for MapObj {
    fn type_index() -> u32 {
        index::MAP
    }
}

impl MapObj {
    /// A new Map object from pairs; a repeated key keeps the first value as TVM's map does.
    pub fn new_object(pairs: Vec<(ObjectRef, Option<ObjectRef>)>) -> ObjectRef {
        let mut entries = IndexMap::with_capacity(pairs.len());
        for (k, v) in pairs {
            entries.entry(MapKey::of(&k)).or_insert((k, v));
        }
        ObjectRef::new(MapObj { entries })
    }
    /// Looks a key up.
    pub fn get(&self, key: &MapKey) -> Option<&Option<ObjectRef>> {
        self.entries.get(key).map(|(_, v)| v)
    }
}

/// `runtime.ADT`: a constructor tag and fields.
pub struct AdtObj {
    /// Constructor tag.
    pub tag: i32,
    /// Fields.
    pub fields: Vec<Option<ObjectRef>>,
}

impl ObjectBody for AdtObj {
    fn type_index() -> u32 {
        index::ADT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_string_keys_by_content() {
        let v = StringObj::new_object(b"v");
        let m = MapObj::new_object(vec![
            (StringObj::new_object(b"a"), Some(v.clone())),
            (StringObj::new_object(b"a"), None),
            (v.clone(), None),
        ]);
        let m = m.downcast::<MapObj>().unwrap();
        assert_eq!(m.entries.len(), 2);
        assert!(m.get(&MapKey::Str(b"a".to_vec())).unwrap().is_some());
        assert!(m.get(&MapKey::of(&v)).is_some());
    }

    #[test]
    fn string_layout() {
        let s = StringObj::new_object(b"hi\0there");
        let body = s.downcast::<StringObj>().unwrap();
        assert_eq!(body.as_bytes(), b"hi\0there");
        assert_eq!(body.size, 8);
    }

    #[test]
    fn strings_and_shapes_of_other_layouts_read_through_the_shared_fields() {
        // Laid out like TVM's C++ `StringObj::FromStd` / `ShapeTupleObj::FromStd`: the two
        // shared fields, then storage of the maker's own.
        #[repr(C)]
        struct CxxString {
            head: StringObj,
            other: [u64; 3],
            text: Box<[u8]>,
        }
        // SAFETY: test type; never mutated.
        unsafe impl Send for CxxString {}
        // SAFETY: as above.
        unsafe impl Sync for CxxString {}
        let text: Box<[u8]> = b"made elsewhere\0".to_vec().into_boxed_slice();
        let head = StringObj { data: text.as_ptr().cast(), size: 14 };
        let s = ObjectRef::alloc(index::STRING, CxxString { head, other: [7; 3], text });
        assert_eq!(s.downcast::<StringObj>().unwrap().as_bytes(), b"made elsewhere");
        let key = MapKey::of(&s);
        assert_eq!(key, MapKey::Str(b"made elsewhere".to_vec()));

        #[repr(C)]
        struct CxxShape {
            head: ShapeTupleObj,
            dims: Vec<i64>,
        }
        // SAFETY: test type; never mutated.
        unsafe impl Send for CxxShape {}
        // SAFETY: as above.
        unsafe impl Sync for CxxShape {}
        let dims = vec![2i64, 3, 4];
        let head = ShapeTupleObj { data: dims.as_ptr(), size: 3 };
        let t = ObjectRef::alloc(index::SHAPE_TUPLE, CxxShape { head, dims });
        assert_eq!(t.downcast::<ShapeTupleObj>().unwrap().dims(), &[2, 3, 4]);
        let empty = ShapeTupleObj { data: std::ptr::null(), size: 0 };
        assert!(empty.dims().is_empty());
    }

    #[test]
    fn array_view_matches_items() {
        let a = ArrayObj::new_object(vec![Some(StringObj::new_object(b"x")), None]);
        let body = a.downcast::<ArrayObj>().unwrap();
        assert_eq!(body.size, 2);
        assert_eq!(body.data, body.items.as_ptr());
        // The element slots are plain nullable object pointers, as C++ `ObjectRef`s are.
        assert_eq!(std::mem::size_of::<Option<ObjectRef>>(), std::mem::size_of::<*const u8>());
    }
}
