//! The `metadata` module of BYOC exports (TVM v0.8's `MetadataModuleNode`,
//! renamed `ConstLoaderModuleNode` in v0.9+ with the same payload): it owns the constants of the
//! offloaded regions and imports the host library and one module per region. Looking up a
//! region's function initialises the importing module once, lazily, by calling its
//! `__init_<symbol>` with the region's constants (an `Array<NDArray>` in the order the symbol's
//! const-name list gives), then the function is found in the imports.
//!
//! Payload: `vec<str>` variable names, `u64` count, that many NDArray records, `vec<str>`
//! symbols, `u64` count, that many `vec<str>` const-name lists.
//!
//! Differences from TVM v0.8, all on bad input: a symbol whose const list names a variable the
//! module does not hold, a repeated variable or symbol, and counts that disagree are refused at
//! load time (v0.8 checks the missing variable only when the symbol is first initialised; v0.9+
//! refuses it at load time too). Initialisation is thread-safe: two threads asking for the same
//! symbol at once initialise it once (v0.8 races); a failed initialisation is reported to the
//! caller and tried again by the next lookup.

use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::io::{Reader, Writer};
use crate::module::{Module, ModuleNode};
use crate::ndarray::serialize::{load_ndarray, save_ndarray};
use crate::ndarray::NDArray;
use crate::object::{ArrayObj, MapObj, StringObj};
use crate::value::Value;
use parking_lot::ReentrantMutex;
use std::any::Any;
use std::cell::Cell;
use std::collections::HashMap;

/// Type key of v0.8's module.
pub(crate) const METADATA: &str = "metadata";
/// Type key of the same module in v0.9+.
pub(crate) const CONST_LOADER: &str = "const_loader";

/// Per-symbol initialisation state: `done`, behind a lock that the initialising thread holds
/// while the `__init_` function runs (re-entrant, so that a lookup from inside it is an error,
/// not a deadlock).
struct InitState {
    lock: ReentrantMutex<Cell<State>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    Done,
}

/// The module.
pub struct MetadataModule {
    type_key: &'static str,
    /// Variables in payload order (kept for a byte-identical `SaveToBinary`).
    vars: Vec<(String, NDArray)>,
    by_name: HashMap<String, usize>,
    /// Symbols with their const names, in payload order.
    symbols: Vec<(String, Vec<String>)>,
    init: HashMap<String, InitState>,
}

impl MetadataModule {
    /// A module of kind `type_key` from variables and per-symbol const lists (checked).
    pub fn new(
        type_key: &'static str,
        vars: Vec<(String, NDArray)>,
        symbols: Vec<(String, Vec<String>)>,
    ) -> Result<MetadataModule> {
        let mut by_name = HashMap::with_capacity(vars.len());
        for (i, (name, _)) in vars.iter().enumerate() {
            if by_name.insert(name.clone(), i).is_some() {
                return Err(Error::value(format!("{type_key} module: variable {name} appears twice")));
            }
        }
        let mut init = HashMap::with_capacity(symbols.len());
        for (sym, names) in &symbols {
            if let Some(missing) = names.iter().find(|n| !by_name.contains_key(*n)) {
                return Err(Error::value(format!(
                    "{type_key} module: Found not recorded constant variable: {missing} (needed by {sym})"
                )));
            }
            let state = InitState { lock: ReentrantMutex::new(Cell::new(State::Pending)) };
            if init.insert(sym.clone(), state).is_some() {
                return Err(Error::value(format!("{type_key} module: symbol {sym} appears twice")));
            }
        }
        Ok(MetadataModule { type_key, vars, by_name, symbols, init })
    }

    /// Reads the payload.
    pub fn load(type_key: &'static str, r: &mut Reader<'_>) -> Result<MetadataModule> {
        let names = r.vec_string().map_err(|e| e.context("Loading variables failed"))?;
        let n = r.u64().map_err(|e| e.context("Loading metadata size failed"))?;
        if n != names.len() as u64 {
            return Err(Error::value(format!(
                "The number of variables and ndarray counts must match: {} variables, {n} arrays",
                names.len()
            )));
        }
        let mut vars = Vec::with_capacity(names.len());
        for name in names {
            let a = load_ndarray(r).map_err(|e| e.context(format_args!("Loading constant {name} failed")))?;
            vars.push((name, a));
        }
        let syms = r.vec_string().map_err(|e| e.context("Loading symbols failed"))?;
        let n = r.u64().map_err(|e| e.context("Loading number of symbols failed"))?;
        if n != syms.len() as u64 {
            return Err(Error::value(format!(
                "The number of symbols and const-variable lists must match: {} symbols, {n} lists",
                syms.len()
            )));
        }
        let mut symbols = Vec::with_capacity(syms.len());
        for sym in syms {
            let names = r.vec_string().map_err(|e| e.context("Loading const variables failed"))?;
            symbols.push((sym, names));
        }
        MetadataModule::new(type_key, vars, symbols)
    }

