//! `dnnl_json`: TVM's DNNL JSON runtime on oneDNN, opened at run time ([`sys`]). The operators
//! and their checks are in [`ops`], the primitives and per-call contexts in [`plan`], the
//! kernels that C-source BYOC libraries call in [`kernels`].
//!
//! A module loads only where oneDNN can be opened: elsewhere loading fails with an error naming
//! the libraries looked for (everything else in the runtime is unaffected).
//!
//! Initialisation (`__init_<symbol>`, which the metadata module calls while a graph executor is
//! created) checks the constants at once and then builds the oneDNN primitives on a background
//! thread, so that creating an executor does not wait for oneDNN's code generation (and the
//! regions of a model build in parallel); the first call waits for the build and reports its
//! error, if any. `TVM_DNNL_SYNC_INIT=1` builds during `__init_` instead.

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
use std::sync::Arc;

/// The `dnnl_json` backend.
pub struct DnnlBackend;

struct DnnlGraph {
    graph: Arc<Graph>,
    ops: Vec<Option<ops::Op>>,
    d: &'static api::Dnnl,
}

impl Backend for DnnlBackend {
    fn type_key(&self) -> &'static str {
        "dnnl_json"
    }

    fn prepare(&self, graph: Arc<Graph>) -> Result<Box<dyn Prepared>> {
        let ops = ops::analyze(&graph)?;
        let d = api::dnnl()?;
        Ok(Box::new(DnnlGraph { graph, ops, d }))
    }
}

impl Prepared for DnnlGraph {
    fn init(&self, consts: Vec<NDArray>) -> Result<Arc<dyn Engine>> {
        let (d, graph, ops) = (self.d, self.graph.clone(), self.ops.clone());
        // A panic while building becomes the build's error (waiters must never hang).
        let build = move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plan::Plan::build(d, &graph, &ops, consts)))
                .unwrap_or_else(|p| {
                    Err(crate::error::Error::internal(format!(
                        "DNNL: building the primitives panicked: {}",
                        crate::error::panic_payload_text(&*p)
                    )))
                })
                .map(Arc::new)
        };
        if std::env::var("TVM_DNNL_SYNC_INIT").is_ok_and(|v| v == "1") {
            return Ok(Arc::new(Built(Mutex::new(Some(build())), Condvar::new())));
        }
        let built = Arc::new(Built(Mutex::new(None), Condvar::new()));
        let slot = built.clone();
        let job = move || {
            let r = build();
            *slot.0.lock() = Some(r);
            slot.1.notify_all();
        };
        // Without a thread (resource limits), build here.
        let job = Arc::new(Mutex::new(Some(job)));
        let spawned = {
            let job = job.clone();
            std::thread::Builder::new().name("tvm-dnnl-build".into()).spawn(move || {
                if let Some(f) = job.lock().take() {
                    f()
                }
            })
        };
        if spawned.is_err() {
            if let Some(f) = job.lock().take() {
                f()
            }
        }
        Ok(built)
    }
}

/// A plan being built (or built): the result and a condition variable to wait on.
struct Built(Mutex<Option<Result<Arc<plan::Plan>>>>, Condvar);

impl Built {
    fn plan(&self) -> Result<Arc<plan::Plan>> {
        let mut g = self.0.lock();
        loop {
            if let Some(r) = g.as_ref() {
                return r.clone();
            }
            self.1.wait(&mut g);
        }
    }
}

impl Engine for Built {
    fn run(&self, inputs: &[&DLTensor], outputs: &[&DLTensor]) -> Result<()> {
        self.plan()?.run(inputs, outputs)
    }
}
