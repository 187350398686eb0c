use super::*;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A file of `len` patterned bytes mapped with `prot` / `flags`; unmapped and deleted on drop.
struct Mapping {
    addr: *mut u8,
    len: usize,
    path: std::path::PathBuf,
}

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 12)) as u8
}

impl Mapping {
    fn new(len: usize, prot: i32, flags: i32) -> Mapping {
        let data: Vec<u8> = (0..len).map(pattern).collect();
        Mapping::of(&data, prot, flags)
    }

    /// A file holding `data`, mapped.
    fn of(data: &[u8], prot: i32, flags: i32) -> Mapping {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "tvm-rt-mapped-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let len = data.len();
        std::fs::File::create(&path).unwrap().write_all(data).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        // A writable private mapping of a read-only descriptor is allowed (copy on write).
        // SAFETY: a fresh mapping of an open file; checked for failure below.
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        assert_ne!(addr, libc::MAP_FAILED);
        Mapping { addr: addr.cast(), len, path }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes, alive while `self` is.
        unsafe { std::slice::from_raw_parts(self.addr, self.len) }
    }

    fn touch(&self) -> u64 {
        self.bytes().iter().step_by(512).map(|&b| u64::from(b)).sum()
    }

    fn intact(&self) -> bool {
        self.bytes().iter().enumerate().all(|(i, &b)| b == pattern(i))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
        let _ = std::fs::remove_file(&self.path);
    }
}

const LEN: usize = 1 << 20;

#[test]
fn clean_pages_of_a_read_only_file_mapping_are_released_and_read_back() {
    let m = Mapping::new(LEN, libc::PROT_READ, libc::MAP_PRIVATE);
    let r = Region::new(m.bytes(), None);
    assert!(r.releases(), "{r:?}");
    m.touch();
    let page = page_size();
    assert_eq!(resident_file_page(m.addr as usize), Some(true));
    // Progressive: only whole pages below the mark go.
    let mid = m.addr as usize + LEN / 2 + 100;
    r.release_to(mid);
    assert_eq!(r.released_bytes(), LEN / 2);
    assert_eq!(resident_page(m.addr as usize), Some(false));
    assert_eq!(resident_page(m.addr as usize + LEN / 2), Some(true));
    r.release_rest();
    assert_eq!(r.released_bytes(), LEN);
    assert_eq!(resident_page(m.addr as usize + LEN - page), Some(false));
    // Reading again gives the same bytes (faulted in from the file).
    assert!(m.intact());
    // Pages mapped again after their release are released again at the end.
    m.touch();
    r.release_rest();
    assert_eq!(r.released_bytes(), 2 * LEN);
    assert_eq!(resident_page(m.addr as usize), Some(false));
}

#[test]
fn shared_read_only_mappings_are_released_too() {
    let m = Mapping::new(LEN, libc::PROT_READ, libc::MAP_SHARED);
    let r = Region::new(m.bytes(), None);
    assert!(r.releases());
    m.touch();
    r.release_rest();
    assert_eq!(r.released_bytes(), LEN);
    assert!(m.intact());
}

#[test]
fn pages_that_were_written_are_kept() {
    // Writable first: the write makes page 3 a private (anonymous) copy; then read-only.
    let m = Mapping::new(LEN, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE);
    let page = page_size();
    // A writable mapping is never released.
    assert!(!Region::new(m.bytes(), None).releases());
    // SAFETY: page 3 is inside the writable mapping.
    unsafe { *m.addr.add(3 * page + 5) = 0xAB };
    // SAFETY: our own mapping.
    assert_eq!(unsafe { libc::mprotect(m.addr.cast(), LEN, libc::PROT_READ) }, 0);
    let r = Region::new(m.bytes(), None);
    assert!(r.releases());
    m.touch();
    assert_eq!(resident_file_page(m.addr as usize + 3 * page), Some(false));
    r.release_rest();
    assert_eq!(r.released_bytes(), LEN - page);
    assert_eq!(m.bytes()[3 * page + 5], 0xAB, "the private copy was dropped");
    assert!(m.bytes().iter().enumerate().all(|(i, &b)| i == 3 * page + 5 || b == pattern(i)));
}

#[test]
fn heap_and_small_buffers_are_never_released() {
    let v: Vec<u8> = (0..LEN).map(pattern).collect();
    let r = Region::new(&v, None);
    assert!(!r.releases());
    r.release_rest();
    assert_eq!(r.released_bytes(), 0);
    assert!(v.iter().enumerate().all(|(i, &b)| b == pattern(i)));
    let m = Mapping::new(MIN_REGION_BYTES / 2, libc::PROT_READ, libc::MAP_PRIVATE);
    assert!(!Region::new(m.bytes(), None).releases());
    assert!(!Region::inert(m.bytes()).releases());
}

#[test]
fn in_place_needs_a_keeper_and_an_eligible_mapping() {
    let keep: KeepAlive = Arc::new(());
    let m = Mapping::new(LEN, libc::PROT_READ, libc::MAP_PRIVATE);
    let r = Region::new(m.bytes(), Some(keep.clone()));
    assert!(r.in_place(&m.bytes()[128..256]).is_some());
    let outside = [0u8; 4];
    assert!(r.in_place(&outside).is_none());
    assert!(Region::new(m.bytes(), None).in_place(&m.bytes()[..8]).is_none());
    let v = vec![0u8; LEN];
    assert!(Region::new(&v, Some(keep)).in_place(&v[..8]).is_none());
    // Kept pages are not released, before or at the end.
    m.touch();
    let page = page_size();
    r.keep(&m.bytes()[2 * page + 10..3 * page + 1]);
    assert_eq!(r.released_bytes(), 2 * page);
    r.release_rest();
    assert_eq!(r.released_bytes(), LEN - 2 * page);
    assert_eq!(resident_file_page(m.addr as usize + 2 * page), Some(true));
    assert_eq!(resident_file_page(m.addr as usize + 3 * page), Some(true));
    assert_eq!(resident_page(m.addr as usize + 4 * page), Some(false));
}

#[test]
fn maps_coverage() {
    let maps = "\
1000-3000 r--p 00000000 08:01 42 /lib/a.so
3000-4000 r--p 00002000 08:01 42 /lib/a.so
4000-5000 rw-p 00003000 08:01 42 /lib/a.so
6000-7000 r--p 00000000 00:00 0
8000-9000 r-xp 00000000 08:01 43 /lib/b.so
";
    assert!(covered_read_only(maps, 0x1800, 0x3800));
    assert!(covered_read_only(maps, 0x1000, 0x4000));
    assert!(!covered_read_only(maps, 0x3800, 0x4800), "writable");
    assert!(!covered_read_only(maps, 0x6000, 0x6100), "anonymous");
    assert!(!covered_read_only(maps, 0x5000, 0x5100), "unmapped");
    assert!(!covered_read_only(maps, 0x8800, 0x9800), "runs past the end");
    assert!(!covered_read_only(maps, 0x2000, 0x2000), "empty");
    assert!(covered_read_only(maps, 0x8000, 0x8004), "code is read-only too");
}
