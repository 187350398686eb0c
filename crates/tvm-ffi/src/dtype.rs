//! Data type text forms of tvm-ffi (`TVMFFIDataTypeFromString` / `ToString`). They differ from
//! the classic runtime's: `bool` is DLPack's `kDLBool` with 8 bits (not `uint1`), the short
//! aliases `i32`, `u8`, `f16`, `bf16`, `fp8_*` are accepted, and the float8/6/4 variants of
//! DLPack 1.x have their own codes.

use super::{FfiError, FfiResult};
use tvm_runtime_classic::abi::DLDataType;

const INT: u8 = 0;
const UINT: u8 = 1;
const FLOAT: u8 = 2;
const HANDLE: u8 = 3;
const BFLOAT: u8 = 4;
const BOOL: u8 = 6;
const CUSTOM_BEGIN: u8 = 129;

/// The names of the float8/6/4 codes 7..=17, in code order.
const SMALL_FLOATS: [&str; 11] = [
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
];

fn code_name(code: u8) -> FfiResult<String> {
    Ok(match code {
        INT => "int".into(),
        UINT => "uint".into(),
        FLOAT => "float".into(),
        HANDLE => "handle".into(),
        BFLOAT => "bfloat".into(),
        BOOL => "bool".into(),
        7..=17 => SMALL_FLOATS[(code - 7) as usize].into(),
        c if c >= CUSTOM_BEGIN => format!("custom[{}]", custom_name(c)?),
        c => return Err(FfiError::value(format!("DLDataType contains unknown type_code={c}"))),
    })
}

fn custom_name(code: u8) -> FfiResult<String> {
    let f = super::registry::get("dtype.get_custom_type_name")
        .ok_or_else(|| FfiError::value(format!("custom type code {code}: no dtype.get_custom_type_name registered")))?;
    let r = super::function::call_any(&f, &[super::Any::int(code as i64)])?;
    r.as_str()
        .map(str::to_string)
        .ok_or_else(|| FfiError::type_error("dtype.get_custom_type_name returned a non-string"))
}

/// Formats a data type as tvm-ffi does.
pub fn format(t: DLDataType) -> FfiResult<String> {
    if t.bits == 8 && t.lanes == 1 && t.code == BOOL {
        return Ok("bool".into());
    }
    if t.code == HANDLE && t.lanes == 0 && t.bits == 0 {
        return Ok(String::new());
    }
    let mut s = code_name(t.code)?;
    if t.code == HANDLE {
        return Ok(s);
    }
    let lanes = t.lanes as i16;
    if t.code < 7 && (t.code != BOOL || t.bits != 8) {
        s.push_str(&t.bits.to_string());
    }
    if lanes > 1 {
        s.push_str(&format!("x{lanes}"));
    } else if lanes < -1 {
        s.push_str(&format!("xvscalex{}", -(lanes as i32)));
    }
    Ok(s)
}

fn digits(s: &str) -> (u64, usize) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    let mut v: u64 = 0;
    for b in s[..n].bytes() {
        v = v.saturating_mul(10).saturating_add((b - b'0') as u64);
    }
    (v, n)
}

fn lanes(rest: &str, whole: &str, allow_scalable: bool) -> FfiResult<(u16, usize)> {
    let mut mult: i32 = 1;
    let mut r = rest;
    let mut used = 0;
    if allow_scalable && r.starts_with("xvscale") {
        mult = -1;
        r = &r[7..];
        used = 7;
    }
    if !r.starts_with('x') {
        return Ok((1, 0));
    }
    let (v, n) = digits(&r[1..]);
    if n == 0 || v == 0 {
        return Err(FfiError::value(format!(
            "Invalid lanes specification in dtype '{whole}'. Lanes must be a positive integer."
        )));
    }
    if v > u32::MAX as u64 {
        return Err(FfiError::value(format!(
            "Integer value in dtype string '{}' is out of range for uint32_t",
            &r[1..1 + n]
        )));
    }
    if v > u16::MAX as u64 {
        return Err(FfiError::value(format!("Lanes value {v} is out of range for uint16_t in dtype '{whole}'")));
    }
    Ok(((mult * v as i32) as u16, used + 1 + n))
}

fn small_float(s: &str, offset: usize, family: &str) -> FfiResult<DLDataType> {
    let (names, bits): (&[(&str, u8)], u8) = match family {
        "8" => (
            &[
                ("e4m3b11fnuz", 9),
                ("e4m3fnuz", 11),
                ("e4m3fn", 10),
                ("e5m2fnuz", 13),
                ("e8m0fnu", 14),
                ("e3m4", 7),
                ("e4m3", 8),
                ("e5m2", 12),
            ],
            8,
        ),
        "6" => (&[("e2m3fn", 15), ("e3m2fn", 16)], 6),
        _ => (&[("e2m1fn", 17)], 4),
    };
    let underscore = family == "4";
    let rest = &s[offset..];
    for (name, code) in names {
        if let Some(after) = rest.strip_prefix(name) {
            let next = after.as_bytes().first();
            if !(after.is_empty() || next == Some(&b'x') || underscore && next == Some(&b'_')) {
                continue;
            }
            let after = if underscore { after.strip_prefix('_').unwrap_or(after) } else { after };
            let (l, used) = lanes(after, s, false)?;
            if used != after.len() {
                return Err(FfiError::value(format!("unknown dtype `{s}`")));
            }
            return Ok(DLDataType { code: *code, bits, lanes: l });
        }
    }
    Err(FfiError::value(format!("unknown float{family} type `{s}`")))
}

