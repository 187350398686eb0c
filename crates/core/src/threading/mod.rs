//! The CPU thread pool behind `TVMBackendParallelLaunch` / `TVMBackendParallelBarrier`,
//! `runtime.config_threadpool` and `TVMBackendRunOnce`.
//!
//! Task model (as in TVM v0.8): a launch of `N` tasks calls `flambda(task_id, penv, cdata)`
//! exactly once for every `task_id` in `0..N`, with `penv->num_task == N`, all tasks able to run
//! concurrently (so they may meet at barriers), and returns after all of them finished. The
//! launching thread runs task 0 itself; tasks `1..N` run on long-lived worker threads.
//! `num_task <= 0` means "the calling thread's configured worker count".
//!
//! Differences from v0.8 (the thread-pool settings, and this project's requirements):
//! * failures are always reported (also with one thread), completely (published before the
//!   launch can complete), as `Task <i> error: <message>\n` lines;
//! * a launch from inside a task runs inline as a one-task launch instead of deadlocking or
//!   aborting; `num_task` above the worker count is an error instead of an abort;
//! * panics in tasks are caught and reported as that task's failure;
//! * the pool size is computed once per process, from `TVM_NUM_THREADS`, `OMP_NUM_THREADS` or
//!   the CPUs the process may use (affinity mask and cgroup quota, halved on x86-64 as v0.8
//!   halves its CPU count), instead of on every launch;
//! * an idle worker that finds itself sharing the launcher's CPU moves elsewhere (v0.8 pins
//!   its threads by default, which has the same effect);
//! * threads are pinned to cores only when `TVM_BIND_THREADS=1` asks for it;
//! * idle workers poll for at most ~2 ms (adapted to the launch period) and then sleep in the
//!   kernel, instead of yielding in a loop for ~100 ms;
//! * one shared pool serves the process; a thread that launches while it is busy gets another
//!   pool (as v0.8's per-thread pools would), so concurrent launchers never wait or deadlock;
//! * a forked child that launches gets fresh workers.
//!
//! See `pool.rs` for the hand-off protocol and `config.rs` for the settings.

mod config;
mod futex;
mod pool;
pub mod stack;

pub(crate) use config::CoreMode;

use crate::error::{last_error_message, Error, Result};
use parking_lot::{Condvar, Mutex};
use pool::{Job, LaunchError, TaskResult};
use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::thread::ThreadId;

/// The group environment handed to every task (`TVMParallelGroupEnv`, 16 bytes).
#[repr(C)]
#[derive(Debug)]
pub struct TVMParallelGroupEnv {
    /// Points at the launch's synchronisation state (opaque to tasks).
    pub sync_handle: *mut c_void,
    /// Number of tasks of the launch.
    pub num_task: i32,
}

/// A task body: returns 0, or non-zero after setting this thread's last error.
pub type FTVMParallelLambda =
    unsafe extern "C" fn(task_id: c_int, penv: *mut TVMParallelGroupEnv, cdata: *mut c_void) -> c_int;

/// Per-thread configuration made by `runtime.config_threadpool` (v0.8: per launching thread).
#[derive(Clone, Copy)]
struct ThreadCfg {
    /// Tasks of a `num_task = 0` launch; 0 = not configured (use the process default).
    threads: usize,
    mode: CoreMode,
    /// The launching thread's own affinity has been set for `mode` (only with binding on).
    pinned: bool,
}

thread_local! {
    static THREAD_CFG: Cell<ThreadCfg> = const {
        Cell::new(ThreadCfg { threads: 0, mode: CoreMode::Big, pinned: false })
    };
}

fn thread_cfg() -> ThreadCfg {
    THREAD_CFG.with(Cell::get)
}

/// Task count of a `num_task = 0` launch made by this thread outside any task.
fn configured_threads() -> usize {
    match thread_cfg().threads {
        0 => config::settings().default_threads,
        n => n,
    }
}

/// The number of tasks a launch with `num_task = 0` from this thread uses right now (1 inside a
/// task, where launches run inline).
pub fn num_threads() -> usize {
    if pool::in_task() {
        1
    } else {
        configured_threads()
    }
}

/// The number of task slots of a pool (`MaxConcurrency()`), fixed for the process.
pub fn max_concurrency() -> usize {
    config::settings().slots
}

/// Tells the pool that another runtime's thread team that spins between its parallel regions
/// (oneDNN built on GNU OpenMP, whose threads busy-wait by default) runs in this process: from
/// now on idle workers sleep on their futex instead of polling with `sched_yield`, which on a
/// machine without spare cores would leave them waiting for a spinner's time slice to end at
/// every launch. Called when such a library is opened; `TVM_THREAD_POOL_SPIN_COUNT` overrides it.
pub fn share_cpus_with_spinning_team() {
    pool::note_spinning_team();
}

