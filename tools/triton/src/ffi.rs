//! Our declarations of the part of Triton's backend API this backend uses: `tritonbackend.h`
//! (API 1.19) and `tritonserver.h` (API 1.34) of triton-inference-server/core r24.10, the
//! release of server 2.51. Written from the header, not generated; only what we call.
//!
//! The functions are provided by the server's `libtritonserver` (whose soname the PyPI wheel
//! renames), so the backend does not link against it: the symbols resolve when the server
//! `dlopen`s the backend, from the server's own global scope.

use std::ffi::{c_char, c_void};

/// `TRITONBACKEND_API_VERSION_MAJOR` / `_MINOR` of r24.10.
pub const BACKEND_API_MAJOR: u32 = 1;
/// The minor version we were written against (a server must offer at least this).
pub const BACKEND_API_MINOR: u32 = 19;

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        /// An opaque Triton object, only ever behind a pointer.
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    TRITONSERVER_Error,
    TRITONSERVER_Message,
    TRITONBACKEND_Backend,
    TRITONBACKEND_Model,
    TRITONBACKEND_ModelInstance,
    TRITONBACKEND_Request,
    TRITONBACKEND_Response,
    TRITONBACKEND_Input,
    TRITONBACKEND_Output,
);

/// `TRITONSERVER_Error_Code`.
pub type ErrorCode = u32;
/// `TRITONSERVER_ERROR_INTERNAL`.
pub const ERROR_INTERNAL: ErrorCode = 1;
/// `TRITONSERVER_ERROR_INVALID_ARG`.
pub const ERROR_INVALID_ARG: ErrorCode = 3;
/// `TRITONSERVER_ERROR_UNAVAILABLE`.
pub const ERROR_UNAVAILABLE: ErrorCode = 4;
/// `TRITONSERVER_ERROR_UNSUPPORTED`.
pub const ERROR_UNSUPPORTED: ErrorCode = 5;

/// `TRITONSERVER_DataType` (`TRITONSERVER_TYPE_INVALID` = 0 ... `TRITONSERVER_TYPE_BF16` = 14).
pub type DataType = u32;

/// `TRITONSERVER_MemoryType`.
pub type MemoryType = u32;
/// `TRITONSERVER_MEMORY_CPU`.
pub const MEMORY_CPU: MemoryType = 0;
/// `TRITONSERVER_MEMORY_CPU_PINNED`.
pub const MEMORY_CPU_PINNED: MemoryType = 1;

/// `TRITONSERVER_InstanceGroupKind`.
pub type InstanceGroupKind = u32;
/// `TRITONSERVER_INSTANCEGROUPKIND_AUTO`.
pub const KIND_AUTO: InstanceGroupKind = 0;
/// `TRITONSERVER_INSTANCEGROUPKIND_CPU`.
pub const KIND_CPU: InstanceGroupKind = 1;
/// `TRITONSERVER_INSTANCEGROUPKIND_GPU`.
pub const KIND_GPU: InstanceGroupKind = 2;

/// `TRITONSERVER_LogLevel`.
pub type LogLevel = u32;
/// `TRITONSERVER_LOG_INFO`.
pub const LOG_INFO: LogLevel = 0;
/// `TRITONSERVER_LOG_ERROR`.
pub const LOG_ERROR: LogLevel = 2;

/// `TRITONBACKEND_ArtifactType`.
pub type ArtifactType = u32;
/// `TRITONBACKEND_ARTIFACT_FILESYSTEM`.
pub const ARTIFACT_FILESYSTEM: ArtifactType = 0;

/// `TRITONSERVER_REQUEST_RELEASE_ALL`.
pub const REQUEST_RELEASE_ALL: u32 = 1;
/// `TRITONSERVER_RESPONSE_COMPLETE_FINAL`.
pub const RESPONSE_COMPLETE_FINAL: u32 = 1;

