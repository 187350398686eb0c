//! Executors: the graph executor, its factory, the debug executor, the time evaluator.

pub mod graph;
pub mod report;
pub mod time_eval;

use crate::registry::Registrar;

/// Registers the executor globals.
pub fn register(r: &mut Registrar<'_>) {
    graph::register(r);
    time_eval::register(r);
    report::register(r);
}
