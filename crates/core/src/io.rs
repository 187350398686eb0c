//! Byte streams in TVM's dmlc::Stream conventions: little-endian scalars,
//! u64-length-prefixed strings and vectors. Every read checks the length against what is left
//! before it allocates, so a corrupt length is an error, never an out-of-memory.

use crate::abi::{DLDataType, DLDevice};
use crate::error::{Error, Result};
use crate::mapped::Region;

/// A reader over a byte slice.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
    region: Option<&'a Region>,
}

impl<'a> Reader<'a> {
    /// Reads `buf`; `what` names the format in error messages.
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what, region: None }
    }

    /// The same reader, over bytes that lie in `region` (a file mapping whose pages can be
    /// given back once copied out, see [`crate::mapped`]).
    pub fn with_region(mut self, region: Option<&'a Region>) -> Self {
        self.region = region;
        self
    }

    /// The mapping region the bytes lie in, if known.
    pub fn region(&self) -> Option<&'a Region> {
        self.region
    }

    /// Gives back the whole pages of the mapping behind the read position (everything read so
    /// far has been copied out or is not needed again). A no-op without a region.
    pub fn release_consumed(&self) {
        if let Some(r) = self.region {
            r.release_to(self.buf.as_ptr() as usize + self.pos);
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Current position.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The error for a short or malformed read.
    pub fn error(&self, detail: impl std::fmt::Display) -> Error {
        Error::value(format!("{}: {detail} (at byte {} of {})", self.what, self.pos, self.buf.len()))
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(format!("needs {n} more bytes, only {} left", self.remaining())));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let b = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    /// A u8.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    /// A little-endian u16.
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// A little-endian i32.
    pub fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    /// A little-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// A little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// A little-endian i64.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// A count of elements of at least `min_elem_size` bytes each, checked against what is left.
    pub fn count(&mut self, min_elem_size: usize) -> Result<usize> {
        let n = self.u64()?;
        let fits = usize::try_from(n).ok().filter(|&n| n.saturating_mul(min_elem_size.max(1)) <= self.remaining());
        fits.ok_or_else(|| self.error(format!("count {n} runs past the end")))
    }

    /// A length-prefixed string (raw bytes).
    pub fn str_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.count(1)?;
        self.bytes(n)
    }

    /// A length-prefixed string as UTF-8 text.
    pub fn string(&mut self) -> Result<String> {
        let b = self.str_bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| self.error("string is not UTF-8"))
    }

    /// A vector of strings.
    pub fn vec_string(&mut self) -> Result<Vec<String>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.string()).collect()
    }

    /// A vector of u64.
    pub fn vec_u64(&mut self) -> Result<Vec<u64>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.u64()).collect()
    }

    /// A `DLDataType`.
    pub fn dtype(&mut self) -> Result<DLDataType> {
        Ok(DLDataType { code: self.u8()?, bits: self.u8()?, lanes: self.u16()? })
    }

    /// A `DLDevice`.
    pub fn device(&mut self) -> Result<DLDevice> {
        Ok(DLDevice { device_type: self.i32()?, device_id: self.i32()? })
    }
}

/// A writer appending to a byte vector.
#[derive(Default)]
pub struct Writer {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// A u8.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// A u16.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// An i32.
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A u64.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// An i64.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// A length-prefixed string.
    pub fn str_bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.bytes(b);
    }
    /// A vector of strings.
    pub fn vec_str<S: AsRef<[u8]>>(&mut self, v: &[S]) {
        self.u64(v.len() as u64);
        for s in v {
            self.str_bytes(s.as_ref());
        }
    }
    /// A vector of u64.
    pub fn vec_u64(&mut self, v: &[u64]) {
        self.u64(v.len() as u64);
        for &x in v {
            self.u64(x);
        }
    }
    /// A `DLDataType`.
    pub fn dtype(&mut self, t: DLDataType) {
        self.u8(t.code);
        self.u8(t.bits);
        self.u16(t.lanes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_checked() {
        let mut w = Writer::default();
        w.vec_str(&["a", "bc"]);
        assert_eq!(w.buf.len(), 8 + 9 + 10);
        let mut r = Reader::new(&w.buf, "test");
        assert_eq!(r.vec_string().unwrap(), vec!["a", "bc"]);
        assert!(r.u8().is_err());
        let huge = u64::MAX.to_le_bytes();
        assert!(Reader::new(&huge, "test").str_bytes().unwrap_err().to_string().contains("runs past the end"));
    }
}
