//! The allocators both virtual machines use (TVM's `src/runtime/memory/`: memory_manager.cc,
//! naive_allocator.h, pooled_allocator.h): blocks of device memory over the device API, naive or
//! pooled by size. The Relay VM's `vm.Storage` (`vm::memory`) and the Relax VM's storage
//! objects (`relax::objects`) hold their blocks from here.
//!
//! Unlike TVM v0.8, whose allocators are process-wide (one per device, shared by every VM and
//! never freed), each virtual machine owns its allocators: VMs on different threads do not
//! contend for one pool, and a VM's pool is released when the VM goes. A storage block keeps its
//! allocator alive, so tensors that outlive their VM (results) stay valid; when such a block is
//! freed after the VM has gone, it goes straight back to the device.

use crate::abi::{DLDataType, DLDevice};
use crate::device::{self, DeviceApi};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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
    pub(crate) fn release_all(&self) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::FLOAT32;

    const CPU0: DLDevice = DLDevice { device_type: 1, device_id: 0 };

    #[test]
    fn pooled_rounds_reuses_and_closes() {
        let a = Allocator::new(CPU0, AllocatorKind::Pooled).unwrap();
        let (p, size) = a.alloc(100, 64, FLOAT32).unwrap();
        assert_eq!(size, PAGE_SIZE);
        a.free(p, size, 64);
        assert_eq!(a.pooled_bytes(), PAGE_SIZE);
        let (p2, size2) = a.alloc(4000, 64, FLOAT32).unwrap();
        assert_eq!((p2, size2), (p, PAGE_SIZE));
        // Another alignment is another pool.
        let (p3, _) = a.alloc(4000, 128, FLOAT32).unwrap();
        assert_ne!(p3, p);
        assert_eq!(a.held_bytes(), 2 * PAGE_SIZE);
        a.free(p3, PAGE_SIZE, 128);
        release_all_pools();
        assert_eq!(a.pooled_bytes(), 0);
        a.close();
        // After close, a free goes to the device.
        a.free(p2, size2, 64);
        assert_eq!(a.pooled_bytes(), 0);
        assert_eq!(a.held_bytes(), 0);
    }

    #[test]
    fn naive_frees_at_once_and_bad_kinds_are_refused() {
        let a = Allocator::new(CPU0, AllocatorKind::Naive).unwrap();
        let (p, size) = a.alloc(100, 64, FLOAT32).unwrap();
        assert_eq!((size, a.held_bytes()), (100, 100));
        a.free(p, size, 64);
        assert_eq!(a.held_bytes(), 0);
        assert!(AllocatorKind::from_code(3).is_err());
        assert!(Allocator::new(DLDevice { device_type: 7, device_id: 0 }, AllocatorKind::Naive).is_err());
        let pooled = Allocator::new(CPU0, AllocatorKind::Pooled).unwrap();
        assert!(pooled.alloc(usize::MAX - 10, 64, FLOAT32).is_err());
    }
}
