//! Each instruction family against hand-computed results: one thread computes a list of values
//! and stores each into its own 8-byte slot of the output buffer.

mod common;
use common::*;

/// A kernel `k(out)` run by one thread: `body` may use %p, %h (16-bit), %r, %rd, %f, %fd
/// registers; `%rd0` holds the output address. Returns the output slots.
fn one(body: &str, n: usize) -> Vec<u64> {
    setup(0);
    let src = ptx(&format!(
        ".visible .entry k(.param .u64 out_p)\n{{\n\
         .reg .pred %p<20>;\n.reg .b16 %h<40>;\n.reg .b32 %r<80>;\n.reg .b64 %rd<80>;\n\
         .reg .f32 %f<60>;\n.reg .f64 %fd<40>;\n\
         ld.param.u64 %rd0, [out_p];\n{body}\nret;\n}}\n"
    ));
    run1(&src, 1, n, &[])
}

/// `st.global.u32 [out + 8k], reg` lines for 32-bit registers.
fn st32(regs: &[&str]) -> String {
    regs.iter().enumerate().map(|(k, r)| format!("st.global.b32 [%rd0+{}], {r};\n", 8 * k)).collect()
}

/// The same for 64-bit registers.
fn st64(regs: &[&str]) -> String {
    regs.iter().enumerate().map(|(k, r)| format!("st.global.b64 [%rd0+{}], {r};\n", 8 * k)).collect()
}

fn f32s(v: &[u64]) -> Vec<f32> {
    v.iter().map(|&x| f32::from_bits(x as u32)).collect()
}

#[test]
fn integer_arithmetic() {
    let body = "
        mov.u32 %r1, 7; mov.u32 %r2, -3;
        add.s32 %r3, %r1, %r2;          // 4
        sub.s32 %r4, %r2, %r1;          // -10
        mul.lo.s32 %r5, %r1, %r2;       // -21
        mul.hi.u32 %r6, %r2, 16;        // (2^32-3)*16 >> 32 = 15
        mul.hi.s32 %r7, %r2, 16;        // -48 >> 32 = -1
        mad.lo.s32 %r8, %r1, %r1, %r2;  // 46
        div.s32 %r9, %r2, 2;            // -1 (toward zero)
        rem.s32 %r10, %r2, 2;           // -1
        div.u32 %r11, %r2, 2;           // 2147483646
        abs.s32 %r12, %r2;              // 3
        neg.s32 %r13, %r1;              // -7
        min.s32 %r14, %r1, %r2;         // -3
        min.u32 %r15, %r1, %r2;         // 7
        max.s32 %r16, %r1, %r2;         // 7
        add.sat.s32 %r17, 2147483647, %r1; // saturates
        mul24.lo.u32 %r18, 16777217, 3;  // only the low 24 bits: 3
        sad.u32 %r19, %r1, 10, 100;      // |7-10|+100 = 103
        mul.wide.s32 %rd1, %r2, 1000000000; // -3e9
        mul.wide.u32 %rd2, %r2, 2;       // (2^32-3)*2
        mad.wide.s32 %rd3, %r2, %r1, 5;  // -16
        mov.u64 %rd4, -9;
        div.s64 %rd5, %rd4, 4;           // -2
        rem.u64 %rd6, %rd4, 10;          // (2^64-9) % 10 = 7
        mul.hi.u64 %rd7, %rd4, 4;        // 3
        div.u32 %r20, %r1, 0;            // by zero: all ones (cudasim's choice)
    ";
    let regs32 = [
        "%r3", "%r4", "%r5", "%r6", "%r7", "%r8", "%r9", "%r10", "%r11", "%r12", "%r13", "%r14", "%r15", "%r16",
        "%r17", "%r18", "%r19", "%r20",
    ];
    let o = one(&format!("{body}{}", st32(&regs32)), regs32.len());
    let want: [i64; 18] = [4, -10, -21, 15, -1, 46, -1, -1, 2147483646, 3, -7, -3, 7, 7, 2147483647, 3, 103, -1];
    for (k, (&got, &w)) in o.iter().zip(&want).enumerate() {
        assert_eq!(got, w as u32 as u64, "{}", regs32[k]);
    }
    let o = one(&format!("{body}{}", st64(&["%rd1", "%rd2", "%rd3", "%rd5", "%rd6", "%rd7"])), 6);
    assert_eq!(o, [-3_000_000_000i64 as u64, 0x1_FFFF_FFFA, -16i64 as u64, -2i64 as u64, 7, 3]);
}