extern "C" {
    // tritonserver.h: errors, messages, logging.
    pub fn TRITONSERVER_ErrorNew(code: ErrorCode, msg: *const c_char) -> *mut TRITONSERVER_Error;
    pub fn TRITONSERVER_ErrorDelete(error: *mut TRITONSERVER_Error);
    pub fn TRITONSERVER_ErrorMessage(error: *mut TRITONSERVER_Error) -> *const c_char;
    pub fn TRITONSERVER_MessageNewFromSerializedJson(
        message: *mut *mut TRITONSERVER_Message,
        base: *const c_char,
        byte_size: usize,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONSERVER_MessageDelete(message: *mut TRITONSERVER_Message) -> *mut TRITONSERVER_Error;
    pub fn TRITONSERVER_MessageSerializeToJson(
        message: *mut TRITONSERVER_Message,
        base: *mut *const c_char,
        byte_size: *mut usize,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONSERVER_LogMessage(
        level: LogLevel,
        filename: *const c_char,
        line: i32,
        msg: *const c_char,
    ) -> *mut TRITONSERVER_Error;

    // tritonbackend.h: the backend.
    pub fn TRITONBACKEND_ApiVersion(major: *mut u32, minor: *mut u32) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_BackendConfig(
        backend: *mut TRITONBACKEND_Backend,
        backend_config: *mut *mut TRITONSERVER_Message,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_BackendSetState(
        backend: *mut TRITONBACKEND_Backend,
        state: *mut c_void,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_BackendState(
        backend: *mut TRITONBACKEND_Backend,
        state: *mut *mut c_void,
    ) -> *mut TRITONSERVER_Error;

    // Models.
    pub fn TRITONBACKEND_ModelName(
        model: *mut TRITONBACKEND_Model,
        name: *mut *const c_char,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelVersion(model: *mut TRITONBACKEND_Model, version: *mut u64) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelRepository(
        model: *mut TRITONBACKEND_Model,
        artifact_type: *mut ArtifactType,
        location: *mut *const c_char,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelConfig(
        model: *mut TRITONBACKEND_Model,
        config_version: u32,
        model_config: *mut *mut TRITONSERVER_Message,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelAutoCompleteConfig(
        model: *mut TRITONBACKEND_Model,
        auto_complete_config: *mut bool,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelSetConfig(
        model: *mut TRITONBACKEND_Model,
        config_version: u32,
        model_config: *mut TRITONSERVER_Message,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelBackend(
        model: *mut TRITONBACKEND_Model,
        backend: *mut *mut TRITONBACKEND_Backend,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelSetState(model: *mut TRITONBACKEND_Model, state: *mut c_void) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelState(
        model: *mut TRITONBACKEND_Model,
        state: *mut *mut c_void,
    ) -> *mut TRITONSERVER_Error;

    // Model instances.
    pub fn TRITONBACKEND_ModelInstanceName(
        instance: *mut TRITONBACKEND_ModelInstance,
        name: *mut *const c_char,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelInstanceKind(
        instance: *mut TRITONBACKEND_ModelInstance,
        kind: *mut InstanceGroupKind,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelInstanceDeviceId(
        instance: *mut TRITONBACKEND_ModelInstance,
        device_id: *mut i32,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelInstanceModel(
        instance: *mut TRITONBACKEND_ModelInstance,
        model: *mut *mut TRITONBACKEND_Model,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelInstanceSetState(
        instance: *mut TRITONBACKEND_ModelInstance,
        state: *mut c_void,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelInstanceState(
        instance: *mut TRITONBACKEND_ModelInstance,
        state: *mut *mut c_void,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelInstanceReportStatistics(
        instance: *mut TRITONBACKEND_ModelInstance,
        request: *mut TRITONBACKEND_Request,
        success: bool,
        exec_start_ns: u64,
        compute_start_ns: u64,
        compute_end_ns: u64,
        exec_end_ns: u64,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ModelInstanceReportBatchStatistics(
        instance: *mut TRITONBACKEND_ModelInstance,
        batch_size: u64,
        exec_start_ns: u64,
        compute_start_ns: u64,
        compute_end_ns: u64,
        exec_end_ns: u64,
    ) -> *mut TRITONSERVER_Error;

    // Requests and their inputs.
    pub fn TRITONBACKEND_RequestInputCount(
        request: *mut TRITONBACKEND_Request,
        count: *mut u32,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_RequestInputByIndex(
        request: *mut TRITONBACKEND_Request,
        index: u32,
        input: *mut *mut TRITONBACKEND_Input,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_RequestOutputCount(
        request: *mut TRITONBACKEND_Request,
        count: *mut u32,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_RequestOutputName(
        request: *mut TRITONBACKEND_Request,
        index: u32,
        output_name: *mut *const c_char,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_RequestRelease(
        request: *mut TRITONBACKEND_Request,
        release_flags: u32,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_InputProperties(
        input: *mut TRITONBACKEND_Input,
        name: *mut *const c_char,
        datatype: *mut DataType,
        shape: *mut *const i64,
        dims_count: *mut u32,
        byte_size: *mut u64,
        buffer_count: *mut u32,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_InputBuffer(
        input: *mut TRITONBACKEND_Input,
        index: u32,
        buffer: *mut *const c_void,
        buffer_byte_size: *mut u64,
        memory_type: *mut MemoryType,
        memory_type_id: *mut i64,
    ) -> *mut TRITONSERVER_Error;

    // Responses and their outputs.
    pub fn TRITONBACKEND_ResponseNew(
        response: *mut *mut TRITONBACKEND_Response,
        request: *mut TRITONBACKEND_Request,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ResponseOutput(
        response: *mut TRITONBACKEND_Response,
        output: *mut *mut TRITONBACKEND_Output,
        name: *const c_char,
        datatype: DataType,
        shape: *const i64,
        dims_count: u32,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_OutputBuffer(
        output: *mut TRITONBACKEND_Output,
        buffer: *mut *mut c_void,
        buffer_byte_size: u64,
        memory_type: *mut MemoryType,
        memory_type_id: *mut i64,
    ) -> *mut TRITONSERVER_Error;
    pub fn TRITONBACKEND_ResponseSend(
        response: *mut TRITONBACKEND_Response,
        send_flags: u32,
        error: *mut TRITONSERVER_Error,
    ) -> *mut TRITONSERVER_Error;
}
