//! Data type text forms of tvm-ffi (`TVMFFIDataTypeFromString` / `ToString`).

use super::{FfiError, FfiResult};
use crate::abi::DLDataType;

/// Parses a data type.
pub fn parse(s: &str) -> FfiResult<DLDataType> {
    crate::value::dtype::parse(s).map_err(|_| FfiError::value(format!("unknown dtype `{s}`")))
}

/// Formats a data type.
pub fn format(t: DLDataType) -> FfiResult<String> {
    crate::value::dtype::format(t).map_err(FfiError::from)
}