/// True while the calling thread runs a parallel task (a launch from here runs inline).
#[cfg(test)]
pub(crate) fn in_parallel_task() -> bool {
    pool::in_task()
}

struct CLambda {
    f: FTVMParallelLambda,
    cdata: *mut c_void,
}

/// # Safety
/// `data` points to a live [`CLambda`] whose `f` may be called with its `cdata`.
unsafe fn call_c_lambda(data: *const (), task_id: i32, env: &mut TVMParallelGroupEnv) -> TaskResult {
    // SAFETY: per this function's contract.
    let l = unsafe { &*data.cast::<CLambda>() };
    // SAFETY: the caller of `parallel_launch` vouches for `f` and `cdata`; `env` is valid.
    let rc = unsafe { (l.f)(task_id, env, l.cdata) };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_error_message())
    }
}

/// # Safety
/// `data` points to a live `F`.
#[cfg(test)]
unsafe fn call_closure<F>(data: *const (), task_id: i32, env: &mut TVMParallelGroupEnv) -> TaskResult
where
    F: Fn(i32, &mut TVMParallelGroupEnv) -> Result<()> + Sync,
{
    // SAFETY: per this function's contract; `F: Sync`, so sharing it between threads is fine.
    let f = unsafe { &*data.cast::<F>() };
    f(task_id, env).map_err(|e| e.to_string())
}

fn failure_text(failures: &[(usize, String)]) -> Error {
    let mut text = String::new();
    for (task, msg) in failures {
        text.push_str(&format!("Task {task} error: {msg}\n"));
    }
    Error::from_foreign(text)
}

fn launch(job: Job, num_task: i32) -> Result<()> {
    if pool::in_task() {
        // Nested launch: one task, inline.
        return pool::run_inline(job).map_err(|m| failure_text(&[(0, m)]));
    }
    let s = config::settings();
    let used = configured_threads();
    let n = match usize::try_from(num_task) {
        Ok(0) | Err(_) => used,
        Ok(n) => n,
    };
    if n > used {
        return Err(Error::tvm(format!(
            "Request parallel sync task larger than number of threads used workers={used} request={n}"
        )));
    }
    if n <= 1 {
        return pool::run_inline(job).map_err(|m| failure_text(&[(0, m)]));
    }
    let pin = s.bind_threads.then(|| {
        let cfg = thread_cfg();
        if !cfg.pinned {
            config::affinity::pin_launcher(s, cfg.mode);
            THREAD_CFG.with(|c| c.set(ThreadCfg { pinned: true, ..cfg }));
        }
        cfg.mode
    });
    match pool::launch_on_pool(job, n, pin, s) {
        Ok(()) => Ok(()),
        Err(LaunchError::Tasks(failures)) => Err(failure_text(&failures)),
        // The system refused a worker thread. An explicit task count must be honoured; a
        // default one may shrink to the workers that exist (each id still runs once).
        Err(LaunchError::Threads(_, why)) if num_task > 0 => Err(Error::tvm(why)),
        Err(LaunchError::Threads(have, _)) if have < 2 => pool::run_inline(job).map_err(|m| failure_text(&[(0, m)])),
        Err(LaunchError::Threads(have, _)) => match pool::launch_on_pool(job, have, pin, s) {
            Ok(()) => Ok(()),
            Err(LaunchError::Tasks(failures)) => Err(failure_text(&failures)),
            Err(LaunchError::Threads(_, why)) => Err(Error::tvm(why)),
        },
    }
}

/// Runs `flambda(task_id, env, cdata)` for every task id in `0..N` and blocks until all finish.
/// `N` is `num_task`, or this thread's worker count when `num_task <= 0`; a launch from inside a
/// task runs inline with `N = 1`. `Err` when a task failed: one `Task <i> error: <that thread's
/// last error>\n` line per failed task, in task order.
pub fn parallel_launch(flambda: Option<FTVMParallelLambda>, cdata: *mut c_void, num_task: i32) -> Result<()> {
    let f = flambda.ok_or_else(|| Error::value("TVMBackendParallelLaunch: flambda is NULL"))?;
    let lambda = CLambda { f, cdata };
    let job = Job { call: call_c_lambda, data: (&lambda as *const CLambda).cast() };
    launch(job, num_task)
}

/// [`parallel_launch`] for a Rust body: `f(task_id, env)` for every task; an `Err` (or a panic)
/// fails that task.
#[cfg(test)]
pub(crate) fn parallel_launch_with<F>(num_task: i32, f: F) -> Result<()>
where
    F: Fn(i32, &mut TVMParallelGroupEnv) -> Result<()> + Sync,
{
    let job = Job { call: call_closure::<F>, data: (&f as *const F).cast() };
    launch(job, num_task)
}

/// `TVMBackendParallelBarrier`: waits until every task of the current launch has arrived.
///
/// The launch is identified by the calling thread's task context, so `penv` is not read (a
/// stale or foreign `penv` is harmless). Outside a multi-task launch it returns at once. `Err`
/// only when the barrier can never complete because a partner task already returned.
pub fn parallel_barrier(_task_id: i32, _penv: *mut TVMParallelGroupEnv) -> Result<()> {
    pool::barrier().map_err(Error::tvm)
}

