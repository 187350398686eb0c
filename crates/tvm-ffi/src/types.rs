//! The type table: tvm-ffi's static indices, dynamic allocation with reserved child slots,
//! ancestors, and the reflection registered on each type (fields, methods, metadata, attribute
//! columns). `TVMFFIGetTypeInfo` hands out pointers into it: entries never move or go away.

use super::any::{Any, TVMFFIAny};
use super::{ti, FfiError, FfiResult, TVMFFIByteArray};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::OnceLock;

/// `TVMFFIFieldGetter`.
pub(crate) type FieldGetter = unsafe extern "C" fn(field: *mut c_void, result: *mut TVMFFIAny) -> i32;
/// `TVMFFIObjectCreator`.
pub(crate) type ObjectCreator = unsafe extern "C" fn(result: *mut *mut c_void) -> i32;

/// `TVMFFIFieldInfo`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIFieldInfo {
    /// Field name.
    pub name: TVMFFIByteArray,
    /// Documentation.
    pub doc: TVMFFIByteArray,
    /// JSON metadata.
    pub metadata: TVMFFIByteArray,
    /// `kTVMFFIFieldFlagBitMask*`.
    pub flags: i64,
    /// Size in bytes.
    pub size: i64,
    /// Alignment.
    pub alignment: i64,
    /// Byte offset in the object.
    pub offset: i64,
    /// Reads the field.
    pub getter: Option<unsafe extern "C" fn(field: *mut c_void, result: *mut TVMFFIAny) -> i32>,
    /// Writes it (a C function, or a function object with `SetterIsFunctionObj`).
    pub setter: *mut c_void,
    /// The default value or its factory.
    pub default_value_or_factory: TVMFFIAny,
    /// The static type index of the field's type.
    pub field_static_type_index: i32,
}

/// `TVMFFIMethodInfo`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIMethodInfo {
    /// Method name.
    pub name: TVMFFIByteArray,
    /// Documentation.
    pub doc: TVMFFIByteArray,
    /// JSON metadata.
    pub metadata: TVMFFIByteArray,
    /// Flags (static method).
    pub flags: i64,
    /// The function.
    pub method: TVMFFIAny,
}

/// `TVMFFITypeMetadata`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFITypeMetadata {
    /// Documentation.
    pub doc: TVMFFIByteArray,
    /// Makes an empty instance.
    pub creator: Option<unsafe extern "C" fn(result: *mut *mut c_void) -> i32>,
    /// The object's size.
    pub total_size: i32,
    /// `TVMFFISEqHashKind`.
    pub structural_eq_hash_kind: i32,
}

/// `TVMFFITypeAttrColumn`.
#[repr(C)]
pub struct TVMFFITypeAttrColumn {
    /// Values by type index (minus `begin_index`).
    pub data: *const TVMFFIAny,
    /// How many.
    pub size: i32,
    /// The type index of `data[0]`.
    pub begin_index: i32,
}

/// `TVMFFITypeInfo`.
#[repr(C)]
pub struct TVMFFITypeInfo {
    /// The index.
    pub type_index: i32,
    /// Depth in the hierarchy (Object is 0).
    pub type_depth: i32,
    /// The key.
    pub type_key: TVMFFIByteArray,
    /// Ancestors from the root, `type_depth` of them.
    pub type_ancestors: *const *const TVMFFITypeInfo,
    /// libstdc++'s hash of the key.
    pub type_key_hash: u64,
    /// Registered fields.
    pub num_fields: i32,
    /// Registered methods.
    pub num_methods: i32,
    /// The fields.
    pub fields: *const TVMFFIFieldInfo,
    /// The methods.
    pub methods: *const TVMFFIMethodInfo,
    /// The metadata, once registered.
    pub metadata: *const TVMFFITypeMetadata,
}

struct Entry {
    info: TVMFFITypeInfo,
    key: Box<str>,
    ancestors: Vec<*const TVMFFITypeInfo>,
    fields: Vec<TVMFFIFieldInfo>,
    methods: Vec<TVMFFIMethodInfo>,
    metadata: Option<Box<TVMFFITypeMetadata>>,
    num_slots: i32,
    allocated_slots: i32,
    can_overflow: bool,
}

