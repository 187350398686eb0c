//! Semantics and stress tests of the thread pool. Unit-test builds give the pool at least four
//! slots (see `config::compute`), and every test configures its own thread's task count, so the
//! tests do not depend on the machine or on each other. Each body runs under a time limit, so a
//! deadlock fails the test instead of hanging the run.

use super::*;
use crate::error::set_last_error;
use std::collections::HashSet;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

/// Runs `body` on a fresh thread and fails if it takes longer than `secs`.
fn within<T: Send + 'static>(secs: u64, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)));
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("test body did not finish within {secs} s (deadlock?)"),
    }
}

fn configure(n: i32) {
    assert!(config_threadpool(0, n).is_ok());
    assert_eq!(num_threads(), usize::try_from(n).unwrap_or(0));
}

/// Per-launch record of which task ids ran, how often, with which `num_task`, on which thread.
#[derive(Default)]
struct Seen {
    calls: Mutex<Vec<(i32, i32, ThreadId)>>,
}

impl Seen {
    fn ids(&self) -> Vec<i32> {
        let mut v: Vec<i32> = self.calls.lock().map(|c| c.iter().map(|x| x.0).collect()).unwrap_or_default();
        v.sort_unstable();
        v
    }
    fn num_tasks(&self) -> HashSet<i32> {
        self.calls.lock().map(|c| c.iter().map(|x| x.1).collect()).unwrap_or_default()
    }
    fn threads(&self) -> Vec<(i32, ThreadId)> {
        self.calls.lock().map(|c| c.iter().map(|x| (x.0, x.2)).collect()).unwrap_or_default()
    }
}

unsafe extern "C" fn record(task_id: c_int, penv: *mut TVMParallelGroupEnv, cdata: *mut c_void) -> c_int {
    // SAFETY: the tests pass a live `Seen` as cdata; `penv` comes from the pool.
    let (seen, env) = unsafe { (&*cdata.cast::<Seen>(), &*penv) };
    if let Ok(mut c) = seen.calls.lock() {
        c.push((task_id, env.num_task, std::thread::current().id()));
    }
    0
}

fn launch_record(num_task: i32) -> (Result<()>, Seen) {
    let seen = Seen::default();
    let r = parallel_launch(Some(record), (&seen as *const Seen).cast_mut().cast(), num_task);
    (r, seen)
}

#[test]
fn num_task_zero_uses_the_configured_count() {
    within(30, || {
        for n in 1..=4 {
            configure(n);
            let (r, seen) = launch_record(0);
            assert!(r.is_ok());
            assert_eq!(seen.ids(), (0..n).collect::<Vec<_>>());
            assert_eq!(seen.num_tasks(), HashSet::from([n]));
        }
        // A negative count also means "use the pool's size".
        configure(3);
        let (r, seen) = launch_record(-1);
        assert!(r.is_ok());
        assert_eq!(seen.ids(), vec![0, 1, 2]);
    });
}

#[test]
fn every_task_id_runs_exactly_once_over_many_launches() {
    within(60, || {
        configure(4);
        for round in 0..3000 {
            let n = round % 4 + 1;
            let (r, seen) = launch_record(n);
            assert!(r.is_ok());
            assert_eq!(seen.ids(), (0..n).collect::<Vec<_>>(), "round {round}");
            assert_eq!(seen.num_tasks(), HashSet::from([n]));
        }
    });
}

#[test]
fn caller_runs_task_zero_and_workers_the_rest() {
    within(30, || {
        configure(4);
        let me = std::thread::current().id();
        let (r, seen) = launch_record(4);
        assert!(r.is_ok());
        let threads = seen.threads();
        let distinct: HashSet<ThreadId> = threads.iter().map(|t| t.1).collect();
        assert_eq!(distinct.len(), 4, "all tasks of a launch are concurrent, on their own threads");
        if config::settings().caller_runs_task0 {
            for (task, thread) in threads {
                assert_eq!(task == 0, thread == me, "task {task}");
            }
        }
        // One task: inline on the caller, no hand-off.
        let (r, seen) = launch_record(1);
        assert!(r.is_ok());
        assert_eq!(seen.threads(), vec![(0, me)]);
    });
}

#[test]
fn num_task_above_the_worker_count_is_an_error() {
    within(30, || {
        configure(2);
        let (r, seen) = launch_record(3);
        let e = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(e, "TVMError: Request parallel sync task larger than number of threads used workers=2 request=3");
        assert!(seen.ids().is_empty());
    });
}

