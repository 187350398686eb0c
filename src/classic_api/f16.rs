//! The half-precision helpers LLVM-generated code calls (`__gnu_f2h_ieee`, `__gnu_h2f_ieee`).

/// float32 -> float16 bits, rounding to nearest even.
#[no_mangle]
pub extern "C" fn __gnu_f2h_ieee(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}

/// float16 bits -> float32.
#[no_mangle]
pub extern "C" fn __gnu_h2f_ieee(x: u16) -> f32 {
    half::f16::from_bits(x).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(__gnu_f2h_ieee(1.0), 0x3C00);
        assert_eq!(__gnu_h2f_ieee(0xC000), -2.0);
        assert_eq!(__gnu_f2h_ieee(65520.0), 0x7C00);
        assert!(__gnu_h2f_ieee(0x7E00).is_nan());
    }
}