struct Column {
    raw: TVMFFITypeAttrColumn,
    values: Vec<Any>,
}

struct Table {
    entries: Vec<Option<Box<Entry>>>,
    by_key: HashMap<Box<str>, i32>,
    counter: i32,
    #[allow(clippy::vec_box, reason = "TVMFFIGetTypeAttrColumn hands out pointers to columns: they must not move")]
    columns: Vec<Box<Column>>,
    column_by_name: HashMap<Box<str>, usize>,
    /// Strings and values that registered infos point into: kept for the process's life.
    pool: Vec<Box<[u8]>>,
    any_pool: Vec<Any>,
}

// SAFETY: the raw pointers point into boxes the table owns and never frees; access goes through
// the lock.
unsafe impl Send for Table {}
// SAFETY: as above.
unsafe impl Sync for Table {}

/// The object types libtvm_ffi registers beyond the static ones, in its order (parent key, key).
const DYN_TYPES: &[(&str, &str)] = &[
    ("ffi.Object", "ffi.EnumState"),
    ("ffi.Object", "ffi.Enum"),
    ("ffi.Enum", "ffi.IntEnum"),
    ("ffi.Enum", "ffi.StrEnum"),
    ("ffi.Object", "ffi.reflection.AccessStep"),
    ("ffi.Object", "ffi.reflection.AccessPath"),
    ("ffi.Object", "ffi.StructuralVisitor"),
    ("ffi.Object", "ffi.VisitErrorContext"),
    ("ffi.Object", "ffi.StructuralMutator"),
    ("ffi.Object", "ffi.StructuralKey"),
];

/// The type attribute columns that exist from the start (`EnsureTypeAttrColumn` in tvm-ffi).
pub(crate) const ATTR_COLUMNS: &[&str] = &[
    "__ffi_enum__",
    "__s_equal__",
    "__s_hash__",
    "__ffi_shallow_copy__",
    "__ffi_repr__",
    "__ffi_hash__",
    "__ffi_eq__",
    "__ffi_compare__",
    "__ffi_new__",
    "__ffi_init__",
    "__s_mutate__",
    "__s_maybe_inplace_mutate__",
    "__data_to_json__",
    "__data_from_json__",
    "__s_visit__",
    "__any_hash__",
    "__any_equal__",
];

fn table() -> &'static RwLock<Table> {
    static T: OnceLock<RwLock<Table>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Table {
            entries: (0..ti::DYN_OBJECT_BEGIN).map(|_| None).collect(),
            by_key: HashMap::new(),
            counter: ti::DYN_OBJECT_BEGIN,
            columns: Vec::new(),
            column_by_name: HashMap::new(),
            pool: Vec::new(),
            any_pool: Vec::new(),
        };
        t.alloc("ffi.Object", ti::OBJECT, 0, 0, true, -1).expect("root type");
        t.register_metadata(
            ti::OBJECT,
            &TVMFFITypeMetadata {
                doc: TVMFFIByteArray::EMPTY,
                creator: None,
                total_size: 24,
                structural_eq_hash_kind: 0,
            },
        )
        .expect("root metadata");
        for (key, idx) in ti::POD_KEYS {
            t.alloc(key, *idx, 0, 0, false, -1).expect("static type");
        }
        for (key, idx) in ti::OBJECT_KEYS {
            t.alloc(key, *idx, 1, 0, false, ti::OBJECT).expect("static type");
        }
        // The object types libtvm_ffi registers beyond the static ones, in its order, before
        // any other library can allocate an index: they get tvm-ffi's indices (128...). Their
        // fields and methods come from the subsystems that implement them.
        for (parent, key) in DYN_TYPES {
            let p = t.by_key[*parent];
            let depth = t.entry(p).map_or(0, |e| e.info.type_depth) + 1;
            t.alloc(key, -1, depth, 0, true, p).expect("built-in type");
        }
        t.alloc("ffi.VisitInterrupt", ti::VISIT_INTERRUPT, 1, 0, false, ti::OBJECT).expect("built-in type");
        // The attribute columns tvm-ffi creates at start-up: C++ code looks them up at load time
        // and fails when one is missing.
        for name in ATTR_COLUMNS {
            t.columns.push(Box::new(Column {
                raw: TVMFFITypeAttrColumn { data: std::ptr::null(), size: 0, begin_index: 0 },
                values: Vec::new(),
            }));
            t.column_by_name.insert((*name).into(), t.columns.len() - 1);
        }
        RwLock::new(t)
    })
}

