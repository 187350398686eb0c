//! Memory the simulated device sees: device allocations (addresses inside a range of the host's
//! address space reserved with no access, so the host can never touch device memory directly;
//! the bytes live in host buffers owned here) and pinned host memory (real host memory that
//! kernels may also address, as with unified addressing).

use std::collections::BTreeMap;

/// Device addresses are 256-byte aligned, with at least this gap between allocations, so that
/// an access running past the end of one allocation faults instead of reaching the next.
const ALIGN: u64 = 256;
const GAP: u64 = 256;

/// Uninitialised device memory reads as all ones (NaN for floats).
pub const POISON: u8 = 0xFF;

/// One allocation.
pub struct Alloc {
    /// Its device address.
    pub start: u64,
    /// Its bytes.
    pub data: Vec<u8>,
    /// Owned by a module (a `.global` variable): not freed by `cuMemFree`.
    pub module: bool,
}

/// The allocations of one device, inside `[base, base + span)`.
pub struct DeviceMemory {
    base: u64,
    span: u64,
    /// Bytes the device has (`cuMemGetInfo`'s total).
    pub total: u64,
    /// Bytes allocated.
    pub used: u64,
    allocs: Vec<Alloc>,
    cursor: u64,
    last: usize,
}

impl DeviceMemory {
    /// Memory of `total` bytes with addresses in `[base, base + span)`.
    pub fn new(base: u64, span: u64, total: u64) -> DeviceMemory {
        DeviceMemory { base, span, total, used: 0, allocs: Vec::new(), cursor: base + GAP, last: 0 }
    }

    /// Whether `addr` is inside this device's address range.
    pub fn owns(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.span
    }

    /// A new allocation of `n` bytes (filled with [`POISON`]), or `None` when out of memory.
    pub fn alloc(&mut self, n: u64, module: bool) -> Option<u64> {
        if n == 0 || self.used.checked_add(n)? > self.total {
            return None;
        }
        let end = self.base + self.span;
        let fits = |start: u64, allocs: &[Alloc], idx: usize| -> bool {
            let stop = start + n + GAP;
            stop <= end && allocs.get(idx).map_or(true, |a| stop <= a.start)
        };
        // Next fit from the cursor, then first fit from the start.
        let mut found = None;
        for from in [self.cursor, self.base + GAP] {
            let mut start = from.next_multiple_of(ALIGN);
            let mut idx = self.allocs.partition_point(|a| a.start < start);
            if idx > 0 {
                let prev = &self.allocs[idx - 1];
                start = start.max((prev.start + prev.data.len() as u64 + GAP).next_multiple_of(ALIGN));
            }
            loop {
                if start + n + GAP > end {
                    break;
                }
                if fits(start, &self.allocs, idx) {
                    found = Some((start, idx));
                    break;
                }
                let a = &self.allocs[idx];
                start = (a.start + a.data.len() as u64 + GAP).next_multiple_of(ALIGN);
                idx += 1;
            }
            if found.is_some() {
                break;
            }
        }
        let (start, idx) = found?;
        // Out of host memory is out of device memory, not an abort.
        let mut data = Vec::new();
        data.try_reserve_exact(usize::try_from(n).ok()?).ok()?;
        data.resize(n as usize, POISON);
        self.allocs.insert(idx, Alloc { start, data, module });
        self.used += n;
        self.cursor = start + n;
        Some(start)
    }

    /// Frees the allocation starting at `addr` (not a module's); false if there is none.
    pub fn free(&mut self, addr: u64, module: bool) -> bool {
        match self.allocs.binary_search_by_key(&addr, |a| a.start) {
            Ok(i) if self.allocs[i].module == module => {
                self.used -= self.allocs[i].data.len() as u64;
                self.allocs.remove(i);
                self.last = 0;
                true
            }
            _ => false,
        }
    }

    /// Frees everything (a context reset).
    pub fn clear(&mut self) {
        self.allocs.clear();
        self.used = 0;
        self.last = 0;
        self.cursor = self.base + GAP;
    }

    fn find(&mut self, addr: u64) -> Option<usize> {
        let hit = |a: &Alloc| addr >= a.start && addr - a.start < a.data.len() as u64;
        if self.allocs.get(self.last).is_some_and(hit) {
            return Some(self.last);
        }
        let i = self.allocs.partition_point(|a| a.start <= addr).checked_sub(1)?;
        if hit(&self.allocs[i]) {
            self.last = i;
            Some(i)
        } else {
            None
        }
    }

    /// The `len` bytes at `addr`, if they lie inside one allocation.
    pub fn slice(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let i = self.find(addr)?;
        let a = &mut self.allocs[i];
        let off = (addr - a.start) as usize;
        a.data.get_mut(off..off.checked_add(len)?)
    }

