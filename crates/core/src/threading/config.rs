//! Process-wide thread-pool settings, computed once, and CPU affinity.
//!
//! TVM v0.8 re-reads `TVM_NUM_THREADS` / `OMP_NUM_THREADS` and re-counts the CPUs on every
//! launch; this runtime does it once, at the first use of the pool, and keeps the result for the
//! life of the process (forked children included). `runtime.config_threadpool` then adjusts the
//! number of workers a thread uses, within the slot count fixed here.

use std::sync::OnceLock;

/// Which cores a thread configuration prefers (`mode` of `runtime.config_threadpool`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CoreMode {
    /// `kBig` (1) and every mode other than -1: the fastest cores first.
    Big,
    /// `kLittle` (-1): the slowest cores first.
    Little,
}

/// How waiting threads poll before sleeping in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Spin {
    /// This runtime's policy: bounded, time-based polling windows (see `pool.rs`).
    Timed,
    /// `TVM_THREAD_POOL_SPIN_COUNT=<n>`: poll `n` times with a `sched_yield` in between (TVM's
    /// meaning of the variable), then sleep; 0 sleeps at once.
    Yields(u32),
}

/// Everything the pool needs to know about the machine and the environment.
#[derive(Clone, Debug)]
pub(super) struct Settings {
    /// `MaxConcurrency()`: task slots of a pool (caller included). At least 1.
    pub slots: usize,
    /// Default number of tasks of a `num_task = 0` launch: `min(slots, big_count)`, at least 1.
    pub default_threads: usize,
    /// The CPUs this process may run on, fastest first (ties by id): TVM's `sorted_order`.
    pub sorted_cpus: Vec<usize>,
    /// How many CPUs share the highest maximum frequency (capped at the usable CPU count).
    pub big_count: usize,
    /// How many CPUs have the lowest maximum frequency, 0 when all are equally fast.
    pub little_count: usize,
    /// `TVM_BIND_THREADS=1` and at least as many usable CPUs as slots: pin workers (and the
    /// launching thread) to cores.
    pub bind_threads: bool,
    /// False when `TVM_EXCLUDE_WORKER0=0`: task 0 then runs on a worker, not on the caller.
    pub caller_runs_task0: bool,
    /// Idle-wait policy of workers, launchers and barriers.
    pub spin: Spin,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// The process-wide settings, computed on first use.
#[inline]
pub(super) fn settings() -> &'static Settings {
    SETTINGS.get_or_init(compute)
}

/// `atoi(value)` as C does it: optional blanks, optional sign, then digits; anything else ends
/// the number (so `"abc"` is 0). Saturates instead of overflowing.
pub(super) fn atoi(value: &str) -> i64 {
    let s = value.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut n: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        n = n.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if neg {
        -n
    } else {
        n
    }
}

/// `MaxConcurrency()` from the two variables and the usable CPU count: `TVM_NUM_THREADS`, else
/// `OMP_NUM_THREADS` (each `max(atoi, 1)`), else the CPUs, halved on x86-64 as TVM assumes 2-way
/// SMT there.
pub(super) fn max_concurrency(tvm: Option<&str>, omp: Option<&str>, usable_cpus: usize) -> usize {
    match tvm.or(omp) {
        Some(v) => usize::try_from(atoi(v).max(1)).unwrap_or(usize::MAX),
        None => {
            let n = if cfg!(target_arch = "x86_64") { usable_cpus / 2 } else { usable_cpus };
            n.max(1)
        }
    }
}

/// TVM's core classification from each CPU's `scaling_max_freq` (missing 0, unparsable -1):
/// returns `(sorted_order, big_count, little_count)`.
pub(super) fn classify(freqs: &[(usize, i64)]) -> (Vec<usize>, usize, usize) {
    let mut v = freqs.to_vec();
    // A total order (CPU ids are unique), so an unstable sort gives the same result.
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let (Some(hi), Some(lo)) = (v.first().map(|c| c.1), v.last().map(|c| c.1)) else {
        return (Vec::new(), 0, 0);
    };
    let big = v.iter().filter(|c| c.1 == hi).count();
    let little = if lo == hi { 0 } else { v.iter().filter(|c| c.1 == lo).count() };
    (v.into_iter().map(|c| c.0).collect(), big, little)
}

fn env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

fn cpu_max_freq(cpu: usize) -> i64 {
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_max_freq");
    match std::fs::read_to_string(path) {
        Ok(s) => s.trim().parse().unwrap_or(-1),
        Err(_) => 0,
    }
}