impl Table {
    fn alloc(
        &mut self,
        key: &str,
        static_index: i32,
        depth: i32,
        num_child_slots: i32,
        mut can_overflow: bool,
        parent_index: i32,
    ) -> FfiResult<i32> {
        if let Some(&i) = self.by_key.get(key) {
            return Ok(i);
        }
        if parent_index == -2 {
            return Ok(-2);
        }
        if num_child_slots < 0 {
            return Err(FfiError::value(format!("type `{key}`: negative child slots")));
        }
        let parent: Option<(i32, i32, bool)> = if parent_index < 0 {
            None
        } else {
            let p = self
                .entry(parent_index)
                .ok_or_else(|| FfiError::value(format!("type `{key}`: unknown parent type index {parent_index}")))?;
            Some((p.info.type_index, p.info.type_depth, p.can_overflow))
        };
        if depth != 0 {
            match parent {
                Some((_, pd, _)) if pd + 1 == depth => {}
                _ => return Err(FfiError::value(format!("type `{key}`: depth {depth} does not follow its parent's"))),
            }
        }
        let num_slots = num_child_slots + 1;
        let index = if static_index >= 0 {
            if static_index as usize >= self.entries.len() || self.entries[static_index as usize].is_some() {
                return Err(FfiError::value(format!("type `{key}`: conflicting static index {static_index}")));
            }
            static_index
        } else {
            let (pi, _, _) = parent.ok_or_else(|| FfiError::value(format!("type `{key}` has no parent")))?;
            let p = self.entries[pi as usize].as_mut().expect("parent exists");
            if p.allocated_slots + num_slots <= p.num_slots {
                let i = p.info.type_index + p.allocated_slots;
                p.allocated_slots += num_slots;
                i
            } else {
                if !p.can_overflow {
                    return Err(FfiError::runtime(format!("Reach maximum number of sub-classes for {}", p.key)));
                }
                let i = self.counter;
                self.counter =
                    self.counter.checked_add(num_slots).ok_or_else(|| FfiError::runtime("type table is full"))?;
                while (self.entries.len() as i32) < self.counter {
                    self.entries.push(None);
                }
                i
            }
        };
        if let Some((_, _, false)) = parent {
            can_overflow = false;
        }
        let mut ancestors = Vec::with_capacity(depth as usize);
        if let Some((pi, pd, _)) = parent.filter(|_| depth != 0) {
            let p = self.entries[pi as usize].as_ref().expect("parent exists");
            ancestors.extend_from_slice(&p.ancestors[..pd as usize]);
            ancestors.push(&p.info as *const TVMFFITypeInfo);
        }
        let key: Box<str> = key.into();
        let mut e = Box::new(Entry {
            info: TVMFFITypeInfo {
                type_index: index,
                type_depth: depth,
                type_key: TVMFFIByteArray::EMPTY,
                type_ancestors: std::ptr::null(),
                type_key_hash: super::hash::std_hash_bytes(key.as_bytes()),
                num_fields: 0,
                num_methods: 0,
                fields: std::ptr::null(),
                methods: std::ptr::null(),
                metadata: std::ptr::null(),
            },
            key: key.clone(),
            ancestors,
            fields: Vec::new(),
            methods: Vec::new(),
            metadata: None,
            num_slots,
            allocated_slots: 1,
            can_overflow,
        });
        e.info.type_key = TVMFFIByteArray { data: e.key.as_ptr().cast(), size: e.key.len() };
        e.info.type_ancestors = e.ancestors.as_ptr();
        self.entries[index as usize] = Some(e);
        self.by_key.insert(key, index);
        Ok(index)
    }

    fn entry(&self, index: i32) -> Option<&Entry> {
        self.entries.get(usize::try_from(index).ok()?)?.as_deref()
    }

