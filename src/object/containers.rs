//! Container objects: String, Array, Map, ShapeTuple and ADT.
//!
//! `StringObj` and `ShapeTupleObj` keep the body layout of TVM's C++ classes (`{data, size}`
//! after the header) so that C++ code reading them directly still works.

use super::{index, ObjectBody, ObjectRef};
use indexmap::IndexMap;
use std::ffi::c_char;

/// `runtime.String`: immutable bytes (NUL-terminated in storage, size excludes the NUL).
#[repr(C)]
pub struct StringObj {
    data: *const c_char,
    size: u64,
    storage: Box<[u8]>,
}

// SAFETY: `data` points into `storage`, which is never mutated after construction.
unsafe impl Send for StringObj {}
// SAFETY: as above.
unsafe impl Sync for StringObj {}

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
        ObjectRef::new(StringObj { data: storage.as_ptr().cast(), size: bytes.len() as u64, storage })
    }
    /// The bytes (without the trailing NUL).
    pub fn as_bytes(&self) -> &[u8] {
        &self.storage[..self.size as usize]
    }
    /// The text, lossily decoded.
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }
}

/// `runtime.ShapeTuple`.
#[repr(C)]
pub struct ShapeTupleObj {
    data: *const i64,
    size: u64,
    storage: Box<[i64]>,
}

// SAFETY: `data` points into `storage`, never mutated after construction.
unsafe impl Send for ShapeTupleObj {}
// SAFETY: as above.
unsafe impl Sync for ShapeTupleObj {}

impl ObjectBody for ShapeTupleObj {
    fn type_index() -> u32 {
        index::SHAPE_TUPLE
    }
}

impl ShapeTupleObj {
    /// A new ShapeTuple object.
    pub fn new_object(dims: Vec<i64>) -> ObjectRef {
        let storage = dims.into_boxed_slice();
        ObjectRef::new(ShapeTupleObj { data: storage.as_ptr(), size: storage.len() as u64, storage })
    }
    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.storage
    }
}

/// `Array`: a sequence of objects (None elements allowed).
pub struct ArrayObj {
    /// The elements.
    pub items: Vec<Option<ObjectRef>>,
}

impl ObjectBody for ArrayObj {
    fn type_index() -> u32 {
        index::ARRAY
    }
}

impl ArrayObj {
    /// A new Array object.
    pub fn new_object(items: Vec<Option<ObjectRef>>) -> ObjectRef {
        ObjectRef::new(ArrayObj { items })
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
}
