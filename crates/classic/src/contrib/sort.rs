//! `tvm.contrib.sort.{sort, argsort, argsort_nms, topk}`: stable sorts along
//! one axis of compact CPU tensors, as TVM's `src/runtime/contrib/sort/sort.cc` computes them.

use super::Tensor;
use crate::error::{Error, Result};
use crate::registry::Registrar;
use crate::value::{Args, Value};
use std::cmp::Ordering;

/// A sort key read from a tensor: integers stay exact, floats compare as floats.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Key {
    I(i64),
    F(f64),
}

impl Key {
    /// A total preorder: numbers by value (so `-0.0 == 0.0`, kept in order by the stable sort),
    /// NaN after every number.
    fn cmp(&self, other: &Key) -> Ordering {
        match (self, other) {
            (Key::I(a), Key::I(b)) => a.cmp(b),
            (Key::F(a), Key::F(b)) => a.partial_cmp(b).unwrap_or_else(|| a.is_nan().cmp(&b.is_nan())),
            _ => Ordering::Equal,
        }
    }
}

/// Element types a sort reads.
#[derive(Clone, Copy)]
enum Elem {
    F16,
    F32,
    F64,
    I32,
    I64,
}

fn data_elem(t: &Tensor, what: &str) -> Result<Elem> {
    Ok(match (t.dtype.code, t.dtype.bits, t.dtype.lanes) {
        (2, 16, 1) => Elem::F16,
        (2, 32, 1) => Elem::F32,
        (2, 64, 1) => Elem::F64,
        (0, 32, 1) => Elem::I32,
        (0, 64, 1) => Elem::I64,
        _ => return Err(Error::value(format!("{what}: unsupported data type {}", t.dtype_name()))),
    })
}

/// Index output types.
fn index_elem(t: &Tensor, what: &str) -> Result<Elem> {
    Ok(match (t.dtype.code, t.dtype.bits, t.dtype.lanes) {
        (0, 32, 1) => Elem::I32,
        (0, 64, 1) => Elem::I64,
        (2, 32, 1) => Elem::F32,
        (2, 64, 1) => Elem::F64,
        _ => return Err(Error::value(format!("{what}: unsupported output data type {}", t.dtype_name()))),
    })
}

fn read(t: &Tensor, e: Elem, i: usize) -> Key {
    // SAFETY: in every arm, `i < t.len` (callers index within the tensor) and the element type
    // matches the tensor's dtype; reads are unaligned-safe.
    unsafe {
        match e {
            Elem::F16 => Key::F(f64::from(half::f16::from_bits(t.ptr.cast::<u16>().add(i).read_unaligned()).to_f32())),
            Elem::F32 => Key::F(f64::from(t.ptr.cast::<f32>().add(i).read_unaligned())),
            Elem::F64 => Key::F(t.ptr.cast::<f64>().add(i).read_unaligned()),
            Elem::I32 => Key::I(i64::from(t.ptr.cast::<i32>().add(i).read_unaligned())),
            Elem::I64 => Key::I(t.ptr.cast::<i64>().add(i).read_unaligned()),
        }
    }
}

/// Copies element `src` of `from` to element `dst` of `to` (same dtype).
fn copy_elem(from: &Tensor, src: usize, to: &Tensor, dst: usize) {
    let n = crate::value::dtype::element_bytes(from.dtype);
    // SAFETY: both indices are within their tensors, which have the same element size.
    unsafe { std::ptr::copy_nonoverlapping(from.ptr.add(src * n), to.ptr.add(dst * n), n) };
}

fn write_index(t: &Tensor, e: Elem, i: usize, v: usize) {
    // SAFETY: in every arm, `i < t.len` and the element type matches the tensor's dtype.
    unsafe {
        match e {
            Elem::I32 => t.ptr.cast::<i32>().add(i).write_unaligned(v as i32),
            Elem::I64 => t.ptr.cast::<i64>().add(i).write_unaligned(v as i64),
            Elem::F32 => t.ptr.cast::<f32>().add(i).write_unaligned(v as f32),
            Elem::F64 => t.ptr.cast::<f64>().add(i).write_unaligned(v as f64),
            Elem::F16 => t.ptr.cast::<u16>().add(i).write_unaligned(half::f16::from_f32(v as f32).to_bits()),
        }
    }
}

