/* The ABI facts of TVM v0.8's headers: sizes, offsets and enum values, checked at compile
 * time against our generated headers. */
#include <dlpack/dlpack.h>
#include <stddef.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>

_Static_assert(sizeof(DLDevice) == 8, "DLDevice");
_Static_assert(offsetof(DLDevice, device_id) == 4, "DLDevice.device_id");
_Static_assert(sizeof(DLDataType) == 4, "DLDataType");
_Static_assert(offsetof(DLDataType, bits) == 1 && offsetof(DLDataType, lanes) == 2, "DLDataType fields");
_Static_assert(sizeof(DLTensor) == 48, "DLTensor");
_Static_assert(offsetof(DLTensor, device) == 8, "DLTensor.device");
_Static_assert(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim");
_Static_assert(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype");
_Static_assert(offsetof(DLTensor, shape) == 24, "DLTensor.shape");
_Static_assert(offsetof(DLTensor, strides) == 32, "DLTensor.strides");
_Static_assert(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset");
_Static_assert(sizeof(DLManagedTensor) == 64, "DLManagedTensor");
_Static_assert(offsetof(DLManagedTensor, manager_ctx) == 48, "manager_ctx");
_Static_assert(offsetof(DLManagedTensor, deleter) == 56, "deleter");
_Static_assert(sizeof(TVMValue) == 8 && _Alignof(TVMValue) == 8, "TVMValue");
_Static_assert(sizeof(TVMByteArray) == 16, "TVMByteArray");
_Static_assert(offsetof(TVMByteArray, size) == 8, "TVMByteArray.size");
_Static_assert(sizeof(TVMParallelGroupEnv) == 16, "TVMParallelGroupEnv");
_Static_assert(offsetof(TVMParallelGroupEnv, num_task) == 8, "num_task");
_Static_assert(sizeof(DLDeviceType) == 4, "enum size");
_Static_assert(DLPACK_VERSION == 40, "DLPACK_VERSION is octal 050");
_Static_assert(kDLCPU == 1 && kDLCUDA == 2 && kDLCUDAHost == 3 && kDLOpenCL == 4 && kDLVulkan == 7 &&
                   kDLMetal == 8 && kDLVPI == 9 && kDLROCM == 10 && kDLExtDev == 12,
               "DLDeviceType values");
_Static_assert(kDLAOCL == 5 && kDLSDAccel == 6 && kOpenGL == 11 && kDLMicroDev == 13 && kDLHexagon == 14 &&
                   kDLWebGPU == 15,
               "TVMDeviceExtType values");
_Static_assert(kDLInt == 0 && kDLUInt == 1 && kDLFloat == 2 && kDLOpaqueHandle == 3 && kDLBfloat == 4 &&
                   kDLComplex == 5,
               "DLDataTypeCode values");
_Static_assert(kTVMArgInt == 0 && kTVMArgFloat == 2 && kTVMOpaqueHandle == 3 && kTVMNullptr == 4 &&
                   kTVMDataType == 5 && kDLDevice == 6 && kTVMDLTensorHandle == 7 && kTVMObjectHandle == 8 &&
                   kTVMModuleHandle == 9 && kTVMPackedFuncHandle == 10 && kTVMStr == 11 && kTVMBytes == 12 &&
                   kTVMNDArrayHandle == 13 && kTVMObjectRValueRefArg == 14 && kTVMExtBegin == 15 &&
                   kTVMNNVMFirst == 16 && kTVMNNVMLast == 20 && kTVMExtReserveEnd == 64 && kTVMExtEnd == 128,
               "TVMArgTypeCode values");
_Static_assert(sizeof(tvm_index_t) == 8, "tvm_index_t");

int main(void) {
  /* TVM_VERSION is the string "0.8.0"; a handle typedef is a pointer. */
  TVMArrayHandle h = NULL;
  TVMModuleHandle m = NULL;
  TVMFunctionHandle f = NULL;
  TVMPackedCFunc cf = NULL;
  TVMBackendPackedCFunc bf = NULL;
  FTVMParallelLambda lam = NULL;
  (void)h; (void)m; (void)f; (void)cf; (void)bf; (void)lam;
  return strcmp(TVM_VERSION, "0.8.0") == 0 ? 0 : 1;
}
