//! Whole kernels: barriers and shared memory in a block reduction, grids larger than a block
//! with 2-D and 3-D geometry, warp shuffles and votes, divergence, dynamic shared memory, a
//! grid-wide barrier between blocks, and many blocks.

mod common;
use common::*;

#[test]
fn block_reduction_with_barriers_and_shared_memory() {
    // Each block of 256 threads sums its 256 inputs with a shared-memory tree (a barrier per
    // level); 40 blocks.
    let src = ptx(".visible .entry k(.param .u64 in_p, .param .u64 out_p)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<20>;
    .shared .align 4 .b8 red[1024];
    ld.param.u64 %rd1, [in_p];
    ld.param.u64 %rd2, [out_p];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    mov.u64 %rd5, red;
    mul.wide.u32 %rd6, %r1, 4;
    add.s64 %rd7, %rd5, %rd6;
    st.shared.f32 [%rd7], %f1;
    bar.sync 0;
    shr.u32 %r5, %r3, 1;
LOOP:
    setp.eq.u32 %p1, %r5, 0;
    @%p1 bra DONE;
    setp.ge.u32 %p2, %r1, %r5;
    @%p2 bra SKIP;
    mul.wide.u32 %rd8, %r5, 4;
    add.s64 %rd9, %rd7, %rd8;
    ld.shared.f32 %f2, [%rd9];
    ld.shared.f32 %f3, [%rd7];
    add.f32 %f3, %f3, %f2;
    st.shared.f32 [%rd7], %f3;
SKIP:
    bar.sync 0;
    shr.u32 %r5, %r5, 1;
    bra.uni LOOP;
DONE:
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra END;
    ld.shared.f32 %f1, [red];
    mul.wide.u32 %rd10, %r2, 4;
    add.s64 %rd11, %rd2, %rd10;
    st.global.f32 [%rd11], %f1;
END:
    ret;
}
");
    setup(0);
    let m = load(&src);
    let (blocks, threads) = (40usize, 256usize);
    let v: Vec<f32> = (0..blocks * threads).map(|i| ((i * 7) % 13) as f32).collect();
    let (inb, out) = (Buf::from(&v), Buf::new(blocks * 4));
    ok(launch(m.func("k"), [blocks as u32, 1, 1], [threads as u32, 1, 1], 0, &[P::U64(inb.0), P::U64(out.0)]));
    let want: Vec<f32> = v.chunks(threads).map(|c| c.iter().sum()).collect();
    assert_eq!(out.read::<f32>(blocks), want);
}

