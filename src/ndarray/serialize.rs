//! The NDArray record and the params blob (formats.md §2, §3).

use super::NDArray;
use crate::abi::DLDevice;
use crate::error::{Error, Result};
use crate::io::{Reader, Writer};

/// Magic of an NDArray record.
pub const NDARRAY_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;
/// The largest array a vector-dtype record may make beyond the bytes it stores (1 GiB).
pub const MAX_VECTOR_RECORD: usize = 1 << 30;

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

/// Reads one record into a new CPU array.
pub fn load_ndarray(r: &mut Reader<'_>) -> Result<NDArray> {
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
    let a = NDArray::empty(&shape, dtype, DLDevice { device_type: 1, device_id: 0 })?;
    let total = a.byte_size()?;
    if total == data.len() {
        a.copy_from_bytes(data)?;
    } else {
        // Vector dtypes: the record holds the first `elems * bits/8` bytes only.
        let mut full = vec![0u8; total];
        let n = data.len().min(total);
        full[..n].copy_from_slice(&data[..n]);
        a.copy_from_bytes(&full)?;
    }
    Ok(a)
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
fn read_params_header(r: &mut Reader<'_>) -> Result<Vec<String>> {
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

/// Parses a params blob into named CPU arrays, in file order.
pub fn load_params(blob: &[u8]) -> Result<Vec<(String, NDArray)>> {
    let mut r = Reader::new(blob, "params");
    let names = read_params_header(&mut r)?;
    names
        .into_iter()
        .map(|n| {
            let a = load_ndarray(&mut r).map_err(|e| e.context(format!("param {n}")))?;
            Ok((n, a))
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
