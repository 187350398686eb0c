//! Hostile images: mutated, truncated and pathological PTX is refused with an error (or, when
//! it still is valid PTX, loads and runs or fails cleanly), never a panic (which the entry
//! points would turn into `CUDA_ERROR_UNKNOWN`), an abort or a hang. In a process of its own:
//! launches of mutants may fail and are followed by a reset.

mod common;
use common::*;
use cudasim::driver::errors::*;
use cudasim::driver::*;

const SOURCE: &str = ".version 7.0
.target sm_70
.address_size 64
.extern .func (.param .b32 func_retval0) __nv_expf (.param .b32 p0);
.global .align 4 .u32 table[4] = {1, 2, 3, 4};
.extern .shared .align 4 .b8 dyn[];
.func (.param .b32 r) twice(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    shl.b32 %r2, %r1, 1;
    st.param.b32 [r+0], %r2;
    ret;
}
.visible .entry k(.param .u64 out_p, .param .u32 n)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [out_p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    mov.u64 %rd2, dyn;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.shared.u32 [%rd4], %r2;
    bar.sync 0;
    ld.global.u32 %r3, [table+4];
    shfl.sync.down.b32 %r4, %r2, 1, 31, -1;
    { .param .b32 param0; st.param.b32 [param0+0], %r4; .param .b32 retval0;
      call.uni (retval0), twice, (param0); ld.param.b32 %r5, [retval0+0]; }
    cvt.rn.f32.u32 %f1, %r5;
    { .param .b32 param0; st.param.f32 [param0+0], %f1; .param .b32 retval0;
      call.uni (retval0), __nv_expf, (param0); ld.param.f32 %f2, [retval0+0]; }
    atom.global.add.u32 %r6, [%rd1], %r3;
    add.s64 %rd5, %rd1, %rd3;
    st.global.f32 [%rd5+4], %f2;
DONE:
    ret;
}
";

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut b = src.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => {
                let n = rng.below(20).min(b.len() - at);
                b.drain(at..at + n);
            }
            1 => b.truncate(at),
            2 => {
                let pick = b"{}()[],;:+-!@<>|%._0123456789xfabcdeXYZ \n";
                let last = b.len().saturating_sub(1);
                b[at.min(last)] = pick[rng.below(pick.len())];
            }
            3 => {
                let n = rng.below(30).min(b.len() - at);
                let piece = b[at..at + n].to_vec();
                let to = rng.below(b.len());
                b.splice(to..to, piece);
            }
            4 => {
                let words: [&[u8]; 8] = [b"%r99", b"0xFFFFFFFFFFFFFFFF", b".v4", b"-", b"_", b"[", b"sm_99", b"{"];
                let w = words[rng.below(words.len())];
                b.splice(at..at, w.iter().copied());
            }
            _ => {
                if let Some(p) = b[at..].iter().position(|&c| c.is_ascii_digit()) {
                    b[at + p] = b'0' + rng.below(10) as u8;
                }
            }
        }
        if b.is_empty() {
            break;
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn mutated_ptx_never_panics() {
    setup(1);
    load(SOURCE);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut loaded, mut ran) = (0, 0);
    let out = Buf::from(&[0u32; 64]);
    for i in 0..1500 {
        let src = mutate(SOURCE, &mut rng);
        match try_load(&src) {
            Ok(m) => {
                loaded += 1;
                if i % 3 == 0 {
                    let mut f = std::ptr::null_mut();
                    let name = std::ffi::CString::new("k").unwrap();
                    // SAFETY: valid pointers.
                    if unsafe { cuModuleGetFunction(&mut f, m.0, name.as_ptr()) } == CUDA_SUCCESS {
                        let r = launch(f, [2, 1, 1], [40, 1, 1], 256, &[P::U64(out.0), P::U32(33)]);
                        assert_ne!(r, CUDA_ERROR_UNKNOWN, "mutant {i}:\n{src}");
                        ran += 1;
                        if r != CUDA_SUCCESS {
                            // SAFETY: device 1 exists.
                            ok(unsafe { cuDevicePrimaryCtxReset_v2(1) });
                            std::mem::forget(m);
                            continue;
                        }
                    }
                }
            }
            Err((r, log)) => {
                assert_ne!(r, CUDA_ERROR_UNKNOWN, "mutant {i} panicked the loader:\n{src}\n{log}");
                assert!(!log.is_empty(), "mutant {i} refused without a reason");
            }
        }
    }
    assert!(loaded > 20 && ran > 5, "some mutants still load and run ({loaded}, {ran})");
    std::mem::forget(out);
}

#[test]
fn pathological_sizes_are_refused() {
    setup(0);
    // Calls doubling at each level: 2^30 instructions if inlined; refused, quickly.
    let mut src = String::from(".version 7.0\n.target sm_70\n.address_size 64\n");
    src += ".func f0() { ret; }\n";
    for l in 1..31 {
        src += &format!(".func f{l}() {{ call.uni f{p}; call.uni f{p}; ret; }}\n", p = l - 1);
    }
    src += ".visible .entry k() { call.uni f30; ret; }\n";
    let t = std::time::Instant::now();
    let (r, log) = try_load(&src).err().unwrap();
    assert_eq!(r, CUDA_ERROR_INVALID_PTX);
    assert!(log.contains("inlining"), "{log}");
    assert!(t.elapsed().as_secs() < 60);
    // Recursion.
    let (r, log) =
        try_load(&ptx(".func g() { call.uni g; ret; }\n.visible .entry k() { call.uni g; ret; }")).err().unwrap();
    assert_eq!(r, CUDA_ERROR_INVALID_PTX);
    assert!(log.contains("recursive"), "{log}");
    // Deep nesting in operands and initializers.
    let deep = format!("{}1{}", "{".repeat(10000), "}".repeat(10000));
    let (r, _) = try_load(&ptx(&format!(".global .u32 x[1] = {deep};\n"))).err().unwrap();
    assert_eq!(r, CUDA_ERROR_INVALID_PTX);
    let (r, _) = try_load(&ptx(&format!(".visible .entry k() {{ mov.b32 %r1, {deep}; ret; }}"))).err().unwrap();
    assert_eq!(r, CUDA_ERROR_INVALID_PTX);
    // Huge declarations cost nothing until used; too much local memory is refused.
    load(&ptx(".visible .entry k() { .reg .b32 %r<100000000>; mov.u32 %r5, 1; ret; }"));
    let (r, _) = try_load(&ptx(".visible .entry k() { .local .b8 big[100000000]; ret; }")).err().unwrap();
    assert_eq!(r, CUDA_ERROR_INVALID_PTX);
    let (r, _) = try_load(&ptx(".visible .entry k() { .shared .b8 big[100000]; ret; }")).err().unwrap();
    assert_eq!(r, CUDA_ERROR_INVALID_PTX);
    // A huge allocation is out of memory, not an abort.
    let mut p = 0;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { cuMemAlloc_v2(&mut p, 1 << 45) }, CUDA_ERROR_OUT_OF_MEMORY);
}