#[test]
fn sixteen_bit_and_mixed_widths() {
    let body = "
        mov.u16 %h1, 65535; mov.u16 %h2, 2;
        add.u16 %h3, %h1, %h2;          // wraps to 1
        mul.wide.u16 %r1, %h1, %h2;     // 131070
        mul.wide.s16 %r2, %h1, %h2;     // -2
        cvt.s32.s16 %r3, %h1;           // -1
        cvt.u32.u16 %r4, %h1;           // 65535
        cvt.u16.u32 %h4, 0x12345;       // 0x2345
        cvt.u32.u16 %r5, %h4;
        cvt.u32.u16 %r6, %h3;
        min.s16 %h5, %h1, %h2;          // -1
        cvt.s32.s16 %r7, %h5;
        shr.s16 %h6, %h1, 3;            // still -1
        cvt.s32.s16 %r8, %h6;
        shr.u16 %h7, %h1, 12;           // 15
        cvt.u32.u16 %r9, %h7;
    ";
    let regs = ["%r1", "%r2", "%r3", "%r4", "%r5", "%r6", "%r7", "%r8", "%r9"];
    let o = one(&format!("{body}{}", st32(&regs)), regs.len());
    let want: [i64; 9] = [131070, -2, -1, 65535, 0x2345, 1, -1, -1, 15];
    assert_eq!(o, want.map(|w| w as u32 as u64));
}

#[test]
fn bit_operations() {
    let body = "
        mov.b32 %r1, 0xF0F0; mov.b32 %r2, 0xFF00;
        and.b32 %r3, %r1, %r2;          // 0xF000
        or.b32 %r4, %r1, %r2;           // 0xFFF0
        xor.b32 %r5, %r1, %r2;          // 0x0FF0
        not.b32 %r6, %r1;               // 0xFFFF0F0F
        cnot.b32 %r7, 0;                // 1
        shl.b32 %r8, %r1, 4;            // 0xF0F00
        shl.b32 %r9, %r1, 33;           // 0 (shifts saturate)
        shr.u32 %r10, 0x80000000, 31;   // 1
        shr.s32 %r11, 0x80000000, 40;   // -1
        popc.b32 %r12, %r1;             // 8
        clz.b32 %r13, %r1;              // 16
        brev.b32 %r14, 1;               // 0x80000000
        bfind.u32 %r15, %r1;            // 15
        bfind.shiftamt.u32 %r16, %r1;   // 16
        bfe.u32 %r17, 0xABCD, 4, 8;     // 0xBC
        bfe.s32 %r18, 0x80, 4, 4;       // -8
        bfi.b32 %r19, 0xF, 0, 8, 4;     // 0xF00
        prmt.b32 %r20, 0x44332211, 0x88776655, 0x1054; // 0x22115544... bytes 4,5,0,1
        lop3.b32 %r21, %r1, %r2, 0xAAAA, 0x96;       // a ^ b ^ c
        shf.l.wrap.b32 %r22, 0x80000000, 1, 1;       // 3
        shf.r.clamp.b32 %r23, 0, 5, 40;              // 5
        popc.b64 %r24, -1;              // 64
        clz.b64 %r25, 1;                // 63
        dp4a.s32.s32 %r26, 0x01FF0302, 0x02020202, 10; // 2*2+3*2-1*2+1*2 + 10 = 20
    ";
    let regs: Vec<String> = (3..=26).map(|i| format!("%r{i}")).collect();
    let refs: Vec<&str> = regs.iter().map(String::as_str).collect();
    let o = one(&format!("{body}{}", st32(&refs)), refs.len());
    let want: [u32; 24] = [
        0xF000,
        0xFFF0,
        0x0FF0,
        0xFFFF_0F0F,
        1,
        0xF_0F00,
        0,
        1,
        u32::MAX,
        8,
        16,
        0x8000_0000,
        15,
        16,
        0xBC,
        0xFFFF_FFF8,
        0xF00,
        0x2211_6655,
        0xF0F0 ^ 0xFF00 ^ 0xAAAA,
        3,
        5,
        64,
        63,
        20,
    ];
    for (k, (&got, &w)) in o.iter().zip(&want).enumerate() {
        assert_eq!(got, u64::from(w), "{}", refs[k]);
    }
}