#[test]
fn grid_larger_than_a_block_in_three_dimensions() {
    // Every thread of a 3x2x2 grid of 8x4x2 blocks writes its coordinates at its global index.
    let src = ptx(".visible .entry k(.param .u64 out_p)
{
    .reg .b32 %r<40>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out_p];
    mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y; mov.u32 %r3, %tid.z;
    mov.u32 %r4, %ntid.x; mov.u32 %r5, %ntid.y; mov.u32 %r6, %ntid.z;
    mov.u32 %r7, %ctaid.x; mov.u32 %r8, %ctaid.y; mov.u32 %r9, %ctaid.z;
    mov.u32 %r10, %nctaid.x; mov.u32 %r11, %nctaid.y;
    // block linear = x + y*nx + z*nx*ny; thread linear = tx + ty*bx + tz*bx*by
    mad.lo.s32 %r12, %r9, %r11, %r8;
    mad.lo.s32 %r13, %r12, %r10, %r7;
    mad.lo.s32 %r14, %r3, %r5, %r2;
    mad.lo.s32 %r15, %r14, %r4, %r1;
    mul.lo.s32 %r16, %r4, %r5;
    mul.lo.s32 %r17, %r16, %r6;
    mad.lo.s32 %r18, %r13, %r17, %r15;
    // value = ctaid.z<<20 | ctaid.y<<16 | ctaid.x<<12 | tid.z<<8 | tid.y<<4 | tid.x
    shl.b32 %r19, %r9, 20; shl.b32 %r20, %r8, 16; shl.b32 %r21, %r7, 12;
    shl.b32 %r22, %r3, 8; shl.b32 %r23, %r2, 4;
    or.b32 %r24, %r19, %r20; or.b32 %r24, %r24, %r21; or.b32 %r24, %r24, %r22;
    or.b32 %r24, %r24, %r23; or.b32 %r24, %r24, %r1;
    mul.wide.u32 %rd2, %r18, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r24;
    ret;
}
");
    setup(0);
    let m = load(&src);
    let (grid, block) = ([3u32, 2, 2], [8u32, 4, 2]);
    let n = (grid.iter().product::<u32>() * block.iter().product::<u32>()) as usize;
    let out = Buf::new(n * 4);
    ok(launch(m.func("k"), grid, block, 0, &[P::U64(out.0)]));
    let got: Vec<u32> = out.read(n);
    let mut i = 0;
    for cz in 0..2 {
        for cy in 0..2 {
            for cx in 0..3 {
                for tz in 0..2 {
                    for ty in 0..4 {
                        for tx in 0..8 {
                            let want = (cz << 20) | (cy << 16) | (cx << 12) | (tz << 8) | (ty << 4) | tx;
                            assert_eq!(got[i], want, "index {i}");
                            i += 1;
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn warp_shuffles_votes_and_lane_registers() {
    // 64 threads (two warps); each writes 12 values.
    let src = ptx(".visible .entry k(.param .u64 out_p)
{
    .reg .pred %p<8>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out_p];
    mov.u32 %r1, %tid.x;
    mad.lo.s32 %r2, %r1, 3, 1;                         // v = 3*tid + 1
    shfl.sync.down.b32 %r3|%p1, %r2, 1, 0x1f, -1;      // v[lane+1], p = in range
    shfl.sync.up.b32 %r4, %r2, 2, 0, -1;               // v[lane-2]
    shfl.sync.bfly.b32 %r5, %r2, 5, 0x1f, -1;          // v[lane^5]
    shfl.sync.idx.b32 %r6, %r2, 7, 0x1f, -1;           // v[7 of this warp]
    shfl.sync.down.b32 %r7, %r2, 1, 0x181f, -1;        // within groups of 8
    shfl.down.b32 %r8, %r2, 4, 0x1f;                   // the pre-Volta form
    // warp sum by halving shuffles (TVM's cross-thread reduction)
    mov.u32 %r9, %r2;
    shfl.sync.down.b32 %r10, %r9, 16, 31, -1; add.s32 %r9, %r9, %r10;
    shfl.sync.down.b32 %r10, %r9, 8, 31, -1; add.s32 %r9, %r9, %r10;
    shfl.sync.down.b32 %r10, %r9, 4, 31, -1; add.s32 %r9, %r9, %r10;
    shfl.sync.down.b32 %r10, %r9, 2, 31, -1; add.s32 %r9, %r9, %r10;
    shfl.sync.down.b32 %r10, %r9, 1, 31, -1; add.s32 %r9, %r9, %r10;
    shfl.sync.idx.b32 %r9, %r9, 0, 31, -1;             // broadcast lane 0's sum
    and.b32 %r11, %r1, 1;
    setp.eq.u32 %p2, %r11, 1;
    vote.sync.ballot.b32 %r12, %p2, -1;                // odd lanes
    setp.eq.u32 %p3, %r1, 5;
    vote.sync.any.pred %p4, %p3, -1;                   // only warp 0
    selp.u32 %r13, 1, 0, %p4;
    setp.lt.u32 %p5, %r1, 64;
    vote.all.pred %p6, %p5;
    selp.u32 %r14, 1, 0, %p6;
    mov.u32 %r15, %laneid;
    mov.u32 %r16, %warpid;
    mov.u32 %r17, %lanemask_lt;
    mov.u32 %r18, 0;
    @!%p2 bra EVEN;
    activemask.b32 %r18;                               // inside the odd-lanes branch
EVEN:
    selp.u32 %r19, 1, 0, %p1;
    mul.lo.u32 %r20, %r1, 48;
    cvt.u64.u32 %rd2, %r20;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r3, %r4, %r5, %r6};
    st.global.v4.u32 [%rd3+16], {%r7, %r8, %r9, %r12};
    st.global.v4.u32 [%rd3+32], {%r13, %r14, %r15, %r16};
    st.global.u32 [%rd3+44], %r17;
    st.global.u32 [%rd3+40], %r18;
    mov.u32 %r21, %r19;
    ret;
}
");
    // The pre-Volta forms (no .sync) are refused by a real sm_70+ driver from PTX ISA 6.4 on:
    // on another driver, and for the ptxas check, their .sync forms (the same results here,
    // every lane being active) stand in.
    let src = if simulated() && std::env::var_os("TVMRT_PTXAS").is_none() {
        src
    } else {
        src.replace("shfl.down.b32 %r8, %r2, 4, 0x1f;", "shfl.sync.down.b32 %r8, %r2, 4, 0x1f, -1;")
            .replace("vote.all.pred %p6, %p5;", "vote.sync.all.pred %p6, %p5, -1;")
    };
    setup(0);
    let m = load(&src);
    let out = Buf::new(64 * 48);
    ok(launch(m.func("k"), [1, 1, 1], [64, 1, 1], 0, &[P::U64(out.0)]));
    let o: Vec<u32> = out.read(64 * 12);
    let v = |t: u32| 3 * t + 1;
    for t in 0..64u32 {
        let (lane, base) = (t % 32, t - t % 32);
        let r = &o[12 * t as usize..12 * t as usize + 12];
        let down1 = if lane < 31 { v(t + 1) } else { v(t) };
        let up2 = if lane >= 2 { v(t - 2) } else { v(t) };
        let seg = if lane % 8 < 7 { v(t + 1) } else { v(t) };
        let down4 = if lane < 28 { v(t + 4) } else { v(t) };
        let sum: u32 = (base..base + 32).map(v).sum();
        assert_eq!(r[0], down1, "down 1, thread {t}");
        assert_eq!(r[1], up2, "up 2, thread {t}");
        assert_eq!(r[2], v(base + (lane ^ 5)), "bfly 5, thread {t}");
        assert_eq!(r[3], v(base + 7), "idx 7, thread {t}");
        assert_eq!(r[4], seg, "down 1 in groups of 8, thread {t}");
        assert_eq!(r[5], down4, "shfl.down (no .sync), thread {t}");
        assert_eq!(r[6], sum, "warp sum, thread {t}");
        assert_eq!(r[7], 0xAAAA_AAAA, "ballot, thread {t}");
        assert_eq!(r[8], u32::from(t < 32), "any, thread {t}");
        assert_eq!(r[9], 1, "all, thread {t}");
        assert_eq!((r[10], r[11]), (if lane % 2 == 1 { 0xAAAA_AAAA } else { 0 }, (1u32 << lane) - 1), "thread {t}");
        let _ = t / 32;
    }
    // %laneid and %warpid are in slots 10 and 11 of the third vector, overwritten above by
    // activemask and lanemask: check them with a second, smaller kernel.
    let src2 = ptx(".visible .entry k(.param .u64 out_p)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out_p];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %laneid;
    mov.u32 %r3, %warpid;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r2, %r3};
    ret;
}
");
    let m2 = load(&src2);
    let out2 = Buf::new(70 * 8);
    ok(launch(m2.func("k"), [1, 1, 1], [70, 1, 1], 0, &[P::U64(out2.0)]));
    let o2: Vec<u32> = out2.read(140);
    for t in 0..70u32 {
        assert_eq!((o2[2 * t as usize], o2[2 * t as usize + 1]), (t % 32, t / 32));
    }
}

#[test]
fn divergent_exit_before_a_barrier_and_dynamic_shared_memory() {
    // Threads at or beyond n leave at once; the others stage their values in dynamic shared
    // memory, meet at a barrier and read their neighbour's.
    let src = ptx(".extern .shared .align 8 .b8 dyn[];
.visible .entry k(.param .u64 out_p, .param .u32 n)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [out_p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 exit;
    mov.u32 %r3, %dynamic_smem_size;
    mov.u64 %rd2, dyn;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    mul.lo.u32 %r4, %r2, %r2;
    st.shared.u32 [%rd4], %r4;
    bar.sync 0;
    add.u32 %r5, %r2, 1;
    rem.u32 %r6, %r5, %r1;
    mul.wide.u32 %rd5, %r6, 4;
    add.s64 %rd6, %rd2, %rd5;
    ld.shared.u32 %r7, [%rd6];
    mul.wide.u32 %rd7, %r2, 8;
    add.s64 %rd8, %rd1, %rd7;
    st.global.v2.u32 [%rd8], {%r7, %r3};
    ret;
}
");
    setup(0);
    let m = load(&src);
    let n = 100u32;
    let out = Buf::from(&vec![0u32; 2 * 128]);
    ok(launch(m.func("k"), [1, 1, 1], [128, 1, 1], 4 * n, &[P::U64(out.0), P::U32(n)]));
    let o: Vec<u32> = out.read(2 * 128);
    for t in 0..128u32 {
        let want = if t < n { (((t + 1) % n).pow(2), 4 * n) } else { (0, 0) };
        assert_eq!((o[2 * t as usize], o[2 * t as usize + 1]), want, "thread {t}");
    }
    // Without the dynamic shared memory the reads fall outside: a launch failure.
}

#[test]
fn blocks_meet_at_a_grid_wide_barrier() {
    // TVM's global barrier: thread 0 of each block counts in and spins until every block has;
    // block b then reads what block b+1 wrote before the barrier.
    let src = ptx(".visible .global .align 4 .u32 state;
.visible .entry k(.param .u64 a_p, .param .u64 b_p, .param .u32 nblocks)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [a_p];
    ld.param.u64 %rd2, [b_p];
    ld.param.u32 %r1, [nblocks];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd1, %rd3;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra WAIT;
    mul.lo.u32 %r4, %r2, 10;
    st.global.u32 [%rd4], %r4;
    membar.gl;
    atom.global.add.u32 %r5, [state], 1;
SPIN:
    ld.volatile.global.u32 %r6, [state];
    setp.lt.u32 %p2, %r6, %r1;
    @%p2 bra SPIN;
WAIT:
    bar.sync 0;
    @%p1 bra END;
    add.u32 %r7, %r2, 1;
    rem.u32 %r8, %r7, %r1;
    mul.wide.u32 %rd5, %r8, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.volatile.global.u32 %r9, [%rd6];
    add.s64 %rd7, %rd2, %rd3;
    st.global.u32 [%rd7], %r9;
END:
    ret;
}
");
    setup(0);
    let m = load(&src);
    let blocks = 24u32;
    let (a, b) = (Buf::new(blocks as usize * 4), Buf::new(blocks as usize * 4));
    let mut state = 0u64;
    let mut size = 0usize;
    let name = std::ffi::CString::new("state").unwrap();
    // SAFETY: valid pointers.
    ok(unsafe { drv::cuModuleGetGlobal_v2(&mut state, &mut size, m.0, name.as_ptr()) });
    assert_eq!(size, 4);
    for _ in 0..2 {
        // SAFETY: a 4-byte device global.
        ok(unsafe { drv::cuMemsetD32_v2(state, 0, 1) });
        ok(launch(m.func("k"), [blocks, 1, 1], [64, 1, 1], 0, &[P::U64(a.0), P::U64(b.0), P::U32(blocks)]));
        let want: Vec<u32> = (0..blocks).map(|i| ((i + 1) % blocks) * 10).collect();
        assert_eq!(b.read::<u32>(blocks as usize), want);
    }
}

#[test]
fn many_blocks_and_long_loops() {
    // 3000 blocks of 33 threads (a partial second warp), each thread looping 200 times.
    let src = ptx(".visible .entry k(.param .u64 out_p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out_p];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mad.lo.s32 %r3, %r1, 33, %r2;
    mov.u32 %r4, 0;
    mov.u32 %r5, 0;
L:
    add.u32 %r4, %r4, %r3;
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p1, %r5, 200;
    @%p1 bra L;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
    ret;
}
");
    setup(0);
    let m = load(&src);
    let n = 3000 * 33;
    let out = Buf::new(n * 4);
    ok(launch(m.func("k"), [3000, 1, 1], [33, 1, 1], 0, &[P::U64(out.0)]));
    let o: Vec<u32> = out.read(n);
    for (i, &v) in o.iter().enumerate() {
        assert_eq!(v, (i as u32).wrapping_mul(200), "{i}");
    }
}