/// Parses tvm-ffi's text form of a data type.
pub fn parse(input: &str) -> FfiResult<DLDataType> {
    if input.is_empty() || input == "void" {
        return Ok(DLDataType { code: HANDLE, bits: 0, lanes: 0 });
    }
    let digit_at = |s: &str, i: usize| s.as_bytes().get(i).is_some_and(u8::is_ascii_digit);
    let normalized: String = if input.starts_with('i') && digit_at(input, 1) {
        format!("int{}", &input[1..])
    } else if input.starts_with('u') && digit_at(input, 1) {
        format!("uint{}", &input[1..])
    } else if input.starts_with("bf") && digit_at(input, 2) {
        format!("bfloat{}", &input[2..])
    } else if let Some(r) = input.strip_prefix("fp8_") {
        format!("float8_{r}")
    } else if let Some(r) = input.strip_prefix("fp6_") {
        format!("float6_{r}")
    } else if let Some(r) = input.strip_prefix("fp4_") {
        format!("float4_{r}")
    } else if input.starts_with('f') && digit_at(input, 1) {
        format!("float{}", &input[1..])
    } else {
        input.to_string()
    };
    let s = normalized.as_str();
    let mut t = DLDataType { code: 0, bits: 32, lanes: 1 };
    let scan: usize;
    if let Some(r) = s.strip_prefix("f8_") {
        return small_float(&format!("float8_{r}"), 7, "8");
    } else if let Some(r) = s.strip_prefix("f6_") {
        return small_float(&format!("float6_{r}"), 7, "6");
    } else if let Some(r) = s.strip_prefix("f4_") {
        return small_float(&format!("float4_{r}"), 7, "4");
    }
    if s.starts_with("int") {
        t.code = INT;
        scan = 3;
    } else if s.starts_with("uint") {
        t.code = UINT;
        scan = 4;
    } else if s.starts_with("bool") {
        t.code = BOOL;
        t.bits = 8;
        scan = 4;
    } else if s.starts_with("float") {
        for fam in ["8", "6", "4"] {
            if s.strip_prefix("float").is_some_and(|r| r.starts_with(&format!("{fam}_"))) {
                return small_float(s, 7, fam);
            }
        }
        t.code = FLOAT;
        scan = 5;
    } else if s.starts_with("handle") {
        t.code = HANDLE;
        t.bits = 64;
        scan = 6;
    } else if s.starts_with("bfloat") {
        t.code = BFLOAT;
        t.bits = 16;
        scan = 6;
    } else if let Some(r) = s.strip_prefix("custom") {
        let inner = r
            .strip_prefix('[')
            .ok_or_else(|| FfiError::value(format!("expected opening brace after 'custom' type in{s}")))?;
        let end = inner
            .find(']')
            .ok_or_else(|| FfiError::value(format!("expected closing brace after 'custom' type in{s}")))?;
        let name = &inner[..end];
        let f = super::registry::get("dtype.get_custom_type_code").ok_or_else(|| {
            FfiError::value(format!("custom type `{name}`: no dtype.get_custom_type_code registered"))
        })?;
        let code = super::function::call_any(&f, &[super::Any::string(name)])?
            .as_i64()
            .ok_or_else(|| FfiError::type_error("dtype.get_custom_type_code returned a non-integer"))?;
        t.code = u8::try_from(code).map_err(|_| FfiError::value(format!("custom type code {code} out of range")))?;
        scan = 6 + 1 + end + 1;
    } else {
        return Err(FfiError::value(format!("unknown dtype `{s}`")));
    }
    let rest = &s[scan..];
    let (bits, n) = digits(rest);
    if bits > u32::MAX as u64 {
        return Err(FfiError::value(format!(
            "Integer value in dtype string '{}' is out of range for uint32_t",
            &rest[..n]
        )));
    }
    if bits > u8::MAX as u64 {
        return Err(FfiError::value(format!("Bits value {bits} is out of range for uint8_t in dtype '{s}'")));
    }
    if bits != 0 {
        t.bits = bits as u8;
    }
    let (l, used) = lanes(&rest[n..], s, true)?;
    t.lanes = l;
    if n + used != rest.len() {
        return Err(FfiError::value(format!("unknown dtype `{s}`")));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(s: &str) -> String {
        format(parse(s).unwrap()).unwrap()
    }

    #[test]
    fn forms() {
        assert_eq!(rt("float32"), "float32");
        assert_eq!(rt("f16"), "float16");
        assert_eq!(rt("i8x4"), "int8x4");
        assert_eq!(rt("bool"), "bool");
        assert_eq!(parse("bool").unwrap(), DLDataType { code: 6, bits: 8, lanes: 1 });
        assert_eq!(rt("bf16"), "bfloat16");
        assert_eq!(rt("fp8_e4m3fn"), "float8_e4m3fn");
        assert_eq!(rt("float8_e5m2x4"), "float8_e5m2x4");
        assert_eq!(rt("float4_e2m1fn_x2"), "float4_e2m1fnx2");
        assert_eq!(rt("handle"), "handle");
        assert_eq!(rt(""), "");
        assert_eq!(rt("float32xvscalex4"), "float32xvscalex4");
        assert!(parse("float32x0").is_err());
        assert!(parse("int256").is_err());
        assert!(parse("blah").is_err());
        assert!(parse("float8_e9m9").is_err());
    }
}
