//! The RPC session interface (TVM's `RPCSession`): what one side can ask of the other.
//!
//! Two kinds implement it: [`super::local::LocalSession`], which serves requests with this
//! process's runtime (behind a server, or in-process as `rpc.LocalSession`), and
//! [`super::endpoint::ClientSession`], which forwards them over a connection. A server serves
//! whatever session its client asked for, so a server can also forward (a proxy chain).
//!
//! Handles are 64-bit values meaningful only to the side that issued them. Returns of
//! [`Session::call_func`] follow TVM's encoding: `[type code, value]`, or for an NDArray
//! `[13, tensor, array handle]`.

use super::codec::{WireTensor, WireValue};
use crate::abi::{DLDataType, DLDevice};
use crate::error::Result;

/// One side of an RPC connection, as seen by the other.
pub trait Session: Send + Sync {
    /// A handle to the global function `name`, or 0 when there is none.
    fn get_function(&self, name: &str) -> Result<u64>;

    /// Calls a function; returns the encoded return value.
    fn call_func(&self, func: u64, args: &[WireValue<'_>]) -> Result<Vec<WireValue<'static>>>;

    /// Copies `from` into the remote tensor `to` (at its byte offset).
    fn copy_to_remote(&self, from: &[u8], to: &WireTensor<'_>) -> Result<()>;

    /// Copies from the remote tensor `from` (at its byte offset) into `to`.
    fn copy_from_remote(&self, from: &WireTensor<'_>, to: &mut [u8]) -> Result<()>;

    /// Releases a handle of type `type_code` (function, module or NDArray).
    fn free_handle(&self, handle: u64, type_code: i32) -> Result<()>;

    /// `DeviceAPI::SetDevice`.
    fn set_device(&self, dev: DLDevice) -> Result<()>;

    /// `DeviceAPI::GetAttr`.
    fn get_attr(&self, dev: DLDevice, kind: i32) -> Result<WireValue<'static>>;

    /// `DeviceAPI::AllocDataSpace` (flat).
    fn alloc_data(&self, dev: DLDevice, nbytes: u64, alignment: u64, type_hint: DLDataType) -> Result<u64>;

    /// `DeviceAPI::AllocDataSpace` for the shape of `t` in a memory scope.
    fn alloc_data_scoped(&self, t: &WireTensor<'_>, scope: Option<&str>) -> Result<u64>;

    /// `DeviceAPI::FreeDataSpace`.
    fn free_data(&self, dev: DLDevice, data: u64) -> Result<()>;

    /// Copies between two tensors that both live on the remote side.
    fn copy_among(&self, from: &WireTensor<'_>, to: &WireTensor<'_>, stream: u64) -> Result<()>;

    /// `DeviceAPI::CreateStream`.
    fn create_stream(&self, dev: DLDevice) -> Result<u64>;

    /// `DeviceAPI::FreeStream`.
    fn free_stream(&self, dev: DLDevice, stream: u64) -> Result<()>;

    /// `DeviceAPI::StreamSync`.
    fn stream_sync(&self, dev: DLDevice, stream: u64) -> Result<()>;

    /// `DeviceAPI::SetStream`.
    fn set_stream(&self, dev: DLDevice, stream: u64) -> Result<()>;

    /// Whether handles are this process's own (an in-process session).
    fn is_local(&self) -> bool;

    /// Where the session can lend the bytes of `from` directly (CPU memory of a local session),
    /// calls `f` with them and returns true; else returns false without calling `f`.
    fn with_local_bytes(
        &self,
        _from: &WireTensor<'_>,
        _nbytes: u64,
        _f: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Where the session can lend the memory of `to` for writing (CPU memory of a local
    /// session, the whole range checked), calls `f` with it and returns true; else (also when
    /// the range is not memory it handed out) returns false without calling `f`.
    fn with_local_bytes_mut(
        &self,
        _to: &WireTensor<'_>,
        _nbytes: u64,
        _f: &mut dyn FnMut(&mut [u8]) -> Result<()>,
    ) -> Result<bool> {
        Ok(false)
    }
}