#[test]
fn predicates_selects_and_guards() {
    let body = "
        mov.u32 %r1, 5; mov.u32 %r2, -5;
        setp.lt.s32 %p1, %r2, %r1;              // true
        setp.lt.u32 %p2, %r2, %r1;              // false
        setp.ge.s32 %p3|%p4, %r1, %r2;          // true | false
        setp.eq.and.s32 %p5, %r1, 5, %p2;       // true and false
        setp.ne.or.s32 %p6, %r1, 5, !%p2;       // false or true
        selp.b32 %r3, 10, 20, %p1;              // 10
        selp.b32 %r4, 10, 20, %p2;              // 20
        and.pred %p7, %p1, %p3;                 // true
        or.pred %p8, %p2, %p4;                  // false
        not.pred %p9, %p8;                      // true
        xor.pred %p10, %p1, %p9;                // false
        selp.u32 %r5, 1, 0, %p5;
        selp.u32 %r6, 1, 0, %p6;
        selp.u32 %r7, 1, 0, %p7;
        selp.u32 %r8, 1, 0, %p8;
        selp.u32 %r9, 1, 0, %p9;
        selp.u32 %r10, 1, 0, %p10;
        selp.u32 %r11, 1, 0, %p4;
        mov.u32 %r12, 0;
        @%p1 add.u32 %r12, %r12, 1;             // taken
        @!%p1 add.u32 %r12, %r12, 10;           // skipped
        @%p2 add.u32 %r12, %r12, 100;           // skipped
        @!%p2 add.u32 %r12, %r12, 1000;         // taken -> 1001
        set.lt.u32.s32 %r13, %r2, %r1;          // all ones
        set.gt.f32.s32 %r14, %r2, %r1;          // 0.0
        slct.u32.s32 %r15, 7, 8, %r2;           // c < 0: 8
        setp.hi.u32 %p11, %r2, %r1;             // unsigned >: true
        selp.u32 %r16, 1, 0, %p11;
    ";
    let regs: Vec<String> = (3..=16).map(|i| format!("%r{i}")).collect();
    let refs: Vec<&str> = regs.iter().map(String::as_str).collect();
    let o = one(&format!("{body}{}", st32(&refs)), refs.len());
    let want: [u32; 14] = [10, 20, 0, 1, 1, 0, 1, 0, 0, 1001, u32::MAX, 0, 8, 1];
    assert_eq!(o, want.map(u64::from));
}

