//! Device type numbers and their names, in one table for every numbering this runtime speaks.
//!
//! TVM v0.8 numbered its own device types after DLPack 0.x's (aocl 5, sdaccel 6, opengl 11,
//! micro_dev 13, hexagon 14); v0.9 moved to DLPack's later numbers (rocm_host 11, cuda_managed 13,
//! oneapi 14, webgpu 15, hexagon 16, maia 17, trn 18) and its own extra types to 32-35. The names
//! of each era come from one row per number here:
//! - [`v08_name`]: `DeviceName` of TVM v0.8 (the classic C API, graph executor, Relay VM);
//! - [`ffi_name`]: tvm-ffi 0.1.15's `DeviceTypeName` (its repr: every DLPack 1.x type);
//! - [`v027_name`]: TVM v0.27's `DLDeviceType2Str` (its device API and RPC): the same names,
//!   except that TVM's table has no `maia` (17), and types from 128 up are RPC sessions.

/// `kRPCSessMask`: device types from here up are devices of an RPC session.
pub const RPC_SESS_MASK: i32 = 128;

/// A device type number: its v0.8 name, its DLPack 1.x name, whether TVM v0.27's
/// `DLDeviceType2Str` knows it.
struct Row(i32, Option<&'static str>, Option<&'static str>, bool);

#[rustfmt::skip]
const TABLE: &[Row] = &[
    Row(1, Some("cpu"), Some("cpu"), true),
    Row(2, Some("cuda"), Some("cuda"), true),
    Row(3, Some("cuda_host"), Some("cuda_host"), true),
    Row(4, Some("opencl"), Some("opencl"), true),
    Row(5, Some("aocl"), None, false),
    Row(6, Some("sdaccel"), None, false),
    Row(7, Some("vulkan"), Some("vulkan"), true),
    Row(8, Some("metal"), Some("metal"), true),
    Row(9, Some("vpi"), Some("vpi"), true),
    Row(10, Some("rocm"), Some("rocm"), true),
    Row(11, None, Some("rocm_host"), true),
    Row(12, Some("ext_dev"), Some("ext_dev"), true),
    Row(13, None, Some("cuda_managed"), true),
    Row(14, Some("hexagon"), Some("oneapi"), true),
    Row(15, Some("webgpu"), Some("webgpu"), true),
    Row(16, None, Some("hexagon"), true),
    Row(17, None, Some("maia"), false),
    Row(18, None, Some("trn"), true),
];

fn row(device_type: i32) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.0 == device_type)
}

/// TVM v0.8's name of a device type (`rpc` for an RPC session's), `None` for one it does not know.
pub(crate) fn v08_name(device_type: i32) -> Option<&'static str> {
    if device_type >= RPC_SESS_MASK {
        return Some("rpc");
    }
    row(device_type).and_then(|r| r.1)
}

/// tvm-ffi's name of a device type: `"unknown"` for a type DLPack 1.x does not define (tvm-ffi's
/// repr prints no RPC sessions).
pub fn ffi_name(device_type: i32) -> &'static str {
    row(device_type).and_then(|r| r.2).unwrap_or("unknown")
}

/// TVM v0.27's name of a device type (`rpc` for an RPC session's), `None` where its
/// `DLDeviceType2Str` throws "unknown type".
pub fn v027_name(device_type: i32) -> Option<&'static str> {
    if device_type >= RPC_SESS_MASK {
        return Some("rpc");
    }
    row(device_type).filter(|r| r.3).and_then(|r| r.2)
}

/// The names a device type number has had, for numbers whose meaning changed between releases
/// (`None` for the others).
pub fn history(device_type: i32) -> Option<&'static str> {
    Some(match device_type {
        5 => "aocl in TVM v0.8, unused from v0.9 on",
        6 => "sdaccel in TVM v0.8, unused from v0.9 on",
        11 => "opengl in TVM v0.8, rocm_host from v0.9 on",
        13 => "micro_dev in TVM v0.8, cuda_managed from v0.9 on",
        14 => "hexagon in TVM v0.8, oneapi from v0.9 on",
        16 => "hexagon (TVM v0.9+)",
        32 => "aocl (TVM v0.9+)",
        33 => "sdaccel (TVM v0.9+)",
        34 => "opengl (TVM v0.9+)",
        35 => "micro_dev (TVM v0.9+)",
        _ => return None,
    })
}

/// `" (device type N: ...)"` for device numbers whose meaning changed between releases.
pub(crate) fn history_note(device_type: i32) -> String {
    history(device_type).map(|n| format!(" (device type {device_type}: {n})")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eras_agree_where_the_numbers_do() {
        for t in [1, 2, 3, 4, 7, 8, 9, 10, 12, 15] {
            assert_eq!(v08_name(t), Some(ffi_name(t)), "type {t}");
            assert_eq!(v027_name(t), Some(ffi_name(t)), "type {t}");
        }
        assert_eq!((v08_name(14), ffi_name(14), v027_name(14)), (Some("hexagon"), "oneapi", Some("oneapi")));
        assert_eq!((v08_name(16), v027_name(16)), (None, Some("hexagon")));
        // TVM v0.27's DLDeviceType2Str has no maia; tvm-ffi's repr has.
        assert_eq!((ffi_name(17), v027_name(17)), ("maia", None));
        assert_eq!((v08_name(5), ffi_name(5), v027_name(5)), (Some("aocl"), "unknown", None));
        assert_eq!((v08_name(130), v027_name(130), ffi_name(130)), (Some("rpc"), Some("rpc"), "unknown"));
        for bad in [0, -1, 19, 99, 127] {
            assert_eq!((v08_name(bad), v027_name(bad), ffi_name(bad)), (None, None, "unknown"), "type {bad}");
        }
        assert!(history(14).unwrap().contains("oneapi"));
        assert!(history(99).is_none());
        assert_eq!(history_note(1), "");
    }
}
