//! `tvm.contrib.random.{randint, uniform, normal, random_fill}`. One generator
//! per thread, seeded from the clock at first use, as in TVM (exact streams are not part of the
//! contract).

use super::Tensor;
use crate::abi::{DLDevice, DLTensor};
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use crate::registry::Registrar;
use crate::value::{Args, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use std::cell::RefCell;

thread_local! {
    static RNG: RefCell<SmallRng> = RefCell::new({
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let id = std::thread::current().id();
        let mix = format!("{id:?}").bytes().fold(t as u64, |h, b| h.rotate_left(5) ^ u64::from(b));
        SmallRng::seed_from_u64(mix)
    });
}

fn with_rng<T>(f: impl FnOnce(&mut SmallRng) -> T) -> T {
    RNG.with(|r| f(&mut r.borrow_mut()))
}

fn out_arg(a: &Args<'_>, i: usize, what: &str) -> Result<Tensor> {
    Tensor::arg(a, i, what)
}

fn randint(a: &Args<'_>) -> Result<Value> {
    let what = "tvm.contrib.random.randint";
    a.expect_len(what, 3)?;
    let (low, high) = (a.i64(0)?, a.i64(1)?);
    if high <= low {
        return Err(Error::value(format!("{what}: high ({high}) must be greater than low ({low})")));
    }
    let raw = a.dltensor(2)?;
    // SAFETY: a tensor argument is a live DLTensor for the call.
    if !raw.is_null() && !unsafe { (*raw).strides }.is_null() {
        return Err(Error::value(format!("{what}: the output must not have strides")));
    }
    let t = out_arg(a, 2, what)?;
    let (min, max): (i64, i64) = match (t.dtype.code, t.dtype.bits, t.dtype.lanes) {
        (0, 8, 1) => (i8::MIN.into(), i8::MAX.into()),
        (0, 16, 1) => (i16::MIN.into(), i16::MAX.into()),
        (0, 32, 1) => (i32::MIN.into(), i32::MAX.into()),
        (1, 8, 1) => (0, u8::MAX.into()),
        (1, 16, 1) => (0, u16::MAX.into()),
        (1, 32, 1) => (0, u32::MAX.into()),
        _ => return Err(Error::value(format!("{what}: unknown data type {}", t.dtype_name()))),
    };
    let (lo, hi) = (low.max(min), high.min(max));
    if hi <= lo {
        return Err(Error::value(format!("{what}: [{low}, {high}) is empty for {}", t.dtype_name())));
    }
    let span = (hi - lo) as u64;
    with_rng(|r| {
        for i in 0..t.len {
            let v = lo + (u64::from(r.random::<u32>()) % span) as i64;
            // SAFETY: in every arm, `i < len` and the element type is the tensor's.
            unsafe {
                match t.dtype.bits {
                    8 => t.ptr.add(i).write(v as u8),
                    16 => t.ptr.cast::<u16>().add(i).write_unaligned(v as u16),
                    _ => t.ptr.cast::<u32>().add(i).write_unaligned(v as u32),
                }
            }
        }
    });
    Ok(Value::Null)
}

fn float32_out(a: &Args<'_>, i: usize, what: &str) -> Result<Tensor> {
    let t = out_arg(a, i, what)?;
    if (t.dtype.code, t.dtype.bits, t.dtype.lanes) != (2, 32, 1) {
        return Err(Error::value(format!("{what}: only float32 is supported, got {}", t.dtype_name())));
    }
    Ok(t)
}

fn fill_f32(t: &Tensor, mut f: impl FnMut() -> f32) {
    for i in 0..t.len {
        // SAFETY: `i < len` of a float32 tensor.
        unsafe { t.ptr.cast::<f32>().add(i).write_unaligned(f()) };
    }
}

fn uniform(a: &Args<'_>) -> Result<Value> {
    let what = "tvm.contrib.random.uniform";
    a.expect_len(what, 3)?;
    let (low, high) = (a.f64(0)?, a.f64(1)?);
    if high.partial_cmp(&low) != Some(std::cmp::Ordering::Greater) {
        return Err(Error::value(format!("{what}: high ({high}) must be greater than low ({low})")));
    }
    let t = float32_out(a, 2, what)?;
    with_rng(|r| fill_f32(&t, || (low + r.random::<f64>() * (high - low)) as f32));
    Ok(Value::Null)
}

fn normal(a: &Args<'_>) -> Result<Value> {
    let what = "tvm.contrib.random.normal";
    a.expect_len(what, 3)?;
    let (loc, scale) = (a.f64(0)?, a.f64(1)?);
    if scale.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Err(Error::value(format!("{what}: scale ({scale}) must be positive")));
    }
    let t = float32_out(a, 2, what)?;
    let d = Normal::new(loc, scale).map_err(|e| Error::value(format!("{what}: {e}")))?;
    with_rng(|r| fill_f32(&t, || d.sample(r) as f32));
    Ok(Value::Null)
}