#[test]
fn float_arithmetic_and_rounding() {
    let body = "
        mov.f32 %f1, 0f3F800000;            // 1.0
        mov.f32 %f2, 0f40400000;            // 3.0
        add.f32 %f3, %f1, %f2;              // 4
        sub.f32 %f4, %f1, %f2;              // -2
        mul.f32 %f5, %f2, %f2;              // 9
        fma.rn.f32 %f6, %f2, %f2, %f1;      // 10
        div.rn.f32 %f7, %f1, %f2;           // 1/3 rounded to nearest (up)
        div.rz.f32 %f8, %f1, %f2;           // one ulp below
        div.approx.f32 %f9, 0f40C00000, %f2; // 2
        div.full.f32 %f10, 0f40C00000, %f2;  // 2
        rcp.rn.f32 %f11, 0f40800000;        // 0.25
        sqrt.rn.f32 %f12, 0f41100000;       // 3
        sqrt.approx.f32 %f13, 0f41800000;   // 4
        rsqrt.approx.f32 %f14, 0f40800000;  // 0.5
        ex2.approx.f32 %f15, %f2;           // 8
        lg2.approx.f32 %f16, 0f41000000;    // 3
        abs.f32 %f17, %f4;                  // 2
        neg.f32 %f18, %f1;                  // -1
        min.f32 %f19, %f1, %f4;             // -2
        max.f32 %f20, %f1, %f4;             // 1
        add.sat.f32 %f21, %f2, %f1;         // 1 (saturated)
        add.rm.f32 %f22, %f1, 0f2EDBE6FF;   // 1 + 1e-10 rounded down: 1
        add.rp.f32 %f23, %f1, 0f2EDBE6FF;   // one ulp above 1
        mul.ftz.f32 %f24, 0f00800000, 0f3F000000; // subnormal result flushed to 0
        mul.f32 %f25, 0f00800000, 0f3F000000;     // 2^-127 kept
        copysign.f32 %f26, %f4, %f2;        // -3
        sin.approx.f32 %f27, 0f00000000;    // 0
        cos.approx.f32 %f28, 0f00000000;    // 1
        max.f32 %f29, 0f7FC00000, %f1;      // NaN ignored: 1
        mul.f32 %f30, 0f00000000, 0f7F800000; // 0*inf: canonical NaN
    ";
    let regs: Vec<String> = (3..=30).map(|i| format!("%f{i}")).collect();
    let refs: Vec<&str> = regs.iter().map(String::as_str).collect();
    let o = one(&format!("{body}{}", st32(&refs)), refs.len());
    let f = f32s(&o);
    let third = 1.0f32 / 3.0;
    let want = [
        4.0,
        -2.0,
        9.0,
        10.0,
        third,
        f32::from_bits(third.to_bits() - 1),
        2.0,
        2.0,
        0.25,
        3.0,
        4.0,
        0.5,
        8.0,
        3.0,
        2.0,
        -1.0,
        -2.0,
        1.0,
        1.0,
        1.0,
        f32::from_bits(1.0f32.to_bits() + 1),
        0.0,
        f32::from_bits(0x0040_0000),
        -3.0,
        0.0,
        1.0,
        1.0,
    ];
    for (k, w) in want.iter().enumerate() {
        assert_eq!(f[k].to_bits(), w.to_bits(), "{}: {} vs {w}", refs[k], f[k]);
    }
    assert_eq!(o[27], 0x7FFF_FFFF, "canonical NaN");
    // testp
    let body = "
        testp.finite.f32 %p1, 0f7F800000;
        testp.notanumber.f32 %p2, 0f7FC00000;
        testp.subnormal.f32 %p3, 0f00000001;
        testp.normal.f32 %p4, 0f00000001;
        selp.u32 %r1, 1, 0, %p1; selp.u32 %r2, 1, 0, %p2; selp.u32 %r3, 1, 0, %p3; selp.u32 %r4, 1, 0, %p4;
        setp.ltu.f32 %p5, 0f7FC00000, %f1;   // unordered: true
        setp.lt.f32 %p6, 0f7FC00000, %f1;    // ordered: false
        setp.neu.f32 %p7, 0f7FC00000, 0f7FC00000;
        setp.nan.f32 %p8, %f1, 0f7FC00000;
        selp.u32 %r5, 1, 0, %p5; selp.u32 %r6, 1, 0, %p6; selp.u32 %r7, 1, 0, %p7; selp.u32 %r8, 1, 0, %p8;
    ";
    let o = one(
        &format!("mov.f32 %f1, 0f3F800000;\n{body}{}", st32(&["%r1", "%r2", "%r3", "%r4", "%r5", "%r6", "%r7", "%r8"])),
        8,
    );
    assert_eq!(o, [0, 1, 1, 0, 1, 0, 1, 1]);
}