/// `(before, n, after)` of `shape` split at `axis` (negative from the end).
fn split(shape: &[i64], axis: i64, what: &str) -> Result<(usize, usize, usize, usize)> {
    let nd = shape.len() as i64;
    let ax = if axis < 0 { axis + nd } else { axis };
    if ax < 0 || ax >= nd {
        return Err(Error::value(format!("{what}: axis {axis} is out of range for {nd} dimensions")));
    }
    let ax = ax as usize;
    let p = |s: &[i64]| s.iter().product::<i64>() as usize;
    Ok((ax, p(&shape[..ax]), shape[ax] as usize, p(&shape[ax + 1..])))
}

/// The stable order of the first `count` elements of slice `(o, i)`.
fn order(data: &Tensor, e: Elem, base: usize, stride: usize, count: usize, ascend: bool) -> Vec<(usize, Key)> {
    let mut v: Vec<(usize, Key)> = (0..count).map(|k| (k, read(data, e, base + k * stride))).collect();
    // One stable sort for both directions (descending keeps equal keys in input order too).
    v.sort_by(|a, b| if ascend { a.1.cmp(&b.1) } else { b.1.cmp(&a.1) });
    v
}

fn same_shape(a: &Tensor, b: &Tensor, what: &str) -> Result<()> {
    if a.shape != b.shape {
        return Err(Error::value(format!("{what}: output shape {:?} differs from input shape {:?}", b.shape, a.shape)));
    }
    Ok(())
}

fn sort_global(a: &Args<'_>, with_indices: bool) -> Result<Value> {
    let what = if with_indices { "tvm.contrib.sort.argsort" } else { "tvm.contrib.sort.sort" };
    a.expect_len(what, 4)?;
    let data = Tensor::arg(a, 0, what)?;
    let out = Tensor::arg(a, 1, what)?;
    let (axis, ascend) = (a.i64(2)?, a.i64(3)? != 0);
    let de = data_elem(&data, what)?;
    same_shape(&data, &out, what)?;
    let oe = if with_indices {
        index_elem(&out, what)?
    } else {
        if out.dtype != data.dtype {
            return Err(Error::value(format!(
                "{what}: output data type {} differs from input data type {}",
                out.dtype_name(),
                data.dtype_name()
            )));
        }
        de
    };
    let (_, before, n, after) = split(&data.shape, axis, what)?;
    for o in 0..before {
        for i in 0..after {
            let base = o * n * after + i;
            for (k, (src, _)) in order(&data, de, base, after, n, ascend).into_iter().enumerate() {
                if with_indices {
                    write_index(&out, oe, base + k * after, src);
                } else {
                    copy_elem(&data, base + src * after, &out, base + k * after);
                }
            }
        }
    }
    Ok(Value::Null)
}

fn argsort_nms(a: &Args<'_>) -> Result<Value> {
    let what = "tvm.contrib.sort.argsort_nms";
    a.expect_len(what, 5)?;
    let data = Tensor::arg(a, 0, what)?;
    let counts = Tensor::arg(a, 1, what)?;
    let out = Tensor::arg(a, 2, what)?;
    let (axis, ascend) = (a.i64(3)?, a.i64(4)? != 0);
    if (data.dtype.code, data.dtype.bits, data.dtype.lanes) != (2, 32, 1) {
        return Err(Error::value(format!("{what}: data must be float32, got {}", data.dtype_name())));
    }
    if (counts.dtype.code, counts.dtype.bits) != (0, 32) || (out.dtype.code, out.dtype.bits) != (0, 32) {
        return Err(Error::value(format!("{what}: valid_count and the output must be int32")));
    }
    same_shape(&data, &out, what)?;
    let (_, before, n, after) = split(&data.shape, axis, what)?;
    if counts.len < before * after {
        return Err(Error::value(format!(
            "{what}: valid_count has {} entries, {} slices need one each",
            counts.len,
            before * after
        )));
    }
    for o in 0..before {
        for i in 0..after {
            let Key::I(c) = read(&counts, Elem::I32, o * after + i) else { unreachable!("int32 keys are ints") };
            let count = c.clamp(0, n as i64) as usize;
            let base = o * n * after + i;
            let sorted = order(&data, Elem::F32, base, after, count, ascend);
            for k in 0..n {
                let v = sorted.get(k).map_or(k, |s| s.0);
                write_index(&out, Elem::I32, base + k * after, v);
            }
        }
    }
    Ok(Value::Null)
}