    fn entry_mut(&mut self, index: i32) -> FfiResult<&mut Entry> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.entries.get_mut(i))
            .and_then(|e| e.as_deref_mut())
            .ok_or_else(|| FfiError::value(format!("Cannot find type info for type_index={index}")))
    }

    fn copy_str(&mut self, s: &TVMFFIByteArray) -> TVMFFIByteArray {
        // SAFETY: registration passes valid byte arrays.
        let b = unsafe { s.as_slice() };
        if b.is_empty() {
            return TVMFFIByteArray::EMPTY;
        }
        let mut v = Vec::with_capacity(b.len() + 1);
        v.extend_from_slice(b);
        v.push(0);
        let boxed = v.into_boxed_slice();
        let out = TVMFFIByteArray { data: boxed.as_ptr().cast(), size: b.len() };
        self.pool.push(boxed);
        out
    }

    fn keep_any(&mut self, v: &TVMFFIAny) -> FfiResult<TVMFFIAny> {
        // SAFETY: registration passes valid values.
        let a = unsafe { Any::from_view(v) }?;
        let raw = *a.raw();
        self.any_pool.push(a);
        Ok(raw)
    }

    fn register_metadata(&mut self, index: i32, m: &TVMFFITypeMetadata) -> FfiResult<()> {
        let doc = self.copy_str(&m.doc);
        let e = self.entry_mut(index)?;
        if e.metadata.is_some() {
            return Err(FfiError::runtime(format!(
                "Overriding {}, possible causes:\n- two ObjectDef<T>() calls for the same T \n- when we \
                 forget to assign _type_key to ObjectRef<Y> that inherits from T\n- another type with \
                 the same key is already registered\nCross check the reflection registration.",
                e.key
            )));
        }
        let md = Box::new(TVMFFITypeMetadata { doc, ..*m });
        e.info.metadata = &*md;
        e.metadata = Some(md);
        Ok(())
    }
}

/// `TVMFFITypeGetOrAllocIndex`.
pub fn get_or_alloc_index(
    key: &str,
    static_index: i32,
    depth: i32,
    num_child_slots: i32,
    can_overflow: bool,
    parent_index: i32,
) -> FfiResult<i32> {
    if let Some(&i) = table().read().by_key.get(key) {
        return Ok(i);
    }
    table().write().alloc(key, static_index, depth, num_child_slots, can_overflow, parent_index)
}

/// The index of a type key.
pub fn key_to_index(key: &str) -> Option<i32> {
    table().read().by_key.get(key).copied()
}

/// The info of a type (a pointer that stays valid for the process's life).
pub fn type_info(index: i32) -> Option<*const TVMFFITypeInfo> {
    table().read().entry(index).map(|e| &e.info as *const TVMFFITypeInfo)
}

/// The key of a type, or a placeholder naming the index.
pub fn type_key(index: i32) -> String {
    match table().read().entry(index) {
        Some(e) => e.key.to_string(),
        None => format!("<unknown type {index}>"),
    }
}

/// All registered keys, by index.
pub(crate) fn registered_keys() -> Vec<String> {
    table().read().entries.iter().flatten().map(|e| e.key.to_string()).collect()
}

/// Whether `index` is `target` or derives from it.
pub fn is_instance(index: i32, target: i32) -> bool {
    if index == target || target == ti::OBJECT && index >= ti::STATIC_OBJECT_BEGIN {
        return true;
    }
    let t = table().read();
    let (Some(e), Some(te)) = (t.entry(index), t.entry(target)) else {
        return false;
    };
    let d = te.info.type_depth as usize;
    // SAFETY: ancestors point to entries that live for the process.
    d < e.ancestors.len() && unsafe { (*e.ancestors[d]).type_index } == target
}

