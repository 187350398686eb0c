//! Which of the model kinds a loaded module is (what `tvmrt` and the Triton backend run).

use crate::Module;

/// The kind of model a module is: what runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelKind {
    /// A graph executor factory ([`crate::GraphExecutor::from_factory`]).
    Graph,
    /// An AOT executor factory ([`crate::AotExecutor::from_factory`]).
    Aot,
    /// A Relay VM executable ([`crate::VirtualMachine::new`]).
    Vm,
    /// A Relax VM executable: an export of TVM v0.22+, loaded with [`crate::RelaxModule::load`]
    /// (not [`Module::load`]; [`crate::relax::is_relax_export`] tells the files apart) and run by
    /// [`crate::RelaxVm`].
    Relax,
}

impl ModelKind {
    /// A description for messages: `graph executor factory`, ...
    pub fn description(self) -> &'static str {
        match self {
            ModelKind::Graph => "graph executor factory",
            ModelKind::Aot => "AOT executor factory",
            ModelKind::Vm => "Relay VM executable",
            ModelKind::Relax => "Relax VM executable (TVM v0.22+)",
        }
    }
}

impl Module {
    /// The kind of model this root module is, if it is one (an operator library, for one, is
    /// none). Never [`ModelKind::Relax`]: those load as [`crate::RelaxModule`]s.
    pub fn model_kind(&self) -> Option<ModelKind> {
        if self.factory_info().is_some() {
            Some(ModelKind::Graph)
        } else if self.aot_info().is_some() {
            Some(ModelKind::Aot)
        } else if self.vm_info().is_some() {
            Some(ModelKind::Vm)
        } else {
            None
        }
    }
}

impl crate::RelaxModule {
    /// [`ModelKind::Relax`].
    pub fn model_kind(&self) -> ModelKind {
        ModelKind::Relax
    }
}
