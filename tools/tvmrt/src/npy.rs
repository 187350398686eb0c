//! `.npy` files <-> arrays, through the `npyz` crate: every element type the runtime has
//! (`bool`, `int8`..`int64`, `uint8`..`uint64`, `float16`, `float32`, `float64`, and `bfloat16`
//! as ml_dtypes saves it: `<V2` raw 2-byte elements), either byte order, C or Fortran order.

use crate::fail::{Fail, Result};
use npyz::{DType, FixedSizeBytes, NpyFile, Order, TypeChar, WriterBuilder};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;
use tvm_rt::{DataType, Device, Element, NDArray};

/// The element type an npy type string stands for.
fn dtype_of(d: &DType, path: &Path) -> Result<DataType> {
    let bad = || Fail::input(format!("{}: unsupported .npy element type {}", path.display(), d.descr()));
    let DType::Plain(t) = d else { return Err(bad()) };
    let size = t.size_field();
    Ok(match (t.type_char(), size) {
        (TypeChar::Bool, 1) => DataType::BOOL,
        (TypeChar::Int, 1) => DataType::INT8,
        (TypeChar::Int, 2) => DataType::INT16,
        (TypeChar::Int, 4) => DataType::INT32,
        (TypeChar::Int, 8) => DataType::INT64,
        (TypeChar::Uint, 1) => DataType::UINT8,
        (TypeChar::Uint, 2) => DataType::UINT16,
        (TypeChar::Uint, 4) => DataType::UINT32,
        (TypeChar::Uint, 8) => DataType::UINT64,
        (TypeChar::Float, 2) => DataType::FLOAT16,
        (TypeChar::Float, 4) => DataType::FLOAT32,
        (TypeChar::Float, 8) => DataType::FLOAT64,
        (TypeChar::RawData, 2) => DataType::BFLOAT16,
        _ => return Err(bad()),
    })
}

fn elements<T: npyz::Deserialize + Element>(f: NpyFile<BufReader<File>>, path: &Path) -> Result<Vec<u8>> {
    let v: Vec<T> = f.into_vec().map_err(|e| Fail::input(format!("{}: {e}", path.display())))?;
    Ok(T::as_bytes(&v).into_owned())
}

