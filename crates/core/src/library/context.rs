//! The variable through which a library's compiled code names its own module: the classic
//! `__tvm_module_ctx` and tvm-ffi's `__tvm_ffi__library_ctx`. Both object models keep it the same
//! way, with this piece:
//!
//! The variable holds the module's address and no reference (the module's functions keep the
//! module alive). When the same library is loaded again while an earlier load is alive (dlopen
//! hands back the same mapping, so the same variable), the new module takes the variable over
//! and keeps a reference to the module it named, because compiled code may have cached functions
//! that point into it; when a module goes, it gives the variable back to its predecessor (or
//! NULL), so the variable never names a module that is gone. Only the modules written into such
//! a variable, and not gone yet, are ever followed when a kernel hands its context back: a
//! library that starts with a stray non-NULL value cannot make the runtime follow it.

use super::slots::pointer_slot;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

/// The context variables of one object model: the modules they may name. Its lock also
/// serialises every read and write of those variables by the runtime.
pub struct ContextVars {
    /// What the variables are called, for errors.
    name: &'static str,
    /// The addresses of the modules written into a variable and not gone yet.
    live: Mutex<Vec<usize>>,
}

/// Where a module was written into its library's context variable, and the module the variable
/// named before (`R`: a reference to it), kept alive until this one goes.
pub struct Link<R> {
    slot: usize,
    me: usize,
    pred: Option<R>,
}

impl ContextVars {
    /// No variable written yet; `name` is what the variables are called (`__tvm_module_ctx`).
    pub const fn new(name: &'static str) -> Self {
        ContextVars { name, live: Mutex::new(Vec::new()) }
    }

    /// Writes the module at `me` into the variable at `slot` and records where in `link`. If the
    /// variable names a live module of this model (an earlier load of the same library),
    /// `retain` is called with its address, under the lock (so it cannot go meanwhile), for a
    /// new reference that `link` keeps (`None`: it is already being destroyed). An error if
    /// `slot` is not an aligned pointer variable or `link` was set before.
    ///
    /// # Safety
    /// `slot` is one [`pointer_slot`] accepts, live until the link is detached; `me` is the
    /// module that detaches `link` before it goes.
    pub unsafe fn attach<R>(
        &self,
        slot: *mut c_void,
        me: *mut c_void,
        link: &OnceLock<Link<R>>,
        retain: impl FnOnce(*mut c_void) -> Option<R>,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        let var = unsafe { pointer_slot(slot, self.name) }?;
        let refused = {
            let mut live = self.live.lock();
            let old = var.load(Ordering::Acquire);
            let pred = if old != me && live.contains(&(old as usize)) { retain(old) } else { None };
            match link.set(Link { slot: slot as usize, me: me as usize, pred }) {
                Ok(()) => {
                    live.push(me as usize);
                    var.store(me, Ordering::Release);
                    None
                }
                Err(refused) => Some(refused),
            }
        };
        // Dropped outside the lock: releasing the predecessor may destroy it, which detaches.
        match refused {
            None => Ok(()),
            Some(refused) => {
                drop(refused);
                Err(Error::internal(format!("{} attached twice", self.name)))
            }
        }
    }