#[test]
fn doubles() {
    let body = "
        mov.f64 %fd1, 0d4000000000000000;   // 2
        mov.f64 %fd2, 0d3FF8000000000000;   // 1.5
        add.f64 %fd3, %fd1, %fd2;           // 3.5
        mul.f64 %fd4, %fd1, %fd2;           // 3
        fma.rn.f64 %fd5, %fd1, %fd2, %fd1;  // 5
        div.rn.f64 %fd6, %fd1, 0d4008000000000000; // 2/3
        sqrt.rn.f64 %fd7, 0d4010000000000000;      // 2
        neg.f64 %fd8, %fd2;
        min.f64 %fd9, %fd8, %fd1;           // -1.5
        cvt.rn.f32.f64 %f1, %fd6;
        cvt.f64.f32 %fd10, %f1;
        div.rz.f64 %fd11, 0d3FF0000000000000, 0d4008000000000000; // 1/3 toward zero
    ";
    let o = one(&format!("{body}{}", st64(&["%fd3", "%fd4", "%fd5", "%fd6", "%fd7", "%fd9", "%fd10", "%fd11"])), 8);
    let d: Vec<f64> = o.iter().map(|&x| f64::from_bits(x)).collect();
    assert_eq!(&d[..6], &[3.5, 3.0, 5.0, 2.0 / 3.0, 2.0, -1.5]);
    assert_eq!(d[6], f64::from((2.0f64 / 3.0) as f32));
    assert!(d[7] <= 1.0 / 3.0 && 1.0 / 3.0 - d[7] < 1e-16);
}

#[test]
fn halves() {
    let body = "
        mov.b16 %h1, 0x3C00;                 // 1.0
        mov.b16 %h2, 0x4200;                 // 3.0
        add.f16 %h3, %h1, %h2;               // 4.0 = 0x4400
        mul.f16 %h4, %h2, %h2;               // 9.0 = 0x4880
        fma.rn.f16 %h5, %h2, %h2, %h1;       // 10.0 = 0x4900
        neg.f16 %h6, %h1;                    // 0xBC00
        mov.b32 %r1, {%h1, %h2};             // pack
        mov.b32 %r2, {%h2, %h2};
        add.f16x2 %r3, %r1, %r2;             // (4, 6) = 0x4600_4400
        mov.b32 {%h7, %h8}, %r3;             // unpack
        cvt.f32.f16 %f1, %h8;                // 6.0
        cvt.rn.f16.f32 %h9, 0f3E800000;      // 0.25 = 0x3400
        cvt.u32.u16 %r4, %h3; cvt.u32.u16 %r5, %h4; cvt.u32.u16 %r6, %h5; cvt.u32.u16 %r7, %h6;
        cvt.u32.u16 %r8, %h9;
        mov.b32 %r9, %f1;
        setp.lt.f16 %p1, %h1, %h2;
        selp.u32 %r10, 1, 0, %p1;
    ";
    let o = one(&format!("{body}{}", st32(&["%r4", "%r5", "%r6", "%r7", "%r3", "%r8", "%r9", "%r10"])), 8);
    assert_eq!(o, [0x4400, 0x4880, 0x4900, 0xBC00, 0x4600_4400, 0x3400, u64::from(6.0f32.to_bits()), 1]);
}

#[test]
fn conversions() {
    let body = "
        cvt.rzi.s32.f32 %r1, 0fC02CCCCD;     // -2.7 -> -2
        cvt.rni.s32.f32 %r2, 0f40200000;     // 2.5 -> 2
        cvt.rmi.s32.f32 %r3, 0fC0200000;     // -2.5 -> -3
        cvt.rpi.s32.f32 %r4, 0f40100000;     // 2.25 -> 3
        cvt.rzi.s32.f32 %r5, 0f60AD78EC;     // 1e20 saturates
        cvt.rzi.u32.f32 %r6, 0fC0A00000;     // -5 -> 0
        cvt.rzi.s32.f32 %r7, 0f7FC00000;     // NaN -> 0
        cvt.rn.f32.s32 %f1, -1;
        cvt.rz.f32.u32 %f2, -1;              // 2^32-1 toward zero
        cvt.rn.f32.u32 %f3, -1;              // 2^32
        cvt.rni.f32.f32 %f4, 0f40200000;     // 2.5 -> 2.0
        cvt.sat.f32.f32 %f5, 0f40000000;     // 1.0
        cvt.sat.u8.s32 %r8, -7;              // 0
        cvt.s8.s32 %r9, 0x1FF;               // -1 (sign-extended into the register)
        cvt.u64.s32 %rd1, -1;                // sign-extended: all ones
        cvt.u64.u32 %rd2, -1;                // 0xFFFFFFFF
        cvt.s64.s16 %rd3, 0x8000;            // -32768
        cvt.rn.f64.s64 %fd1, -3;
        cvt.rzi.s64.f64 %rd4, %fd1;
        mov.b32 %r10, %f1; mov.b32 %r11, %f2; mov.b32 %r12, %f3; mov.b32 %r13, %f4; mov.b32 %r14, %f5;
    ";
    let regs = ["%r1", "%r2", "%r3", "%r4", "%r5", "%r6", "%r7", "%r8", "%r9", "%r10", "%r11", "%r12", "%r13", "%r14"];
    let o = one(&format!("{body}{}", st32(&regs)), regs.len());
    let want: [u32; 14] = [
        -2i32 as u32,
        2,
        -3i32 as u32,
        3,
        i32::MAX as u32,
        0,
        0,
        0,
        u32::MAX,
        (-1.0f32).to_bits(),
        0x4F7F_FFFF,
        4_294_967_296.0f32.to_bits(),
        2.0f32.to_bits(),
        1.0f32.to_bits(),
    ];
    for (k, (&got, &w)) in o.iter().zip(&want).enumerate() {
        assert_eq!(got, u64::from(w), "{}", regs[k]);
    }
    let o = one(&format!("{body}{}", st64(&["%rd1", "%rd2", "%rd3", "%rd4"])), 4);
    assert_eq!(o, [u64::MAX, 0xFFFF_FFFF, -32768i64 as u64, -3i64 as u64]);
}

