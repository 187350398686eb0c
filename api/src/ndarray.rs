//! [`NDArray`] and the element types it converts from and to ([`Element`]).

use crate::{DataType, Device, Error, Result};
use std::borrow::Cow;
use std::fmt;
use tvm_runtime::ndarray::NDArray as CoreArray;

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the element type of an array: `f32`, `f64`, `i8`..`i64`, `u8`..`u64`,
/// `bool`, [`half::f16`] (`float16`) and [`half::bf16`] (`bfloat16`).
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The array data type of this element type.
    const DTYPE: DataType;
    /// The elements as the bytes an array holds (native byte order).
    fn as_bytes(data: &[Self]) -> Cow<'_, [u8]>;
    /// Elements from an array's bytes (`bytes.len()` is a multiple of the element size).
    fn from_bytes(bytes: &[u8]) -> Vec<Self>;
}

macro_rules! pod_element {
    ($($t:ty => $dt:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = $dt;
            fn as_bytes(data: &[Self]) -> Cow<'_, [u8]> {
                Cow::Borrowed(bytemuck::cast_slice(data))
            }
            fn from_bytes(bytes: &[u8]) -> Vec<Self> {
                bytemuck::pod_collect_to_vec(bytes)
            }
        }
    )*};
}

pod_element! {
    f32 => DataType::FLOAT32, f64 => DataType::FLOAT64,
    i8 => DataType::INT8, i16 => DataType::INT16, i32 => DataType::INT32, i64 => DataType::INT64,
    u8 => DataType::UINT8, u16 => DataType::UINT16, u32 => DataType::UINT32, u64 => DataType::UINT64,
}

macro_rules! half_element {
    ($($t:ty => $dt:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = $dt;
            fn as_bytes(data: &[Self]) -> Cow<'_, [u8]> {
                Cow::Owned(data.iter().flat_map(|x| x.to_bits().to_ne_bytes()).collect())
            }
            fn from_bytes(bytes: &[u8]) -> Vec<Self> {
                u16::from_bytes(bytes).into_iter().map(<$t>::from_bits).collect()
            }
        }
    )*};
}

half_element! { half::f16 => DataType::FLOAT16, half::bf16 => DataType::BFLOAT16 }

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DataType = DataType::BOOL;
    fn as_bytes(data: &[Self]) -> Cow<'_, [u8]> {
        Cow::Owned(data.iter().map(|&b| u8::from(b)).collect())
    }
    fn from_bytes(bytes: &[u8]) -> Vec<Self> {
        bytes.iter().map(|&b| b != 0).collect()
    }
}

/// An n-dimensional array on a device: TVM's `NDArray`.
///
/// Cloning shares the array (a reference count), as in TVM. Its contents are only ever read and
/// written by copying (`copy_from_*`, `to_vec`, `to_bytes`): the API never hands out Rust
/// references into an array's memory, which may be on a GPU. Arrays returned by the runtime's
/// own functions may share memory with it; [`crate::GraphExecutor`] returns copies.
///
/// `Send + Sync`: the reference count is atomic. Writing one array from two threads at once, or
/// reading it while another thread writes it, gives unspecified contents (as in TVM); arrange
/// such access yourself.
#[derive(Clone)]
pub struct NDArray(pub(crate) CoreArray);

fn numel(shape: &[i64]) -> Result<usize> {
    shape.iter().try_fold(1usize, |n, &d| {
        let d = usize::try_from(d).map_err(|_| Error::value(format!("negative extent {d} in shape {shape:?}")))?;
        n.checked_mul(d).ok_or_else(|| Error::value(format!("shape {shape:?} has too many elements")))
    })
}

impl NDArray {
    /// A new array with uninitialised contents.
    pub fn empty(shape: &[i64], dtype: DataType, device: Device) -> Result<NDArray> {
        CoreArray::empty(shape, dtype.dl(), device.dl()).map(NDArray)
    }