    /// Gives the variable of `link` back to the module it named before (or NULL) and forgets
    /// this module: from the module's destructor, while its library is still loaded. The
    /// predecessor's reference goes with `link`, after this returns.
    ///
    /// # Safety
    /// The library of `link`'s variable is still loaded.
    pub unsafe fn detach<R>(&self, link: &Link<R>, pred_addr: impl Fn(&R) -> *mut c_void) {
        let back = link.pred.as_ref().map_or(std::ptr::null_mut(), pred_addr);
        let mut live = self.live.lock();
        if let Some(i) = live.iter().position(|&a| a == link.me) {
            live.swap_remove(i);
        }
        // SAFETY: accepted when the link was made (`attach`), and still loaded (the contract).
        if let Ok(var) = unsafe { pointer_slot(link.slot as *mut c_void, self.name) } {
            let _ = var.compare_exchange(link.me as *mut c_void, back, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Writes the module at `me`, which lives for the rest of the process (the system
    /// library), into the variable at `slot`: no bookkeeping.
    ///
    /// # Safety
    /// `slot` is one [`pointer_slot`] accepts.
    pub unsafe fn write_forever(&self, slot: *mut c_void, me: *mut c_void) -> Result<()> {
        // SAFETY: the caller's contract.
        let var = unsafe { pointer_slot(slot, self.name) }?;
        let _g = self.live.lock();
        var.store(me, Ordering::Release);
        Ok(())
    }

    /// Runs `f` with whether `p` is a module written into one of these variables and not gone
    /// yet, under the lock: while `f` runs, such a module's memory stays there.
    pub fn with_live<T>(&self, p: *mut c_void, f: impl FnOnce(bool) -> T) -> T {
        let live = self.live.lock();
        f(live.contains(&(p as usize)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    static VARS: ContextVars = ContextVars::new("__mtest_ctx");

    /// A module: its address is the Arc's, its link restores the variable when it goes.
    struct Module {
        link: OnceLock<Link<Arc<Module>>>,
    }

    impl Drop for Module {
        fn drop(&mut self) {
            if let Some(link) = self.link.get() {
                // SAFETY: the test's variables outlive the modules.
                unsafe { VARS.detach(link, |m| Arc::as_ptr(m).cast_mut().cast()) };
            }
        }
    }

    fn addr(m: &Arc<Module>) -> *mut c_void {
        Arc::as_ptr(m).cast_mut().cast()
    }

    /// Attaches `m` to the variable at `slot`.
    fn attach(
        slot: *mut c_void,
        m: &Arc<Module>,
        retain: impl FnOnce(*mut c_void) -> Option<Arc<Module>>,
    ) -> Result<()> {
        // SAFETY: `slot` is a pointer variable of the test that outlives the module.
        unsafe { VARS.attach(slot, addr(m), &m.link, retain) }
    }

    fn read(slot: *mut c_void) -> *mut c_void {
        // SAFETY: a pointer variable of the test.
        unsafe { pointer_slot(slot, "v") }.unwrap().load(Ordering::Acquire)
    }

    #[test]
    fn a_reload_takes_over_the_variable_and_gives_it_back() {
        let mut var: *mut c_void = std::ptr::null_mut();
        let slot = (&mut var as *mut *mut c_void).cast::<c_void>();
        let first = Arc::new(Module { link: OnceLock::new() });
        attach(slot, &first, |_| unreachable!("the variable was NULL")).unwrap();
        assert_eq!(read(slot), addr(&first));
        let second = Arc::new(Module { link: OnceLock::new() });
        let live_first = first.clone();
        attach(slot, &second, |p| {
            assert_eq!(p, addr(&first));
            Some(live_first)
        })
        .unwrap();
        assert_eq!(read(slot), addr(&second));
        let e = attach(slot, &second, |_| None).unwrap_err();
        assert_eq!(e.to_string(), "InternalError: __mtest_ctx attached twice");
        assert!(VARS.with_live(addr(&first), |l| l) && VARS.with_live(addr(&second), |l| l));
        let first_addr = addr(&first);
        drop(first); // the second keeps it
        assert!(VARS.with_live(first_addr, |l| l));
        let second_addr = addr(&second);
        drop(second); // gives the variable back to the first, which then goes and gives NULL back
        assert_eq!(read(slot), std::ptr::null_mut());
        assert!(!VARS.with_live(first_addr, |l| l) && !VARS.with_live(second_addr, |l| l));
    }

    #[test]
    fn a_stray_value_is_never_followed_and_misaligned_slots_are_refused() {
        let mut var: *mut c_void = 0x1234 as *mut c_void;
        let slot = (&mut var as *mut *mut c_void).cast::<c_void>();
        let m = Arc::new(Module { link: OnceLock::new() });
        attach(slot, &m, |_| panic!("a stray value is not a live module")).unwrap();
        drop(m);
        assert_eq!(read(slot), std::ptr::null_mut());
        let bytes = [0u64; 2];
        let odd = bytes.as_ptr().cast::<u8>().wrapping_add(1).cast_mut().cast::<c_void>();
        let m = Arc::new(Module { link: OnceLock::new() });
        let e = attach(odd, &m, |_| None).unwrap_err().to_string();
        assert!(e.contains("is not an aligned pointer variable"), "{e}");
        assert!(m.link.get().is_none());
    }
}
