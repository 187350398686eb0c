//! A check of an ELF file's extent before `dlopen`: every loadable segment must lie inside the
//! file. glibc maps segments without checking that, and the first access to a page past the end
//! of a truncated library kills the process with SIGBUS inside `dlopen` (TVM's runtime and any
//! `dlopen` caller crash the same way); with this check a truncated library is an error.
//!
//! Only the ELF header and the program header table are read (both classes, both byte
//! orders); everything else about the file is left to the dynamic loader.

use crate::error::{Error, Result};
use std::io::Read;
use std::os::unix::fs::FileExt;

/// `PT_LOAD`.
const PT_LOAD: u32 = 1;

/// The fields read from an ELF header.
struct Header {
    wide: bool,
    little: bool,
    phoff: u64,
    phentsize: u64,
    phnum: u64,
}

fn uint(b: &[u8], little: bool) -> u64 {
    let mut v = 0u64;
    for (i, &x) in b.iter().enumerate() {
        let shift = if little { 8 * i } else { 8 * (b.len() - 1 - i) };
        v |= u64::from(x) << shift;
    }
    v
}

/// Reads the header fields; `None` when `h` (at least 64 bytes, or the whole file) is not ELF.
fn header(h: &[u8]) -> Option<Header> {
    if h.len() < 52 || &h[..4] != b"\x7fELF" {
        return None;
    }
    let wide = h[4] == 2;
    let little = h[5] != 2;
    if wide && h.len() < 64 {
        return None;
    }
    let (phoff, phentsize, phnum) = if wide {
        (uint(&h[32..40], little), uint(&h[54..56], little), uint(&h[56..58], little))
    } else {
        (uint(&h[28..32], little), uint(&h[42..44], little), uint(&h[44..46], little))
    };
    Some(Header { wide, little, phoff, phentsize, phnum })
}

fn truncated(what: &str, len: u64, need: u64) -> Error {
    Error::value(format!(
        "{what} is truncated or damaged: it is {len} bytes long but its ELF program headers need {need} bytes"
    ))
}

/// Checks the program header table `ph` of a file of `len` bytes.
fn check_segments(h: &Header, ph: &[u8], len: u64, what: &str) -> Result<()> {
    if h.phnum == 0 {
        return Ok(());
    }
    let entry = usize::try_from(h.phentsize).unwrap_or(0);
    let min_entry = if h.wide { 56 } else { 32 };
    if entry < min_entry {
        return Err(Error::value(format!("{what}: ELF program header entries of {entry} bytes are too small")));
    }
    for e in ph.chunks_exact(entry) {
        if uint(&e[..4], h.little) as u32 != PT_LOAD {
            continue;
        }
        let (off, filesz) = if h.wide {
            (uint(&e[8..16], h.little), uint(&e[32..40], h.little))
        } else {
            (uint(&e[4..8], h.little), uint(&e[16..20], h.little))
        };
        let end = off.checked_add(filesz).ok_or_else(|| truncated(what, len, u64::MAX))?;
        if end > len {
            return Err(truncated(what, len, end));
        }
    }
    Ok(())
}

fn table_end(h: &Header, len: u64, what: &str) -> Result<u64> {
    let end = h.phentsize.checked_mul(h.phnum).and_then(|n| n.checked_add(h.phoff)).unwrap_or(u64::MAX);
    if end > len {
        return Err(truncated(what, len, end));
    }
    Ok(end)
}

/// Checks the bytes of a whole library. Bytes that are not ELF pass (the loader names them).
pub fn check_bytes(bytes: &[u8], what: &str) -> Result<()> {
    let Some(h) = header(bytes) else { return Ok(()) };
    let len = bytes.len() as u64;
    let end = table_end(&h, len, what)?;
    check_segments(&h, &bytes[h.phoff as usize..end as usize], len, what)
}

/// Checks a library file. A file that cannot be read or is not ELF passes (the loader says
/// what is wrong with it).
pub(crate) fn check_file(path: &str, what: &str) -> Result<()> {
    let Ok(mut f) = std::fs::File::open(path) else { return Ok(()) };
    let Ok(meta) = f.metadata() else { return Ok(()) };
    let len = meta.len();
    let mut head = Vec::with_capacity(64);
    if (&mut f).take(64).read_to_end(&mut head).is_err() {
        return Ok(());
    }
    let Some(h) = header(&head) else { return Ok(()) };
    let end = table_end(&h, len, what)?;
    let size = usize::try_from(end - h.phoff).map_err(|_| truncated(what, len, end))?;
    let mut ph = vec![0u8; size];
    f.read_exact_at(&mut ph, h.phoff).map_err(|e| Error::value(format!("{what}: {e}")))?;
    check_segments(&h, &ph, len, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF64 little-endian header with one PT_LOAD segment `[off, off + filesz)`.
    fn elf(off: u64, filesz: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len.max(120)];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&1u16.to_le_bytes());
        b[64..68].copy_from_slice(&PT_LOAD.to_le_bytes());
        b[72..80].copy_from_slice(&off.to_le_bytes());
        b[96..104].copy_from_slice(&filesz.to_le_bytes());
        b.truncate(len.max(120));
        b
    }

    #[test]
    fn segments_must_fit() {
        assert!(check_bytes(&elf(0, 200, 200), "x").is_ok());
        let e = check_bytes(&elf(0, 4096, 200), "lib").unwrap_err().to_string();
        assert_eq!(
            e,
            "ValueError: lib is truncated or damaged: it is 200 bytes long but its ELF program headers need 4096 bytes"
        );
        assert!(check_bytes(&elf(u64::MAX, 2, 200), "x").is_err());
        let mut b = elf(0, 10, 200);
        b[56..58].copy_from_slice(&60000u16.to_le_bytes());
        assert!(check_bytes(&b, "x").is_err());
        assert!(check_bytes(b"not elf", "x").is_ok());
        assert!(check_file("/nonexistent", "x").is_ok());
    }
}
