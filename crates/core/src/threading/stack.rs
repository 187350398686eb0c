//! How close the calling thread is to the end of its stack: recursive work (dataclass
//! traversals, Relax VM functions calling each other) stops with an error instead of
//! overflowing the stack, whatever stack size the thread was given.

use std::cell::Cell;

thread_local! {
    /// The lowest stack address recursive work may reach on this thread (0: not known yet).
    static FLOOR: Cell<usize> = const { Cell::new(0) };
}

/// Room kept free below the deepest recursive frame (for the calls it makes: kernels, hooks,
/// allocation), at most half the thread's stack.
const RESERVE: usize = 512 << 10;

fn floor() -> usize {
    // SAFETY: pthread_getattr_np fills `attr` for the calling thread; it is destroyed after use.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return 1;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 || addr.is_null() {
            return 1;
        }
        addr as usize + RESERVE.min(size / 2)
    }
}

/// Whether the caller's frame is below the floor: recursing further could overflow the stack.
pub fn near_end() -> bool {
    let floor = FLOOR.with(|f| {
        if f.get() == 0 {
            f.set(floor());
        }
        f.get()
    });
    let marker = 0u8;
    (std::ptr::addr_of!(marker) as usize) < floor
}

#[cfg(test)]
mod tests {
    #[test]
    fn deep_recursion_is_noticed_on_a_small_stack() {
        fn depth(n: usize) -> usize {
            if super::near_end() {
                return n;
            }
            let pad = [n as u8; 512];
            std::hint::black_box(&pad);
            depth(n + 1) + std::hint::black_box(0)
        }
        let n = std::thread::Builder::new().stack_size(1 << 20).spawn(|| depth(0)).unwrap().join().unwrap();
        assert!(n > 10 && n < 1 << 20, "{n}");
    }
}
