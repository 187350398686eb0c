//! The measurement loop of TVM's time evaluator (`WrapTimeEvaluator` of `timer.cc`, the same
//! from v0.8 to v0.27) and the CPU cache flush around it, written once for both faces: the
//! classic `runtime.RPCTimeEvaluator` and the debug graph executor (`executor/time_eval.rs`)
//! and tvm-ffi's (`tvm_ffi/runtime_api/timer.rs`) decode their arguments and call these.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

/// The measurement settings of a time evaluator. Releases added settings over time; a caller
/// of an older release gets that release's behaviour for the ones it does not pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerConfig {
    /// Calls per measurement (grown to reach `min_repeat_ms`).
    pub number: i64,
    /// Measurements.
    pub repeat: i64,
    /// Minimum duration of one measurement.
    pub min_repeat_ms: i64,
    /// Give up growing `number` after this many measurements of exactly zero (v0.10+; v0.8 and
    /// v0.9 never give up).
    pub limit_zero_time_iterations: i64,
    /// Sleep between measurements (v0.9+).
    pub cooldown_interval_ms: i64,
    /// Sleep after every this many measurements (v0.9+).
    pub repeats_to_cooldown: i64,
    /// Bytes copied between two scratch arrays before each try at a measurement, to flush
    /// caches (v0.14+).
    pub cache_flush_bytes: i64,
}

/// The steps of one evaluation that depend on the ABI: each may fail with the face's error.
pub struct Steps<'a, E> {
    /// Waits for the device's default stream.
    pub sync: &'a dyn Fn() -> Result<(), E>,
    /// Runs ahead of each measurement (the preprocessing function).
    pub before_repeat: &'a mut dyn FnMut() -> Result<(), E>,
    /// Runs ahead of each try at a measurement (the cache flush).
    pub before_attempt: &'a mut dyn FnMut() -> Result<(), E>,
    /// The call measured.
    pub call: &'a mut dyn FnMut() -> Result<(), E>,
}

/// `cfg.repeat` measurements of `number` calls each: `number` grows (by the golden ratio, or to
/// what `min_repeat_ms` needs) until a measurement lasts `cfg.min_repeat_ms` or
/// `limit_zero_time_iterations` tries took no time, and stays grown for the evaluator's later
/// calls. Returns the seconds per call of each measurement as native-endian f64 bytes (what
/// `Module.time_evaluator` unpacks with `struct.unpack("@" + "d" * repeat, blob)`).
pub fn measure<E>(cfg: &TimerConfig, number: &AtomicI64, steps: Steps<'_, E>) -> Result<Vec<u8>, E> {
    let Steps { sync, before_repeat, before_attempt, call } = steps;
    let mut out = Vec::with_capacity(cfg.repeat.max(0) as usize * 8);
    for i in 0..cfg.repeat.max(0) {
        let mut duration_ms = 0.0f64;
        let mut zero_times = 0i64;
        let mut n = number.load(Ordering::Relaxed).max(1);
        before_repeat()?;
        loop {
            if duration_ms > 0.0 {
                // TVM keeps `number` in an int.
                let grown = (cfg.min_repeat_ms as f64 / (duration_ms / n as f64) + 1.0).max(n as f64 * 1.618);
                n = grown.min(i32::MAX as f64) as i64;
                number.store(n, Ordering::Relaxed);
            }
            before_attempt()?;
            sync()?;
            let t0 = Instant::now();
            for _ in 0..n {
                call()?;
            }
            sync()?;
            let nanos = t0.elapsed().as_nanos();
            if nanos == 0 {
                zero_times += 1;
            }
            duration_ms = nanos as f64 / 1e6;
            if duration_ms >= cfg.min_repeat_ms as f64 || zero_times >= cfg.limit_zero_time_iterations {
                break;
            }
        }
        out.extend_from_slice(&(duration_ms / 1e3 / n as f64).to_ne_bytes());
        if cfg.cooldown_interval_ms > 0 && cfg.repeats_to_cooldown > 0 && i % cfg.repeats_to_cooldown == 0 {
            std::thread::sleep(std::time::Duration::from_millis(cfg.cooldown_interval_ms as u64));
        }
    }
    Ok(out)
}

