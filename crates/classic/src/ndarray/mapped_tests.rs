//! NDArray records read from a file mapping (`mapped::Region`): used in place only when the
//! caller asks and a keeper holds the mapping, and then read-only; copied otherwise, with the
//! pages given back.

use crate::mapped::{page_size, KeepAlive, Region, MIN_REGION_BYTES};
use std::io::Write;
use std::sync::Arc;

/// A file holding `data`, mapped read-only and private; unmapped and deleted on drop.
struct Mapping {
    addr: *mut u8,
    len: usize,
    path: std::path::PathBuf,
}

impl Mapping {
    fn of(data: &[u8]) -> Mapping {
        let path = std::env::temp_dir().join(format!("tvm-rt-records-{}", std::process::id()));
        let len = data.len();
        std::fs::File::create(&path).unwrap().write_all(data).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        // SAFETY: a fresh mapping of an open file; checked for failure below.
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, fd, 0) };
        assert_ne!(addr, libc::MAP_FAILED);
        Mapping { addr: addr.cast(), len, path }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes, alive while `self` is.
        unsafe { std::slice::from_raw_parts(self.addr, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
        let _ = std::fs::remove_file(&self.path);
    }
}

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 12)) as u8
}

/// A file holding one float32 NDArray record whose data starts at byte 128 (aligned).
fn record_file(n: usize) -> (Mapping, Vec<u8>) {
    let a = crate::ndarray::NDArray::empty(
        &[n as i64],
        crate::value::dtype::FLOAT32,
        crate::abi::DLDevice { device_type: 1, device_id: 0 },
    )
    .unwrap();
    let data: Vec<u8> = (0..n * 4).map(pattern).collect();
    a.copy_from_bytes(&data).unwrap();
    let mut w = crate::io::Writer::default();
    w.bytes(&[0; 80]);
    crate::ndarray::serialize::save_ndarray(&mut w, &a).unwrap();
    (Mapping::of(&w.buf), data)
}

#[test]
fn records_are_used_in_place_only_when_asked_and_then_read_only() {
    use crate::io::Reader;
    use crate::ndarray::serialize::{load_ndarray, load_ndarray_shared};
    let n = MIN_REGION_BYTES / 4;
    let (m, data) = record_file(n);
    let keep: KeepAlive = Arc::new(());
    let region = Region::new(m.bytes(), Some(keep));
    let mut r = Reader::new(&m.bytes()[80..], "test").with_region(Some(&region));
    let a = load_ndarray_shared(&mut r).unwrap();
    assert_eq!(a.tensor().data as usize, m.addr as usize + 128, "not used in place");
    assert!(a.is_read_only());
    assert_eq!(a.to_bytes().unwrap(), data);
    let e = a.copy_from_bytes(&data).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
    let view = a.create_view(&[2], crate::value::dtype::FLOAT32).unwrap();
    assert!(view.is_read_only());
    assert!(view.copy_from(a.tensor()).is_err());
    // The plain loader copies (and gives the pages back).
    let region = Region::new(m.bytes(), None);
    let mut r = Reader::new(&m.bytes()[80..], "test").with_region(Some(&region));
    let b = load_ndarray(&mut r).unwrap();
    assert_ne!(b.tensor().data as usize, m.addr as usize + 128);
    assert!(!b.is_read_only());
    assert_eq!(b.to_bytes().unwrap(), data);
    assert!(region.released_bytes() >= n * 4 - 2 * page_size());
    // Without a keeper, the shared loader copies too.
    let mut r = Reader::new(&m.bytes()[80..], "test").with_region(Some(&region));
    assert!(!load_ndarray_shared(&mut r).unwrap().is_read_only());
}
