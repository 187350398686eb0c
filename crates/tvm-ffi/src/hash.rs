//! The hash functions tvm-ffi's layouts depend on.

/// tvm-ffi's `StableHashBytes`: what `ffi.Map` hashes string keys with (C++ code compiled against
/// tvm-ffi's headers probes our maps inline, so the values must be the same).
pub(crate) fn stable_hash_bytes(data: &[u8]) -> u64 {
    const MUL: u64 = 1_099_511_628_211;
    const MOD: u64 = 2_147_483_647;
    let mut result: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let b = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        result = result.wrapping_mul(MUL).wrapping_add(b) % MOD;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut a = [0u8; 8];
        a[..rest.len()].copy_from_slice(rest);
        result = result.wrapping_mul(MUL).wrapping_add(u64::from_le_bytes(a)) % MOD;
    }
    result
}

/// libstdc++'s `std::hash<std::string_view>` (`_Hash_bytes`, seed 0xc70f6907): the
/// `type_key_hash` of a type's info.
pub(crate) fn std_hash_bytes(data: &[u8]) -> u64 {
    const MUL: u64 = (0xc6a4_a793u64 << 32) + 0x5bd1_e995;
    fn shift_mix(v: u64) -> u64 {
        v ^ (v >> 47)
    }
    let len = data.len();
    let mut hash = 0xc70f_6907u64 ^ (len as u64).wrapping_mul(MUL);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let d = shift_mix(u64::from_le_bytes(c.try_into().expect("8 bytes")).wrapping_mul(MUL)).wrapping_mul(MUL);
        hash ^= d;
        hash = hash.wrapping_mul(MUL);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut d = 0u64;
        for &b in rest.iter().rev() {
            d = (d << 8) + b as u64;
        }
        hash ^= d;
        hash = hash.wrapping_mul(MUL);
    }
    hash = shift_mix(hash).wrapping_mul(MUL);
    shift_mix(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_hash_matches_the_definition() {
        assert_eq!(stable_hash_bytes(b""), 0);
        // one partial chunk: the little-endian value mod 2^31 - 1
        assert_eq!(stable_hash_bytes(b"a"), 97);
        let eight = u64::from_le_bytes(*b"abcdefgh") % 2_147_483_647;
        assert_eq!(stable_hash_bytes(b"abcdefgh"), eight);
        let nine = (eight.wrapping_mul(1_099_511_628_211).wrapping_add(105)) % 2_147_483_647;
        assert_eq!(stable_hash_bytes(b"abcdefghi"), nine);
    }
}
