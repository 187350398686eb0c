//! Memory of the VM (memory_manager.cc, naive_allocator.h, pooled_allocator.h): allocators over
//! the device API and `vm.Storage` objects, the blocks that `AllocStorage` makes and
//! `AllocTensor` carves tensors out of.
//!
//! Unlike TVM v0.8, whose allocators are process-wide (one per device, shared by every VM and
//! never freed), each VirtualMachine owns its allocators: VMs on different threads do not
//! contend for one pool, and a VM's pool is released when the VM goes. A storage block keeps its
//! allocator alive, so tensors that outlive their VM (results) stay valid; when such a block is
//! freed after the VM has gone, it goes straight back to the device.

use crate::abi::{DLDataType, DLDevice};
use crate::device::{self, DeviceApi};
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use crate::object::{register_type, ObjectBody, ObjectRef};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// `AllocatorType`: the values `init` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocatorKind {
    /// `kNaive` (1): every block straight from and back to the device.
    Naive = 1,
    /// `kPooled` (2): freed blocks are kept, by size, for the next allocation of that size.
    Pooled = 2,
}

impl AllocatorKind {
    /// The kind for `init`'s allocator type number.
    pub fn from_code(code: i64) -> Result<AllocatorKind> {
        match code {
            1 => Ok(AllocatorKind::Naive),
            2 => Ok(AllocatorKind::Pooled),
            c => Err(Error::value(format!("Unknown allocator type: {c} (1 = naive, 2 = pooled)"))),
        }
    }
}

/// The page size pooled blocks are rounded up to.
pub const PAGE_SIZE: usize = 4096;

/// The pooled allocators alive, for [`release_all_pools`].
static POOLED: Mutex<Vec<std::sync::Weak<Allocator>>> = Mutex::new(Vec::new());

/// `MemoryManager::Clear` (`vm.builtin.memory_manager.clear`): every pooled allocator of every
/// VM gives the blocks it keeps back to the device; blocks in use stay.
pub fn release_all_pools() {
    let live: Vec<Arc<Allocator>> = POOLED.lock().iter().filter_map(std::sync::Weak::upgrade).collect();
    for a in live {
        a.release_all();
    }
}

/// A device memory handle kept in a pool.
struct Block(*mut c_void);

// SAFETY: a device memory handle is an address or an opaque driver handle that any thread may
// pass back to the device API.
unsafe impl Send for Block {}

#[derive(Default)]
struct Pool {
    /// Free blocks by (size, alignment).
    free: HashMap<(usize, usize), Vec<Block>>,
    /// The VM is gone: frees go back to the device.
    closed: bool,
}

/// An allocator for one device.
pub struct Allocator {
    kind: AllocatorKind,
    device: DLDevice,
    api: &'static dyn DeviceApi,
    pool: Mutex<Pool>,
    /// Bytes currently held from the device (in use or pooled).
    held: AtomicUsize,
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator").field("kind", &self.kind).field("device", &self.device).finish()
    }
}

impl Allocator {
    /// An allocator of `kind` for `dev` (its device API must exist).
    pub fn new(dev: DLDevice, kind: AllocatorKind) -> Result<Arc<Allocator>> {
        let api = device::api(dev.device_type)?;
        let a = Arc::new(Allocator {
            kind,
            device: dev,
            api,
            pool: Mutex::new(Pool::default()),
            held: AtomicUsize::new(0),
        });
        if kind == AllocatorKind::Pooled {
            let mut live = POOLED.lock();
            live.retain(|w| w.strong_count() > 0);
            live.push(Arc::downgrade(&a));
        }
        Ok(a)
    }

    /// The kind.
    pub fn kind(&self) -> AllocatorKind {
        self.kind
    }

    /// The device.
    pub fn device(&self) -> DLDevice {
        self.device
    }

    /// Bytes held from the device: blocks in use plus (pooled) blocks kept for reuse.
    pub fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Bytes of the blocks kept in the pool.
    pub fn pooled_bytes(&self) -> usize {
        self.pool.lock().free.iter().map(|((size, _), v)| size * v.len()).sum()
    }

    fn device_alloc(&self, size: usize, alignment: usize, hint: DLDataType) -> Result<*mut c_void> {
        let p = self.api.alloc_data_space(self.device, size, alignment, hint)?;
        self.held.fetch_add(size, Ordering::Relaxed);
        Ok(p)
    }

    fn device_free(&self, p: *mut c_void, size: usize) {
        // A failing free (a lost GPU context) cannot be reported from a destructor.
        let _ = self.api.free_data_space(self.device, p);
        self.held.fetch_sub(size, Ordering::Relaxed);
    }

    /// A block of at least `nbytes` with `alignment`; returns its pointer and size.
    #[inline]
    pub fn alloc(&self, nbytes: usize, alignment: usize, hint: DLDataType) -> Result<(*mut c_void, usize)> {
        match self.kind {
            AllocatorKind::Naive => Ok((self.device_alloc(nbytes, alignment, hint)?, nbytes)),
            AllocatorKind::Pooled => {
                let size = nbytes
                    .checked_next_multiple_of(PAGE_SIZE)
                    .ok_or_else(|| Error::value(format!("storage of {nbytes} bytes is too large")))?;
                if let Some(b) = self.pool.lock().free.get_mut(&(size, alignment)).and_then(Vec::pop) {
                    return Ok((b.0, size));
                }
                match self.device_alloc(size, alignment, hint) {
                    Ok(p) => Ok((p, size)),
                    Err(_) => {
                        // As TVM: give the pooled blocks back and try once more.
                        self.release_all();
                        Ok((self.device_alloc(size, alignment, hint)?, size))
                    }
                }
            }
        }
    }