#[test]
fn config_threadpool_changes_the_size_of_later_launches() {
    within(30, || {
        let slots = max_concurrency();
        assert!(slots >= 4);
        configure(3);
        assert_eq!(launch_record(0).1.ids().len(), 3);
        configure(2);
        assert_eq!(launch_record(0).1.ids().len(), 2);
        // Capped at the slot count.
        assert!(config_threadpool(0, 1000).is_ok());
        assert_eq!(num_threads(), slots);
        // Mode "big" with no count: the fast cores (all cores on a homogeneous machine, capped).
        assert!(config_threadpool(1, 0).is_ok());
        assert!(num_threads() >= 1 && num_threads() <= slots);
        // v0.8 picks 0 workers here (homogeneous machine) and hangs; we use 1.
        assert!(config_threadpool(-1, 0).is_ok());
        assert!(num_threads() >= 1);
        assert!(config_threadpool(0, 0).is_ok());
        assert_eq!(num_threads(), slots);
        // Another thread's configuration is its own.
        let other = std::thread::spawn(num_threads).join().ok();
        assert_eq!(other, Some(config::settings().default_threads));
    });
}

unsafe extern "C" fn fail_odd(task_id: c_int, _penv: *mut TVMParallelGroupEnv, _cdata: *mut c_void) -> c_int {
    if task_id % 2 == 1 {
        set_last_error(&format!("ValueError: bad task {task_id}"));
        return -1;
    }
    0
}

#[test]
fn failing_tasks_are_reported_in_task_order() {
    within(30, || {
        configure(4);
        for _ in 0..200 {
            let r = parallel_launch(Some(fail_odd), std::ptr::null_mut(), 0);
            let e = r.err().map(|e| e.to_string()).unwrap_or_default();
            assert_eq!(e, "TVMError: Task 1 error: ValueError: bad task 1\nTask 3 error: ValueError: bad task 3\n");
        }
        // The pool is fine afterwards.
        assert!(launch_record(0).0.is_ok());
    });
}

unsafe extern "C" fn fail_all(task_id: c_int, _penv: *mut TVMParallelGroupEnv, _cdata: *mut c_void) -> c_int {
    set_last_error(&format!("KeyError: k{task_id}"));
    7
}

#[test]
fn failures_are_reported_with_one_thread_too() {
    within(30, || {
        configure(1);
        let r = parallel_launch(Some(fail_all), std::ptr::null_mut(), 0);
        let e = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(e, "TVMError: Task 0 error: KeyError: k0\n");
        configure(2);
        let r = parallel_launch(Some(fail_all), std::ptr::null_mut(), 0);
        let e = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(e, "TVMError: Task 0 error: KeyError: k0\nTask 1 error: KeyError: k1\n");
    });
}

#[test]
fn a_null_lambda_is_an_error() {
    assert!(parallel_launch(None, std::ptr::null_mut(), 0).is_err());
}

#[test]
fn a_panicking_task_is_contained() {
    within(30, || {
        configure(4);
        for round in 0..20 {
            let r = parallel_launch_with(0, |task, _env| {
                if task == 2 || (round % 2 == 0 && task == 0) {
                    panic!("boom in task {task}");
                }
                Ok(())
            });
            let e = r.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("Task 2 error: InternalError: panic in a parallel task: boom in task 2\n"), "{e}");
            assert_eq!(e.contains("Task 0 error"), round % 2 == 0, "{e}");
        }
        let r = parallel_launch_with(0, |task, _| if task == 1 { Err(Error::value("x")) } else { Ok(()) });
        assert_eq!(r.err().map(|e| e.to_string()).unwrap_or_default(), "TVMError: Task 1 error: ValueError: x\n");
        assert!(launch_record(0).0.is_ok());
    });
}

#[test]
fn barrier_separates_phases_over_many_rounds() {
    within(60, || {
        const ROUNDS: u32 = 300;
        configure(4);
        for _ in 0..5 {
            let cells: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
            let errors = AtomicUsize::new(0);
            let r = parallel_launch_with(0, |task, env| {
                let n = usize::try_from(env.num_task).unwrap_or(0);
                let me = usize::try_from(task).unwrap_or(0);
                for round in 1..=ROUNDS {
                    cells[me].store(round, Ordering::Relaxed);
                    parallel_barrier(task, env)?;
                    // Everybody has written this round and nobody the next one yet.
                    if cells[..n].iter().any(|c| c.load(Ordering::Relaxed) != round) {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    parallel_barrier(task, env)?;
                }
                Ok(())
            });
            assert!(r.is_ok());
            assert_eq!(errors.load(Ordering::Relaxed), 0);
        }
    });
}

#[test]
fn barrier_outside_a_launch_or_in_one_task_returns_at_once() {
    let mut env = TVMParallelGroupEnv { sync_handle: std::ptr::null_mut(), num_task: 1 };
    assert!(parallel_barrier(0, &mut env).is_ok());
    assert!(parallel_barrier(0, std::ptr::null_mut()).is_ok());
    within(30, || {
        configure(1);
        let r = parallel_launch_with(0, |task, env| {
            assert!(!env.sync_handle.is_null());
            parallel_barrier(task, env)
        });
        assert!(r.is_ok());
    });
}

#[test]
fn a_task_failing_before_a_barrier_releases_its_partners() {
    within(30, || {
        configure(3);
        let r = parallel_launch_with(0, |task, env| {
            if task == 1 {
                return Err(Error::value("gave up"));
            }
            // These two can never meet task 1 here: the barrier must give up, not hang.
            let _ = parallel_barrier(task, env);
            Ok(())
        });
        let e = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("Task 1 error: ValueError: gave up\n"), "{e}");
        assert!(e.contains("Task 0 error: TVMError: parallel barrier abandoned"), "{e}");
        assert!(e.contains("Task 2 error: TVMError: parallel barrier abandoned"), "{e}");
        // Barriers work again in the next launch.
        let r = parallel_launch_with(0, |task, env| parallel_barrier(task, env));
        assert!(r.is_ok());
    });
}

