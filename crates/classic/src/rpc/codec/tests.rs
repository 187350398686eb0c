//! Codec tests: packets laid out by hand from `rpc_reference.h` (an encoding independent of the
//! encoder), round trips, and every kind of malformed input.

use super::*;
use crate::value::dtype::FLOAT32;

fn le32(v: i32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}
fn le64(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// A `kCallFunc` packet for `f(7, 2.5, "hi", cpu(0), float32, NULL, tensor)` written field by
/// field as TVM's `RPCEndpoint::CallFunc` + `SendPackedSeq` lay it out.
fn hand_call_packet() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(le32(3)); // kCallFunc
    body.extend(le64(0xdead_beef)); // handle
    body.extend(le32(7)); // num_args
    for c in [0, 2, 11, 6, 5, 4, 7] {
        body.extend(le32(c));
    }
    body.extend(7i64.to_le_bytes());
    body.extend(2.5f64.to_bits().to_le_bytes());
    body.extend(le64(2));
    body.extend(b"hi");
    body.extend(le32(1));
    body.extend(le32(0)); // cpu(0)
    body.extend([2u8, 32, 1, 0]); // float32
    body.extend(le32(0)); // padding
                          // tensor: data, device, ndim, dtype, shape, byte_offset
    body.extend(le64(0x1000));
    body.extend(le32(1));
    body.extend(le32(0));
    body.extend(le32(2));
    body.extend([2u8, 32, 1, 0]);
    body.extend(3i64.to_le_bytes());
    body.extend(4i64.to_le_bytes());
    body.extend(le64(16));
    let mut p = le64(body.len() as u64);
    p.extend(body);
    p
}

fn call_args() -> Vec<WireValue<'static>> {
    vec![
        WireValue::Int(7),
        WireValue::Float(2.5),
        WireValue::Str(Cow::Borrowed(b"hi")),
        WireValue::Device(DLDevice { device_type: 1, device_id: 0 }),
        WireValue::DataType(FLOAT32),
        WireValue::Null,
        WireValue::Tensor(WireTensor {
            data: 0x1000,
            device: DLDevice { device_type: 1, device_id: 0 },
            dtype: FLOAT32,
            shape: Cow::Owned(vec![3, 4]),
            byte_offset: 16,
        }),
    ]
}

#[test]
fn call_packet_matches_tvm_layout() {
    let mut out = Vec::new();
    encode_call(&mut out, 0xdead_beef, &call_args()).unwrap();
    assert_eq!(out, hand_call_packet());
    match decode_packet(&out[8..]).unwrap() {
        Packet::CallFunc { handle, args } => {
            assert_eq!(handle, 0xdead_beef);
            assert_eq!(args, call_args());
        }
        p => panic!("{p:?}"),
    }
}

#[test]
fn fixed_packets_match_tvm_layout() {
    // ReturnVoid: [len=12][kReturn][num_args=1][kTVMNullptr]
    let mut out = Vec::new();
    encode_return_void(&mut out);
    let mut want = le64(12);
    want.extend(le32(4));
    want.extend(le32(1));
    want.extend(le32(4));
    assert_eq!(out, want);
    // ReturnException: [len][kException][1][kTVMStr][len][msg]
    out.clear();
    encode_exception(&mut out, "boom");
    let mut want = le64(4 + 4 + 4 + 8 + 4);
    want.extend(le32(5));
    want.extend(le32(1));
    want.extend(le32(11));
    want.extend(le64(4));
    want.extend(b"boom");
    assert_eq!(out, want);
    assert_eq!(decode_packet(&out[8..]).unwrap(), Packet::Exception("boom".into()));
    // Shutdown: [len=4][kShutdown]
    out.clear();
    encode_shutdown(&mut out);
    assert_eq!(out, [le64(4), le32(1)].concat());
    // InitServer: [len][kInitServer][u64 5]["0.8.0"][num_args=0]
    out.clear();
    encode_init_server(&mut out, &[]).unwrap();
    assert_eq!(out, [le64(4 + 8 + 5 + 4), le32(2), le64(5), b"0.8.0".to_vec(), le32(0)].concat());
    // The overhead of a copy head: code, data, device, ndim, dtype, byte_offset, shape, nbytes.
    out.clear();
    let t = WireTensor {
        data: 1,
        device: DLDevice::default(),
        dtype: FLOAT32,
        shape: Cow::Owned(vec![10]),
        byte_offset: 0,
    };
    encode_copy_to_remote_head(&mut out, &t, 40).unwrap();
    assert_eq!(out.len() - 8, 4 + 8 + 8 + 4 + 4 + 8 + 8 + 8);
    assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), (out.len() - 8 + 40) as u64);
}