    /// Returns a block from [`Allocator::alloc`].
    #[inline]
    pub fn free(&self, p: *mut c_void, size: usize, alignment: usize) {
        if self.kind == AllocatorKind::Pooled {
            let mut pool = self.pool.lock();
            if !pool.closed {
                pool.free.entry((size, alignment)).or_default().push(Block(p));
                return;
            }
        }
        self.device_free(p, size);
    }

    /// Gives every pooled block back to the device.
    pub fn release_all(&self) {
        let blocks: Vec<((usize, usize), Vec<Block>)> = self.pool.lock().free.drain().collect();
        for ((size, _), v) in blocks {
            for b in v {
                self.device_free(b.0, size);
            }
        }
    }

    /// The owning VM is gone: release the pool; later frees go to the device.
    pub fn close(&self) {
        self.pool.lock().closed = true;
        self.release_all();
    }
}

/// The body of a `vm.Storage` object: one block of an allocator.
pub struct StorageObj {
    data: *mut c_void,
    size: usize,
    alignment: usize,
    alloc: Arc<Allocator>,
}

// SAFETY: the block is device memory owned by this object; the pointer is only handed to tensors
// and returned to the allocator once, in Drop.
unsafe impl Send for StorageObj {}
// SAFETY: as above; the object is immutable.
unsafe impl Sync for StorageObj {}

impl Drop for StorageObj {
    fn drop(&mut self) {
        self.alloc.free(self.data, self.size, self.alignment);
    }
}

impl ObjectBody for StorageObj {
    fn type_index() -> u32 {
        storage_type_index()
    }
}

/// The type index of `vm.Storage` (registered by key on first use).
pub fn storage_type_index() -> u32 {
    static IDX: OnceLock<u32> = OnceLock::new();
    *IDX.get_or_init(|| register_type("vm.Storage", "runtime.Object"))
}

impl StorageObj {
    /// A new storage object of `nbytes` from `alloc`.
    pub fn new_object(alloc: &Arc<Allocator>, nbytes: usize, alignment: usize, hint: DLDataType) -> Result<ObjectRef> {
        let (data, size) = alloc.alloc(nbytes, alignment, hint)?;
        Ok(ObjectRef::new(StorageObj { data, size, alignment, alloc: alloc.clone() }))
    }

    /// The storage body of an object, if it is a `vm.Storage`.
    pub fn of(obj: &ObjectRef) -> Option<&StorageObj> {
        obj.downcast::<StorageObj>()
    }

    /// The block's size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device.
    pub fn device(&self) -> DLDevice {
        self.alloc.device
    }

    /// `StorageObj::AllocNDArray`: a tensor at byte `offset` of the block (the block's pointer
    /// with `byte_offset`, as TVM makes it), keeping `this` (the storage object) alive.
    pub fn alloc_ndarray(&self, this: &ObjectRef, offset: i64, shape: &[i64], dtype: DLDataType) -> Result<NDArray> {
        super::executable::verify_dtype(dtype)?;
        let needed = device::shape_bytes(shape, dtype)?;
        let off = usize::try_from(offset).map_err(|_| Error::value(format!("negative storage offset {offset}")))?;
        if !matches!(off.checked_add(needed), Some(end) if end <= self.size) {
            return Err(Error::value(format!(
                "storage allocation failure, attempted to allocate {needed} at offset {off} in region that is {}bytes",
                self.size
            )));
        }
        NDArray::in_storage(self.data, off as u64, shape, dtype, self.alloc.device, this.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::dtype::FLOAT32;

    const CPU0: DLDevice = DLDevice { device_type: 1, device_id: 0 };

    #[test]
    fn pooled_reuses_and_closes() {
        let a = Allocator::new(CPU0, AllocatorKind::Pooled).unwrap();
        let s = StorageObj::new_object(&a, 100, 64, FLOAT32).unwrap();
        let p = StorageObj::of(&s).unwrap().data;
        assert_eq!(StorageObj::of(&s).unwrap().size(), PAGE_SIZE);
        drop(s);
        assert_eq!(a.pooled_bytes(), PAGE_SIZE);
        let s2 = StorageObj::new_object(&a, 4000, 64, FLOAT32).unwrap();
        assert_eq!(StorageObj::of(&s2).unwrap().data, p);
        let t = StorageObj::of(&s2).unwrap().alloc_ndarray(&s2, 16, &[10], FLOAT32).unwrap();
        assert_eq!(t.tensor().byte_offset, 16);
        assert!(StorageObj::of(&s2).unwrap().alloc_ndarray(&s2, 4096 - 39, &[10], FLOAT32).is_err());
        drop(s2);
        // The tensor keeps its storage.
        assert_eq!(a.pooled_bytes(), 0);
        a.close();
        drop(t);
        assert_eq!(a.pooled_bytes(), 0);
        assert_eq!(a.held_bytes(), 0);
    }

    #[test]
    fn naive_frees_at_once() {
        let a = Allocator::new(CPU0, AllocatorKind::Naive).unwrap();
        let s = StorageObj::new_object(&a, 100, 64, FLOAT32).unwrap();
        assert_eq!(a.held_bytes(), 100);
        drop(s);
        assert_eq!(a.held_bytes(), 0);
        assert!(AllocatorKind::from_code(3).is_err());
    }
}
