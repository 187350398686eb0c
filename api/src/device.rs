//! [`Device`] and [`DataType`].

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;
use tvm_runtime::abi::{DLDataType, DLDevice};
use tvm_runtime::device as core_device;
use tvm_runtime::value::dtype as core_dtype;

/// A device: a device type (TVM's `DLDeviceType` number) and an index.
///
/// Written and parsed as `name[:index]` (`cpu`, `cuda:1`, `opencl:0`), with TVM's device names.
///
/// `Send + Sync`: a plain value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    device_type: i32,
    id: i32,
}

impl Device {
    /// `kDLCPU`.
    pub const CPU: i32 = core_device::CPU;
    /// `kDLCUDA`.
    pub const CUDA: i32 = core_device::CUDA;
    /// `kDLOpenCL`.
    pub const OPENCL: i32 = core_device::OPENCL;

    /// A device of any type.
    pub const fn new(device_type: i32, id: i32) -> Device {
        Device { device_type, id }
    }

    /// The CPU.
    pub const fn cpu() -> Device {
        Device::new(Self::CPU, 0)
    }

    /// CUDA GPU `id`.
    pub const fn cuda(id: i32) -> Device {
        Device::new(Self::CUDA, id)
    }

    /// OpenCL device `id`.
    pub const fn opencl(id: i32) -> Device {
        Device::new(Self::OPENCL, id)
    }

    /// The device type number.
    pub fn device_type(&self) -> i32 {
        self.device_type
    }

    /// The device index.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// TVM's name of the device type (`cpu`, `cuda`, `opencl`, ...), or `unknown`.
    pub fn type_name(&self) -> &'static str {
        core_device::device_name(self.device_type).unwrap_or("unknown")
    }

    /// Whether the device is present (TVM's `Device.exist`): `false` also when its driver cannot
    /// be opened.
    pub fn exists(&self) -> bool {
        match core_device::api(self.device_type) {
            Ok(api) => matches!(api.get_attr(self.dl(), 0), Ok(tvm_runtime::device::Attr::Int(n)) if n != 0),
            Err(_) => false,
        }
    }

    /// `Ok` if the device is present, else an error saying why not (the driver's or the
    /// runtime's reason), as one line.
    pub fn check_present(&self) -> Result<()> {
        if self.exists() {
            return Ok(());
        }
        // A one-element allocation fails with the back end's own reason (no driver, no device).
        let reason = match tvm_runtime::ndarray::NDArray::empty(&[1], core_dtype::FLOAT32, self.dl()) {
            Ok(_) => "it reports that it does not exist".to_owned(),
            Err(e) => e.to_string(),
        };
        Err(Error::value(format!("device {self} is not present: {reason}")))
    }

    /// Waits until the work queued on the device is done.
    pub fn sync(&self) -> Result<()> {
        core_device::api(self.device_type)?.stream_sync(self.dl(), std::ptr::null_mut())
    }

    pub(crate) fn dl(self) -> DLDevice {
        DLDevice { device_type: self.device_type, device_id: self.id }
    }

    pub(crate) fn from_dl(d: DLDevice) -> Device {
        Device::new(d.device_type, d.device_id)
    }
}

