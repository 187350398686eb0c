//! The workspace pool behind `TVMBackendAllocWorkspace` / `TVMBackendFreeWorkspace`
//!.
//!
//! [`WorkspacePool`] is TVM v0.8's algorithm, generic over the device allocator ([`RawAlloc`]),
//! with one sub-pool per device id. Blocks are page-rounded and never split or merged; a freed
//! block goes to a size-sorted free list and is handed out again by best fit, so generated code
//! that allocates and frees the same sizes on every call (strictly nested, LIFO) reuses the same
//! blocks and makes no device allocation at all in steady state. The exact reuse decisions,
//! including v0.8's quirks (a single free block is taken whatever its size; a too-small one is
//! replaced), are reproduced because they are observable through pointer identity.
//!
//! The CPU device keeps one pool per OS thread ([`cpu_alloc_workspace`],
//! [`cpu_free_workspace`]), backed by `posix_memalign(128)` / `free`; its blocks still on the
//! free list are released when the thread exits (blocks still in use then are leaked, as in v0.8).

use crate::error::{Error, Result};
use std::cell::RefCell;
use std::ffi::c_void;

/// Page size that workspace requests are rounded up to (`kWorkspacePageSize`).
pub const PAGE_SIZE: usize = 4096;

/// Alignment of every workspace (`kTempAllocaAlignment`): generated code relies on it.
pub(crate) const ALIGNMENT: usize = 128;

/// The message of a free of a pointer that this pool did not hand out.
pub(crate) const NOT_ALLOCATED: &str = "trying to free things that has not been allocated";

/// The device allocator a pool draws from (`AllocDataSpace(dev, n, 128, uint8)` /
/// `FreeDataSpace`).
pub trait RawAlloc {
    /// A new block of `nbytes` bytes, [`ALIGNMENT`]-aligned, on device `device_id`.
    fn alloc(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void>;
    /// Returns a block obtained from [`RawAlloc::alloc`] with the same device id.
    fn free(&self, device_id: i32, ptr: *mut c_void);
}

/// One block: its address and (page-rounded) size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    ptr: *mut c_void,
    size: usize,
}

/// The pool of one device id. Unlike v0.8 the lists hold no `(NULL, 0)` sentinel; the rules
/// below are v0.8's, restated for sentinel-free indices.
#[derive(Default, Debug)]
struct SubPool {
    /// Free blocks, sorted by size ascending (equal sizes: oldest insertion first).
    free: Vec<Block>,
    /// Blocks handed out, in allocation order.
    used: Vec<Block>,
}

impl SubPool {
    fn alloc(&mut self, a: &dyn RawAlloc, device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        let block = match self.free.len() {
            0 => Block { ptr: a.alloc(device_id, nbytes)?, size: nbytes },
            // One free block: taken whatever its size; replaced when too small.
            1 => match self.free.pop() {
                Some(b) if b.size >= nbytes => b,
                Some(b) => {
                    a.free(device_id, b.ptr);
                    Block { ptr: a.alloc(device_id, nbytes)?, size: nbytes }
                }
                None => Block { ptr: a.alloc(device_id, nbytes)?, size: nbytes },
            },
            _ => match self.free.iter().position(|b| b.size >= nbytes) {
                // Best fit: the first (smallest, oldest) block that is large enough.
                Some(i) => self.free.remove(i),
                // None is large enough: replace the largest.
                None => {
                    if let Some(b) = self.free.pop() {
                        a.free(device_id, b.ptr);
                    }
                    Block { ptr: a.alloc(device_id, nbytes)?, size: nbytes }
                }
            },
        };
        self.used.push(block);
        Ok(block.ptr)
    }