#[test]
fn a_nested_launch_runs_inline_as_one_task() {
    within(30, || {
        configure(3);
        let inner: Mutex<Vec<(i32, ThreadId, ThreadId, bool)>> = Mutex::new(Vec::new());
        let r = parallel_launch_with(0, |_outer_task, _| {
            let outer_thread = std::thread::current().id();
            assert_eq!(num_threads(), 1);
            assert!(in_parallel_task());
            parallel_launch_with(0, |task, env| {
                let barrier_ok = parallel_barrier(task, env).is_ok();
                if let Ok(mut v) = inner.lock() {
                    v.push((env.num_task, outer_thread, std::thread::current().id(), barrier_ok));
                }
                assert_eq!(task, 0);
                Ok(())
            })?;
            // An explicit count is ignored inside a task as well (N = 1).
            parallel_launch_with(3, |task, env| {
                assert_eq!((task, env.num_task), (0, 1));
                Ok(())
            })
        });
        assert!(r.is_ok());
        let v = inner.lock().map(|v| v.clone()).unwrap_or_default();
        assert_eq!(v.len(), 3);
        for (n, outer, inner_thread, barrier_ok) in v {
            assert_eq!(n, 1);
            assert_eq!(outer, inner_thread, "inner tasks run on the outer task's thread");
            assert!(barrier_ok);
        }
        // Nested failures carry the inner text.
        let r = parallel_launch_with(2, |task, _| {
            parallel_launch_with(0, |_, _| if task == 1 { Err(Error::value("inner")) } else { Ok(()) })
        });
        let e = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(e, "TVMError: Task 1 error: TVMError: Task 0 error: ValueError: inner\n\n");
    });
}

#[test]
fn workers_that_went_to_sleep_wake_up() {
    within(30, || {
        configure(4);
        for _ in 0..5 {
            assert!(launch_record(0).0.is_ok());
            std::thread::sleep(Duration::from_millis(20));
            let (r, seen) = launch_record(0);
            assert!(r.is_ok());
            assert_eq!(seen.ids(), vec![0, 1, 2, 3]);
        }
        // A long task makes the launcher sleep instead of spin; it must still be woken.
        let r = parallel_launch_with(0, |task, _| {
            if task == 3 {
                std::thread::sleep(Duration::from_millis(30));
            }
            Ok(())
        });
        assert!(r.is_ok());
    });
}