#[test]
fn round_trips() {
    let vals = vec![
        WireValue::UInt(u64::MAX as i64),
        WireValue::Handle(42),
        WireValue::Bytes(Cow::Owned(vec![0, 1, 2, 255])),
        WireValue::Str(Cow::Borrowed(b"")),
        WireValue::Float(f64::NEG_INFINITY),
    ];
    let mut out = Vec::new();
    encode_syscall(&mut out, RpcCode::DevGetAttr, &vals).unwrap();
    assert_eq!(decode_packet(&out[8..]).unwrap(), Packet::Syscall { code: RpcCode::DevGetAttr, args: vals.clone() });
    out.clear();
    encode_return(&mut out, &vals).unwrap();
    assert_eq!(decode_packet(&out[8..]).unwrap(), Packet::Return(vals));
    // Module and function handles travel only from a client.
    out.clear();
    assert!(encode_return(&mut out, &[WireValue::Module(1)]).is_err());
    assert!(out.is_empty());
    encode_call(&mut out, 1, &[WireValue::Module(5), WireValue::Func(6)]).unwrap();
    let t =
        WireTensor { data: 9, device: DLDevice::default(), dtype: FLOAT32, shape: Cow::Owned(vec![2]), byte_offset: 4 };
    out.clear();
    encode_copy_to_remote_head(&mut out, &t, 3).unwrap();
    out.extend([7, 8, 9]);
    assert_eq!(decode_packet(&out[8..]).unwrap(), Packet::CopyToRemote { tensor: t.clone(), data: &[7, 8, 9] });
    out.clear();
    encode_copy_from_remote(&mut out, &t, 8).unwrap();
    assert_eq!(decode_packet(&out[8..]).unwrap(), Packet::CopyFromRemote { tensor: t, nbytes: 8 });
    out.clear();
    encode_copy_ack_head(&mut out, 2);
    out.extend([1, 2]);
    assert_eq!(decode_packet(&out[8..]).unwrap(), Packet::CopyAck(&[1, 2]));
}

#[test]
fn every_truncation_is_an_error() {
    let p = hand_call_packet();
    let body = &p[8..];
    for n in 0..body.len() {
        let e = decode_packet(&body[..n]).unwrap_err().to_string();
        assert!(e.starts_with("RPCError: malformed RPC packet"), "{n}: {e}");
    }
    let mut long = body.to_vec();
    long.push(0);
    assert!(decode_packet(&long).unwrap_err().to_string().contains("trailing"));
}

