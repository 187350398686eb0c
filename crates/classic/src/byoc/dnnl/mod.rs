//! `dnnl_json`: TVM's DNNL JSON runtime on oneDNN, opened at run time ([`sys`]). The operators
//! and their checks are in [`ops`], the primitives and per-call contexts in [`plan`], the
//! kernels that C-source BYOC libraries call in [`kernels`].
//!
//! A module loads only where oneDNN can be opened: elsewhere loading fails with an error naming
//! the libraries looked for (everything else in the runtime is unaffected).
//!
//! The oneDNN primitives depend on shapes only: they are built while the module loads and the
//! constant weights are prepared in `__init_<symbol>` (executor creation), as TVM does.
//! `TVM_DNNL_ASYNC_INIT=1` builds them on a background thread instead (one builder thread per
//! process, regions in turn), so that loading, executor creation and oneDNN's code generation
//! overlap; the first call then waits for the build, runs the constant-weight reorders once and
//! reports the build's error, if any. It is not the default because a process that exits while
//! a build runs can crash inside oneDNN: its static destructors run at exit under the builder's
//! feet, and no exit handler can wait for the builder first (oneDNN registers destructors during
//! the build, which then run before any handler registered earlier).

pub mod api;
pub mod kernels;
pub mod ops;
pub mod plan;
pub mod sys;

use super::json::graph::Graph;
use super::json::{Backend, Engine, Prepared};
use crate::abi::DLTensor;
use crate::error::Result;
use crate::ndarray::NDArray;
use parking_lot::{Condvar, Mutex};
use std::sync::{Arc, OnceLock};

/// The `dnnl_json` backend.
pub(crate) struct DnnlBackend;

fn sync_init() -> bool {
    !std::env::var("TVM_DNNL_ASYNC_INIT").is_ok_and(|v| v == "1")
}

type Job = Box<dyn FnOnce() + Send>;

/// The process's one builder thread (started on first use), which builds plans one after
/// another, so that on a small machine the loading thread keeps a core; `None` if it cannot be
/// started.
fn builder() -> Option<&'static Mutex<std::sync::mpsc::Sender<Job>>> {
    static TX: OnceLock<Option<Mutex<std::sync::mpsc::Sender<Job>>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new().name("tvm-dnnl-build".into()).spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
            }
        });
        spawned.ok().map(|_| Mutex::new(tx))
    })
    .as_ref()
}

/// A value computed on the builder thread (or at once): waiters block until it is there.
struct Built<T>(Mutex<Option<Result<T>>>, Condvar);

impl<T: Clone + Send + 'static> Built<T> {
    /// Runs `f` on the builder thread (here when `sync` is set or no thread can be started). A
    /// panic in `f` becomes its error: waiters never hang.
    fn start(sync: bool, f: impl FnOnce() -> Result<T> + Send + 'static) -> Arc<Built<T>> {
        let built = Arc::new(Built(Mutex::new(None), Condvar::new()));
        let slot = built.clone();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
                Err(crate::error::Error::internal(format!(
                    "DNNL: building the primitives panicked: {}",
                    crate::error::panic_payload_text(&*p)
                )))
            });
            *slot.0.lock() = Some(r);
            slot.1.notify_all();
        });
        match if sync { None } else { builder() } {
            Some(tx) => {
                if let Err(std::sync::mpsc::SendError(job)) = tx.lock().send(job) {
                    job()
                }
            }
            None => job(),
        }
        built
    }

    fn wait(&self) -> Result<T> {
        let mut g = self.0.lock();
        loop {
            if let Some(r) = g.as_ref() {
                return r.clone();
            }
            self.1.wait(&mut g);
        }
    }
}

/// A checked graph whose primitives are being built.
struct DnnlGraph(Arc<Built<Arc<plan::Plan>>>);

impl Backend for DnnlBackend {
    fn type_key(&self) -> &'static str {
        "dnnl_json"
    }

    fn prepare(&self, graph: Arc<Graph>) -> Result<Box<dyn Prepared>> {
        let ops = ops::analyze(&graph)?;
        let d = api::dnnl()?;
        let built = Built::start(sync_init(), move || plan::Plan::build(d, &graph, &ops).map(Arc::new));
        Ok(Box::new(DnnlGraph(built)))
    }
}

/// The engine of one `__init_`: the plan (when built) with the constants, made at first use.
struct Engine1 {
    plan: Arc<Built<Arc<plan::Plan>>>,
    consts: Mutex<Option<Vec<NDArray>>>,
    instance: OnceLock<Result<Arc<plan::Instance>>>,
}

impl Engine1 {
    fn instance(&self) -> Result<Arc<plan::Instance>> {
        self.instance
            .get_or_init(|| {
                let p = self.plan.wait()?;
                let consts = self.consts.lock().take().unwrap_or_default();
                plan::Instance::new(p, consts).map(Arc::new)
            })
            .clone()
    }
}

impl Prepared for DnnlGraph {
    fn init(&self, consts: Vec<NDArray>) -> Result<Arc<dyn Engine>> {
        let e = Engine1 { plan: self.0.clone(), consts: Mutex::new(Some(consts)), instance: OnceLock::new() };
        if sync_init() {
            e.instance()?;
        }
        Ok(Arc::new(e))
    }
}

impl Engine for Engine1 {
    fn run(&self, inputs: &[&DLTensor], outputs: &[&DLTensor]) -> Result<()> {
        self.instance()?.run(inputs, outputs)
    }
}