#[test]
fn memory_spaces() {
    // Global loads of every width with sign extension, vectors, a module variable with an
    // initializer, local memory through generic addresses, shared memory through cvta.
    let src = ptx(".global .align 8 .u32 table[4] = {10, 20, 30, 40};
.const .align 4 .f32 scale = 0f40000000;
.visible .entry k(.param .u64 out_p, .param .u64 in_p, .param .align 8 .b8 pair[16])
{
    .reg .pred %p<3>;
    .reg .b16 %h<4>;
    .reg .b32 %r<30>;
    .reg .b64 %rd<30>;
    .reg .f32 %f<4>;
    .local .align 8 .b8 depot[32];
    .shared .align 4 .b8 sh[64];
    ld.param.u64 %rd0, [out_p];
    ld.param.u64 %rd1, [in_p];
    ld.global.u8 %r1, [%rd1];          // 0xFE -> 254
    ld.global.s8 %r2, [%rd1];          // -2
    ld.global.s16 %r3, [%rd1+2];       // 0x8001 -> -32767
    ld.global.v2.u32 {%r4, %r5}, [%rd1+8];
    ld.global.v4.u32 {%r6, %r7, _, %r8}, [%rd1+16];
    mov.u64 %rd2, table;
    ld.global.u32 %r9, [%rd2+8];       // 30
    ld.const.f32 %f1, [scale];         // 2.0
    mov.b32 %r10, %f1;
    mov.u64 %rd3, pair;                // a .b8 array parameter read through its address
    ld.param.u32 %r11, [%rd3+12];
    mov.u64 %rd4, depot;
    cvta.local.u64 %rd5, %rd4;
    st.u32 [%rd5+4], 77;               // generic store into local memory
    ld.local.u32 %r12, [depot+4];      // 77
    mov.u64 %rd6, sh;
    cvta.shared.u64 %rd7, %rd6;
    st.shared.u32 [sh+8], 99;
    ld.u32 %r13, [%rd7+8];             // generic load of shared: 99
    isspacep.shared %p1, %rd7;
    isspacep.global %p2, %rd7;
    selp.u32 %r14, 1, 0, %p1;
    selp.u32 %r15, 1, 0, %p2;
    cvta.to.shared.u64 %rd8, %rd7;     // back to the shared offset
    cvt.u32.u64 %r16, %rd8;
    sub.u32 %r17, %r16, %r16;
    st.global.u8 [%rd1+40], 0x1ff;     // narrow stores keep the low bits
    ld.global.u32 %r18, [%rd1+40];
    st.global.v2.u32 [%rd0+0], {%r1, %r2};
    st.global.v2.u32 [%rd0+8], {%r3, %r4};
    st.global.v2.u32 [%rd0+16], {%r5, %r6};
    st.global.v2.u32 [%rd0+24], {%r7, %r8};
    st.global.v2.u32 [%rd0+32], {%r9, %r10};
    st.global.v2.u32 [%rd0+40], {%r11, %r12};
    st.global.v2.u32 [%rd0+48], {%r13, %r14};
    st.global.v2.u32 [%rd0+56], {%r15, %r17};
    st.global.u32 [%rd0+64], %r18;
    ret;
}
");
    setup(0);
    let m = load(&src);
    let mut input = vec![0u8; 48];
    input[0] = 0xFE;
    input[2..4].copy_from_slice(&0x8001u16.to_le_bytes());
    for (k, v) in [5u32, 6, 7, 8, 9, 10].iter().enumerate() {
        input[8 + 4 * k..12 + 4 * k].copy_from_slice(&v.to_le_bytes());
    }
    input[40..44].copy_from_slice(&0xAABB_CC00u32.to_le_bytes());
    let inb = Buf::from(&input);
    let out = Buf::from(&[0u32; 18]);
    let mut pair = [0u8; 16];
    pair[12..16].copy_from_slice(&1234u32.to_le_bytes());
    let mut slots = [out.0, inb.0];
    let mut ptrs: Vec<*mut std::ffi::c_void> =
        vec![(&mut slots[0] as *mut u64).cast(), (&mut slots[1] as *mut u64).cast(), pair.as_mut_ptr().cast()];
    // SAFETY: one pointer per parameter, each to the parameter's bytes.
    let r = unsafe {
        drv::cuLaunchKernel(
            m.func("k"),
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            std::ptr::null_mut(),
            ptrs.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    ok(r);
    let o: Vec<u32> = out.read(17);
    let want =
        [254, -2i32 as u32, -32767i32 as u32, 5, 6, 7, 8, 10, 30, 2.0f32.to_bits(), 1234, 77, 99, 1, 0, 0, 0xAABB_CCFF];
    assert_eq!(o, want);
}

#[test]
fn atomics() {
    // 64 threads update global and shared counters; thread 0 reports.
    let src = ptx(".visible .entry k(.param .u64 out_p)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<10>;
    .reg .f32 %f<4>;
    .shared .align 4 .u32 cnt;
    ld.param.u64 %rd0, [out_p];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra START;
    st.shared.u32 [cnt], 0;
START:
    bar.sync 0;
    atom.global.add.u32 %r2, [%rd0], 1;          // slot 0: 64
    red.global.add.u32 [%rd0+8], %r1;            // slot 1: sum of tids = 2016
    atom.global.max.s32 %r3, [%rd0+16], %r1;     // slot 2: 63
    atom.global.min.u32 %r4, [%rd0+24], %r1;     // slot 3 starts at 100: 0
    cvt.rn.f32.u32 %f1, %r1;
    atom.global.add.f32 %f2, [%rd0+32], %f1;     // slot 4: 2016.0
    atom.global.inc.u32 %r5, [%rd0+40], 9;       // slot 5: 64 increments wrapping at 9 -> 64 % 10 = 4
    atom.global.or.b32 %r6, [%rd0+48], %r1;      // slot 6: 63
    atom.global.exch.b32 %r7, [%rd0+56], 5;      // slot 7: 5
    atom.shared.add.u32 %r8, [cnt], 2;
    atom.global.cas.b32 %r9, [%rd0+64], 0, %r1;  // slot 8: the first thread (0) wins: 0 then 1..? only old==0 swaps
    atom.global.add.u64 %rd1, [%rd0+72], 1;      // slot 9: 64
    bar.sync 0;
    @%p1 bra DONE;
    ld.shared.u32 %r10, [cnt];
    st.global.u32 [%rd0+80], %r10;               // slot 10: 128
DONE:
    ret;
}
");
    setup(0);
    let m = load(&src);
    let mut init = [0u64; 11];
    init[3] = 100;
    let out = Buf::from(&init);
    ok(launch(m.func("k"), [1, 1, 1], [64, 1, 1], 0, &[P::U64(out.0)]));
    let o: Vec<u64> = out.read(11);
    assert_eq!(o[0], 64);
    assert_eq!(o[1], 2016);
    assert_eq!(o[2], 63);
    assert_eq!(o[3], 0);
    assert_eq!(f32::from_bits(o[4] as u32), 2016.0);
    assert_eq!(o[5], 4);
    assert_eq!(o[6], 63);
    assert_eq!(o[7], 5);
    // cas: thread 0 swaps 0 for 0, thread 1 then swaps 0 for 1, later threads see 1.
    assert_eq!(o[8], 1);
    assert_eq!(o[9], 64);
    assert_eq!(o[10], 128);
}

#[test]
fn control_flow_and_calls() {
    // A loop, a divergent if/else that reconverges, a .func inlined twice, libdevice calls.
    let src = ptx(".extern .func (.param .b32 func_retval0) __nv_expf (.param .b32 __nv_expf_param_0);
.extern .func (.param .b32 func_retval0) __nv_powf (.param .b32 p0, .param .b32 p1);
.func (.param .b32 twice_ret) twice(.param .b32 twice_x)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [twice_x];
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra ZERO;
    shl.b32 %r2, %r1, 1;
    st.param.b32 [twice_ret+0], %r2;
    ret;
ZERO:
    st.param.b32 [twice_ret+0], 1000;
    ret;
}
.visible .entry k(.param .u64 out_p)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<10>;
    .reg .f32 %f<8>;
    ld.param.u64 %rd0, [out_p];
    mov.u32 %r1, %tid.x;
    // sum 0..tid
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
LOOP:
    setp.gt.u32 %p1, %r3, %r1;
    @%p1 bra END;
    add.u32 %r2, %r2, %r3;
    add.u32 %r3, %r3, 1;
    bra.uni LOOP;
END:
    and.b32 %r4, %r1, 1;
    setp.eq.u32 %p2, %r4, 0;
    @%p2 bra EVEN;
    mul.lo.u32 %r5, %r2, 3;
    bra.uni JOIN;
EVEN:
    add.u32 %r5, %r2, 7;
JOIN:
    { .param .b32 param0; st.param.b32 [param0+0], %r5; .param .b32 retval0;
      call.uni (retval0), twice, (param0); ld.param.b32 %r6, [retval0+0]; }
    { .param .b32 param0; st.param.b32 [param0+0], 0; .param .b32 retval0;
      call.uni (retval0), twice, (param0); ld.param.b32 %r7, [retval0+0]; }
    add.u32 %r8, %r6, %r7;
    cvt.rn.f32.u32 %f1, %r1;
    { .param .b32 param0; st.param.f32 [param0+0], %f1; .param .b32 retval0;
      call.uni (retval0), __nv_expf, (param0); ld.param.f32 %f2, [retval0+0]; }
    { .param .b32 param0; st.param.f32 [param0+0], 0f40000000; .param .b32 param1; st.param.f32 [param1+0], %f1;
      .param .b32 retval0; call.uni (retval0), __nv_powf, (param0, param1); ld.param.f32 %f3, [retval0+0]; }
    mul.wide.u32 %rd1, %r1, 16;
    add.s64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r8;
    st.global.f32 [%rd2+4], %f2;
    st.global.f32 [%rd2+8], %f3;
    ret;
}
");
    setup(0);
    let m = load(&src);
    let out = Buf::from(&[0u32; 4 * 40]);
    ok(launch(m.func("k"), [1, 1, 1], [40, 1, 1], 0, &[P::U64(out.0)]));
    let o: Vec<u32> = out.read(4 * 40);
    for t in 0..40u32 {
        let sum = t * (t + 1) / 2;
        let v = if t % 2 == 0 { sum + 7 } else { sum * 3 };
        let tw = if v == 0 { 1000 } else { 2 * v };
        assert_eq!(o[4 * t as usize], tw + 1000, "thread {t}");
        let e = f32::from_bits(o[4 * t as usize + 1]);
        assert!((e - (t as f32).exp()).abs() <= (t as f32).exp() * 1e-6, "exp {t}: {e}");
        assert_eq!(f32::from_bits(o[4 * t as usize + 2]), 2f32.powf(t as f32), "pow {t}");
    }
}