    fn free(&mut self, ptr: *mut c_void) -> Result<()> {
        let block = match self.used.last() {
            Some(b) if b.ptr == ptr => self.used.pop(),
            _ => {
                // Search newest to oldest, skipping the last entry (already compared).
                let len = self.used.len();
                let found = self.used[..len.saturating_sub(1)].iter().rposition(|b| b.ptr == ptr);
                found.map(|i| self.used.remove(i))
            }
        };
        let Some(block) = block else {
            return Err(Error::internal(NOT_ALLOCATED));
        };
        match self.free.last() {
            // Strictly larger than every free block (or the list is empty): append.
            None => self.free.push(block),
            Some(last) if block.size > last.size => self.free.push(block),
            // Exactly one free block: v0.8 puts the new one in front, even if equal in size.
            Some(_) if self.free.len() == 1 => self.free.insert(0, block),
            // After the last block whose size is <= the new one's (stable for equal sizes).
            Some(_) => {
                let at = self.free.partition_point(|b| b.size <= block.size);
                self.free.insert(at, block);
            }
        }
        Ok(())
    }

    fn release(&mut self, a: &dyn RawAlloc, device_id: i32) {
        for b in self.free.drain(..) {
            a.free(device_id, b.ptr);
        }
    }
}

/// Workspace pools of one device type, one sub-pool per device id (created on first use).
#[derive(Default, Debug)]
pub struct WorkspacePool {
    /// `(device_id, pool)`; a thread rarely touches more than one or two ids, so a short list
    /// searched linearly beats a map.
    pools: Vec<(i32, SubPool)>,
}

/// `nbytes` rounded up to whole pages (0 becomes one page); `None` on overflow.
fn page_round(nbytes: u64) -> Option<usize> {
    let n = usize::try_from(nbytes).ok()?;
    let n = n.checked_add(PAGE_SIZE - 1)? / PAGE_SIZE * PAGE_SIZE;
    Some(n.max(PAGE_SIZE))
}

impl WorkspacePool {
    /// An empty pool.
    pub fn new() -> Self {
        WorkspacePool { pools: Vec::new() }
    }

    fn sub(&mut self, device_id: i32) -> Option<&mut SubPool> {
        self.pools.iter_mut().find(|(id, _)| *id == device_id).map(|(_, p)| p)
    }

    /// A workspace of at least `nbytes` bytes on `device_id`.
    pub fn alloc(&mut self, a: &dyn RawAlloc, device_id: i32, nbytes: u64) -> Result<*mut c_void> {
        let Some(n) = page_round(nbytes) else {
            return Err(Error::tvm(format!("workspace allocation of {nbytes} bytes failed")));
        };
        if self.sub(device_id).is_none() {
            self.pools.push((device_id, SubPool::default()));
        }
        match self.sub(device_id) {
            Some(p) => p.alloc(a, device_id, n),
            None => Err(Error::internal("workspace sub-pool vanished")),
        }
    }

    /// Returns a workspace to the pool. NULL is a no-op; a pointer
    /// this pool did not hand out for `device_id` is an error and changes nothing.
    pub fn free(&mut self, _a: &dyn RawAlloc, device_id: i32, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        match self.sub(device_id) {
            Some(p) => p.free(ptr),
            None => Err(Error::internal(NOT_ALLOCATED)),
        }
    }

    /// Frees every block on the free lists (thread exit). Blocks still in use are forgotten.
    pub(crate) fn release_all(&mut self, a: &dyn RawAlloc) {
        for (id, p) in &mut self.pools {
            p.release(a, *id);
            p.used.clear();
        }
    }
}

/// The CPU allocator of workspaces: `posix_memalign(128)` / `free`. Private: its `free` may only
/// see pointers its `alloc` returned, which the pool guarantees.
#[derive(Clone, Copy, Debug, Default)]
struct CpuAlloc;

impl RawAlloc for CpuAlloc {
    fn alloc(&self, _device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: `p` is a valid out-pointer; ALIGNMENT is a power of two multiple of the
        // pointer size, as posix_memalign requires.
        let rc = unsafe { libc::posix_memalign(&mut p, ALIGNMENT, nbytes) };
        if rc != 0 || p.is_null() {
            return Err(Error::tvm(format!("workspace allocation of {nbytes} bytes failed")));
        }
        Ok(p)
    }

    fn free(&self, _device_id: i32, ptr: *mut c_void) {
        // SAFETY: the pool passes only pointers it got from `alloc` above, each exactly once.
        unsafe { libc::free(ptr) };
    }
}

