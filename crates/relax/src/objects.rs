//! The tvm-ffi objects of the Relax VM: `vm.Storage` (a block from an allocator, which tensors
//! are carved out of) and `relax.vm.Closure` (a function name and its implementation, which
//! takes the VM as its first argument).
//!
//! The allocators are the core's, shared with the Relay VM ([`tvm_runtime_classic::memory::Allocator`]): naive
//! or pooled by page-rounded size, one set per virtual machine.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};
use tvm_runtime_classic::abi::{DLDataType, DLDevice};
use tvm_runtime_classic::memory::Allocator;
use tvm_runtime_tvm_ffi::any::Any;
use tvm_runtime_tvm_ffi::object::{make_object, ObjectRef};
use tvm_runtime_tvm_ffi::{ti, types, FfiError, FfiResult};

fn type_index(key: &'static str, cell: &'static OnceLock<i32>) -> i32 {
    *cell.get_or_init(|| {
        types::get_or_alloc_index(key, -1, 1, 0, false, ti::OBJECT)
            .unwrap_or_else(|e| panic!("registering {key}: {}", e.message()))
    })
}

/// The type index of `vm.Storage`.
pub(crate) fn storage_index() -> i32 {
    static I: OnceLock<i32> = OnceLock::new();
    type_index("vm.Storage", &I)
}

/// The type index of `relax.vm.Closure`.
pub(crate) fn closure_index() -> i32 {
    static I: OnceLock<i32> = OnceLock::new();
    type_index("relax.vm.Closure", &I)
}

/// The payload of a `vm.Storage`: one block of an allocator, returned to it when the object
/// goes (after every tensor carved out of it, which hold the storage).
pub struct Storage {
    data: *mut c_void,
    size: usize,
    alignment: usize,
    device: DLDevice,
    alloc: Arc<Allocator>,
}

// SAFETY: the block is device memory this object owns; the pointer is only handed to tensors
// and given back to the (thread-safe) allocator once, in Drop.
unsafe impl Send for Storage {}
// SAFETY: as above; the payload is never mutated.
unsafe impl Sync for Storage {}

impl Drop for Storage {
    fn drop(&mut self) {
        self.alloc.free(self.data, self.size, self.alignment);
    }
}

/// `ffi::GetDataSize`: bytes of `numel` elements of `dtype` (lanes included, bits rounded up).
#[inline]
pub fn data_size(shape: &[i64], dtype: DLDataType) -> FfiResult<usize> {
    let mut n: u128 = 1;
    for &d in shape {
        let d = u128::try_from(d).map_err(|_| FfiError::value(format!("shape {shape:?} has a negative extent")))?;
        n = n.saturating_mul(d);
    }
    let bits = n.saturating_mul(u128::from(dtype.bits)).saturating_mul(u128::from(dtype.lanes));
    usize::try_from(bits.div_ceil(8))
        .ok()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| FfiError::value(format!("a tensor of shape {shape:?} is too large")))
}

/// Allocates a storage block of `nbytes` from `alloc`.
#[inline]
pub fn alloc_storage(alloc: &Arc<Allocator>, nbytes: usize, dtype_hint: DLDataType) -> FfiResult<ObjectRef> {
    let alignment = tvm_runtime_classic::device::data_alignment(dtype_hint);
    let (data, size) = alloc
        .alloc(nbytes, alignment, dtype_hint)
        .map_err(|e| FfiError::runtime(format!("vm.builtin.alloc_storage: cannot allocate {nbytes} bytes: {e}")))?;
    let device = alloc.device();
    Ok(make_object(storage_index(), Storage { data, size, alignment, device, alloc: alloc.clone() }))
}

/// The payload of a storage object, or a type error naming `what`.
#[inline]
pub(crate) fn as_storage<'a>(o: &'a ObjectRef, what: &str) -> FfiResult<&'a Storage> {
    if o.type_index() != storage_index() {
        return Err(FfiError::type_error(format!(
            "{what}: expected vm.Storage but got {}",
            types::type_key(o.type_index())
        )));
    }
    // SAFETY: objects of this type index are made by `alloc_storage` with this payload.
    Ok(unsafe { o.payload::<Storage>() })
}