fn compute() -> Settings {
    let allowed = affinity::allowed_cpus();
    // `available_parallelism` applies the affinity mask and the cgroup v1/v2 CPU quota.
    let quota = std::thread::available_parallelism().map_or(allowed.len(), |n| n.get());
    let usable = allowed.len().min(quota).max(1);
    let slots = max_concurrency(env("TVM_NUM_THREADS").as_deref(), env("OMP_NUM_THREADS").as_deref(), usable);
    let freqs: Vec<(usize, i64)> = allowed.iter().map(|&c| (c, cpu_max_freq(c))).collect();
    let (sorted_cpus, big, little) = classify(&freqs);
    let big_count = big.clamp(1, usable);
    let bind_requested = env("TVM_BIND_THREADS").is_some_and(|v| atoi(&v) == 1);
    let caller_runs_task0 = env("TVM_EXCLUDE_WORKER0").map_or(true, |v| atoi(&v) != 0);
    let spin = match env("TVM_THREAD_POOL_SPIN_COUNT") {
        Some(v) => Spin::Yields(u32::try_from(atoi(&v).max(0)).unwrap_or(u32::MAX)),
        None => Spin::Timed,
    };
    // Unit tests must exercise real worker threads on any machine, so they get four slots.
    let slots = if cfg!(test) { slots.max(4) } else { slots };
    let big_count = if cfg!(test) { big_count.max(4) } else { big_count };
    let bind_threads = bind_requested && sorted_cpus.len() >= slots;
    if bind_requested && !bind_threads {
        eprintln!(
            "[tvm_runtime] The thread affinity cannot be set when the number of workers is larger than the \
             number of available cores in the system."
        );
    }
    Settings {
        slots,
        default_threads: slots.min(big_count).max(1),
        sorted_cpus,
        big_count,
        little_count: little.min(usable),
        bind_threads,
        caller_runs_task0,
        spin,
    }
}

/// Number of tasks `runtime.config_threadpool(mode, nthreads)` selects: the
/// mode's core count, overridden by a non-zero `nthreads`, capped at the slot count, and never
/// below 1 (v0.8 can reach 0 and then hangs).
pub(super) fn configured_threads(s: &Settings, mode: i32, nthreads: i32) -> usize {
    let base = match mode {
        1 => s.big_count,
        -1 => s.little_count,
        _ => s.slots,
    };
    let n = if nthreads != 0 { usize::try_from(nthreads).unwrap_or(0) } else { base };
    n.min(s.slots).max(1)
}

/// Thread affinity (Linux/Android; elsewhere every call is a no-op and all CPUs are "allowed").
pub(super) mod affinity {
    use super::{CoreMode, Settings};