fn topk(a: &Args<'_>) -> Result<Value> {
    let what = "tvm.contrib.sort.topk";
    if a.len() < 6 {
        return Err(Error::value(format!("{what} expects data, outputs, k, axis, ret_type, is_ascend")));
    }
    let m = a.len() - 4;
    let k = a.i64(m)?;
    let axis = a.i64(m + 1)?;
    let ret_type = a.string(m + 2)?;
    let ascend = a.i64(m + 3)? != 0;
    let data = Tensor::arg(a, 0, what)?;
    let de = data_elem(&data, what)?;
    let (values, indices) = match (ret_type.as_str(), m) {
        ("both", 3) => (Some(Tensor::arg(a, 1, what)?), Some(Tensor::arg(a, 2, what)?)),
        ("values", 2) => (Some(Tensor::arg(a, 1, what)?), None),
        ("indices", 2) => (None, Some(Tensor::arg(a, 1, what)?)),
        (r, _) => {
            return Err(Error::value(format!("{what}: ret_type {r:?} does not match {} output tensors", m - 1)));
        }
    };
    let (ax, before, n, after) = split(&data.shape, axis, what)?;
    let kk = if k < 1 { n } else { k as usize };
    if kk > n {
        return Err(Error::value(format!("{what}: k = {k} is larger than the axis ({n})")));
    }
    let mut want = data.shape.clone();
    want[ax] = kk as i64;
    let ie = match &indices {
        Some(t) => Some(index_elem(t, what)?),
        None => None,
    };
    for t in values.iter().chain(indices.iter()) {
        if t.shape != want {
            return Err(Error::value(format!("{what}: output shape {:?}, expected {want:?}", t.shape)));
        }
    }
    if let Some(v) = &values {
        if v.dtype != data.dtype {
            return Err(Error::value(format!("{what}: values output must be {}", data.dtype_name())));
        }
    }
    for o in 0..before {
        for i in 0..after {
            let base = o * n * after + i;
            let obase = o * kk * after + i;
            for (j, (src, _)) in order(&data, de, base, after, n, ascend).into_iter().take(kk).enumerate() {
                if let Some(v) = &values {
                    copy_elem(&data, base + src * after, v, obase + j * after);
                }
                if let (Some(t), Some(e)) = (&indices, ie) {
                    write_index(t, e, obase + j * after, src);
                }
            }
        }
    }
    Ok(Value::Null)
}

/// Registers the sort globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("tvm.contrib.sort.sort", |a| sort_global(a, false));
    r.func("tvm.contrib.sort.argsort", |a| sort_global(a, true));
    r.func("tvm.contrib.sort.argsort_nms", argsort_nms);
    r.func("tvm.contrib.sort.topk", topk);
}

#[cfg(test)]
mod tests {
    use crate::abi::DLDevice;
    use crate::ndarray::NDArray;
    use crate::registry;
    use crate::value::dtype::{dtype, FLOAT32};
    use crate::value::Value;

    fn array(shape: &[i64], vals: &[f32]) -> NDArray {
        let a = NDArray::empty(shape, FLOAT32, DLDevice { device_type: 1, device_id: 0 }).unwrap();
        // SAFETY: a fresh CPU array of `vals.len()` floats.
        unsafe { std::ptr::copy_nonoverlapping(vals.as_ptr(), a.tensor().data.cast::<f32>(), vals.len()) };
        a
    }

    fn empty(shape: &[i64], t: crate::abi::DLDataType) -> NDArray {
        NDArray::empty(shape, t, DLDevice { device_type: 1, device_id: 0 }).unwrap()
    }

    fn f32s(a: &NDArray, n: usize) -> Vec<f32> {
        // SAFETY: a CPU float32 array of at least `n` elements.
        unsafe { std::slice::from_raw_parts(a.tensor().data.cast::<f32>(), n) }.to_vec()
    }

    fn i32s(a: &NDArray, n: usize) -> Vec<i32> {
        // SAFETY: a CPU int32 array of at least `n` elements.
        unsafe { std::slice::from_raw_parts(a.tensor().data.cast::<i32>(), n) }.to_vec()
    }

