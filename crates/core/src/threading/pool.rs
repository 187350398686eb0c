//! The worker pool: long-lived worker threads, the lock-free launch hand-off, completion, and the
//! barrier of `TVMBackendParallelBarrier`.
//!
//! # Design
//!
//! A [`Pool`] has one cache-line-padded [`Slot`] per task id. A launch of `n` tasks, made by the
//! one thread that holds the pool (`Ctl::busy`), writes the task description into the slots of
//! tasks `1..n` and bumps each slot's `job` counter; task 0 runs on the launching thread itself
//! (unless `TVM_EXCLUDE_WORKER0=0`). Completion is the mirror image: the worker stores its `job`
//! value into `done`, and the launcher waits for each `done`. Every word has exactly one writer
//! at a time and every assignment changes it, so nothing can be missed (no ABA), and the hot
//! path is a handful of atomic operations on two cache lines per worker, with no lock.
//!
//! Waiting is bounded polling, then a futex sleep. An idle worker polls for a window that
//! follows the recent launch period (twice the last gap, between 0.5 and 2 ms, halving at most
//! per launch), so back-to-back and periodic launches find it awake, while a pool left alone goes
//! to sleep within 2 ms. The minimum is well above the gaps between the operators of a model run
//! (a few us) and their imbalance (a worker whose share of an operator is smaller waits for the
//! launcher's), so a run never pays a wake-up (~15 us) between operators; a sleep is paid only
//! after a gap of at least 0.5 ms, so it costs at most ~3 % of that gap. To sleep it sets the low bit of `job` and waits on that word;
//! the launcher's bump sees the bit and wakes it. A launcher waiting for a worker, and a task
//! waiting at a barrier, poll up to 2 ms (busy for 20 us, then yielding the CPU between polls,
//! which matters when threads share a CPU) and then sleep the same way (`done`'s low bit, or the
//! barrier's sleeper count).
//!
//! A task's error is published (`error`, `failed`) before `done`, so the launcher never sees a
//! finished-but-unreported failure (a v0.8 race). Tasks run under `catch_unwind`.
//!
//! Pools are created on demand and never freed (they are `&'static`); the launching thread owns a
//! pool only for the duration of one launch. A second application thread that launches while the
//! primary pool is busy takes (or creates) another pool, like v0.8's per-thread pools, so
//! concurrent launchers neither wait for each other nor deadlock. After `fork()` the child drops
//! the registry (its workers do not exist there) and builds a fresh one on its first launch.

use super::config::{self, affinity, CoreMode, Settings, Spin};
use super::futex;
use super::TVMParallelGroupEnv;
use parking_lot::Mutex;
use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::ffi::c_void;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

/// Low bit of [`Slot::job`]: the worker sleeps (or is about to) on the word.
const SLEEPING: u32 = 1;
/// Low bit of [`Slot::done`]: the launcher sleeps (or is about to) on the word.
const WAITING: u32 = 1;
/// Increment of `job` per assignment (the low bit is a flag).
const STEP: u32 = 2;
/// Stack of a worker thread: glibc's default for threads, which v0.8's `std::thread` workers get.
const WORKER_STACK: usize = 8 << 20;
/// How often a barrier sleeper wakes to check whether a partner task has exited.
const BARRIER_RECHECK: Duration = Duration::from_millis(1);

/// Result of one task: `Err` carries the text of its `Task <i> error: <text>` line.
pub(super) type TaskResult = Result<(), String>;

/// What a task runs: `call(data, task_id, env)`. `data` lives on the launching thread's stack
/// until the launch returns.
#[derive(Clone, Copy)]
pub(super) struct Job {
    /// Calls the task body.
    pub call: unsafe fn(data: *const (), task_id: i32, env: &mut TVMParallelGroupEnv) -> TaskResult,
    /// The body's state.
    pub data: *const (),
}

/// Everything a worker needs for one task; copied into its slot before the `job` bump.
#[derive(Clone, Copy)]
struct TaskDesc {
    job: Job,
    num_task: u32,
    seq: u32,
    pin: Option<CoreMode>,
    /// The CPU the launching thread ran on when it handed out the tasks (-1: unknown).
    launcher_cpu: i32,
}