    /// The CPU ids in this thread's affinity mask (all online CPUs when it cannot be read).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(crate) fn allowed_cpus() -> Vec<usize> {
        // SAFETY: cpu_set_t is a plain bit array for which all-zero is a valid value.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a writable cpu_set_t of the size passed; pid 0 is this thread.
        let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        if rc != 0 {
            return (0..n).collect();
        }
        let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: CPU_ISSET only reads bit `c` of `set`, and `c` is below its size in bits.
        let cpus: Vec<usize> = (0..max).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect();
        if cpus.is_empty() {
            (0..n).collect()
        } else {
            cpus
        }
    }

    /// The CPU ids this process may use (no affinity API: `0..available_parallelism`).
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub(crate) fn allowed_cpus() -> Vec<usize> {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn set_current(cpus: &[usize]) {
        // SAFETY: all-zero is a valid cpu_set_t.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
        let mut any = false;
        for &c in cpus.iter().filter(|&&c| c < max) {
            // SAFETY: CPU_SET only writes bit `c` of `set`, and `c` is below its size in bits.
            unsafe { libc::CPU_SET(c, &mut set) };
            any = true;
        }
        if !any {
            return;
        }
        // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
        // A failure (CPU gone offline) leaves the affinity unchanged, which is harmless.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn set_current(_cpus: &[usize]) {}

    /// The CPU the calling thread runs on, or -1 (`sched_getcpu`: a few ns, no system call
    /// with glibc's restartable-sequences support).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[inline]
    pub(crate) fn current_cpu() -> i32 {
        // SAFETY: sched_getcpu has no preconditions.
        unsafe { libc::sched_getcpu() }
    }

    /// The CPU the calling thread runs on: unknown here.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    #[inline]
    pub(crate) fn current_cpu() -> i32 {
        -1
    }

    /// Moves the calling thread off `cpu` (to another CPU of its affinity mask) without changing
    /// its mask: the mask is narrowed, which migrates the thread at once, and then restored.
    /// Returns false when the thread may run nowhere else.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(crate) fn move_off(cpu: usize) -> bool {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if cpu >= 8 * size {
            return false;
        }
        // SAFETY: all-zero is a valid cpu_set_t.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `mask` is a writable cpu_set_t of `size` bytes; pid 0 is this thread.
        if unsafe { libc::sched_getaffinity(0, size, &mut mask) } != 0 {
            return false;
        }
        // SAFETY: CPU_COUNT only reads `mask`.
        let count = unsafe { libc::CPU_COUNT(&mask) };
        // SAFETY: CPU_ISSET only reads bit `cpu` of `mask`, which is in range (checked above).
        if count < 2 || !unsafe { libc::CPU_ISSET(cpu, &mask) } {
            return false;
        }
        let mut elsewhere = mask;
        // SAFETY: CPU_CLR only writes bit `cpu` of `elsewhere`, which is in range.
        unsafe { libc::CPU_CLR(cpu, &mut elsewhere) };
        // SAFETY: both masks are valid cpu_set_t values of `size` bytes; pid 0 is this thread.
        unsafe {
            libc::sched_setaffinity(0, size, &elsewhere);
            libc::sched_setaffinity(0, size, &mask);
        }
        true
    }

    /// Moving threads is not supported here.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub(crate) fn move_off(_cpu: usize) -> bool {
        false
    }

    /// Pins the calling worker thread that runs task `task_id` to its one core.
    pub(crate) fn pin_worker(s: &Settings, task_id: usize, mode: CoreMode) {
        if !s.bind_threads {
            return;
        }
        let len = s.sorted_cpus.len();
        let idx = match mode {
            CoreMode::Big => Some(task_id),
            CoreMode::Little => (len - 1).checked_sub(task_id),
        };
        if let Some(&cpu) = idx.and_then(|i| s.sorted_cpus.get(i)) {
            set_current(&[cpu]);
        }
    }

    /// Restricts the launching thread to the cores its tasks use (TVM's side effect on the
    /// application thread, done only when `TVM_BIND_THREADS=1` asks for binding).
    pub(crate) fn pin_launcher(s: &Settings, mode: CoreMode) {
        if !s.bind_threads {
            return;
        }
        let cpus = match mode {
            CoreMode::Big => &s.sorted_cpus[..s.slots.min(s.big_count).min(s.sorted_cpus.len())],
            CoreMode::Little => &s.sorted_cpus[s.sorted_cpus.len() - s.little_count..],
        };
        set_current(cpus);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_matches_c() {
        assert_eq!(atoi("4"), 4);
        assert_eq!(atoi("  12abc"), 12);
        assert_eq!(atoi("abc"), 0);
        assert_eq!(atoi("-3"), -3);
        assert_eq!(atoi("+7"), 7);
        assert_eq!(atoi(""), 0);
        assert_eq!(atoi("99999999999999999999999"), i64::MAX);
    }

    #[test]
    fn max_concurrency_rules() {
        let half = |n: usize| if cfg!(target_arch = "x86_64") { (n / 2).max(1) } else { n };
        assert_eq!(max_concurrency(Some("3"), Some("5"), 8), 3);
        assert_eq!(max_concurrency(None, Some("5"), 8), 5);
        assert_eq!(max_concurrency(Some("0"), None, 8), 1);
        assert_eq!(max_concurrency(Some("-2"), None, 8), 1);
        assert_eq!(max_concurrency(Some("abc"), None, 8), 1);
        assert_eq!(max_concurrency(None, None, 8), half(8));
        assert_eq!(max_concurrency(None, None, 1), 1);
    }

    #[test]
    fn classification_of_cores() {
        let (order, big, little) = classify(&[(0, 0), (1, 0)]);
        assert_eq!((order, big, little), (vec![0, 1], 2, 0));
        let (order, big, little) = classify(&[(0, 1000), (1, 2000), (2, 2000), (3, 500), (4, 1000)]);
        assert_eq!((order, big, little), (vec![1, 2, 0, 4, 3], 2, 1));
        assert_eq!(classify(&[]), (vec![], 0, 0));
    }

    #[test]
    fn moving_off_a_cpu_keeps_the_affinity_mask() {
        let t = std::thread::spawn(|| {
            let before = affinity::allowed_cpus();
            let cpu = affinity::current_cpu();
            if let Ok(cpu) = usize::try_from(cpu) {
                // (Where it runs afterwards is the scheduler's business, so it is not asserted.)
                assert_eq!(affinity::move_off(cpu), before.len() > 1 && before.contains(&cpu));
            }
            assert_eq!(affinity::allowed_cpus(), before);
        });
        assert!(t.join().is_ok());
    }

    #[test]
    fn config_threadpool_counts() {
        let s = Settings {
            slots: 4,
            default_threads: 2,
            sorted_cpus: vec![0, 1],
            big_count: 2,
            little_count: 0,
            bind_threads: false,
            caller_runs_task0: true,
            spin: Spin::Timed,
        };
        assert_eq!(configured_threads(&s, 1, 0), 2);
        assert_eq!(configured_threads(&s, 0, 0), 4);
        assert_eq!(configured_threads(&s, 0, 3), 3);
        assert_eq!(configured_threads(&s, 1, 16), 4);
        // v0.8 would select 0 workers here and hang on the next launch.
        assert_eq!(configured_threads(&s, -1, 0), 1);
        assert_eq!(configured_threads(&s, 0, -5), 1);
    }
}
