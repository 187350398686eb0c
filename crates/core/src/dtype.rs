//! `DLDataType` text forms and size rules.

use crate::abi::DLDataType;
use crate::error::{Error, Result};
use std::sync::OnceLock;

/// `kDLInt`.
pub const CODE_INT: u8 = 0;
/// `kDLUInt`.
pub const CODE_UINT: u8 = 1;
/// `kDLFloat`.
pub const CODE_FLOAT: u8 = 2;
/// `kDLOpaqueHandle`.
pub const CODE_HANDLE: u8 = 3;
/// `kDLBfloat`.
pub(crate) const CODE_BFLOAT: u8 = 4;
/// First custom type code.
pub(crate) const CODE_CUSTOM_BEGIN: u8 = 129;

/// Builds a data type.
pub const fn dtype(code: u8, bits: u8, lanes: u16) -> DLDataType {
    DLDataType { code, bits, lanes }
}

/// `float32`.
pub const FLOAT32: DLDataType = dtype(CODE_FLOAT, 32, 1);

/// The names of custom data types (`custom[<name>]`, codes from [`CODE_CUSTOM_BEGIN`] on): the
/// compiler defines them through the globals `runtime._datatype_get_type_name` and
/// `runtime._datatype_get_type_code`. The registry that holds those installs this lookup when it
/// starts; before that no such global can exist, and the lookup fails as TVM's does.
pub struct CustomTypes {
    /// The name of a custom type code.
    pub name: fn(u8) -> Result<String>,
    /// The code of a custom type name.
    pub code: fn(&str) -> Result<u8>,
}

static CUSTOM: OnceLock<CustomTypes> = OnceLock::new();

/// Installs the lookup of custom data types (once; later calls are ignored).
pub fn install_custom_types(t: CustomTypes) {
    let _ = CUSTOM.set(t);
}

fn custom_name(code: u8) -> Result<String> {
    match CUSTOM.get() {
        Some(t) => (t.name)(code),
        None => Err(Error::tvm("Function runtime._datatype_get_type_name not found")),
    }
}

fn custom_code(name: &str) -> Result<u8> {
    match CUSTOM.get() {
        Some(t) => (t.code)(name),
        None => Err(Error::tvm("Function runtime._datatype_get_type_code not found")),
    }
}

/// Bytes taken by one element, rounded up (`(bits * lanes + 7) / 8`).
pub fn element_bytes(t: DLDataType) -> usize {
    (t.bits as usize * t.lanes as usize).div_ceil(8)
}

/// Formats a data type as TVM does (`float32`, `int8x4`, `bool`, `handle`, "" for void).
pub fn format(t: DLDataType) -> Result<String> {
    if t.bits == 0 {
        return Ok(String::new());
    }
    if t.code == CODE_UINT && t.bits == 1 && t.lanes == 1 {
        return Ok("bool".into());
    }
    let prefix: String = match t.code {
        CODE_INT => "int".into(),
        CODE_UINT => "uint".into(),
        CODE_FLOAT => "float".into(),
        CODE_HANDLE => return Ok("handle".into()),
        CODE_BFLOAT => "bfloat".into(),
        c if c >= CODE_CUSTOM_BEGIN => {
            let name = custom_name(c)?;
            format!("custom[{name}]")
        }
        c => return Err(Error::value(format!("unknown type_code={c}"))),
    };
    let mut s = format!("{prefix}{}", t.bits);
    if t.lanes != 1 {
        s.push_str(&format!("x{}", t.lanes));
    }
    Ok(s)
}