/// Fills a CPU tensor with values from [1, 10) in the encoding its bit width implies.
fn fill_by_width(t: &Tensor, what: &str) -> Result<()> {
    let bits = t.dtype.bits as usize * t.dtype.lanes as usize;
    let n = t.len * t.dtype.lanes as usize;
    with_rng(|r| -> Result<()> {
        let mut u = || 1.0 + r.random::<f64>() * 9.0;
        for i in 0..n {
            // SAFETY: in every arm, `i` indexes the tensor's `n` scalars of that width.
            unsafe {
                match t.dtype.bits {
                    1 => t.ptr.add(i).write(u8::from(u() >= 5.5)),
                    4 => {
                        if i % 2 == 0 {
                            t.ptr.add(i / 2).write(17 + ((u() - 1.0) / 9.0 * 13.0) as u8);
                        }
                    }
                    8 => t.ptr.add(i).write(u() as u8),
                    16 => t.ptr.cast::<u16>().add(i).write_unaligned(half::f16::from_f64(u()).to_bits()),
                    32 => t.ptr.cast::<f32>().add(i).write_unaligned(u() as f32),
                    64 => t.ptr.cast::<f64>().add(i).write_unaligned(u()),
                    _ => return Err(Error::value(format!("{what}: unsupported bit width {bits}"))),
                }
            }
        }
        Ok(())
    })
}

fn random_fill(a: &Args<'_>) -> Result<Value> {
    let what = "tvm.contrib.random.random_fill";
    a.expect_len(what, 1)?;
    let raw = a.dltensor(0)?;
    if raw.is_null() {
        return Err(Error::value(format!("{what}: NULL tensor")));
    }
    // SAFETY: a tensor argument is a live DLTensor for the call.
    let t: &DLTensor = unsafe { &*raw };
    if t.device.device_type == crate::device::CPU {
        fill_by_width(&Tensor::of(t, what)?, what)?;
        return Ok(Value::Null);
    }
    // Another device: fill a CPU copy, then copy it over.
    let shape = crate::device::tensor_shape(t)?;
    let host = NDArray::empty(shape, t.dtype, DLDevice { device_type: crate::device::CPU, device_id: 0 })?;
    fill_by_width(&Tensor::of(host.tensor(), what)?, what)?;
    crate::ndarray::copy_tensor(host.tensor(), t, std::ptr::null_mut())?;
    crate::device::api(t.device.device_type)?.stream_sync(t.device, std::ptr::null_mut())?;
    Ok(Value::Null)
}

/// Registers the random globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("tvm.contrib.random.randint", randint);
    r.func("tvm.contrib.random.uniform", uniform);
    r.func("tvm.contrib.random.normal", normal);
    r.func("tvm.contrib.random.random_fill", random_fill);
}

#[cfg(test)]
mod tests {
    use crate::abi::DLDevice;
    use crate::ndarray::NDArray;
    use crate::registry;
    use crate::value::dtype::{dtype, FLOAT32};
    use crate::value::Value;

    fn call(name: &str, args: &[Value]) -> crate::error::Result<Value> {
        registry::get(name).unwrap().call(args)
    }

    fn empty(n: i64, t: crate::abi::DLDataType) -> NDArray {
        NDArray::empty(&[n], t, DLDevice { device_type: 1, device_id: 0 }).unwrap()
    }

    #[test]
    fn distributions_stay_in_range() {
        let a = empty(1000, FLOAT32);
        call("tvm.contrib.random.uniform", &[Value::Float(-2.0), Value::Float(3.0), Value::NDArray(a.clone())])
            .unwrap();
        // SAFETY: 1000 floats of a CPU array.
        let v = unsafe { std::slice::from_raw_parts(a.tensor().data.cast::<f32>(), 1000) };
        assert!(v.iter().all(|x| (-2.0..3.0).contains(x)));
        assert!(v.iter().any(|x| *x < 0.0) && v.iter().any(|x| *x > 1.0), "spread over the range");
        call("tvm.contrib.random.normal", &[Value::Float(10.0), Value::Float(0.5), Value::NDArray(a.clone())]).unwrap();
        let mean = v.iter().map(|x| f64::from(*x)).sum::<f64>() / 1000.0;
        assert!((mean - 10.0).abs() < 0.2, "{mean}");

        let b = empty(500, dtype(0, 8, 1));
        call("tvm.contrib.random.randint", &[Value::Int(-3), Value::Int(1000), Value::NDArray(b.clone())]).unwrap();
        // SAFETY: 500 int8 of a CPU array.
        let v = unsafe { std::slice::from_raw_parts(b.tensor().data.cast::<i8>(), 500) };
        assert!(v.iter().all(|x| (-3..=127).contains(&i16::from(*x))));
        let c = empty(4, dtype(0, 64, 1));
        let e = call("tvm.contrib.random.randint", &[Value::Int(0), Value::Int(5), Value::NDArray(c)]).unwrap_err();
        assert!(e.to_string().contains("unknown data type int64"), "{e}");
        assert!(call("tvm.contrib.random.uniform", &[Value::Float(1.0), Value::Float(1.0), Value::NDArray(a)]).is_err());

        let f = empty(300, dtype(2, 64, 1));
        call("tvm.contrib.random.random_fill", &[Value::NDArray(f.clone())]).unwrap();
        // SAFETY: 300 doubles of a CPU array.
        let v = unsafe { std::slice::from_raw_parts(f.tensor().data.cast::<f64>(), 300) };
        assert!(v.iter().all(|x| (1.0..10.0).contains(x)));
    }
}
