//! The smallest possible "wait while a word holds a value" primitive.
//!
//! On Linux and Android this is the `futex(2)` system call on a private (process-local) word:
//! `wait` sleeps in the kernel only while the word still holds the expected value, so a wake-up
//! that happens between the caller's last check and the sleep is never lost. Other systems fall
//! back to short sleeps; every caller re-checks its condition in a loop, so only latency changes.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    /// Sleeps while `*word == expected`, at most `timeout` (forever when `None`). May return
    /// early (signal, spurious wake-up); callers re-check.
    pub(super) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
            // Always below 1e9, so it fits every `c_long`.
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `word` is a live, 4-byte aligned atomic for the whole call and the kernel only
        // reads it; `ts_ptr` is NULL or points to a timespec that outlives the call.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                ts_ptr,
            );
        }
    }

    /// Wakes up to `count` threads sleeping in [`wait`] on `word`.
    pub(super) fn wake(word: &AtomicU32, count: i32) {
        // SAFETY: `word` is a live, aligned atomic; FUTEX_WAKE does not access its memory.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, count);
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    /// Polling fallback: one short sleep unless the word already changed.
    pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        if word.load(Ordering::Acquire) == expected {
            let nap = Duration::from_micros(50);
            std::thread::sleep(timeout.map_or(nap, |t| t.min(nap)));
        }
    }

    /// Nothing to do: sleepers poll.
    pub(crate) fn wake(_word: &AtomicU32, _count: i32) {}
}

/// Sleeps while `*word == expected` (see the module documentation).
#[inline]
pub(super) fn wait(word: &AtomicU32, expected: u32) {
    imp::wait(word, expected, None);
}

/// Like [`wait`], but for at most `timeout`.
#[inline]
pub(super) fn wait_timeout(word: &AtomicU32, expected: u32, timeout: Duration) {
    imp::wait(word, expected, Some(timeout));
}

/// Wakes one thread sleeping on `word`.
#[inline]
pub(super) fn wake_one(word: &AtomicU32) {
    imp::wake(word, 1);
}

/// Wakes every thread sleeping on `word`.
#[inline]
pub(super) fn wake_all(word: &AtomicU32) {
    imp::wake(word, i32::MAX);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn wait_returns_at_once_on_a_changed_word() {
        let w = AtomicU32::new(1);
        wait(&w, 0);
        wait_timeout(&w, 1, Duration::from_millis(1));
    }

    #[test]
    fn wake_releases_a_sleeper() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = Arc::clone(&w);
        let t = std::thread::spawn(move || {
            while w2.load(Ordering::Acquire) == 0 {
                wait(&w2, 0);
            }
        });
        std::thread::sleep(Duration::from_millis(5));
        w.store(1, Ordering::Release);
        wake_all(&w);
        assert!(t.join().is_ok());
    }
}
