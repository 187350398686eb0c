//! The NDArray record and the params blob.

use super::NDArray;
use crate::abi::{DLDataType, DLDevice};
use crate::device::data_alignment;
use crate::error::{Error, Result};
use crate::io::{Reader, Writer};
use crate::mapped::Region;

/// Magic of an NDArray record.
pub const NDARRAY_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;
/// The largest array a vector-dtype record may make beyond the bytes it stores (1 GiB).
pub(crate) const MAX_VECTOR_RECORD: usize = 1 << 30;

/// Magic of a params blob.
pub const PARAMS_MAGIC: u64 = 0xF7E5_8D4F_0504_9CB7;

/// Appends the record of `a` (data copied to host first if needed).
pub fn save_ndarray(w: &mut Writer, a: &NDArray) -> Result<()> {
    let t = a.tensor();
    w.u64(NDARRAY_MAGIC);
    w.u64(0);
    w.i32(1);
    w.i32(0);
    w.i32(t.ndim);
    w.dtype(t.dtype);
    for &d in a.shape() {
        w.i64(d);
    }
    let elems: usize = a.shape().iter().map(|&d| d as usize).product();
    // Lanes are ignored in this record's size, as in TVM.
    let size = elems * (t.dtype.bits as usize).div_ceil(8);
    w.i64(size as i64);
    let data = a.to_bytes()?;
    let n = size.min(data.len());
    w.bytes(&data[..n]);
    w.bytes(&vec![0u8; size - n]);
    Ok(())
}

/// One NDArray record as stored: its shape and element type, and a view of its data bytes.
pub struct Record<'a> {
    /// The shape.
    pub shape: Vec<i64>,
    /// The element type.
    pub dtype: DLDataType,
    /// The data: `elems * ceil(bits / 8)` bytes (lanes are not counted, as in TVM).
    pub data: &'a [u8],
}

/// Reads the header of one record and takes a view of its data, with every check of the format;
/// nothing is allocated beyond the shape.
pub fn read_record<'a>(r: &mut Reader<'a>) -> Result<Record<'a>> {
    let bad = |_| Error::value("Invalid DLTensor file format");
    let magic = r.u64().map_err(bad)?;
    r.u64().map_err(bad)?;
    if magic != NDARRAY_MAGIC {
        return Err(Error::value("Invalid DLTensor file format"));
    }
    let dev = r.device().map_err(bad)?;
    let ndim = r.i32().map_err(bad)?;
    let dtype = r.dtype().map_err(bad)?;
    if dev.device_type != 1 {
        return Err(Error::value("Invalid DLTensor device: can only save as CPU tensor"));
    }
    let ndim = usize::try_from(ndim).map_err(|_| Error::value(format!("Invalid DLTensor file format: ndim {ndim}")))?;
    if ndim.saturating_mul(8) > r.remaining() {
        return Err(r.error(format!("ndim {ndim} runs past the end")));
    }
    let shape = (0..ndim).map(|_| r.i64()).collect::<Result<Vec<_>>>()?;
    let elems = shape.iter().try_fold(1usize, |acc, &d| usize::try_from(d).ok().and_then(|d| acc.checked_mul(d)));
    let expect = elems
        .and_then(|e| e.checked_mul((dtype.bits as usize).div_ceil(8)))
        .ok_or_else(|| Error::value(format!("Invalid DLTensor file format: shape {shape:?}")))?;
    let size = r.i64()?;
    if usize::try_from(size).ok() != Some(expect) {
        return Err(Error::value(format!("Invalid DLTensor file format: data size {size}, expected {expect}")));
    }
    if expect > r.remaining() {
        return Err(Error::value(format!(
            "Invalid DLTensor file format: data size {size} of shape {shape:?} runs past the end ({} bytes left)",
            r.remaining()
        )));
    }
    let data = r.bytes(expect)?;
    // Vector dtypes: the array is `lanes` times the stored bytes (TVM writes only the first
    // lane's worth). That factor is the one size not bounded by the input, so it is capped.
    let total = crate::device::shape_bytes(&shape, dtype)?;
    if total > data.len() && total > MAX_VECTOR_RECORD {
        return Err(Error::value(format!(
            "Invalid DLTensor file format: dtype with {} lanes makes a {total}-byte array from {} stored bytes \
             (at most {MAX_VECTOR_RECORD})",
            dtype.lanes,
            data.len()
        )));
    }
    Ok(Record { shape, dtype, data })
}

/// How much is copied between two page releases when a record is copied out of a mapping.
const RELEASE_CHUNK: usize = 1 << 20;

impl Record<'_> {
    /// A new CPU array holding the record's data (vector types: the stored bytes, then zeros).
    /// With `region` (the mapping the data lies in), the data is copied in chunks and the pages
    /// behind each chunk are given back at once, so the record is never resident twice.
    pub(crate) fn to_array(&self, region: Option<&Region>) -> Result<NDArray> {
        let a = NDArray::empty(&self.shape, self.dtype, DLDevice { device_type: 1, device_id: 0 })?;
        let total = a.byte_size()?;
        if total == self.data.len() {
            match region {
                Some(region) if region.releases() => {
                    let dst = a.tensor().data.cast::<u8>();
                    for (k, chunk) in self.data.chunks(RELEASE_CHUNK).enumerate() {
                        // SAFETY: `a` is a new, contiguous CPU array of `total` bytes (its data
                        // pointer has no byte offset), and the chunks tile `total` bytes; the
                        // source is another allocation.
                        unsafe {
                            std::ptr::copy_nonoverlapping(chunk.as_ptr(), dst.add(k * RELEASE_CHUNK), chunk.len())
                        };
                        region.release_to(chunk.as_ptr() as usize + chunk.len());
                    }
                }
                _ => a.copy_from_bytes(self.data)?,
            }
        } else {
            // Vector dtypes: the record holds the first `elems * bits/8` bytes only.
            let mut full = vec![0u8; total];
            let n = self.data.len().min(total);
            full[..n].copy_from_slice(&self.data[..n]);
            a.copy_from_bytes(&full)?;
            if let Some(region) = region {
                region.release_to(self.data.as_ptr() as usize + self.data.len());
            }
        }
        Ok(a)
    }
}