/// The task the current thread is running (barrier and nested-launch detection).
#[derive(Clone, Copy)]
pub(super) struct TaskCtx {
    /// The pool of the launch; `None` for a launch run inline on one thread.
    pool: Option<&'static Pool>,
    num_task: u32,
    seq: u32,
}

thread_local! {
    static TASK_CTX: Cell<Option<TaskCtx>> = const { Cell::new(None) };
    static BARRIER_ABANDONED: Cell<bool> = const { Cell::new(false) };
}

/// True while the calling thread runs a parallel task.
#[inline]
pub(super) fn in_task() -> bool {
    TASK_CTX.with(|c| c.get().is_some())
}

/// Aligns a value to 128 bytes (two cache lines, which x86 prefetches in pairs).
#[repr(align(128))]
struct Padded<T>(T);

impl<T> Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One task id's hand-off point.
#[repr(align(128))]
struct Slot {
    /// Assignment counter (+[`STEP`] per task given to this slot) | [`SLEEPING`].
    job: AtomicU32,
    /// The `job` value of the last finished task | [`WAITING`].
    done: AtomicU32,
    /// Whether the last finished task failed (its text is in `error`).
    failed: AtomicBool,
    /// The task of the current assignment.
    desc: UnsafeCell<Option<TaskDesc>>,
    /// The failure text of the last finished task.
    error: Mutex<Option<String>>,
}

// SAFETY: the atomics and the mutex are Sync by themselves. `desc` is written only by the thread
// holding the pool (`Ctl::busy`), and only while the slot's worker is idle: before the `job`
// bump (release) that hands it to the worker, and after the worker's `done` store (release) that
// the launcher acquired. The worker reads it only between acquiring that bump and storing
// `done`. So accesses never overlap, and each read happens-after the write it reads.
unsafe impl Sync for Slot {}

impl Slot {
    fn new() -> Self {
        Slot {
            job: AtomicU32::new(0),
            done: AtomicU32::new(0),
            failed: AtomicBool::new(false),
            desc: UnsafeCell::new(None),
            error: Mutex::new(None),
        }
    }
}

/// State owned by the launching thread.
struct Ctl {
    /// Held by the thread that launches on this pool.
    busy: AtomicBool,
    /// Number of the current (or last) launch.
    seq: AtomicU32,
    /// `seq` once every slot of the launch has been handed its task.
    published: AtomicU32,
    /// `seq` once the launching thread finished task 0.
    caller_done: AtomicU32,
    /// Slots below this index have a worker thread.
    spawned: AtomicUsize,
}

/// Generation barrier shared by the tasks of a launch; `sync_handle` points here.
struct Barrier {
    arrived: AtomicU32,
    generation: AtomicU32,
    sleepers: AtomicU32,
}

/// A set of worker threads that serves one launch at a time.
pub(super) struct Pool {
    ctl: Padded<Ctl>,
    barrier: Padded<Barrier>,
    slots: Box<[Slot]>,
}

/// A failed launch: `(task id, message)` in task order.
pub(super) type Failures = Vec<(usize, String)>;

