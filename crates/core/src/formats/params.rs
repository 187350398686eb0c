//! The NDArray record (`NDArray::Save`'s bytes: magic, device, shape, data type, data) and the
//! params blob (`relay.save_param_dict`: magic, names, records), read as views with every check
//! of the format: nothing here makes an array. The classic crate's `ndarray::serialize` turns
//! records into NDArrays and writes them; the Relax VM's executable reads its constants with it.

use crate::abi::DLDataType;
use crate::error::{Error, Result};
use crate::io::Reader;

/// Magic of an NDArray record.
pub const NDARRAY_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;
/// The largest array a vector-dtype record may make beyond the bytes it stores (1 GiB).
pub const MAX_VECTOR_RECORD: usize = 1 << 30;

/// Magic of a params blob.
pub const PARAMS_MAGIC: u64 = 0xF7E5_8D4F_0504_9CB7;

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

/// Reads the header of a params blob (magic, reserved, names, count), leaving `r` at the arrays.
pub fn read_params_header(r: &mut Reader<'_>) -> Result<Vec<String>> {
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

/// Every record of a params blob, checked, in file order, as views (nothing is copied): so a
/// caller can apply a blob all or nothing.
pub fn param_records(blob: &[u8]) -> Result<Vec<(String, Record<'_>)>> {
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