/// Flushes the cache lines of `n` bytes of host memory at `base` (x86-64 `clflush`; nothing
/// elsewhere), as `cache_flush_cpu_non_first_arg` does for each tensor.
///
/// # Safety
/// `base..base + n` must be host memory that stays mapped during the call.
pub unsafe fn flush_cache_lines(base: *const u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..n).step_by(64) {
        // SAFETY: the line lies inside the caller's mapped range; clflush changes no data.
        unsafe { std::arch::x86_64::_mm_clflush(base.wrapping_add(off)) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (base, n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn bump(c: &Cell<i32>) -> Result<(), ()> {
        c.set(c.get() + 1);
        Ok(())
    }

    fn spin() -> Result<(), ()> {
        std::thread::sleep(std::time::Duration::from_micros(50));
        Ok(())
    }

    fn cfg(number: i64, repeat: i64, min_repeat_ms: i64) -> TimerConfig {
        TimerConfig {
            number,
            repeat,
            min_repeat_ms,
            limit_zero_time_iterations: 100,
            cooldown_interval_ms: 0,
            repeats_to_cooldown: 1,
            cache_flush_bytes: 0,
        }
    }

    #[test]
    fn counts_grows_and_stops_at_the_first_error() {
        let (calls, syncs, repeats, attempts) = (Cell::new(0), Cell::new(0), Cell::new(0), Cell::new(0));
        let number = AtomicI64::new(3);
        let blob = measure::<()>(
            &cfg(3, 4, 0),
            &number,
            Steps {
                sync: &|| bump(&syncs),
                before_repeat: &mut || bump(&repeats),
                before_attempt: &mut || bump(&attempts),
                call: &mut || bump(&calls),
            },
        )
        .unwrap();
        assert_eq!(blob.len(), 32);
        assert_eq!((calls.get(), repeats.get(), attempts.get(), syncs.get()), (12, 4, 4, 8));
        // min_repeat_ms grows `number`, and it stays grown (50 ms: far above one call even on a
        // loaded machine).
        let number = AtomicI64::new(1);
        let blob = measure::<()>(
            &cfg(1, 2, 50),
            &number,
            Steps { sync: &|| Ok(()), before_repeat: &mut || Ok(()), before_attempt: &mut || Ok(()), call: &mut spin },
        )
        .unwrap();
        assert!(number.load(Ordering::Relaxed) > 1);
        let secs: Vec<f64> = blob.chunks(8).map(|c| f64::from_ne_bytes(c.try_into().unwrap())).collect();
        assert!(secs.iter().all(|&s| s >= 50e-6), "{secs:?}");
        // The first error ends the evaluation.
        let calls = Cell::new(0);
        let e = measure(
            &cfg(5, 3, 0),
            &AtomicI64::new(5),
            Steps {
                sync: &|| Ok(()),
                before_repeat: &mut || Ok(()),
                before_attempt: &mut || Ok(()),
                call: &mut || {
                    calls.set(calls.get() + 1);
                    if calls.get() == 2 {
                        Err("boom")
                    } else {
                        Ok(())
                    }
                },
            },
        );
        assert_eq!((e, calls.get()), (Err("boom"), 2));
        // A call that takes no time ends after limit_zero_time_iterations tries, not never.
        let mut c = cfg(1, 1, 1_000_000);
        c.limit_zero_time_iterations = 0;
        let blob = measure::<()>(
            &c,
            &AtomicI64::new(1),
            Steps {
                sync: &|| Ok(()),
                before_repeat: &mut || Ok(()),
                before_attempt: &mut || Ok(()),
                call: &mut || Ok(()),
            },
        )
        .unwrap();
        assert_eq!(blob.len(), 8);
    }

    #[test]
    fn flushing_leaves_the_data() {
        let v: Vec<u8> = (0..=255).cycle().take(1000).collect();
        // SAFETY: the vector is alive and its 1000 bytes are mapped.
        unsafe { flush_cache_lines(v.as_ptr(), v.len()) };
        assert!(v.iter().enumerate().all(|(i, &b)| b == (i % 256) as u8));
    }
}