    /// The constants of `symbol`, in its list order.
    fn constants(&self, symbol: &str) -> Vec<NDArray> {
        self.symbols
            .iter()
            .find(|(s, _)| s == symbol)
            .map(|(_, names)| names.iter().map(|n| self.vars[self.by_name[n]].1.clone()).collect())
            .unwrap_or_default()
    }

    /// Initialises the module that implements `symbol` (once).
    fn ensure_init(&self, symbol: &str, state: &InitState, this: &Module) -> Result<()> {
        let guard = state.lock.lock();
        match guard.get() {
            State::Done => return Ok(()),
            State::Running => {
                return Err(Error::tvm(format!(
                    "{}: __init_{symbol} looked {symbol} up while initialising it",
                    self.type_key
                )))
            }
            State::Pending => {}
        }
        guard.set(State::Running);
        let result = self.run_init(symbol, this);
        guard.set(if result.is_ok() { State::Done } else { State::Pending });
        result
    }

    fn run_init(&self, symbol: &str, this: &Module) -> Result<()> {
        let init_name = format!("__init_{symbol}");
        for m in this.imports() {
            let Some(init) = m.get_function(&init_name, false)? else { continue };
            let arrays = self.constants(symbol).into_iter().map(|a| Some(a.into_object())).collect();
            let ret = init.call(&[Value::Object(ArrayObj::new_object(arrays))]).map_err(|e| {
                if e.is_already_set() {
                    e
                } else {
                    e.context(format_args!("{init_name} failed"))
                }
            })?;
            return match ret {
                Value::Int(0) => Ok(()),
                other => Err(Error::tvm(format!(
                    "{init_name} returned {} instead of 0: {}",
                    describe(&other),
                    crate::error::last_error_message()
                ))),
            };
        }
        Ok(())
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        other => crate::value::code_name(other.type_code()),
    }
}