/// A C-order copy of a Fortran-order array's bytes (`shape` is the logical shape).
fn c_order(bytes: &[u8], shape: &[usize], elem: usize) -> Vec<u8> {
    let n: usize = shape.iter().product();
    let mut out = vec![0u8; bytes.len()];
    // Fortran strides (in elements) of each logical axis.
    let mut fstride = vec![1usize; shape.len()];
    for k in 1..shape.len() {
        fstride[k] = fstride[k - 1] * shape[k - 1];
    }
    let mut idx = vec![0usize; shape.len()];
    for c in 0..n {
        let src: usize = idx.iter().zip(&fstride).map(|(i, s)| i * s).sum();
        out[c * elem..(c + 1) * elem].copy_from_slice(&bytes[src * elem..(src + 1) * elem]);
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

/// Reads an .npy file into a host array.
pub fn read(path: &Path) -> Result<NDArray> {
    let file = File::open(path).map_err(|e| Fail::input(format!("{}: {e}", path.display())))?;
    let f = NpyFile::new(BufReader::new(file))
        .map_err(|e| Fail::input(format!("{}: not a readable .npy file: {e}", path.display())))?;
    let dtype = dtype_of(&f.dtype(), path)?;
    let shape: Vec<usize> = f.shape().iter().map(|&d| d as usize).collect();
    let fortran = f.order() == Order::Fortran && shape.len() > 1;
    let bytes = match dtype {
        DataType::BOOL => elements::<bool>(f, path)?,
        DataType::INT8 => elements::<i8>(f, path)?,
        DataType::INT16 => elements::<i16>(f, path)?,
        DataType::INT32 => elements::<i32>(f, path)?,
        DataType::INT64 => elements::<i64>(f, path)?,
        DataType::UINT8 => elements::<u8>(f, path)?,
        DataType::UINT16 => elements::<u16>(f, path)?,
        DataType::UINT32 => elements::<u32>(f, path)?,
        DataType::UINT64 => elements::<u64>(f, path)?,
        DataType::FLOAT16 => elements::<tvm_rt::f16>(f, path)?,
        DataType::FLOAT32 => elements::<f32>(f, path)?,
        DataType::FLOAT64 => elements::<f64>(f, path)?,
        _ => {
            // bfloat16: raw 2-byte elements, stored little-endian by ml_dtypes.
            let v: Vec<FixedSizeBytes<2>> =
                f.into_vec().map_err(|e| Fail::input(format!("{}: {e}", path.display())))?;
            let words: Vec<u16> = v.iter().map(|b| u16::from_le_bytes(b.0)).collect();
            u16::as_bytes(&words).into_owned()
        }
    };
    let bytes = if fortran { c_order(&bytes, &shape, dtype.element_bytes()) } else { bytes };
    let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    Ok(NDArray::from_bytes(&bytes, &shape, dtype, Device::cpu())?)
}

fn write_elements<T>(path: &Path, shape: &[u64], values: &[T]) -> std::io::Result<()>
where
    T: npyz::AutoSerialize + Copy,
{
    let file = BufWriter::new(File::create(path)?);
    let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(file).begin_nd()?;
    w.extend(values.iter().copied())?;
    w.finish()
}

/// Writes an array (on any device) to an .npy file.
pub fn write(path: &Path, a: &NDArray) -> Result<()> {
    let shape: Vec<u64> = a.shape().iter().map(|&d| d as u64).collect();
    let bytes = a.to_bytes()?;
    let r = match a.dtype() {
        DataType::BOOL => write_elements(path, &shape, &bool::from_bytes(&bytes)),
        DataType::INT8 => write_elements(path, &shape, &i8::from_bytes(&bytes)),
        DataType::INT16 => write_elements(path, &shape, &i16::from_bytes(&bytes)),
        DataType::INT32 => write_elements(path, &shape, &i32::from_bytes(&bytes)),
        DataType::INT64 => write_elements(path, &shape, &i64::from_bytes(&bytes)),
        DataType::UINT8 => write_elements(path, &shape, &u8::from_bytes(&bytes)),
        DataType::UINT16 => write_elements(path, &shape, &u16::from_bytes(&bytes)),
        DataType::UINT32 => write_elements(path, &shape, &u32::from_bytes(&bytes)),
        DataType::UINT64 => write_elements(path, &shape, &u64::from_bytes(&bytes)),
        DataType::FLOAT16 => write_elements(path, &shape, &tvm_rt::f16::from_bytes(&bytes)),
        DataType::FLOAT32 => write_elements(path, &shape, &f32::from_bytes(&bytes)),
        DataType::FLOAT64 => write_elements(path, &shape, &f64::from_bytes(&bytes)),
        DataType::BFLOAT16 => {
            let raw: Vec<FixedSizeBytes<2>> =
                u16::from_bytes(&bytes).iter().map(|w| FixedSizeBytes(w.to_le_bytes())).collect();
            (|| {
                let file = BufWriter::new(File::create(path)?);
                let dt = DType::Plain("<V2".parse().map_err(std::io::Error::other)?);
                let mut w = npyz::WriteOptions::new().dtype(dt).shape(&shape).writer(file).begin_nd()?;
                w.extend(raw)?;
                w.finish()
            })()
        }
        other => return Err(Fail::input(format!("{}: cannot write {other} elements to .npy", path.display()))),
    };
    r.map_err(|e| Fail::input(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::as_f64;

    fn data(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
    }

    #[test]
    fn reads_what_numpy_wrote() {
        let ints = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        let floats = [0.5, 1.5, -2.0, 3.25, 4.0, 5.0];
        let cases: [(&str, DataType, &[f64]); 10] = [
            ("int8.npy", DataType::INT8, &ints),
            ("uint16.npy", DataType::UINT16, &ints),
            ("uint32.npy", DataType::UINT32, &ints),
            ("int64.npy", DataType::INT64, &ints),
            ("float16.npy", DataType::FLOAT16, &floats),
            ("float64.npy", DataType::FLOAT64, &floats),
            ("bfloat16.npy", DataType::BFLOAT16, &floats),
            ("float32_be.npy", DataType::FLOAT32, &floats),
            ("float32_fortran.npy", DataType::FLOAT32, &floats),
            ("bool.npy", DataType::BOOL, &[1.0, 0.0, 1.0, 1.0, 0.0, 0.0]),
        ];
        for (file, dtype, want) in cases {
            let a = read(&data(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(a.dtype(), dtype, "{file}");
            assert_eq!(a.shape(), &[2, 3], "{file}");
            assert_eq!(as_f64(&a).unwrap(), want, "{file}");
        }
        let e = read(&data("complex64.npy")).unwrap_err().msg;
        assert!(e.ends_with("unsupported .npy element type '<c8'"), "{e}");
        let e = read(&data("missing.npy")).unwrap_err().msg;
        assert!(e.contains("missing.npy: No such file"), "{e}");
        let e = read(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml").as_path()).unwrap_err().msg;
        assert!(e.contains("not a readable .npy file"), "{e}");
    }

    #[test]
    fn every_dtype_round_trips() {
        let dir = std::env::temp_dir().join(format!("tvmrt-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, file) in [
            "int8.npy",
            "uint16.npy",
            "uint32.npy",
            "int64.npy",
            "float16.npy",
            "float64.npy",
            "bfloat16.npy",
            "float32_be.npy",
            "bool.npy",
        ]
        .iter()
        .enumerate()
        {
            let a = read(&data(file)).unwrap();
            let p = dir.join(format!("{i}.npy"));
            write(&p, &a).unwrap();
            let b = read(&p).unwrap();
            assert_eq!((b.dtype(), b.shape()), (a.dtype(), a.shape()), "{file}");
            assert_eq!(b.to_bytes().unwrap(), a.to_bytes().unwrap(), "{file}");
        }
        for (dt, v) in [(DataType::UINT8, 200u8), (DataType::INT16, 7), (DataType::UINT64, 9), (DataType::INT32, 3)] {
            let a = NDArray::from_bytes(&vec![v; 4 * dt.element_bytes()], &[4], dt, Device::cpu()).unwrap();
            let p = dir.join(format!("{dt}.npy"));
            write(&p, &a).unwrap();
            assert_eq!(read(&p).unwrap().to_bytes().unwrap(), a.to_bytes().unwrap(), "{dt}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fortran_order_is_reordered() {
        // Logical [[1, 2, 3], [4, 5, 6]] stored column by column.
        let f: Vec<u8> = [1u8, 4, 2, 5, 3, 6].to_vec();
        assert_eq!(c_order(&f, &[2, 3], 1), vec![1, 2, 3, 4, 5, 6]);
    }
}