    /// A new array holding `data` (C order), of `shape`; the length must match the shape.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64], device: Device) -> Result<NDArray> {
        let a = NDArray::empty(shape, T::DTYPE, device)?;
        a.copy_from_slice(data)?;
        Ok(a)
    }

    /// A new array from raw element bytes (native byte order, C order).
    pub fn from_bytes(bytes: &[u8], shape: &[i64], dtype: DataType, device: Device) -> Result<NDArray> {
        let a = NDArray::empty(shape, dtype, device)?;
        a.copy_from_bytes(bytes)?;
        Ok(a)
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        self.0.shape()
    }

    /// A view of the same memory with another shape of as many elements (as TVM's
    /// `NDArray.CreateView`; writes through either are seen by both).
    pub fn reshape(&self, shape: &[i64]) -> Result<NDArray> {
        if numel(shape)? != self.len() {
            return Err(Error::value(format!("cannot view an array of shape {:?} as {shape:?}", self.shape())));
        }
        self.0.create_view(shape, self.0.dtype()).map(NDArray)
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.0.shape().len()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.0.shape().iter().map(|&d| usize::try_from(d).unwrap_or(0)).product()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type.
    pub fn dtype(&self) -> DataType {
        DataType::from_dl(self.0.dtype())
    }

    /// The device that holds the data.
    pub fn device(&self) -> Device {
        Device::from_dl(self.0.device())
    }

    /// The size of the data in bytes.
    pub fn byte_size(&self) -> usize {
        self.0.byte_size().unwrap_or(0)
    }

    fn check_element<T: Element>(&self, what: &str) -> Result<()> {
        if T::DTYPE != self.dtype() {
            return Err(Error::type_error(format!(
                "{what}: the array holds {} but the Rust elements are {}",
                self.dtype(),
                T::DTYPE
            )));
        }
        Ok(())
    }

    /// Copies `data` (C order) in; its element type must be the array's and its length the
    /// number of elements.
    pub fn copy_from_slice<T: Element>(&self, data: &[T]) -> Result<()> {
        self.check_element::<T>("copy_from_slice")?;
        let n = numel(self.shape())?;
        if data.len() != n {
            return Err(Error::value(format!(
                "copy_from_slice: the array of shape {:?} has {n} elements, the slice {}",
                self.shape(),
                data.len()
            )));
        }
        self.copy_from_bytes(&T::as_bytes(data))
    }

    /// Copies raw element bytes in (their length must be [`NDArray::byte_size`]).
    pub fn copy_from_bytes(&self, bytes: &[u8]) -> Result<()> {
        self.0.copy_from_bytes(bytes)
    }

    /// Copies another array's contents in (same size; any devices).
    pub fn copy_from(&self, other: &NDArray) -> Result<()> {
        self.0.copy_from(other.0.tensor())
    }

    /// The contents as a vector (C order); `T` must be the array's element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_element::<T>("to_vec")?;
        Ok(T::from_bytes(&self.to_bytes()?))
    }

    /// The contents as raw bytes (native byte order, C order), copied to the host.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.0.to_bytes()
    }

    /// A copy on another device.
    pub fn copy_to(&self, device: Device) -> Result<NDArray> {
        let a = NDArray::empty(self.shape(), self.dtype(), device)?;
        a.copy_from(self)?;
        Ok(a)
    }

    /// Whether two handles name the same array.
    pub fn same_array(&self, other: &NDArray) -> bool {
        self.0.ptr_eq(&other.0)
    }

    /// A new array holding the elements of an `ndarray` array (any layout; copied in logical
    /// order).
    #[cfg(feature = "ndarray")]
    pub fn from_ndarray<T, S, D>(a: &ndarray::ArrayBase<S, D>, device: Device) -> Result<NDArray>
    where
        T: Element,
        S: ndarray::Data<Elem = T>,
        D: ndarray::Dimension,
    {
        let shape = a
            .shape()
            .iter()
            .map(|&d| i64::try_from(d).map_err(|_| Error::value("extent too large")))
            .collect::<Result<Vec<i64>>>()?;
        match a.as_slice() {
            Some(s) => NDArray::from_slice(s, &shape, device),
            None => NDArray::from_slice(&a.iter().copied().collect::<Vec<T>>(), &shape, device),
        }
    }

    /// The contents as an `ndarray` array of dynamic dimension; `T` must be the array's element
    /// type.
    #[cfg(feature = "ndarray")]
    pub fn to_ndarray<T: Element>(&self) -> Result<ndarray::ArrayD<T>> {
        let shape: Vec<usize> = self.shape().iter().map(|&d| usize::try_from(d).unwrap_or(0)).collect();
        let v = self.to_vec::<T>()?;
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), v).map_err(|e| Error::value(e.to_string()))
    }
}

impl fmt::Debug for NDArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NDArray({}{:?} on {})", self.dtype(), self.shape(), self.device())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_round_trip_with_checks() {
        let a = NDArray::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], Device::cpu()).unwrap();
        assert_eq!(a.shape(), &[2, 3]);
        assert_eq!(a.dtype(), DataType::FLOAT32);
        assert_eq!(a.len(), 6);
        assert_eq!(a.byte_size(), 24);
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let e = a.to_vec::<i32>().unwrap_err().to_string();
        assert_eq!(e, "TypeError: to_vec: the array holds float32 but the Rust elements are int32");
        assert!(a.copy_from_slice(&[1.0f32]).unwrap_err().to_string().contains("has 6 elements, the slice 1"));
        let b = a.copy_to(Device::cpu()).unwrap();
        assert!(!b.same_array(&a));
        assert_eq!(b.to_bytes().unwrap(), a.to_bytes().unwrap());
        let flags = NDArray::from_slice(&[true, false, true], &[3], Device::cpu()).unwrap();
        assert_eq!(flags.dtype().to_string(), "bool");
        assert_eq!(flags.to_vec::<bool>().unwrap(), vec![true, false, true]);
        let h = NDArray::from_slice(&[half::f16::from_f32(1.5)], &[1], Device::cpu()).unwrap();
        assert_eq!(h.to_vec::<half::f16>().unwrap()[0].to_f32(), 1.5);
        assert_eq!(h.to_bytes().unwrap(), half::f16::from_f32(1.5).to_ne_bytes());
        assert!(NDArray::from_slice(&[1i8], &[-1], Device::cpu()).is_err());
    }

    #[cfg(feature = "ndarray")]
    #[test]
    fn ndarray_round_trip_any_layout() {
        let m = ndarray::Array2::from_shape_vec((2, 3), vec![1i64, 2, 3, 4, 5, 6]).unwrap();
        let t = m.t(); // a transposed view: not in C order
        let a = NDArray::from_ndarray(&t, Device::cpu()).unwrap();
        assert_eq!(a.shape(), &[3, 2]);
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![1, 4, 2, 5, 3, 6]);
        let back = a.to_ndarray::<i64>().unwrap();
        assert_eq!(back, t.into_dyn());
        assert!(a.to_ndarray::<f64>().is_err());
    }
}