/// `runtime.config_threadpool(mode, nthreads)` for the calling thread: mode 1
/// uses the fastest cores' count, -1 the slowest, others the slot count; a non-zero `nthreads`
/// overrides it; the result is capped at the slot count and is at least 1. With
/// `TVM_BIND_THREADS=1` the calling thread is re-pinned for the mode.
pub fn config_threadpool(mode: i32, nthreads: i32) -> Result<()> {
    let s = config::settings();
    let threads = config::configured_threads(s, mode, nthreads);
    let mode = if mode == -1 { CoreMode::Little } else { CoreMode::Big };
    let pinned = s.bind_threads && threads > 1;
    if pinned {
        config::affinity::pin_launcher(s, mode);
    }
    THREAD_CFG.with(|c| c.set(ThreadCfg { threads, mode, pinned }));
    Ok(())
}

/// Model runs in progress (see [`run_scope`]).
static ACTIVE_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Marks a model run in progress until dropped (see [`run_scope`]).
#[must_use = "the run lasts as long as the scope lives"]
pub struct RunScope(());

impl Drop for RunScope {
    fn drop(&mut self) {
        ACTIVE_RUNS.fetch_sub(1, Ordering::Release);
    }
}

/// Declares a model run (an executor's `run`): until the scope is dropped, workers and launchers
/// that wait keep polling, yielding the CPU, instead of sleeping in the kernel (for at most
/// 100 ms per wait), as TVM's pool does, so no operator of the run pays a wake-up. After the run
/// the usual idle policy applies (a worker sleeps within 2 ms).
pub fn run_scope() -> RunScope {
    ACTIVE_RUNS.fetch_add(1, Ordering::Acquire);
    RunScope(())
}

/// Whether a model run is in progress.
fn runs_active() -> bool {
    ACTIVE_RUNS.load(Ordering::Relaxed) != 0
}

/// Handles whose first [`run_once`] call is running `f` right now, with the thread running it.
static RUN_ONCE_RUNNING: Mutex<Vec<(usize, ThreadId)>> = Mutex::new(Vec::new());
/// Signalled when an entry leaves [`RUN_ONCE_RUNNING`].
static RUN_ONCE_FINISHED: Condvar = Condvar::new();

/// `TVMBackendRunOnce`: if `*handle` is NULL, sets it to 1 and returns `f(cdata)`'s outcome;
/// otherwise returns `Ok`. As in v0.8 the flag is set first (a failing `f` is not retried, and a
/// call from inside `f` returns `Ok` at once) and `nbytes` is ignored. Unlike v0.8, a call racing
/// with the first one waits until that first `f` has finished, and `f` runs exactly once.
///
/// `handle` must be NULL (an error) or point to a pointer-sized, pointer-aligned variable that
/// is accessed only through this function (or read after it returned).
#[allow(
    clippy::not_unsafe_ptr_arg_deref,
    reason = "signature fixed by the C export layer, which checks `handle` and documents the contract"
)]
pub fn run_once(
    handle: *mut *mut c_void,
    f: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    cdata: *mut c_void,
    _nbytes: i32,
) -> Result<()> {
    if handle.is_null() {
        return Err(Error::value("TVMBackendRunOnce: handle is NULL"));
    }
    if !handle.is_aligned() {
        return Err(Error::value("TVMBackendRunOnce: handle is not aligned"));
    }
    // SAFETY: non-NULL and aligned; per the contract it is a live pointer-sized variable that is
    // only accessed through this function, so viewing it as an AtomicPtr is sound.
    let flag = unsafe { AtomicPtr::from_ptr(handle) };
    let key = handle as usize;
    let me = std::thread::current().id();
    {
        let mut running = RUN_ONCE_RUNNING.lock();
        let set = 1usize as *mut c_void;
        if flag.compare_exchange(std::ptr::null_mut(), set, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // Already set: done, or being run by another thread (wait) or by this one (re-entry).
            while let Some(&(_, runner)) = running.iter().find(|e| e.0 == key) {
                if runner == me {
                    break;
                }
                RUN_ONCE_FINISHED.wait(&mut running);
            }
            return Ok(());
        }
        running.push((key, me));
    }
    let rc = match f {
        // SAFETY: the caller vouches that `f` accepts `cdata`.
        Some(f) => unsafe { f(cdata) },
        None => 0,
    };
    RUN_ONCE_RUNNING.lock().retain(|e| e.0 != key);
    RUN_ONCE_FINISHED.notify_all();
    match rc {
        0 => Ok(()),
        -2 => Err(Error::already_set()),
        _ => Err(Error::from_foreign(last_error_message())),
    }
}

#[cfg(test)]
mod tests;
