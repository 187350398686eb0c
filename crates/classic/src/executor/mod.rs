//! Executors: the graph executor, its factory, the debug executor, the time evaluator.

pub mod graph;
#[cfg(any(feature = "profiling", feature = "vm"))]
pub mod report;
#[cfg(feature = "profiling")]
pub mod time_eval;

use crate::registry::Registrar;

/// Registers the executor globals.
pub fn register(r: &mut Registrar<'_>) {
    graph::register(r);
    #[cfg(feature = "profiling")]
    time_eval::register(r);
    #[cfg(any(feature = "profiling", feature = "vm"))]
    report::register(r);
}
