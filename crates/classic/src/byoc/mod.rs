//! Bring Your Own Codegen: the modules TVM's BYOC exports load into.
//!
//! * [`metadata`]: the `metadata` module (v0.9+: `const_loader`) that owns the constants of the
//!   offloaded regions and initialises their modules (`__init_<symbol>`);
//! * [`json`]: the JSON runtime base that JSON backends plug into, and failing loaders for the
//!   backends this runtime does not have;
//! * [`dnnl`]: the `dnnl_json` backend on oneDNN, and the `dnnl_*` kernels that C-source BYOC
//!   libraries call.

pub mod dnnl;
pub mod json;
pub mod metadata;

use crate::module::blob::LOADER_PREFIX;
use crate::registry::Registrar;
use std::sync::Arc;

/// Registers the loaders and globals of this subsystem.
pub fn register(r: &mut Registrar<'_>) {
    for key in [metadata::METADATA, metadata::CONST_LOADER] {
        r.add(&format!("{LOADER_PREFIX}{key}"), metadata::loader(key));
    }
    let backend: Arc<dyn json::Backend> = Arc::new(dnnl::DnnlBackend);
    r.add("runtime.DNNLJSONRuntimeCreate", json::create_global(backend.clone()));
    json::register_backend(r, backend);
    json::register_unsupported(r, &["dnnl_json"]);
}