impl Pool {
    /// A new pool that lives for the rest of the process; `held`: already owned by the caller.
    fn new_static(slots: usize, held: bool) -> &'static Pool {
        Box::leak(Box::new(Pool {
            ctl: Padded(Ctl {
                busy: AtomicBool::new(held),
                seq: AtomicU32::new(0),
                published: AtomicU32::new(0),
                caller_done: AtomicU32::new(0),
                spawned: AtomicUsize::new(0),
            }),
            barrier: Padded(Barrier {
                arrived: AtomicU32::new(0),
                generation: AtomicU32::new(0),
                sleepers: AtomicU32::new(0),
            }),
            slots: (0..slots.max(1)).map(|_| Slot::new()).collect(),
        }))
    }

    fn try_hold(&'static self) -> Option<Held> {
        self.ctl
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            // Not `then_some`: a `Held` built eagerly would release the pool when dropped.
            .then(|| Held(self))
    }

    fn sync_handle(&'static self) -> *mut c_void {
        (&*self.barrier as *const Barrier).cast_mut().cast()
    }

    /// Starts worker threads for slots `first..n`; returns how many tasks can run (`n`, or fewer
    /// when the system refused a thread: then `Err` with the reason and the usable count).
    fn ensure_workers(&'static self, first: usize, n: usize) -> Result<(), (usize, String)> {
        let mut have = self.ctl.spawned.load(Ordering::Relaxed).max(first);
        while have < n {
            let idx = have;
            let spawned = std::thread::Builder::new()
                .name(format!("tvm-worker-{idx}"))
                .stack_size(WORKER_STACK)
                .spawn(move || worker_main(self, idx));
            if let Err(e) = spawned {
                return Err((have, format!("cannot start a thread-pool worker: {e}")));
            }
            have += 1;
            self.ctl.spawned.store(have, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Runs tasks `0..n` of `job` and waits for all of them.
    fn run(&'static self, job: Job, n: usize, pin: Option<CoreMode>, s: &Settings) -> Result<(), Failures> {
        let first = usize::from(s.caller_runs_task0);
        let seq = self.ctl.seq.load(Ordering::Relaxed).wrapping_add(1);
        self.ctl.seq.store(seq, Ordering::Relaxed);
        let desc = TaskDesc {
            job,
            num_task: u32::try_from(n).unwrap_or(u32::MAX),
            seq,
            pin,
            launcher_cpu: affinity::current_cpu(),
        };
        for slot in &self.slots[first..n] {
            // SAFETY: this thread holds the pool and the slot's previous task finished (its
            // `done` was acquired by the previous launch), so the worker does not read `desc`
            // now; see `unsafe impl Sync for Slot`.
            unsafe { *slot.desc.get() = Some(desc) };
            if slot.job.fetch_add(STEP, Ordering::Release) & SLEEPING != 0 {
                futex::wake_one(&slot.job);
            }
        }
        self.ctl.published.store(seq, Ordering::Release);
        let task0 = (first == 1).then(|| run_task(Some(self), &desc, 0));
        self.ctl.caller_done.store(seq, Ordering::Release);

        let mut failures = Failures::new();
        if let Some(Err(msg)) = task0 {
            failures.push((0, msg));
        }
        for (t, slot) in self.slots.iter().enumerate().take(n).skip(first) {
            let expected = slot.job.load(Ordering::Relaxed) & !SLEEPING;
            wait_done(slot, expected, s.spin);
            if slot.failed.load(Ordering::Relaxed) {
                let msg = slot.error.lock().take().unwrap_or_default();
                failures.push((t, msg));
            }
        }
        if self.barrier.arrived.load(Ordering::Relaxed) != 0 {
            // A barrier was abandoned (a task exited without reaching it): start clean.
            self.barrier.arrived.store(0, Ordering::Relaxed);
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures)
        }
    }

    /// True when some task of the launch `ctx` has already returned (so a barrier that still
    /// waits for it can never complete).
    fn some_task_exited(&self, ctx: &TaskCtx, s: &Settings) -> bool {
        if self.ctl.published.load(Ordering::Acquire) != ctx.seq {
            return false;
        }
        let first = usize::from(s.caller_runs_task0);
        if first == 1 && self.ctl.caller_done.load(Ordering::Acquire) == ctx.seq {
            return true;
        }
        let n = usize::try_from(ctx.num_task).unwrap_or(usize::MAX).min(self.slots.len());
        self.slots[first..n]
            .iter()
            .any(|slot| slot.done.load(Ordering::Acquire) & !WAITING == slot.job.load(Ordering::Acquire) & !SLEEPING)
    }

    fn barrier_wait(&self, ctx: &TaskCtx) -> Result<(), String> {
        let b = &self.barrier;
        let gen = b.generation.load(Ordering::Acquire);
        if b.arrived.fetch_add(1, Ordering::AcqRel) + 1 >= ctx.num_task {
            b.arrived.store(0, Ordering::Relaxed);
            b.generation.store(gen.wrapping_add(1), Ordering::SeqCst);
            if b.sleepers.load(Ordering::SeqCst) != 0 {
                futex::wake_all(&b.generation);
            }
            return Ok(());
        }
        let s = config::settings();
        let passed = || (b.generation.load(Ordering::Acquire) != gen).then_some(());
        if poll_active(passed, s.spin).is_some() {
            return Ok(());
        }
        loop {
            b.sleepers.fetch_add(1, Ordering::SeqCst);
            if b.generation.load(Ordering::SeqCst) == gen {
                futex::wait_timeout(&b.generation, gen, BARRIER_RECHECK);
            }
            b.sleepers.fetch_sub(1, Ordering::SeqCst);
            if passed().is_some() {
                return Ok(());
            }
            if self.some_task_exited(ctx, s) {
                // The exited task passed every barrier it called before exiting, so if this
                // generation is still open it will never be completed.
                return match passed() {
                    Some(()) => Ok(()),
                    None => Err("parallel barrier abandoned: another task of this launch \
                                 returned without reaching it"
                        .to_owned()),
                };
            }
        }
    }
}

/// Exclusive use of a pool for one launch.
struct Held(&'static Pool);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.ctl.busy.store(false, Ordering::Release);
    }
}