    /// Start and size of the allocation holding `addr`.
    pub fn range(&mut self, addr: u64) -> Option<(u64, u64)> {
        let i = self.find(addr)?;
        Some((self.allocs[i].start, self.allocs[i].data.len() as u64))
    }
}

/// One pinned host allocation.
struct Pinned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: the pointer is owned by this registry (allocated and freed here only).
unsafe impl Send for Pinned {}

/// Pinned host allocations (`cuMemAllocHost`), by address.
#[derive(Default)]
pub struct PinnedMemory {
    allocs: BTreeMap<usize, Pinned>,
}

impl PinnedMemory {
    /// A new zeroed, page-aligned host allocation of `n` bytes.
    pub fn alloc(&mut self, n: usize) -> Option<*mut u8> {
        let layout = std::alloc::Layout::from_size_align(n.max(1), 4096).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return None;
        }
        self.allocs.insert(ptr as usize, Pinned { ptr, layout });
        Some(ptr)
    }

    /// Frees a pinned allocation by its start; false if `p` is not one.
    pub fn free(&mut self, p: usize) -> bool {
        match self.allocs.remove(&p) {
            Some(a) => {
                // SAFETY: allocated by `alloc` with this layout, removed from the registry once.
                unsafe { std::alloc::dealloc(a.ptr, a.layout) };
                true
            }
            None => false,
        }
    }

    /// Whether `[p, p + len)` lies inside one pinned allocation.
    pub fn contains(&self, p: usize, len: usize) -> bool {
        self.allocs
            .range(..=p)
            .next_back()
            .is_some_and(|(&s, a)| (p - s).checked_add(len).is_some_and(|e| e <= a.layout.size()))
    }

    /// Start and size of the pinned allocation holding `p`.
    pub fn range(&self, p: usize) -> Option<(usize, usize)> {
        let (&s, a) = self.allocs.range(..=p).next_back()?;
        (p - s < a.layout.size()).then_some((s, a.layout.size()))
    }

    /// The `len` bytes at `p`, if they lie inside one pinned allocation.
    pub fn slice(&mut self, p: u64, len: usize) -> Option<&mut [u8]> {
        let p = usize::try_from(p).ok()?;
        if !self.contains(p, len) {
            return None;
        }
        // SAFETY: the range lies inside a live allocation owned by this registry, and the
        // returned borrow keeps the registry (and so the allocation) borrowed mutably.
        Some(unsafe { std::slice::from_raw_parts_mut(p as *mut u8, len) })
    }
}

impl Drop for PinnedMemory {
    fn drop(&mut self) {
        let keys: Vec<usize> = self.allocs.keys().copied().collect();
        for k in keys {
            self.free(k);
        }
    }
}

/// Memory a kernel addresses globally: its device's allocations and pinned host memory.
pub struct GlobalView<'a> {
    /// The device's memory.
    pub dev: &'a mut DeviceMemory,
    /// Pinned host memory.
    pub pinned: &'a mut PinnedMemory,
}

impl GlobalView<'_> {
    /// The `len` bytes at global address `addr`.
    pub fn slice(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        if self.dev.owns(addr) {
            return self.dev.slice(addr, len);
        }
        self.pinned.slice(addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_apart_and_checked() {
        let mut m = DeviceMemory::new(0x1000_0000, 1 << 20, 1 << 16);
        let a = m.alloc(100, false).unwrap();
        let b = m.alloc(100, false).unwrap();
        assert_eq!(a % 256, 0);
        assert!(b >= a + 100 + GAP);
        assert_eq!(m.slice(a, 100).unwrap()[0], POISON);
        assert!(m.slice(a, 101).is_none(), "one byte past the end");
        assert!(m.slice(a + 100, 1).is_none());
        assert!(m.slice(a - 1, 1).is_none());
        assert_eq!(m.range(a + 50), Some((a, 100)));
        assert!(m.alloc(1 << 16, false).is_none(), "over the total");
        assert!(m.free(a, false));
        assert!(!m.free(a, false));
        assert!(!m.free(b + 1, false));
        assert_eq!(m.used, 100);
        // Fills, then wraps around to reuse freed space.
        let mut n = 0;
        while m.alloc(1000, false).is_some() {
            n += 1;
        }
        assert!(n > 10);
        m.clear();
        assert_eq!(m.used, 0);
        assert!(m.alloc(100, true).is_some());
    }

    #[test]
    fn pinned_memory() {
        let mut p = PinnedMemory::default();
        let a = p.alloc(64).unwrap();
        assert_eq!(a as usize % 4096, 0);
        assert!(p.contains(a as usize + 10, 54));
        assert!(!p.contains(a as usize + 10, 4096));
        p.slice(a as u64, 4).unwrap().copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(p.slice(a as u64 + 2, 1).unwrap()[0], 3);
        assert!(p.free(a as usize));
        assert!(!p.free(a as usize));
    }
}