impl Default for Device {
    fn default() -> Device {
        Device::cpu()
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match core_device::device_name(self.device_type) {
            Ok(n) => write!(f, "{n}:{}", self.id),
            Err(_) => write!(f, "device_type_{}:{}", self.device_type, self.id),
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Device {
    type Err = Error;

    /// Parses `name[:index]`: `cpu`, `cuda:1`, `opencl`, `gpu` (= `cuda`), `cl` (= `opencl`),
    /// or any other TVM device name (`vulkan`, `metal`, `rocm`, ...).
    fn from_str(s: &str) -> Result<Device> {
        let (name, id) = match s.split_once(':') {
            Some((n, i)) => {
                let id =
                    i.parse::<i32>().ok().filter(|&i| i >= 0).ok_or_else(|| {
                        Error::value(format!("device {s}: the index {i} is not a non-negative integer"))
                    })?;
                (n, id)
            }
            None => (s, 0),
        };
        let name = match name.to_ascii_lowercase().as_str() {
            "gpu" => "cuda".to_owned(),
            "cl" => "opencl".to_owned(),
            "llvm" | "c" => "cpu".to_owned(),
            n => n.to_owned(),
        };
        let device_type = (1..=15)
            .find(|&t| core_device::device_name(t).is_ok_and(|n| n == name))
            .ok_or_else(|| Error::value(format!("unknown device {s} (expected cpu, cuda[:N], opencl[:N], ...)")))?;
        Ok(Device::new(device_type, id))
    }
}

/// An element type (TVM's `DLDataType`): `float32`, `int8`, `bool`, `float32x4`, ...
///
/// `Send + Sync`: a plain value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

impl DataType {
    /// `int8`.
    pub const INT8: DataType = DataType::new(0, 8, 1);
    /// `int16`.
    pub const INT16: DataType = DataType::new(0, 16, 1);
    /// `int32`.
    pub const INT32: DataType = DataType::new(0, 32, 1);
    /// `int64`.
    pub const INT64: DataType = DataType::new(0, 64, 1);
    /// `uint8`.
    pub const UINT8: DataType = DataType::new(1, 8, 1);
    /// `uint16`.
    pub const UINT16: DataType = DataType::new(1, 16, 1);
    /// `uint32`.
    pub const UINT32: DataType = DataType::new(1, 32, 1);
    /// `uint64`.
    pub const UINT64: DataType = DataType::new(1, 64, 1);
    /// `float16`.
    pub const FLOAT16: DataType = DataType::new(2, 16, 1);
    /// `float32`.
    pub const FLOAT32: DataType = DataType::new(2, 32, 1);
    /// `float64`.
    pub const FLOAT64: DataType = DataType::new(2, 64, 1);
    /// `bfloat16`.
    pub const BFLOAT16: DataType = DataType::new(4, 16, 1);
    /// `bool` (`uint1`, one byte per element in memory).
    pub const BOOL: DataType = DataType::new(1, 1, 1);

    /// A data type from its parts: type code (0 int, 1 uint, 2 float, 3 handle, 4 bfloat),
    /// bits per lane, lanes.
    pub const fn new(code: u8, bits: u8, lanes: u16) -> DataType {
        DataType { code, bits, lanes }
    }

    /// The type code.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// Bits per lane.
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// Lanes (1 for scalars).
    pub fn lanes(&self) -> u16 {
        self.lanes
    }

    /// Bytes one element takes in memory (`(bits * lanes + 7) / 8`).
    pub fn element_bytes(&self) -> usize {
        core_dtype::element_bytes(self.dl())
    }

    pub(crate) fn dl(self) -> DLDataType {
        DLDataType { code: self.code, bits: self.bits, lanes: self.lanes }
    }

    pub(crate) fn from_dl(t: DLDataType) -> DataType {
        DataType::new(t.code, t.bits, t.lanes)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match core_dtype::format(self.dl()) {
            Ok(s) => f.write_str(&s),
            Err(_) => write!(f, "type({}, {}, {})", self.code, self.bits, self.lanes),
        }
    }
}

impl fmt::Debug for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for DataType {
    type Err = Error;

    /// TVM's text form: `float32`, `int8`, `uint1x8`, `bool`, `bfloat16`, ...
    fn from_str(s: &str) -> Result<DataType> {
        if s.is_empty() {
            return Err(Error::value("empty data type"));
        }
        core_dtype::parse(s).map(DataType::from_dl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_and_print() {
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::cpu());
        assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::cuda(1));
        assert_eq!("OpenCL:2".parse::<Device>().unwrap(), Device::opencl(2));
        assert_eq!("vulkan".parse::<Device>().unwrap().device_type(), 7);
        assert_eq!(Device::cuda(3).to_string(), "cuda:3");
        assert!("tpu".parse::<Device>().unwrap_err().to_string().contains("unknown device tpu"));
        assert!("cuda:-1".parse::<Device>().is_err());
        assert!(Device::cpu().exists());
        assert!(Device::cpu().check_present().is_ok());
        let e = Device::new(7, 0).check_present().unwrap_err().to_string();
        assert!(e.starts_with("ValueError: device vulkan:0 is not present: "), "{e}");
    }

    #[test]
    fn data_types_parse_and_print() {
        for s in ["float32", "int8", "bool", "bfloat16", "float16", "uint64", "float32x4"] {
            assert_eq!(s.parse::<DataType>().unwrap().to_string(), s);
        }
        assert_eq!("float32".parse::<DataType>().unwrap(), DataType::FLOAT32);
        assert_eq!(DataType::BOOL.element_bytes(), 1);
        assert_eq!("float32x4".parse::<DataType>().unwrap().element_bytes(), 16);
        assert!("complex64".parse::<DataType>().is_err());
        assert!("".parse::<DataType>().is_err());
    }
}
