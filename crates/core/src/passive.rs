//! A table that starts on first use from what the library's face installed in it: how both
//! global registries (classic and tvm-ffi) stay passive. The face installs the registration of
//! the built-ins once, when the library loads; the table is built when first used, with them.
//! Should something use the table before the face installed them (a static initialiser of
//! another library or object that ran first), the built-ins are merged in when they arrive.

use parking_lot::Mutex;
use std::sync::OnceLock;

/// A lazily started table `T` and the built-ins `F` (a registration function) it starts with.
pub struct Passive<T, F> {
    table: OnceLock<T>,
    built_ins: OnceLock<F>,
    /// Orders the start against a late install, so that neither misses the other.
    start: Mutex<()>,
}

impl<T, F: Copy> Passive<T, F> {
    /// An empty, unstarted table.
    pub const fn new() -> Self {
        Passive { table: OnceLock::new(), built_ins: OnceLock::new(), start: Mutex::new(()) }
    }

    /// The table, built by `start` from the installed built-ins (`None`: not installed yet) on
    /// first use. `start` must not use this table.
    pub fn get(&self, start: impl FnOnce(Option<F>) -> T) -> &T {
        if let Some(t) = self.table.get() {
            return t;
        }
        let _start = self.start.lock();
        self.table.get_or_init(|| start(self.built_ins.get().copied()))
    }

    /// Installs the built-ins (once: later calls are ignored and return false). A table that
    /// has already started gets them through `merge`, which may use the table.
    pub fn install(&self, built_ins: F, merge: impl FnOnce(&T, F)) -> bool {
        let _start = self.start.lock();
        if self.built_ins.set(built_ins).is_err() {
            return false;
        }
        if let Some(t) = self.table.get() {
            merge(t, built_ins);
        }
        true
    }
}

impl<T, F: Copy> Default for Passive<T, F> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type Table = Mutex<BTreeMap<&'static str, i32>>;
    type Register = fn(&mut BTreeMap<&'static str, i32>);

    fn built_ins(m: &mut BTreeMap<&'static str, i32>) {
        m.insert("a", 1);
        m.insert("b", 2);
    }

    fn start(f: Option<Register>) -> Table {
        let mut m = BTreeMap::new();
        if let Some(f) = f {
            f(&mut m);
        }
        Mutex::new(m)
    }

    fn merge(t: &Table, f: Register) {
        let mut fresh = BTreeMap::new();
        f(&mut fresh);
        let mut m = t.lock();
        for (k, v) in fresh {
            m.entry(k).or_insert(v);
        }
    }

    #[test]
    fn installed_first_the_table_starts_with_the_built_ins() {
        let p: Passive<Table, Register> = Passive::new();
        assert!(p.install(built_ins, merge));
        assert!(!p.install(|m| _ = m.insert("c", 3), merge), "installed once");
        assert_eq!(*p.get(start).lock(), BTreeMap::from([("a", 1), ("b", 2)]));
    }

    #[test]
    fn started_first_the_built_ins_are_merged_in_without_replacing() {
        let p: Passive<Table, Register> = Passive::new();
        p.get(start).lock().insert("b", 20);
        assert!(p.install(built_ins, merge));
        assert_eq!(*p.get(start).lock(), BTreeMap::from([("a", 1), ("b", 20)]));
    }

    #[test]
    fn racing_starts_and_installs_never_lose_the_built_ins() {
        for _ in 0..200 {
            let p: &'static Passive<Table, Register> = Box::leak(Box::new(Passive::new()));
            let user = std::thread::spawn(move || p.get(start).lock().insert("u", 0));
            let face = std::thread::spawn(move || p.install(built_ins, merge));
            user.join().unwrap();
            assert!(face.join().unwrap());
            let m = p.get(start).lock();
            assert_eq!((m.get("a"), m.get("b"), m.get("u")), (Some(&1), Some(&2), Some(&0)));
        }
    }
}
