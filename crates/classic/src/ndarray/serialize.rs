//! NDArrays to and from their records and params blobs (the formats themselves, read as views,
//! are the core's `formats::params`).

use super::NDArray;
use crate::abi::DLDevice;
use crate::device::data_alignment;
use crate::error::Result;
use crate::io::{Reader, Writer};
use crate::mapped::Region;

// The formats themselves are the core's (read as views, checked), under the paths they always had.
pub use tvm_runtime_core::formats::params::{
    load_param_names, param_records, read_params_header, read_record, Record, MAX_VECTOR_RECORD, NDARRAY_MAGIC,
    PARAMS_MAGIC,
};

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

/// How much is copied between two page releases when a record is copied out of a mapping.
const RELEASE_CHUNK: usize = 1 << 20;

/// A new CPU array holding a record's data (vector types: the stored bytes, then zeros). With
/// `region` (the mapping the data lies in), the data is copied in chunks and the pages behind
/// each chunk are given back at once, so the record is never resident twice.
pub(crate) fn to_array(rec: &Record<'_>, region: Option<&Region>) -> Result<NDArray> {
    let a = NDArray::empty(&rec.shape, rec.dtype, DLDevice { device_type: 1, device_id: 0 })?;
    let total = a.byte_size()?;
    if total == rec.data.len() {
        match region {
            Some(region) if region.releases() => {
                let dst = a.tensor().data.cast::<u8>();
                for (k, chunk) in rec.data.chunks(RELEASE_CHUNK).enumerate() {
                    // SAFETY: `a` is a new, contiguous CPU array of `total` bytes (its data
                    // pointer has no byte offset), and the chunks tile `total` bytes; the
                    // source is another allocation.
                    unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), dst.add(k * RELEASE_CHUNK), chunk.len()) };
                    region.release_to(chunk.as_ptr() as usize + chunk.len());
                }
            }
            _ => a.copy_from_bytes(rec.data)?,
        }
    } else {
        // Vector dtypes: the record holds the first `elems * bits/8` bytes only.
        let mut full = vec![0u8; total];
        let n = rec.data.len().min(total);
        full[..n].copy_from_slice(&rec.data[..n]);
        a.copy_from_bytes(&full)?;
        if let Some(region) = region {
            region.release_to(rec.data.as_ptr() as usize + rec.data.len());
        }
    }
    Ok(a)
}

/// Reads one record into a new CPU array (copied; the mapping's pages behind it are given back
/// when the reader has a region).
pub fn load_ndarray(r: &mut Reader<'_>) -> Result<NDArray> {
    to_array(&read_record(r)?, r.region())
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
    to_array(&rec, r.region())
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

/// Parses a params blob into named CPU arrays, in file order. When the blob lies in a read-only
/// file mapping (a caller that mapped the file), its pages are given back as they are copied out.
pub fn load_params(blob: &[u8]) -> Result<Vec<(String, NDArray)>> {
    let region = Region::new(blob, None);
    let records = param_records(blob)?;
    records.into_iter().map(|(n, rec)| Ok((n, to_array(&rec, Some(&region))?))).collect()
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