/// Shortest polling window of an idle worker before it sleeps in the kernel (see the module
/// doc: a wake-up costs ~15 us, ~3 % of this).
const IDLE_POLL_MIN: Duration = Duration::from_micros(500);
/// Longest polling window of an idle worker (reached only while launches keep arriving at
/// regular intervals shorter than half of it).
const IDLE_POLL_MAX: Duration = Duration::from_millis(2);
/// A thread waiting inside a launch (launcher for its workers, task at a barrier) polls with
/// a pause hint this long, then with `sched_yield` up to [`ACTIVE_POLL`], then sleeps.
const PAUSE_POLL: Duration = Duration::from_micros(20);
/// Total polling window of a thread waiting inside a launch.
const ACTIVE_POLL: Duration = Duration::from_millis(2);

/// Polls `poll` until it yields a value: busy (with a pause hint) for `pause`, then yielding the
/// CPU between polls until `limit` (or, under `TVM_THREAD_POOL_SPIN_COUNT`, that many yields).
/// Returns the value and about how long it took.
#[inline]
fn poll_for<T>(
    mut poll: impl FnMut() -> Option<T>,
    spin: Spin,
    pause: Duration,
    limit: Duration,
) -> Option<(T, Duration)> {
    if let Some(v) = poll() {
        return Some((v, Duration::ZERO));
    }
    match spin {
        Spin::Timed => {
            let start = Instant::now();
            let mut elapsed = Duration::ZERO;
            loop {
                for _ in 0..32 {
                    if elapsed < pause {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                    if let Some(v) = poll() {
                        return Some((v, elapsed));
                    }
                }
                elapsed = start.elapsed();
                if elapsed >= limit {
                    return None;
                }
            }
        }
        Spin::Yields(n) => {
            for _ in 0..n {
                std::thread::yield_now();
                if let Some(v) = poll() {
                    return Some((v, Duration::ZERO));
                }
            }
            None
        }
    }
}

/// Polls like a thread waiting inside a launch.
#[inline]
fn poll_active<T>(poll: impl FnMut() -> Option<T>, spin: Spin) -> Option<T> {
    poll_for(poll, spin, PAUSE_POLL, ACTIVE_POLL).map(|(v, _)| v)
}

/// The next polling window of an idle worker that waited `waited` for its last task: twice the
/// gap between launches when that fits the bounds (so periodic launches find it awake), else
/// the minimum (long gaps are not worth burning a core for).
fn next_idle_window(waited: Duration) -> Duration {
    let twice = waited.saturating_mul(2);
    if twice <= IDLE_POLL_MAX {
        twice.max(IDLE_POLL_MIN)
    } else {
        IDLE_POLL_MIN
    }
}

/// Longest a waiting thread keeps polling (yielding the CPU) instead of sleeping while a model
/// run is in progress ([`super::run_scope`]): operators whose work all falls to one task (a
/// parallel loop of extent 1, common at batch 1) leave the others waiting for milliseconds, and
/// a sleep there costs a wake-up (~15 us, and often a migration) at the next operator.
const RUN_POLL: Duration = Duration::from_millis(100);

/// Polls `poll` with yields (no busy phase) while `keep_awake` says a model run is in progress,
/// for at most [`RUN_POLL`] since `start`. Explicit spin counts (`TVM_THREAD_POOL_SPIN_COUNT`)
/// are honoured as they are: no extra polling.
fn poll_while_running<T>(
    mut poll: impl FnMut() -> Option<T>,
    spin: Spin,
    start: Instant,
    keep_awake: &dyn Fn() -> bool,
) -> Option<T> {
    if spin != Spin::Timed {
        return None;
    }
    while keep_awake() && start.elapsed() < RUN_POLL {
        if let Some((v, _)) = poll_for(&mut poll, spin, Duration::ZERO, IDLE_POLL_MIN) {
            return Some(v);
        }
    }
    None
}

/// Waits until the launcher bumps `slot.job` past `seen`, polling for `window` (or, while
/// `keep_awake`, up to [`RUN_POLL`]) before sleeping; returns the new value and about how long
/// the wait took.
fn wait_job(slot: &Slot, seen: u32, spin: Spin, window: Duration, keep_awake: &dyn Fn() -> bool) -> (u32, Duration) {
    let changed = || {
        let v = slot.job.load(Ordering::Acquire);
        (v != seen).then_some(v)
    };
    let start = Instant::now();
    if let Some(found) = poll_for(changed, spin, PAUSE_POLL.min(window), window) {
        return found;
    }
    if let Some(v) = poll_while_running(changed, spin, start, keep_awake) {
        return (v, start.elapsed());
    }
    if let Err(v) = slot.job.compare_exchange(seen, seen | SLEEPING, Ordering::Acquire, Ordering::Acquire) {
        return (v, start.elapsed());
    }
    loop {
        futex::wait(&slot.job, seen | SLEEPING);
        let v = slot.job.load(Ordering::Acquire);
        if v != seen | SLEEPING {
            slot.job.fetch_and(!SLEEPING, Ordering::Relaxed);
            return (v & !SLEEPING, start.elapsed());
        }
    }
}

/// Waits until the slot's worker reports the task `expected` finished.
fn wait_done(slot: &Slot, expected: u32, spin: Spin) {
    let finished = || (slot.done.load(Ordering::Acquire) == expected).then_some(());
    let start = Instant::now();
    if poll_active(finished, spin).is_some() {
        return;
    }
    if poll_while_running(finished, spin, start, &super::runs_active).is_some() {
        return;
    }
    let prev = expected.wrapping_sub(STEP);
    if slot.done.compare_exchange(prev, prev | WAITING, Ordering::Acquire, Ordering::Acquire).is_err() {
        return; // `done` can only have moved on to `expected`.
    }
    while slot.done.load(Ordering::Acquire) != expected {
        futex::wait(&slot.done, prev | WAITING);
    }
}

/// Set once another runtime's thread team runs beside the pool in this process (oneDNN's OpenMP
/// team, see [`super::share_cpus_with_spinning_team`]).
static SPINNING_TEAM: AtomicBool = AtomicBool::new(false);

pub(super) fn note_spinning_team() {
    SPINNING_TEAM.store(true, Ordering::Relaxed);
}

/// How an idle worker waits for its next task. A thread team that spins between its own
/// parallel regions (GNU OpenMP's default) keeps the CPUs busy: a worker that polls with
/// `sched_yield` on the same CPU then runs only when the spinner's time slice ends (a timer tick,
/// ~4 ms), every launch. Sleeping on the futex instead gets the worker woken with the
/// scheduler's wake-up preference, in microseconds. Explicit spin counts are honoured as given.
fn idle_spin(spin: Spin, spinning_team: bool) -> Spin {
    if spin == Spin::Timed && spinning_team {
        Spin::Yields(0)
    } else {
        spin
    }
}

/// Least time between two [`unstack`] moves of one worker.
const MOVE_INTERVAL: Duration = Duration::from_millis(2);

/// Called by a worker that finds itself on the launcher's CPU. The kernel tends to wake a
/// sleeping worker on its waker's CPU and then leaves the two polling threads time-slicing one
/// CPU while another idles, for tens of milliseconds: every launch then costs a context switch
/// (~15-100 us instead of ~0.3 us). v0.8 avoids this only because it pins threads by default;
/// without pinning, the worker moves itself elsewhere (at most once per [`MOVE_INTERVAL`], so
/// a machine that really has no free CPU is not made worse).
#[cold]
fn unstack(cpu: i32, last_move: &mut Option<Instant>) {
    if last_move.is_some_and(|t| t.elapsed() < MOVE_INTERVAL) {
        return;
    }
    if let Ok(cpu) = usize::try_from(cpu) {
        affinity::move_off(cpu);
    }
    *last_move = Some(Instant::now());
}

fn worker_main(pool: &'static Pool, idx: usize) {
    let s = config::settings();
    let slot = &pool.slots[idx];
    let mut seen = 0;
    let mut pinned = None;
    let mut window = IDLE_POLL_MIN;
    let mut last_move: Option<Instant> = None;
    loop {
        let (job, waited) =
            wait_job(slot, seen, idle_spin(s.spin, SPINNING_TEAM.load(Ordering::Relaxed)), window, &super::runs_active);
        seen = job;
        window = next_idle_window(waited).max(window / 2);
        // SAFETY: the acquire load in `wait_job` synchronised with the launcher's release bump,
        // which follows its write of `desc`; it writes again only after our `done` store.
        let desc = unsafe { *slot.desc.get() };
        let result = match desc {
            Some(desc) => {
                if desc.pin != pinned {
                    if let Some(mode) = desc.pin {
                        affinity::pin_worker(s, idx, mode);
                    }
                    pinned = desc.pin;
                }
                if desc.pin.is_none() && desc.launcher_cpu >= 0 && affinity::current_cpu() == desc.launcher_cpu {
                    unstack(desc.launcher_cpu, &mut last_move);
                }
                run_task(Some(pool), &desc, idx)
            }
            None => Err("InternalError: thread-pool slot without a task".to_owned()),
        };
        match result {
            Ok(()) => slot.failed.store(false, Ordering::Relaxed),
            Err(msg) => {
                *slot.error.lock() = Some(msg);
                slot.failed.store(true, Ordering::Relaxed);
            }
        }
        if slot.done.swap(seen, Ordering::Release) & WAITING != 0 {
            futex::wake_one(&slot.done);
        }
    }
}

/// Text of a caught panic.
pub(super) fn panic_text(payload: &(dyn Any + Send)) -> String {
    format!("InternalError: panic in a parallel task: {}", crate::error::panic_payload_text(payload))
}

/// Runs one task on this thread with its environment and task context.
fn run_task(pool: Option<&'static Pool>, desc: &TaskDesc, task_id: usize) -> TaskResult {
    let mut env = TVMParallelGroupEnv {
        sync_handle: pool.map_or_else(serial_sync_handle, Pool::sync_handle),
        num_task: i32::try_from(desc.num_task).unwrap_or(i32::MAX),
    };
    let ctx = TaskCtx { pool, num_task: desc.num_task, seq: desc.seq };
    let prev = TASK_CTX.with(|c| c.replace(Some(ctx)));
    let abandoned = BARRIER_ABANDONED.with(|b| b.replace(false));
    let job = desc.job;
    let task = i32::try_from(task_id).unwrap_or(i32::MAX);
    // SAFETY: `job` was built by `launch` from a body and data that stay valid until the launch
    // returns, which is after this task finished.
    let result = catch_unwind(AssertUnwindSafe(|| unsafe { (job.call)(job.data, task, &mut env) }));
    let broke = BARRIER_ABANDONED.with(|b| b.replace(abandoned));
    TASK_CTX.with(|c| c.set(prev));
    match result {
        Ok(Ok(())) if broke => Err("TVMError: parallel barrier abandoned: another task of this launch \
                                    returned without reaching it"
            .to_owned()),
        Ok(r) => r,
        Err(payload) => Err(panic_text(&*payload)),
    }
}

static SERIAL_SYNC: AtomicU32 = AtomicU32::new(0);

/// `sync_handle` of a launch run inline on one thread (v0.8: a zeroed counter).
fn serial_sync_handle() -> *mut c_void {
    SERIAL_SYNC.as_ptr().cast()
}

/// Runs `job` as a one-task launch on this thread.
pub(super) fn run_inline(job: Job) -> TaskResult {
    let desc = TaskDesc { job, num_task: 1, seq: 0, pin: None, launcher_cpu: -1 };
    run_task(None, &desc, 0)
}

/// The barrier for the task running on this thread (returns at once outside a multi-task launch).
pub(super) fn barrier() -> Result<(), String> {
    let Some(ctx) = TASK_CTX.with(Cell::get) else {
        return Ok(());
    };
    let Some(pool) = ctx.pool else {
        return Ok(());
    };
    if ctx.num_task <= 1 {
        return Ok(());
    }
    let r = pool.barrier_wait(&ctx);
    if r.is_err() {
        BARRIER_ABANDONED.with(|b| b.set(true));
    }
    r
}

/// Every pool of this process.
struct Registry {
    primary: &'static Pool,
    extras: Mutex<Vec<&'static Pool>>,
}

static REGISTRY: AtomicPtr<Registry> = AtomicPtr::new(std::ptr::null_mut());
static ATFORK: Once = Once::new();
/// Registries that lost the start-up race: never used, kept reachable (leak checkers would
/// otherwise report them; freeing a pool is not supported).
static LOST_RACE: std::sync::Mutex<Vec<&'static Registry>> = std::sync::Mutex::new(Vec::new());

/// `pthread_atfork` child handler: the child has none of the parent's workers, so it forgets
/// every pool (leaking them) and builds new ones on its next launch. Async-signal-safe.
extern "C" fn forget_pools_after_fork() {
    REGISTRY.store(std::ptr::null_mut(), Ordering::Relaxed);
}

#[cold]
fn new_registry(slots: usize) -> &'static Registry {
    ATFORK.call_once(|| {
        // SAFETY: registers a plain function that only stores to an atomic; no other handler.
        unsafe { libc::pthread_atfork(None, None, Some(forget_pools_after_fork)) };
    });
    let fresh: &'static Registry =
        Box::leak(Box::new(Registry { primary: Pool::new_static(slots, false), extras: Mutex::new(Vec::new()) }));
    let ptr = (fresh as *const Registry).cast_mut();
    match REGISTRY.compare_exchange(std::ptr::null_mut(), ptr, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => fresh,
        // Lost a start-up race: use the winner's (ours, which has no threads, is kept aside).
        Err(winner) => {
            LOST_RACE.lock().unwrap_or_else(|e| e.into_inner()).push(fresh);
            // SAFETY: only pointers to leaked, never freed registries are stored in REGISTRY.
            unsafe { &*winner }
        }
    }
}

