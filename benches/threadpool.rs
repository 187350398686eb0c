//! Thread-pool and workspace benchmarks (plain `std::time`, `harness = false`).
//!
//! `cargo bench --bench threadpool` runs itself twice as child processes, once with
//! `TVM_NUM_THREADS=2` and once with no thread variable at all (the pool size is fixed per
//! process, so each setting needs its own process), and prints for each:
//!
//! * empty-task launch round trip: median (and best) over 15 runs of `N` launches;
//! * the same with one `TVMBackendParallelBarrier` per task;
//! * a launch after 5 ms of idleness (workers asleep in the kernel);
//! * CPU time (user + sys, `getrusage(RUSAGE_SELF)`) burned by the process in the second after
//!   a burst of 10000 launches, while the launching thread sleeps;
//! * 64 KiB workspace alloc + free in steady state;
//! * the physical floor of a launch: the round trip of one cache line between two threads
//!   polling it (a ping-pong of an atomic counter), which a launch needs twice over (the launcher
//!   hands the task over, the worker hands completion back).
//!
//! Set `TVM_BENCH_CHILD=1` to measure only the current environment.

use std::ffi::{c_int, c_void};
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};
use tvm_runtime::device::workspace::{cpu_alloc_workspace, cpu_free_workspace};
use tvm_runtime::threading::{self, TVMParallelGroupEnv};

const RUNS: usize = 15;
const LAUNCHES: usize = 20_000;

unsafe extern "C" fn empty(_task: c_int, _penv: *mut TVMParallelGroupEnv, _cdata: *mut c_void) -> c_int {
    0
}

unsafe extern "C" fn one_barrier(task: c_int, penv: *mut TVMParallelGroupEnv, _cdata: *mut c_void) -> c_int {
    match threading::parallel_barrier(task, penv) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

fn launch(f: threading::FTVMParallelLambda) {
    if let Err(e) = threading::parallel_launch(Some(f), std::ptr::null_mut(), 0) {
        eprintln!("launch failed: {e}");
        std::process::exit(1);
    }
}

fn median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0])
}

/// Nanoseconds per call of `body`: (median, best) over [`RUNS`] runs of `n` calls.
fn per_call(n: usize, mut body: impl FnMut()) -> (f64, f64) {
    for _ in 0..n / 4 {
        body();
    }
    let runs = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                body();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    median(runs)
}

/// CPU time of the whole process (user + sys) as `getrusage(RUSAGE_SELF)` reports it.
fn rusage_cpu() -> Duration {
    // SAFETY: all-zero is a valid `rusage`, which getrusage fills in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer for the duration of the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time of the whole process from the scheduler's exact runtime (`CLOCK_PROCESS_CPUTIME_ID`);
/// `getrusage` splits the same total into user and sys by tick sampling, which adds noise.
fn exact_cpu() -> Duration {
    // SAFETY: all-zero is a valid `timespec`.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Nanoseconds per round trip of a cache line between this thread and another that both poll
/// it: (median, best).
fn ping_pong() -> (f64, f64) {
    use std::sync::atomic::{AtomicU64, Ordering};
    #[repr(align(128))]
    struct Line(AtomicU64);
    const N: u64 = 200_000;
    let line = Line(AtomicU64::new(0));
    let runs = std::thread::scope(|s| {
        s.spawn(|| {
            // Answers every odd value with the next even one.
            let mut want = 1;
            while want < (RUNS as u64 + 1) * 2 * N {
                while line.0.load(Ordering::Acquire) != want {
                    std::hint::spin_loop();
                }
                line.0.store(want + 1, Ordering::Release);
                want += 2;
            }
        });
        let mut v = 0;
        let mut round = || {
            for _ in 0..N {
                line.0.store(v + 1, Ordering::Release);
                while line.0.load(Ordering::Acquire) != v + 2 {
                    std::hint::spin_loop();
                }
                v += 2;
            }
        };
        round();
        (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                round();
                t.elapsed().as_nanos() as f64 / N as f64
            })
            .collect::<Vec<_>>()
    });
    median(runs)
}

fn measure() {
    println!("  tasks per launch (num_task 0): {}", threading::num_threads());
    let (med, best) = ping_pong();
    println!("  cache-line round trip (floor):  median {med:8.1} ns  best {best:8.1} ns");

    let (med, best) = per_call(LAUNCHES, || launch(empty));
    println!("  empty launch round trip:        median {med:8.1} ns  best {best:8.1} ns");

    let (med, best) = per_call(LAUNCHES, || launch(one_barrier));
    println!("  launch + 1 barrier per task:    median {med:8.1} ns  best {best:8.1} ns");

    let mut idle = Vec::new();
    for _ in 0..31 {
        std::thread::sleep(Duration::from_millis(5));
        let t = Instant::now();
        launch(empty);
        idle.push(t.elapsed().as_nanos() as f64);
    }
    let (med, best) = median(idle);
    println!("  launch after 5 ms idle:         median {med:8.1} ns  best {best:8.1} ns");

    for _ in 0..10_000 {
        launch(empty);
    }
    let (ru0, ex0) = (rusage_cpu(), exact_cpu());
    std::thread::sleep(Duration::from_secs(1));
    let (ru, ex) = (rusage_cpu().saturating_sub(ru0), exact_cpu().saturating_sub(ex0));
    println!(
        "  CPU in the 1 s after a burst:   {:8.3} ms  ({:.3} % of one core; exact runtime {:.3} ms)",
        ru.as_secs_f64() * 1e3,
        ru.as_secs_f64() * 100.0,
        ex.as_secs_f64() * 1e3
    );

    let (med, best) = per_call(1_000_000, || {
        let p = cpu_alloc_workspace(0, 64 << 10).unwrap_or(std::ptr::null_mut());
        black_box(p);
        let _ = cpu_free_workspace(0, p);
    });
    println!("  workspace alloc+free 64 KiB:    median {med:8.1} ns  best {best:8.1} ns");
}

fn main() {
    if std::env::var_os("TVM_BENCH_CHILD").is_some() {
        measure();
        return;
    }
    let Ok(me) = std::env::current_exe() else {
        eprintln!("cannot find the benchmark executable");
        std::process::exit(1);
    };
    let settings: [(&str, Option<&str>); 2] = [("TVM_NUM_THREADS=2", Some("2")), ("no thread variable", None)];
    for (name, threads) in settings {
        println!("threadpool bench, {name}:");
        let mut cmd = Command::new(&me);
        cmd.env("TVM_BENCH_CHILD", "1").env_remove("OMP_NUM_THREADS");
        match threads {
            Some(n) => cmd.env("TVM_NUM_THREADS", n),
            None => cmd.env_remove("TVM_NUM_THREADS"),
        };
        match cmd.status() {
            Ok(s) if s.success() => {}
            other => {
                eprintln!("benchmark child failed: {other:?}");
                std::process::exit(1);
            }
        }
    }
}