/// `TVMFFITypeRegisterField`.
pub fn register_field(index: i32, info: &TVMFFIFieldInfo) -> FfiResult<()> {
    let mut t = table().write();
    // SAFETY: registration passes a valid name.
    let name = unsafe { info.name.as_slice() }.to_vec();
    {
        let e = t.entry_mut(index)?;
        // SAFETY: stored names are valid.
        if e.fields.iter().any(|f| unsafe { f.name.as_slice() } == name.as_slice()) {
            return Err(FfiError::value(format!(
                "Duplicate field name \"{}\" in type \"{}\"",
                String::from_utf8_lossy(&name),
                e.key
            )));
        }
    }
    let mut f = *info;
    if f.flags & super::FIELD_SETTER_IS_FUNCTION_OBJ != 0 && !f.setter.is_null() {
        let setter = TVMFFIAny::with_bits(ti::FUNCTION, f.setter as u64);
        t.keep_any(&setter)?;
    }
    f.name = t.copy_str(&info.name);
    f.doc = t.copy_str(&info.doc);
    f.metadata = t.copy_str(&info.metadata);
    f.default_value_or_factory = if info.flags & super::FIELD_HAS_DEFAULT != 0 {
        t.keep_any(&info.default_value_or_factory)?
    } else {
        TVMFFIAny::NONE
    };
    let e = t.entry_mut(index)?;
    e.fields.push(f);
    e.info.fields = e.fields.as_ptr();
    e.info.num_fields = e.fields.len() as i32;
    Ok(())
}

/// `TVMFFITypeRegisterMethod`.
pub fn register_method(index: i32, info: &TVMFFIMethodInfo) -> FfiResult<()> {
    let mut t = table().write();
    t.entry_mut(index)?;
    let mut m = *info;
    m.name = t.copy_str(&info.name);
    m.doc = t.copy_str(&info.doc);
    m.metadata = t.copy_str(&info.metadata);
    m.method = t.keep_any(&info.method)?;
    let e = t.entry_mut(index)?;
    e.methods.push(m);
    e.info.methods = e.methods.as_ptr();
    e.info.num_methods = e.methods.len() as i32;
    Ok(())
}

/// `TVMFFITypeRegisterMetadata`.
pub fn register_metadata(index: i32, m: &TVMFFITypeMetadata) -> FfiResult<()> {
    table().write().register_metadata(index, m)
}

/// `TVMFFITypeRegisterAttr`.
pub fn register_attr(index: i32, name: &str, value: &TVMFFIAny) -> FfiResult<()> {
    let mut t = table().write();
    let ci = match t.column_by_name.get(name) {
        Some(&c) => c,
        None => {
            t.columns.push(Box::new(Column {
                raw: TVMFFITypeAttrColumn { data: std::ptr::null(), size: 0, begin_index: 0 },
                values: Vec::new(),
            }));
            let c = t.columns.len() - 1;
            t.column_by_name.insert(name.into(), c);
            c
        }
    };
    if index == ti::NONE {
        return Ok(());
    }
    let idx = usize::try_from(index).map_err(|_| FfiError::value(format!("bad type index {index}")))?;
    // SAFETY: registration passes a valid value.
    let v = unsafe { Any::from_view(value) }?;
    let col = &mut t.columns[ci];
    if idx >= col.values.len() {
        col.values.resize_with(idx + 1, Any::none);
    }
    if !col.values[idx].is_none() {
        return Err(FfiError::runtime(format!(
            "TypeAttr `{name}` is already registered for type index {index}. To update the stored \
             value, register a mutable container (e.g., Dict/List) once and mutate it in place on \
             subsequent calls."
        )));
    }
    col.values[idx] = v;
    col.raw.data = col.values.as_ptr().cast();
    col.raw.size = col.values.len() as i32;
    Ok(())
}

/// `TVMFFIGetTypeAttrColumn`: null when no such column.
pub fn attr_column(name: &str) -> *const TVMFFITypeAttrColumn {
    let t = table().read();
    match t.column_by_name.get(name) {
        Some(&c) => &t.columns[c].raw,
        None => std::ptr::null(),
    }
}

/// A type attribute's value for a type (None when unset).
pub(crate) fn attr_value(name: &str, index: i32) -> Option<Any> {
    let t = table().read();
    let col = &t.columns[*t.column_by_name.get(name)?];
    let v = col.values.get(usize::try_from(index).ok()?)?;
    (!v.is_none()).then(|| v.clone())
}