/// `StorageObj::AllocTensor`: a tensor at `offset` of the block.
#[inline]
pub fn alloc_tensor(storage: &ObjectRef, offset: i64, shape: &[i64], dtype: DLDataType) -> FfiResult<ObjectRef> {
    let s = as_storage(storage, "vm.builtin.alloc_tensor")?;
    tvm_runtime_classic::value::dtype::check_alloc_dtype(dtype)?;
    let need = data_size(shape, dtype)?;
    let fits = u64::try_from(offset).ok().and_then(|o| o.checked_add(need as u64)).is_some_and(|e| e <= s.size as u64);
    if !fits {
        return Err(FfiError::value(format!(
            "storage allocation failure, attempted to allocate {need} at offset {offset} in region that is {}bytes",
            s.size
        )));
    }
    Ok(tvm_runtime_tvm_ffi::tensor::in_owner(storage.clone(), s.data, offset as u64, shape, dtype, s.device))
}

/// The payload of a `relax.vm.Closure`.
pub struct Closure {
    /// The function's name.
    pub func_name: String,
    /// `impl(vm, args...)`.
    pub imp: ObjectRef,
}

/// A new closure.
pub(crate) fn make_closure(func_name: &str, imp: ObjectRef) -> ObjectRef {
    make_object(closure_index(), Closure { func_name: func_name.to_owned(), imp })
}

/// The payload of a closure object, if it is one.
#[inline]
pub(crate) fn as_closure(o: &ObjectRef) -> Option<&Closure> {
    // SAFETY: objects of this type index are made by `make_closure` with this payload.
    (o.type_index() == closure_index()).then(|| unsafe { o.payload::<Closure>() })
}

/// A function that calls `func` with `last` appended to its arguments
/// (`VMClosure::BindLastArgs`).
pub(crate) fn bind_last_args(func: ObjectRef, last: Vec<Any>) -> ObjectRef {
    let last = crate::vm::SendAnys(last);
    tvm_runtime_tvm_ffi::function::from_fn(move |args| {
        let last = last.items();
        let mut all: Vec<_> = Vec::with_capacity(args.len() + last.len());
        all.extend_from_slice(args);
        all.extend(last.iter().map(|a| *a.raw()));
        tvm_runtime_tvm_ffi::function::call(&func, &all)
    })
}

/// A process-wide table of objects by name (the tensor cache, the `call_py_func` registry).
/// Objects it lets go of (replaced, removed, cleared) are released after its lock is: releasing
/// one may run host code (a tensor's deleter, a Python function's) that uses the table again.
#[derive(Default)]
pub(crate) struct NamedObjects(Mutex<Option<HashMap<String, ObjectRef>>>);

impl NamedObjects {
    /// An empty table.
    pub(crate) const fn new() -> Self {
        NamedObjects(Mutex::new(None))
    }

    /// The object named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<ObjectRef> {
        self.0.lock().as_ref()?.get(name).cloned()
    }

    /// Sets `name`; with `replace` false, a name already there is an error (and `value` dropped).
    pub(crate) fn insert(&self, name: String, value: ObjectRef, replace: bool) -> FfiResult<()> {
        let old = {
            let mut t = self.0.lock();
            let t = t.get_or_insert_with(HashMap::new);
            if !replace && t.contains_key(&name) {
                return Err(FfiError::value(format!("Name {name} already exists in the cache")));
            }
            t.insert(name, value)
        };
        drop(old);
        Ok(())
    }

    /// Sets every name of `items`, replacing those there.
    pub(crate) fn insert_all(&self, items: impl IntoIterator<Item = (String, ObjectRef)>) {
        let old: Vec<ObjectRef> = {
            let mut t = self.0.lock();
            let t = t.get_or_insert_with(HashMap::new);
            items.into_iter().filter_map(|(k, v)| t.insert(k, v)).collect()
        };
        drop(old);
    }

    /// Removes `name`, if there.
    pub(crate) fn remove(&self, name: &str) {
        let old = self.0.lock().as_mut().and_then(|t| t.remove(name));
        drop(old);
    }

    /// Removes everything.
    pub(crate) fn clear(&self) {
        let old = self.0.lock().take();
        drop(old);
    }
}