#[inline]
fn registry(slots: usize) -> &'static Registry {
    let p = REGISTRY.load(Ordering::Acquire);
    if p.is_null() {
        new_registry(slots)
    } else {
        // SAFETY: only pointers to leaked, never freed registries are stored in REGISTRY.
        unsafe { &*p }
    }
}

fn hold_a_pool(s: &Settings) -> Held {
    let reg = registry(s.slots);
    if let Some(h) = reg.primary.try_hold() {
        return h;
    }
    let mut extras = reg.extras.lock();
    if let Some(h) = extras.iter().find_map(|p| p.try_hold()) {
        return h;
    }
    let pool = Pool::new_static(s.slots, true);
    extras.push(pool);
    Held(pool)
}

/// Why a pool launch did not run every task.
pub(super) enum LaunchError {
    /// The listed tasks failed.
    Tasks(Failures),
    /// Worker threads could not be started: `(tasks that could run, reason)`.
    Threads(usize, String),
}

/// Runs `n >= 2` tasks of `job` on a pool; `pin` selects the core mode when binding is on.
pub(super) fn launch_on_pool(job: Job, n: usize, pin: Option<CoreMode>, s: &Settings) -> Result<(), LaunchError> {
    let held = hold_a_pool(s);
    let pool = held.0;
    let n = n.min(pool.slots.len());
    pool.ensure_workers(usize::from(s.caller_runs_task0), n).map_err(|(have, why)| LaunchError::Threads(have, why))?;
    let r = pool.run(job, n, pin, s).map_err(LaunchError::Tasks);
    drop(held);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_window_follows_the_launch_period_within_bounds() {
        assert_eq!(next_idle_window(Duration::ZERO), IDLE_POLL_MIN);
        assert_eq!(next_idle_window(IDLE_POLL_MIN / 4), IDLE_POLL_MIN);
        assert_eq!(next_idle_window(IDLE_POLL_MIN * 3 / 4), IDLE_POLL_MIN * 3 / 2);
        assert_eq!(next_idle_window(IDLE_POLL_MAX / 2), IDLE_POLL_MAX);
        assert_eq!(next_idle_window(IDLE_POLL_MAX), IDLE_POLL_MIN);
        assert_eq!(next_idle_window(Duration::from_secs(5)), IDLE_POLL_MIN);
    }

    /// A worker waiting `delay` for its next task: whether it went to sleep (the launcher's bump
    /// finds the SLEEPING bit), with a model run in progress or not.
    fn slept_waiting(delay: Duration, in_run: bool) -> bool {
        let slot = Slot::new();
        let awake = move || in_run;
        std::thread::scope(|s| {
            let waiter = s.spawn(|| wait_job(&slot, 0, Spin::Timed, IDLE_POLL_MIN, &awake));
            std::thread::sleep(delay);
            let before = slot.job.fetch_add(STEP, Ordering::Release);
            if before & SLEEPING != 0 {
                futex::wake_one(&slot.job);
            }
            let (got, _) = waiter.join().unwrap();
            assert_eq!(got & !SLEEPING, STEP);
            before & SLEEPING != 0
        })
    }

    #[test]
    fn workers_stay_awake_through_a_model_run_and_sleep_after() {
        // 20 ms: ten times the longest idle window, a fifth of the run limit.
        let wait = Duration::from_millis(20);
        assert!(IDLE_POLL_MAX * 10 <= wait && wait * 5 <= RUN_POLL);
        assert!(!slept_waiting(wait, true), "slept during a run");
        // A loaded machine may not schedule the waiter in time: longer waits before failing.
        assert!(
            [wait, wait * 5, wait * 25].into_iter().any(|w| slept_waiting(w, false)),
            "did not sleep outside a run"
        );
    }

    #[test]
    fn idle_workers_sleep_beside_a_spinning_team_unless_told_otherwise() {
        assert_eq!(idle_spin(Spin::Timed, false), Spin::Timed);
        assert_eq!(idle_spin(Spin::Timed, true), Spin::Yields(0));
        assert_eq!(idle_spin(Spin::Yields(500), true), Spin::Yields(500));
        // Yields(0): no polling at all, straight to the futex.
        let mut polls = 0;
        assert!(poll_for(
            || {
                polls += 1;
                None::<()>
            },
            Spin::Yields(0),
            PAUSE_POLL,
            ACTIVE_POLL
        )
        .is_none());
        assert_eq!(polls, 1);
    }

    #[test]
    fn run_scopes_nest_and_end() {
        let a = crate::threading::run_scope();
        let b = crate::threading::run_scope();
        assert!(crate::threading::runs_active());
        drop(a);
        assert!(crate::threading::runs_active());
        drop(b);
        // Other tests may hold scopes of their own; ours are gone.
    }

    #[test]
    fn polling_gives_up_after_its_window_and_reports_the_wait() {
        let t = Instant::now();
        assert!(poll_for(|| None::<()>, Spin::Timed, PAUSE_POLL, Duration::from_micros(200)).is_none());
        assert!(t.elapsed() >= Duration::from_micros(200));
        assert!(poll_for(|| None::<()>, Spin::Yields(3), PAUSE_POLL, Duration::from_secs(60)).is_none());
        let mut n = 0;
        let got = poll_for(
            || {
                n += 1;
                (n == 100).then_some(7)
            },
            Spin::Timed,
            PAUSE_POLL,
            Duration::from_secs(60),
        );
        assert_eq!(got.map(|g| g.0), Some(7));
    }

    #[test]
    fn slots_are_padded() {
        assert_eq!(std::mem::align_of::<Slot>(), 128);
        assert_eq!(std::mem::size_of::<TVMParallelGroupEnv>(), 16);
    }
}