impl ModuleNode for MetadataModule {
    fn type_key(&self) -> &str {
        self.type_key
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        if let Some(state) = self.init.get(name) {
            self.ensure_init(name, state, this)?;
        }
        if name == "get_const_var_ndarray" {
            let pairs = self
                .vars
                .iter()
                .map(|(n, a)| (StringObj::new_object(n.as_bytes()), Some(a.as_object().clone())))
                .collect();
            let map = MapObj::new_object(pairs);
            return Ok(Some(PackedFunc::from_fn(move |_| Ok(Value::Object(map.clone())))));
        }
        let imports = this.imports();
        if imports.is_empty() {
            return Err(Error::tvm(format!("{} module has no imports to look {name} up in", self.type_key)));
        }
        for m in imports {
            if let Some(f) = m.get_function(name, false)? {
                return Ok(Some(f));
            }
        }
        Ok(None)
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        w.vec_str(&self.vars.iter().map(|(n, _)| n.as_bytes()).collect::<Vec<_>>());
        w.u64(self.vars.len() as u64);
        for (_, a) in &self.vars {
            save_ndarray(&mut w, a)?;
        }
        w.vec_str(&self.symbols.iter().map(|(s, _)| s.as_bytes()).collect::<Vec<_>>());
        w.u64(self.symbols.len() as u64);
        for (_, names) in &self.symbols {
            w.vec_str(names);
        }
        Ok(w.buf)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The loader global for `type_key`.
pub fn loader(type_key: &'static str) -> PackedFunc {
    PackedFunc::from_fn(move |args| {
        let m = crate::module::blob::with_stream(args.handle(0)?, |s| MetadataModule::load(type_key, s.reader()))?;
        Ok(Value::Module(Module::new(m)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{DLDataType, DLDevice};
    use crate::module::FunctionModule;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn array(v: &[f32]) -> NDArray {
        let a = NDArray::empty(
            &[v.len() as i64],
            DLDataType { code: 2, bits: 32, lanes: 1 },
            DLDevice { device_type: 1, device_id: 0 },
        )
        .unwrap();
        a.copy_from_bytes(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>()).unwrap();
        a
    }

    fn module() -> MetadataModule {
        MetadataModule::new(
            METADATA,
            vec![("b".into(), array(&[2.0])), ("a".into(), array(&[1.0, 1.5]))],
            vec![("f".into(), vec!["a".into(), "b".into()]), ("g".into(), vec![])],
        )
        .unwrap()
    }

    #[test]
    fn round_trip() {
        let m = module();
        let bytes = m.save_to_binary().unwrap();
        let back = MetadataModule::load(METADATA, &mut Reader::new(&bytes, "test")).unwrap();
        assert_eq!(back.save_to_binary().unwrap(), bytes);
        assert_eq!(back.constants("f").len(), 2);
        assert_eq!(back.constants("f")[0].to_bytes().unwrap().len(), 8);
    }

    #[test]
    fn bad_payloads() {
        let e = MetadataModule::new(METADATA, vec![], vec![("f".into(), vec!["x".into()])]).err().unwrap();
        assert!(e.to_string().contains("Found not recorded constant variable: x"), "{e}");
        let e = MetadataModule::new(METADATA, vec![("a".into(), array(&[1.0])), ("a".into(), array(&[1.0]))], vec![])
            .err()
            .unwrap();
        assert!(e.to_string().contains("appears twice"));
        let bytes = module().save_to_binary().unwrap();
        for cut in [0, 5, 20, bytes.len() - 3] {
            let e = MetadataModule::load(METADATA, &mut Reader::new(&bytes[..cut], "test")).err().unwrap();
            assert!(e.to_string().contains("failed") || e.to_string().contains("more bytes"), "{cut}: {e}");
        }
        let mut w = Writer::default();
        w.vec_str(&["a"]);
        w.u64(2);
        let e = MetadataModule::load(METADATA, &mut Reader::new(&w.buf, "test")).err().unwrap();
        assert!(e.to_string().contains("must match"));
    }

    /// Two threads looking the same symbol up at once initialise it once, with the constants
    /// in list order; the function is then found in the imports.
    #[test]
    fn init_once_and_lookup() {
        let calls = Arc::new(AtomicUsize::new(0));
        let mut fm = FunctionModule::new("ext");
        let c = calls.clone();
        fm.add(
            "__init_f",
            PackedFunc::from_fn(move |args| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                let arr = args.object(0)?.unwrap();
                let arr = arr.downcast::<ArrayObj>().unwrap();
                let first = NDArray::from_object(arr.items[0].clone().unwrap()).unwrap();
                assert_eq!(first.shape(), &[2]);
                c.fetch_add(1, Ordering::SeqCst);
                Ok(Value::Int(0))
            }),
        );
        fm.add("f", PackedFunc::from_fn(|_| Ok(Value::Int(42))));
        let ext = Module::new(fm);
        let meta = Module::new(module());
        meta.import(ext).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = meta.clone();
                std::thread::spawn(move || {
                    matches!(m.get_function("f", false).unwrap().unwrap().call(&[]).unwrap(), Value::Int(42))
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().unwrap());
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // A symbol without an init function is simply looked up.
        assert!(meta.get_function("g", false).unwrap().is_none());
    }

    #[test]
    fn failing_init_is_reported_and_retried() {
        let calls = Arc::new(AtomicUsize::new(0));
        let mut fm = FunctionModule::new("ext");
        let c = calls.clone();
        fm.add(
            "__init_f",
            PackedFunc::from_fn(move |_| {
                let n = c.fetch_add(1, Ordering::SeqCst);
                Ok(Value::Int(if n == 0 { -1 } else { 0 }))
            }),
        );
        fm.add("f", PackedFunc::from_fn(|_| Ok(Value::Int(1))));
        let meta = Module::new(module());
        meta.import(Module::new(fm)).unwrap();
        let e = meta.get_function("f", false).unwrap_err();
        assert!(e.to_string().contains("__init_f returned -1"), "{e}");
        assert!(meta.get_function("f", false).unwrap().is_some());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