    fn call(name: &str, args: &[Value]) -> crate::error::Result<Value> {
        registry::get(name).unwrap().call(args)
    }

    #[test]
    fn sort_and_argsort_along_axes() {
        // [[3, 1, 2], [0, 5, 5]]
        let x = array(&[2, 3], &[3.0, 1.0, 2.0, 0.0, 5.0, 5.0]);
        let out = empty(&[2, 3], FLOAT32);
        call(
            "tvm.contrib.sort.sort",
            &[Value::NDArray(x.clone()), Value::NDArray(out.clone()), Value::Int(1), Value::Int(1)],
        )
        .unwrap();
        assert_eq!(f32s(&out, 6), vec![1.0, 2.0, 3.0, 0.0, 5.0, 5.0]);
        let idx = empty(&[2, 3], dtype(0, 32, 1));
        // Descending and stable: equal values keep their order.
        call(
            "tvm.contrib.sort.argsort",
            &[Value::NDArray(x.clone()), Value::NDArray(idx.clone()), Value::Int(-1), Value::Int(0)],
        )
        .unwrap();
        assert_eq!(i32s(&idx, 6), vec![0, 2, 1, 1, 2, 0]);
        // Axis 0.
        call(
            "tvm.contrib.sort.argsort",
            &[Value::NDArray(x.clone()), Value::NDArray(idx.clone()), Value::Int(0), Value::Int(1)],
        )
        .unwrap();
        assert_eq!(i32s(&idx, 6), vec![1, 0, 0, 0, 1, 1]);
        let e = call(
            "tvm.contrib.sort.sort",
            &[Value::NDArray(x.clone()), Value::NDArray(idx), Value::Int(1), Value::Int(1)],
        );
        assert!(e.unwrap_err().to_string().contains("differs from input data type"));
        let e = call(
            "tvm.contrib.sort.sort",
            &[Value::NDArray(x.clone()), Value::NDArray(out), Value::Int(2), Value::Int(1)],
        );
        assert!(e.unwrap_err().to_string().contains("out of range"));
    }

    #[test]
    fn topk_and_argsort_nms() {
        let x = array(&[1, 5], &[1.0, 9.0, 3.0, 9.0, 0.0]);
        let (v, i) = (empty(&[1, 2], FLOAT32), empty(&[1, 2], dtype(0, 64, 1)));
        let args = [
            Value::NDArray(x.clone()),
            Value::NDArray(v.clone()),
            Value::NDArray(i.clone()),
            Value::Int(2),
            Value::Int(1),
            Value::str("both"),
            Value::Int(0),
        ];
        call("tvm.contrib.sort.topk", &args).unwrap();
        assert_eq!(f32s(&v, 2), vec![9.0, 9.0]);
        // SAFETY: an int64 CPU array of 2 elements.
        assert_eq!(unsafe { std::slice::from_raw_parts(i.tensor().data.cast::<i64>(), 2) }, &[1, 3]);
        let only = empty(&[1, 5], dtype(0, 32, 1));
        let args = [
            Value::NDArray(x.clone()),
            Value::NDArray(only.clone()),
            Value::Int(0),
            Value::Int(1),
            Value::str("indices"),
            Value::Int(1),
        ];
        call("tvm.contrib.sort.topk", &args).unwrap();
        assert_eq!(i32s(&only, 5), vec![4, 0, 2, 1, 3]);
        let args = [
            Value::NDArray(x.clone()),
            Value::NDArray(only.clone()),
            Value::Int(9),
            Value::Int(1),
            Value::str("indices"),
            Value::Int(1),
        ];
        assert!(call("tvm.contrib.sort.topk", &args).unwrap_err().to_string().contains("larger than the axis"));

        let counts = empty(&[1], dtype(0, 32, 1));
        // SAFETY: an int32 CPU array of 1 element.
        unsafe { *counts.tensor().data.cast::<i32>() = 3 };
        let out = empty(&[1, 5], dtype(0, 32, 1));
        let args =
            [Value::NDArray(x), Value::NDArray(counts), Value::NDArray(out.clone()), Value::Int(1), Value::Int(0)];
        call("tvm.contrib.sort.argsort_nms", &args).unwrap();
        assert_eq!(i32s(&out, 5), vec![1, 2, 0, 3, 4]);
    }
}