/// A thread's pool for one device back end, with its allocator; releases its free blocks when
/// the thread exits (blocks still in use then are leaked, as in v0.8).
pub struct LocalPool<A: RawAlloc> {
    pool: WorkspacePool,
    alloc: A,
}

impl<A: RawAlloc> LocalPool<A> {
    /// An empty pool drawing from `alloc`.
    pub fn new(alloc: A) -> Self {
        LocalPool { pool: WorkspacePool::new(), alloc }
    }
}

impl<A: RawAlloc> Drop for LocalPool<A> {
    fn drop(&mut self) {
        self.pool.release_all(&self.alloc);
    }
}

/// Runs `f` on the calling thread's pool behind `key` (errors instead of panics when the pool is
/// re-entered or used while the thread exits).
pub fn with_local_pool<A: RawAlloc + 'static, T>(
    key: &'static std::thread::LocalKey<RefCell<LocalPool<A>>>,
    f: impl FnOnce(&mut WorkspacePool, &A) -> Result<T>,
) -> Result<T> {
    key.try_with(|p| match p.try_borrow_mut() {
        Ok(mut p) => {
            let p = &mut *p;
            f(&mut p.pool, &p.alloc)
        }
        Err(_) => Err(Error::internal("workspace pool re-entered")),
    })
    .unwrap_or_else(|_| Err(Error::tvm("workspace pool used during thread exit")))
}

thread_local! {
    static CPU_POOL: RefCell<LocalPool<CpuAlloc>> = RefCell::new(LocalPool::new(CpuAlloc));
}

fn with_cpu_pool<T>(f: impl FnOnce(&mut WorkspacePool) -> Result<T>) -> Result<T> {
    with_local_pool(&CPU_POOL, |p, _| f(p))
}

/// `TVMBackendAllocWorkspace` for the CPU: a 128-byte aligned block from this thread's pool.
pub fn cpu_alloc_workspace(device_id: i32, nbytes: u64) -> Result<*mut c_void> {
    with_cpu_pool(|p| p.alloc(&CpuAlloc, device_id, nbytes))
}

