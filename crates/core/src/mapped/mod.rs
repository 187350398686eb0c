//! Bytes read out of a file mapping: giving their pages back to the kernel once they have been
//! copied, and deciding when they may be used in place instead (zero-copy).
//!
//! A model library carries its weights in `__tvm_dev_mblob`, inside a read-only segment that the
//! dynamic loader maps privately from the file. Parsing the weights touches those pages, so they
//! count in the process's resident set beside the aligned copies the kernels use: the weights
//! would be held twice. A [`Region`] describes a buffer being parsed; as parsing moves on, the
//! whole pages behind it that were copied out are dropped (`madvise(MADV_DONTNEED)`), a few at a
//! time, so the peak stays near one copy.
//!
//! # Why dropping is safe
//!
//! After `MADV_DONTNEED`, the next access to a page of a private file mapping reads it again from
//! the file. The bytes are then the same exactly when the page was still the file's own page
//! (shared with the page cache), not a private copy made by a write (copy on write), which would
//! be lost. So a page is dropped only when
//! * every mapping of the buffer is file-backed and not writable (checked once, in
//!   `/proc/self/maps`), so no write can turn a page into a private copy meanwhile, and
//! * `/proc/self/pagemap` says the page is present and a file page (bit 61), not an anonymous copy
//!   made earlier while the mapping was writable (relocation processing, a debugger).
//!
//! That is what the kernel itself does to clean file pages under memory pressure, so the program
//! cannot observe it: a later reader (the same library loaded again, `SaveToBinary` of a weight
//! used in place, a blob loader that kept a pointer) faults the page back in with the same bytes.
//! Where any of this cannot be established (no `/proc`, a heap or anonymous buffer, a writable
//! mapping), nothing is dropped. A `memfd` library is a file too: its pages stay in the memfd and
//! only leave this process's page tables.
//!
//! # Zero-copy
//!
//! Bytes are used in place only where the region also holds what keeps the mapping alive (the
//! loaded library) and the mapping is not writable, so they can neither change nor go away while
//! a user holds them; see [`Region::in_place`]. Such arrays are read-only: only owners that never
//! write into them (copy before writing) may use them.

use std::any::Any;
use std::cell::Cell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Anything whose life keeps a mapping in place (a loaded library).
pub type KeepAlive = Arc<dyn Any + Send + Sync>;

/// Buffers smaller than this are not worth the `/proc` reads and the page faults of the next
/// load: nothing is released or used in place. Proving and releasing the pages of a 430 KB
/// blob (TVM's vm_mlp.so) cost ~190 us a load, twice what the whole load takes without it, to
/// save at most 430 KB; from 1 MiB on the weights' copy dominates the load and the saving is
/// worth it.
pub const MIN_REGION_BYTES: usize = 1 << 20;

/// Bits of a `/proc/self/pagemap` entry.
const PM_PRESENT: u64 = 1 << 63;
const PM_FILE: u64 = 1 << 61;

/// Pagemap entries read per system call.
const PAGEMAP_BATCH: usize = 512;

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
}

/// A buffer that is being parsed and whose pages may be given back (see the module doc). Used by
/// one thread at a time.
pub struct Region {
    start: usize,
    end: usize,
    page: usize,
    /// `/proc/self/pagemap`, when pages may be released.
    pagemap: Option<File>,
    /// Set after a failed pagemap read or `madvise`: release nothing more.
    broken: Cell<bool>,
    /// Pages below this address have been dealt with (released, or kept on purpose).
    done: Cell<usize>,
    /// Page ranges kept on purpose (bytes used in place), in order.
    kept: std::cell::RefCell<Vec<(usize, usize)>>,
    /// Bytes given back so far.
    released: Cell<usize>,
    /// What keeps the mapping alive, when bytes may be used in place.
    keep: Option<KeepAlive>,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("start", &format_args!("{:#x}", self.start))
            .field("len", &(self.end - self.start))
            .field("releasable", &self.pagemap.is_some())
            .field("in_place", &self.keep.is_some())
            .finish()
    }
}

impl Region {
    /// A region over `bytes`. With `keep` (what keeps the mapping alive), aligned parts may be
    /// used in place. Releasing and zero-copy are enabled only when `bytes` is at least
    /// [`MIN_REGION_BYTES`] long and lies in file-backed mappings that are not writable.
    pub fn new(bytes: &[u8], keep: Option<KeepAlive>) -> Region {
        let start = bytes.as_ptr() as usize;
        let end = start + bytes.len();
        let page = page_size();
        let eligible = bytes.len() >= MIN_REGION_BYTES && read_only_file_mapping(start, end);
        Region {
            start,
            end,
            page,
            pagemap: if eligible { File::open("/proc/self/pagemap").ok() } else { None },
            broken: Cell::new(false),
            done: Cell::new(start.next_multiple_of(page)),
            kept: Default::default(),
            released: Cell::new(0),
            keep: if eligible { keep } else { None },
        }
    }

    /// A region that never releases nor allows zero-copy.
    #[cfg(test)]
    pub(crate) fn inert(bytes: &[u8]) -> Region {
        let start = bytes.as_ptr() as usize;
        Region {
            start,
            end: start + bytes.len(),
            page: page_size(),
            pagemap: None,
            broken: Cell::new(false),
            done: Cell::new(usize::MAX),
            kept: Default::default(),
            released: Cell::new(0),
            keep: None,
        }
    }

    /// Whether pages of this region may be given back.
    pub fn releases(&self) -> bool {
        self.pagemap.is_some() && !self.broken.get()
    }

    /// Bytes given back so far.
    pub fn released_bytes(&self) -> usize {
        self.released.get()
    }