/// Parses TVM's text form of a data type.
pub fn parse(s: &str) -> Result<DLDataType> {
    let bad = || Error::value(format!("unknown type {s}"));
    if s.is_empty() {
        return Ok(dtype(CODE_HANDLE, 0, 0));
    }
    if s == "bool" {
        return Ok(dtype(CODE_UINT, 1, 1));
    }
    let mut t = dtype(0, 32, 1);
    let rest = if let Some(r) = s.strip_prefix("int") {
        t.code = CODE_INT;
        r
    } else if let Some(r) = s.strip_prefix("uint") {
        t.code = CODE_UINT;
        r
    } else if let Some(r) = s.strip_prefix("float") {
        t.code = CODE_FLOAT;
        r
    } else if let Some(r) = s.strip_prefix("handle") {
        t.code = CODE_HANDLE;
        t.bits = 64;
        r
    } else if let Some(r) = s.strip_prefix("bfloat") {
        t.code = CODE_BFLOAT;
        r
    } else if let Some(r) = s.strip_prefix("custom[") {
        let end = r.find(']').ok_or_else(bad)?;
        t.code = custom_code(&r[..end])?;
        &r[end + 1..]
    } else {
        return Err(bad());
    };
    let (bits, rest) = split_number(rest);
    if let Some(b) = bits {
        if b != 0 {
            // TVM stores the parsed value in a u8: int256 silently becomes int32 there; we
            // reject what does not fit instead.
            t.bits = u8::try_from(b).map_err(|_| bad())?;
        }
    }
    let rest = match rest.strip_prefix('x') {
        Some(r) => {
            let (lanes, r2) = split_number(r);
            t.lanes = lanes.and_then(|l| u16::try_from(l).ok()).ok_or_else(bad)?;
            r2
        }
        None => rest,
    };
    if !rest.is_empty() {
        return Err(bad());
    }
    Ok(t)
}

fn split_number(s: &str) -> (Option<u64>, &str) {
    let end = s.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return (None, s);
    }
    (s[..end].parse().ok(), &s[end..])
}

/// Validates a dtype for allocation as `TVMArrayAlloc` does.
pub fn check_alloc_dtype(t: DLDataType) -> Result<()> {
    if t.lanes < 1 {
        return Err(Error::value("invalid data type: lanes must be at least 1"));
    }
    if t.code == CODE_FLOAT && t.bits % 8 != 0 {
        return Err(Error::value(format!("invalid data type: float{} (bits must be a multiple of 8)", t.bits)));
    }
    if (t.code == CODE_INT || t.code == CODE_UINT) && !(t.bits == 1 || t.bits == 4 || t.bits % 8 == 0) {
        return Err(Error::value(format!("invalid data type: integer of {} bits", t.bits)));
    }
    if !t.bits.is_power_of_two() {
        return Err(Error::value(format!("invalid data type: {} bits is not a power of two", t.bits)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in ["float32", "int8", "uint8", "float16", "float32x4", "bfloat16", "bool", "handle", "int64", "uint1x8"]
        {
            let t = parse(s).unwrap();
            assert_eq!(format(t).unwrap(), s, "{s}");
        }
        assert_eq!(parse("int").unwrap(), dtype(0, 32, 1));
        assert_eq!(parse("handle").unwrap(), dtype(3, 64, 1));
        assert_eq!(parse("").unwrap(), dtype(3, 0, 0));
        assert_eq!(format(dtype(2, 0, 1)).unwrap(), "");
        assert!(parse("float32y").is_err());
        assert!(parse("complex64").is_err());
        assert!(format(dtype(5, 64, 1)).is_err());
    }

    #[test]
    fn alloc_rules() {
        assert!(check_alloc_dtype(dtype(0, 24, 1)).is_err());
        assert!(check_alloc_dtype(dtype(2, 12, 1)).is_err());
        assert!(check_alloc_dtype(dtype(2, 32, 0)).is_err());
        assert!(check_alloc_dtype(dtype(0, 4, 1)).is_ok());
        assert!(check_alloc_dtype(dtype(4, 16, 1)).is_ok());
        assert_eq!(element_bytes(dtype(1, 1, 1)), 1);
        assert_eq!(element_bytes(dtype(2, 32, 4)), 16);
    }
}