/// `TVMBackendFreeWorkspace` for the CPU: returns `ptr` to this thread's pool. NULL is a no-op;
/// a pointer this thread did not allocate for `device_id` is an error.
pub fn cpu_free_workspace(device_id: i32, ptr: *mut c_void) -> Result<()> {
    if ptr.is_null() {
        return Ok(());
    }
    with_cpu_pool(|p| p.free(&CpuAlloc, device_id, ptr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A device allocator that hands out fake, never dereferenced addresses and logs calls.
    #[derive(Default)]
    struct Fake {
        next: Cell<usize>,
        log: RefCell<Vec<String>>,
        fail: Cell<bool>,
    }

    impl RawAlloc for Fake {
        fn alloc(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void> {
            if self.fail.get() {
                return Err(Error::tvm("out of fake memory"));
            }
            let n = self.next.get() + 1;
            self.next.set(n);
            self.log.borrow_mut().push(format!("alloc {device_id}:{nbytes}"));
            Ok((n * 0x10000) as *mut c_void)
        }
        fn free(&self, device_id: i32, ptr: *mut c_void) {
            self.log.borrow_mut().push(format!("free {device_id}:{:#x}", ptr as usize));
        }
    }

    impl Fake {
        fn take_log(&self) -> Vec<String> {
            std::mem::take(&mut *self.log.borrow_mut())
        }
    }

    fn free_sizes(p: &mut WorkspacePool, id: i32) -> Vec<usize> {
        p.sub(id).map(|s| s.free.iter().map(|b| b.size).collect()).unwrap_or_default()
    }

    /// A worked example of TVM's workspace pool, step by step.
    #[test]
    fn worked_example() -> Result<()> {
        let dev = Fake::default();
        let mut p = WorkspacePool::new();
        // 1. a = Alloc(100): new block A (4096).
        let a = p.alloc(&dev, 0, 100)?;
        assert_eq!(dev.take_log(), ["alloc 0:4096"]);
        assert_eq!(free_sizes(&mut p, 0), Vec::<usize>::new());
        // 2. b = Alloc(5000): new block B (8192).
        let b = p.alloc(&dev, 0, 5000)?;
        assert_eq!(dev.take_log(), ["alloc 0:8192"]);
        // 3. Free(b).
        p.free(&dev, 0, b)?;
        assert_eq!(free_sizes(&mut p, 0), [8192]);
        // 4. Free(a): the single free block gets the new one in front.
        p.free(&dev, 0, a)?;
        assert_eq!(free_sizes(&mut p, 0), [4096, 8192]);
        // 5. c = Alloc(6000): B, the smallest block >= 8192.
        let c = p.alloc(&dev, 0, 6000)?;
        assert_eq!(c, b);
        assert_eq!(free_sizes(&mut p, 0), [4096]);
        assert!(dev.take_log().is_empty());
        // 6. d = Alloc(10000): the single free block A is too small: free A, new block C.
        let d = p.alloc(&dev, 0, 10000)?;
        assert_eq!(dev.take_log(), [format!("free 0:{:#x}", a as usize), "alloc 0:12288".to_owned()]);
        assert_eq!(free_sizes(&mut p, 0), Vec::<usize>::new());
        // 7. Free(c); Free(d).
        p.free(&dev, 0, c)?;
        p.free(&dev, 0, d)?;
        assert_eq!(free_sizes(&mut p, 0), [8192, 12288]);
        // 8. e = Alloc(1): B again (smallest >= 4096).
        let e = p.alloc(&dev, 0, 1)?;
        assert_eq!(e, b);
        assert_eq!(free_sizes(&mut p, 0), [12288]);
        assert!(dev.take_log().is_empty());
        // Release frees the free list only (B is still in use and leaks, as in v0.8).
        p.release_all(&dev);
        assert_eq!(dev.take_log(), [format!("free 0:{:#x}", d as usize)]);
        Ok(())
    }

    #[test]
    fn rounding_and_zero_bytes() -> Result<()> {
        let dev = Fake::default();
        let mut p = WorkspacePool::new();
        let x = p.alloc(&dev, 0, 0)?;
        let y = p.alloc(&dev, 0, 4096)?;
        let z = p.alloc(&dev, 0, 4097)?;
        assert_eq!(dev.take_log(), ["alloc 0:4096", "alloc 0:4096", "alloc 0:8192"]);
        for q in [z, y, x] {
            p.free(&dev, 0, q)?;
        }
        assert!(p.alloc(&dev, 0, u64::MAX).is_err());
        Ok(())
    }

    #[test]
    fn best_fit_prefers_the_oldest_of_equal_sizes_and_replaces_the_largest() -> Result<()> {
        let dev = Fake::default();
        let mut p = WorkspacePool::new();
        let blocks: Vec<*mut c_void> =
            [8192u64, 4096, 8192, 16384].iter().map(|&n| p.alloc(&dev, 0, n)).collect::<Result<_>>()?;
        dev.take_log();
        // Free out of order: 8192 (first), 4096, 8192 (second), 16384.
        for &q in &blocks {
            p.free(&dev, 0, q)?;
        }
        // First two frees: [8192] then [4096, 8192] (front insert); then a stable insert after
        // the equal size; then append.
        assert_eq!(free_sizes(&mut p, 0), [4096, 8192, 8192, 16384]);
        let sub = p.sub(0).map(|s| s.free.clone()).unwrap_or_default();
        assert_eq!(sub[1].ptr, blocks[0]);
        assert_eq!(sub[2].ptr, blocks[2]);
        // 5000 bytes: the older 8192 block.
        assert_eq!(p.alloc(&dev, 0, 5000)?, blocks[0]);
        // Nothing fits 20000: the largest (16384) is replaced.
        p.alloc(&dev, 0, 20000)?;
        assert_eq!(dev.take_log(), [format!("free 0:{:#x}", blocks[3] as usize), "alloc 0:20480".to_owned()]);
        assert_eq!(free_sizes(&mut p, 0), [4096, 8192]);
        Ok(())
    }

    #[test]
    fn one_free_block_in_front_even_when_equal() -> Result<()> {
        let dev = Fake::default();
        let mut p = WorkspacePool::new();
        let a = p.alloc(&dev, 0, 4096)?;
        let b = p.alloc(&dev, 0, 4096)?;
        p.free(&dev, 0, a)?; // out of order: found by the backward search
        p.free(&dev, 0, b)?;
        let order: Vec<*mut c_void> = p.sub(0).map(|s| s.free.iter().map(|b| b.ptr).collect()).unwrap_or_default();
        assert_eq!(order, [b, a]);
        Ok(())
    }

    #[test]
    fn device_ids_have_separate_pools() -> Result<()> {
        let dev = Fake::default();
        let mut p = WorkspacePool::new();
        let a = p.alloc(&dev, 0, 100)?;
        let b = p.alloc(&dev, 3, 100)?;
        assert!(p.free(&dev, 3, a).is_err());
        assert!(p.free(&dev, 7, a).is_err());
        p.free(&dev, 0, a)?;
        p.free(&dev, 3, b)?;
        assert_eq!(p.alloc(&dev, 3, 10)?, b);
        assert_eq!(p.alloc(&dev, 0, 10)?, a);
        Ok(())
    }

    #[test]
    fn bad_frees_are_errors_and_change_nothing() -> Result<()> {
        let dev = Fake::default();
        let mut p = WorkspacePool::new();
        let e = p.free(&dev, 0, 0x1234 as *mut c_void).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("InternalError: trying to free things that has not been allocated"));
        let a = p.alloc(&dev, 0, 1)?;
        assert!(p.free(&dev, 0, std::ptr::null_mut()).is_ok());
        assert!(p.free(&dev, 0, 0x1234 as *mut c_void).is_err());
        p.free(&dev, 0, a)?;
        assert!(p.free(&dev, 0, a).is_err(), "double free");
        assert_eq!(p.alloc(&dev, 0, 1)?, a);
        Ok(())
    }

    #[test]
    fn a_failed_device_alloc_is_an_error() -> Result<()> {
        let dev = Fake::default();
        let mut p = WorkspacePool::new();
        dev.fail.set(true);
        assert!(p.alloc(&dev, 0, 1).is_err());
        dev.fail.set(false);
        let a = p.alloc(&dev, 0, 1)?;
        p.free(&dev, 0, a)?;
        Ok(())
    }

    #[test]
    fn cpu_pool_is_aligned_reused_and_per_thread() -> Result<()> {
        let a = cpu_alloc_workspace(0, 100_000)?;
        let b = cpu_alloc_workspace(0, 3000)?;
        assert_eq!(a as usize % ALIGNMENT, 0);
        assert_eq!(b as usize % ALIGNMENT, 0);
        // SAFETY: `a` is a live block of at least 100000 bytes owned by this test.
        unsafe { std::ptr::write_bytes(a.cast::<u8>(), 0xab, 100_000) };
        // Another thread cannot free them.
        let (pa, pb) = (a as usize, b as usize);
        let other = std::thread::spawn(move || {
            cpu_free_workspace(0, pa as *mut c_void).is_err() && cpu_free_workspace(0, pb as *mut c_void).is_err()
        });
        assert_eq!(other.join().ok(), Some(true));
        cpu_free_workspace(0, b)?;
        cpu_free_workspace(0, a)?;
        // Steady state, LIFO: the same blocks come back every time.
        for _ in 0..1000 {
            let x = cpu_alloc_workspace(0, 90_000)?;
            let y = cpu_alloc_workspace(0, 2000)?;
            assert_eq!((x, y), (a, b));
            cpu_free_workspace(0, y)?;
            cpu_free_workspace(0, x)?;
        }
        assert!(cpu_free_workspace(0, std::ptr::null_mut()).is_ok());
        assert!(cpu_free_workspace(1, a).is_err());
        // A thread's blocks are released at its exit (exercised here; leak checkers see it).
        let t = std::thread::spawn(|| -> Result<()> {
            let p = cpu_alloc_workspace(2, 1 << 20)?;
            cpu_free_workspace(2, p)
        });
        assert!(matches!(t.join(), Ok(Ok(()))));
        Ok(())
    }
}