    /// Gives back the whole pages of the region below `addr` that have not been dealt with.
    pub fn release_to(&self, addr: usize) {
        let to = (addr.min(self.end) / self.page) * self.page;
        let from = self.done.get();
        if to <= from {
            return;
        }
        self.done.set(to);
        if self.releases() {
            self.release_pages(from, to);
        }
    }

    /// Keeps the pages that hold `bytes` (used in place), and gives back those before them.
    pub fn keep(&self, bytes: &[u8]) {
        let a = bytes.as_ptr() as usize;
        self.release_to(a);
        let from = (a / self.page) * self.page;
        let to = (a + bytes.len()).min(self.end).next_multiple_of(self.page);
        let mut kept = self.kept.borrow_mut();
        let at = kept.partition_point(|&r| r < (from, to));
        kept.insert(at, (from, to));
        drop(kept);
        if to > self.done.get() {
            self.done.set(to);
        }
    }

    /// Gives back every whole page of the region except those kept: also pages that were
    /// released before and mapped again since (the kernel maps the neighbours of a faulting
    /// page that are in the page cache, "fault-around").
    pub fn release_rest(&self) {
        self.release_to(self.end);
        if !self.releases() {
            return;
        }
        let kept = self.kept.borrow().clone();
        let mut at = self.start.next_multiple_of(self.page);
        let end = (self.end / self.page) * self.page;
        for (from, to) in kept.into_iter().chain([(end, end)]) {
            if from > at {
                self.release_pages(at, from.min(end));
            }
            at = at.max(to);
            if at >= end {
                break;
            }
        }
    }

    /// What keeps `bytes` alive, when they lie in this region and may be used in place: the
    /// mapping is not writable and the region holds the library that maps it.
    pub fn in_place(&self, bytes: &[u8]) -> Option<&KeepAlive> {
        let a = bytes.as_ptr() as usize;
        let inside = a >= self.start && a.checked_add(bytes.len()).is_some_and(|e| e <= self.end);
        self.keep.as_ref().filter(|_| inside)
    }

    /// Releases the clean file pages among `[from, to)` (page-aligned), in batches.
    fn release_pages(&self, from: usize, to: usize) {
        let Some(pm) = &self.pagemap else { return };
        let mut entries = [0u64; PAGEMAP_BATCH];
        let mut raw = [0u8; PAGEMAP_BATCH * 8];
        let mut at = from;
        while at < to {
            let n = ((to - at) / self.page).min(PAGEMAP_BATCH);
            let buf = &mut raw[..n * 8];
            let offset = (at / self.page) as u64 * 8;
            if pm.read_exact_at(buf, offset).is_err() {
                self.broken.set(true);
                return;
            }
            for (e, b) in entries.iter_mut().zip(buf.chunks_exact(8)) {
                *e = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            }
            // Runs of present file pages.
            let mut k = 0;
            while k < n {
                if entries[k] & (PM_PRESENT | PM_FILE) != PM_PRESENT | PM_FILE {
                    k += 1;
                    continue;
                }
                let first = k;
                while k < n && entries[k] & (PM_PRESENT | PM_FILE) == PM_PRESENT | PM_FILE {
                    k += 1;
                }
                let addr = at + first * self.page;
                let len = (k - first) * self.page;
                // SAFETY: `[addr, addr + len)` lies inside the region's buffer, in a file-backed
                // mapping that is not writable, and each page is the file's own (present, not
                // anonymous): dropping it only makes the next access read the same bytes from
                // the file again (see the module doc). No Rust object is invalidated.
                let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
                if rc != 0 {
                    self.broken.set(true);
                    return;
                }
                self.released.set(self.released.get() + len);
            }
            at += n * self.page;
        }
    }
}

/// Whether `[start, end)` is covered, without gaps, by readable, non-writable, file-backed
/// mappings (`/proc/self/maps`). False when the file cannot be read.
pub(crate) fn read_only_file_mapping(start: usize, end: usize) -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return false };
    covered_read_only(&maps, start, end)
}

/// [`read_only_file_mapping`] over the text of a maps file.
fn covered_read_only(maps: &str, start: usize, end: usize) -> bool {
    if start >= end {
        return false;
    }
    let mut cursor = start;
    for line in maps.lines() {
        // start-end perms offset dev inode [path]
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms), Some(_off), Some(_dev), Some(inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let Some((s, e)) = range.split_once('-') else { continue };
        let (Ok(s), Ok(e)) = (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16)) else { continue };
        if e <= cursor {
            continue;
        }
        if s > cursor {
            return false; // a gap (or the range starts outside any mapping)
        }
        let p = perms.as_bytes();
        let read_only = p.first() == Some(&b'r') && p.get(1) == Some(&b'-');
        if !read_only || inode == "0" {
            return false;
        }
        cursor = e;
        if cursor >= end {
            return true;
        }
    }
    false
}

/// Whether the page holding `addr` is resident in this process as a file page (`None`: the
/// pagemap cannot be read). For tests and benchmarks.
pub fn resident_file_page(addr: usize) -> Option<bool> {
    let pm = File::open("/proc/self/pagemap").ok()?;
    let mut b = [0u8; 8];
    pm.read_exact_at(&mut b, (addr / page_size()) as u64 * 8).ok()?;
    let e = u64::from_le_bytes(b);
    Some(e & (PM_PRESENT | PM_FILE) == PM_PRESENT | PM_FILE)
}

/// Whether the page holding `addr` is resident in this process at all (`None`: unknown).
pub fn resident_page(addr: usize) -> Option<bool> {
    let pm = File::open("/proc/self/pagemap").ok()?;
    let mut b = [0u8; 8];
    pm.read_exact_at(&mut b, (addr / page_size()) as u64 * 8).ok()?;
    Some(u64::from_le_bytes(b) & PM_PRESENT != 0)
}

#[cfg(test)]
mod tests;