#[test]
fn concurrent_launchers_all_complete() {
    within(120, || {
        let total = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..4)
            .map(|k| {
                let total = Arc::clone(&total);
                std::thread::spawn(move || {
                    let n = if k % 2 == 0 { 4 } else { 3 };
                    configure(n);
                    for round in 0..1500 {
                        let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
                        let with_barrier = round % 5 == 0;
                        let r = parallel_launch_with(0, |task, env| {
                            if with_barrier {
                                parallel_barrier(task, env)?;
                            }
                            if let Some(h) = usize::try_from(task).ok().and_then(|t| hits.get(t)) {
                                h.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(())
                        });
                        assert!(r.is_ok());
                        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
                        total.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in handles {
            assert!(h.join().is_ok());
        }
        assert_eq!(total.load(Ordering::Relaxed), 6000);
    });
}

#[test]
fn a_launcher_blocked_inside_a_task_does_not_block_other_launchers() {
    within(30, || {
        configure(2);
        let (tx, rx) = mpsc::channel::<()>();
        let rx = Mutex::new(rx);
        // Task 1 of this launch waits until another application thread finished a launch of
        // its own: with one shared pool and waiting launchers this would deadlock.
        let r = parallel_launch_with(0, |task, _| {
            if task == 0 {
                let helper = std::thread::spawn(|| {
                    configure(2);
                    launch_record(0).0.is_ok()
                });
                if helper.join().ok() != Some(true) {
                    return Err(Error::tvm("helper launch failed"));
                }
                let _ = tx.send(());
            } else if let Ok(rx) = rx.lock() {
                rx.recv_timeout(Duration::from_secs(10)).map_err(|_| Error::tvm("no signal"))?;
            }
            Ok(())
        });
        assert!(r.is_ok());
    });
}

#[test]
fn a_forked_child_gets_a_working_pool() {
    within(60, || {
        configure(4);
        assert!(launch_record(0).0.is_ok()); // the parent's workers exist now
                                             // SAFETY: the child only runs the pool (which re-creates its threads) and `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let mut ok = true;
            for _ in 0..100 {
                let (r, seen) = launch_record(0);
                ok &= r.is_ok() && seen.ids() == vec![0, 1, 2, 3];
                let distinct: HashSet<ThreadId> = seen.threads().iter().map(|t| t.1).collect();
                ok &= distinct.len() == 4;
            }
            ok &= parallel_launch_with(0, |t, env| parallel_barrier(t, env)).is_ok();
            // SAFETY: terminates the child without running the parent's atexit handlers.
            unsafe { libc::_exit(if ok { 0 } else { 3 }) };
        }
        let mut status = 0;
        let mut waited = 0;
        loop {
            // SAFETY: `status` is a valid out-pointer; `pid` is our child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if waited > 20_000 {
                // SAFETY: kills our own hung child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("forked child hung");
            }
            std::thread::sleep(Duration::from_millis(1));
            waited += 1;
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
        // The parent's pool is unaffected.
        assert!(launch_record(0).0.is_ok());
    });
}

static ONCE_HANDLE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static ONCE_CALLS: AtomicI32 = AtomicI32::new(0);

unsafe extern "C" fn slow_once(_cdata: *mut c_void) -> c_int {
    ONCE_CALLS.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(20));
    0
}

#[test]
fn run_once_calls_f_exactly_once_under_a_race() {
    within(30, || {
        let start = Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let start = Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    let r = run_once(ONCE_HANDLE.as_ptr(), Some(slow_once), std::ptr::null_mut(), 0);
                    // Nobody returns before the winner's `f` finished.
                    (r.is_ok(), ONCE_CALLS.load(Ordering::SeqCst))
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().ok(), Some((true, 1)));
        }
        assert_eq!(ONCE_HANDLE.load(Ordering::SeqCst) as usize, 1);
        assert!(run_once(ONCE_HANDLE.as_ptr(), Some(slow_once), std::ptr::null_mut(), 0).is_ok());
        assert_eq!(ONCE_CALLS.load(Ordering::SeqCst), 1);
    });
}

static REENTER_HANDLE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static REENTER_CALLS: AtomicI32 = AtomicI32::new(0);

unsafe extern "C" fn reenter(_cdata: *mut c_void) -> c_int {
    REENTER_CALLS.fetch_add(1, Ordering::SeqCst);
    // v0.8 returns 0 here because the flag is already set; we must not wait for ourselves.
    match run_once(REENTER_HANDLE.as_ptr(), Some(reenter), std::ptr::null_mut(), 0) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

unsafe extern "C" fn failing_once(_cdata: *mut c_void) -> c_int {
    set_last_error("ValueError: once failed");
    -1
}

#[test]
fn run_once_reentry_failure_and_null_handle() {
    within(30, || {
        assert!(run_once(REENTER_HANDLE.as_ptr(), Some(reenter), std::ptr::null_mut(), 0).is_ok());
        assert_eq!(REENTER_CALLS.load(Ordering::SeqCst), 1);

        let mut handle: *mut c_void = std::ptr::null_mut();
        let r = run_once(&mut handle, Some(failing_once), std::ptr::null_mut(), 0);
        assert_eq!(r.err().map(|e| e.to_string()).unwrap_or_default(), "ValueError: once failed");
        assert_eq!(handle as usize, 1, "a failed f still sets the flag (no retry)");
        assert!(run_once(&mut handle, Some(failing_once), std::ptr::null_mut(), 0).is_ok());

        assert!(run_once(std::ptr::null_mut(), Some(failing_once), std::ptr::null_mut(), 0).is_err());

        // Any non-NULL value means "done", as in v0.8.
        let mut preset = 0x1234usize as *mut c_void;
        assert!(run_once(&mut preset, Some(failing_once), std::ptr::null_mut(), 0).is_ok());
        assert_eq!(preset as usize, 0x1234);
    });
}