/// Reads one record into a new CPU array (copied; the mapping's pages behind it are given back
/// when the reader has a region).
pub fn load_ndarray(r: &mut Reader<'_>) -> Result<NDArray> {
    read_record(r)?.to_array(r.region())
}

/// Reads one record like [`load_ndarray`], but uses the data in place when the reader's region
/// allows it (the bytes lie in a read-only mapping of a library that the array then keeps
/// loaded) and the data is aligned as kernels may assume ([`data_alignment`]); otherwise copies.
///
/// An array used in place is read-only (writing into it faults): only for owners that never
/// write into their arrays nor hand them out writable, such as the graph executor factory,
/// whose executors copy a parameter before writing it.
pub(crate) fn load_ndarray_shared(r: &mut Reader<'_>) -> Result<NDArray> {
    let rec = read_record(r)?;
    if let Some(region) = r.region() {
        let aligned = rec.data.as_ptr() as usize % data_alignment(rec.dtype) == 0;
        if let Some(keep) = region.in_place(rec.data).filter(|_| aligned) {
            let a = NDArray::from_mapped(rec.data.as_ptr().cast_mut().cast(), &rec.shape, rec.dtype, keep.clone())?;
            if a.byte_size()? == rec.data.len() {
                region.keep(rec.data);
                return Ok(a);
            }
        }
    }
    rec.to_array(r.region())
}

/// Serializes named arrays as a params blob, in the given order.
pub fn save_params(params: &[(String, NDArray)]) -> Result<Vec<u8>> {
    let mut w = Writer::default();
    w.u64(PARAMS_MAGIC);
    w.u64(0);
    let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    w.vec_str(&names);
    w.u64(params.len() as u64);
    for (_, a) in params {
        save_ndarray(&mut w, a)?;
    }
    Ok(w.buf)
}

/// Reads the header of a params blob (magic, reserved, names, count), leaving `r` at the arrays.
pub(crate) fn read_params_header(r: &mut Reader<'_>) -> Result<Vec<String>> {
    let invalid = |_| Error::value("Invalid parameters file format");
    if r.u64().map_err(invalid)? != PARAMS_MAGIC {
        return Err(Error::value("Invalid parameters file format"));
    }
    r.u64().map_err(invalid)?;
    let names = r.vec_string().map_err(invalid)?;
    if r.u64().map_err(invalid)? != names.len() as u64 {
        return Err(Error::value("Invalid parameters file format"));
    }
    Ok(names)
}

/// The names of a params blob (header and names only, as `share_params` reads it).
pub fn load_param_names(blob: &[u8]) -> Result<Vec<String>> {
    read_params_header(&mut Reader::new(blob, "params"))
}

/// Parses a params blob into named CPU arrays, in file order. When the blob lies in a read-only
/// file mapping (a caller that mapped the file), its pages are given back as they are copied out.
pub fn load_params(blob: &[u8]) -> Result<Vec<(String, NDArray)>> {
    let region = Region::new(blob, None);
    let records = param_records(blob)?;
    records.into_iter().map(|(n, rec)| Ok((n, rec.to_array(Some(&region))?))).collect()
}

/// Every record of a params blob, checked, in file order, as views (nothing is copied): so a
/// caller can apply a blob all or nothing.
pub(crate) fn param_records(blob: &[u8]) -> Result<Vec<(String, Record<'_>)>> {
    let mut r = Reader::new(blob, "params");
    let names = read_params_header(&mut r)?;
    names
        .into_iter()
        .map(|n| {
            let rec = read_record(&mut r).map_err(|e| e.context(format!("param {n}")))?;
            Ok((n, rec))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::dtype::FLOAT32;

    #[test]
    fn worked_example_bytes() {
        let a = NDArray::empty(&[2], FLOAT32, DLDevice { device_type: 1, device_id: 0 }).unwrap();
        let mut d = Vec::new();
        d.extend_from_slice(&1.0f32.to_le_bytes());
        d.extend_from_slice(&2.0f32.to_le_bytes());
        a.copy_from_bytes(&d).unwrap();
        let blob = save_params(&[("x".into(), a)]).unwrap();
        assert_eq!(blob.len(), 97);
        assert_eq!(&blob[..8], &[0xB7, 0x9C, 0x04, 0x05, 0x4F, 0x8D, 0xE5, 0xF7]);
        assert_eq!(&blob[41..49], &[0x3F, 0xA1, 0xB4, 0x96, 0xF0, 0x40, 0x5E, 0xDD]);
        let back = load_params(&blob).unwrap();
        assert_eq!(back[0].0, "x");
        assert_eq!(back[0].1.to_bytes().unwrap(), d);
        assert_eq!(save_params(&back).unwrap(), blob);
        for cut in [0, 7, 20, 45, 96] {
            assert!(load_params(&blob[..cut]).is_err(), "cut {cut}");
        }
        let mut bad = blob.clone();
        bad[0] ^= 1;
        assert_eq!(load_params(&bad).unwrap_err().to_string(), "ValueError: Invalid parameters file format");
    }
}
