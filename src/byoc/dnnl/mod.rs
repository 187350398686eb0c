//! `dnnl_json`: TVM's DNNL JSON runtime on oneDNN, opened at run time ([`sys`]). The operators
//! and their checks are in [`ops`], the primitives and per-call contexts in [`plan`], the
//! kernels that C-source BYOC libraries call in [`kernels`].
//!
//! A module loads only where oneDNN can be opened: elsewhere loading fails with an error naming
//! the libraries looked for (everything else in the runtime is unaffected).

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
        Ok(Arc::new(plan::Plan::build(self.d, &self.graph, &self.ops, consts)?))
    }
}

impl Engine for plan::Plan {
    fn run(&self, inputs: &[&DLTensor], outputs: &[&DLTensor]) -> Result<()> {
        plan::Plan::run(self, inputs, outputs)
    }
}