#[test]
fn hostile_counts_are_refused_before_allocating() {
    // A huge argument count, ndim, string length or copy size in a tiny packet.
    let mut b = le32(3);
    b.extend(le64(1));
    b.extend(le32(i32::MAX));
    assert!(decode_packet(&b).unwrap_err().to_string().contains("exceeds the packet"));
    let mut b = le32(3);
    b.extend(le64(1));
    b.extend(le32(-1));
    assert!(decode_packet(&b).unwrap_err().to_string().contains("negative"));
    let mut b = le32(3);
    b.extend(le64(1));
    b.extend(le32(1));
    b.extend(le32(11));
    b.extend(le64(u64::MAX));
    assert!(decode_packet(&b).is_err());
    let mut b = le32(6); // kCopyFromRemote with ndim 2^31-1
    b.extend(le64(0));
    b.extend(le32(1));
    b.extend(le32(0));
    b.extend(le32(i32::MAX));
    b.extend([2u8, 32, 1, 0]);
    assert!(decode_packet(&b).unwrap_err().to_string().contains("ndim"));
    let mut b = le32(6);
    b.extend(le64(0));
    b.extend(le32(1));
    b.extend(le32(0));
    b.extend(le32(-3));
    b.extend([2u8, 32, 1, 0]);
    assert!(decode_packet(&b).unwrap_err().to_string().contains("negative ndim"));
    // Unknown codes.
    assert!(decode_packet(&le32(99)).unwrap_err().to_string().contains("unknown RPC code 99"));
    assert!(decode_packet(&le32(0)).is_err());
    let mut b = le32(4);
    b.extend(le32(1));
    b.extend(le32(13)); // an NDArray handle cannot travel
    assert!(decode_packet(&b).unwrap_err().to_string().contains("unknown type code 13"));
    let mut b = le32(5); // an exception without a string
    b.extend(le32(1));
    b.extend(le32(0));
    b.extend(7i64.to_le_bytes());
    assert!(decode_packet(&b).unwrap_err().to_string().contains("exception"));
    assert!(packet_len(u64::MAX.to_le_bytes(), 1 << 30).is_err());
    assert_eq!(packet_len(16u64.to_le_bytes(), 1 << 30).unwrap(), 16);
}

#[test]
fn pseudo_random_garbage_never_panics() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let seed = hand_call_packet()[8..].to_vec();
    for _ in 0..20000 {
        let mut b = seed.clone();
        for _ in 0..(next() % 4 + 1) {
            let i = (next() as usize) % b.len();
            b[i] = next() as u8;
        }
        let cut = (next() as usize) % (b.len() + 1);
        let _ = decode_packet(&b[..cut]);
    }
}

#[test]
fn handshake() {
    let h = encode_client_hello("client:abc -timeout=5").unwrap();
    assert_eq!(&h[..4], &le32(0xff271)[..]);
    assert_eq!(&h[4..8], &le32(21)[..]);
    for n in 0..h.len() {
        assert_eq!(parse_client_hello(&h[..n], 64).unwrap(), None);
    }
    assert_eq!(parse_client_hello(&h, 64).unwrap(), Some(("client:abc -timeout=5".into(), h.len())));
    assert!(parse_client_hello(&h, 4).is_err());
    assert!(parse_client_hello(&[1, 2, 3, 4], 64).is_err());
    let mut neg = le32(RPC_MAGIC);
    neg.extend(le32(-1));
    assert!(parse_client_hello(&neg, 64).is_err());
    let r = encode_server_reply(RPC_CODE_SUCCESS, "server:k");
    assert_eq!(r, [le32(0xff271), le32(8), b"server:k".to_vec()].concat());
    assert_eq!(encode_server_reply(RPC_CODE_MISMATCH, "x"), le32(0xff273));
    let k = ClientKey::parse("client:abc  -timeout=2.5 -token=s3cret");
    assert_eq!(k.header, "client:abc");
    assert_eq!(k.timeout(), Some(2.5));
    assert_eq!(k.token(), Some("s3cret"));
    assert_eq!(ClientKey::parse("client:x -timeout=-1").timeout(), None);
    assert_eq!(ClientKey::parse("").header, "");
    assert!(token_eq(b"abc", b"abc"));
    assert!(!token_eq(b"abc", b"abd"));
    assert!(!token_eq(b"abc", b"ab"));
}

#[test]
fn codes() {
    for i in 0..21 {
        assert_eq!(RpcCode::from_i32(i).unwrap() as i32, i);
    }
    assert_eq!(RpcCode::from_i32(21), None);
    assert_eq!(RpcCode::from_i32(-1), None);
    assert!(RpcCode::GetGlobalFunc.is_syscall());
    assert!(!RpcCode::CopyAck.is_syscall());
    assert_eq!(RpcCode::DevSetStream as i32, 20);
}
