/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/device_api.h: what applications use of the device API: DeviceAPI::Get(dev)
 * gives an object whose methods call the runtime's device API through the C API (allocation,
 * copies, streams, workspaces, attributes), DeviceName, the attribute kinds and the alignment
 * constants. Device APIs written in C++ (device_api.<name> globals returning a DeviceAPI*)
 * cannot be plugged into this runtime.
 */
#ifndef TVM_RUNTIME_DEVICE_API_H_
#define TVM_RUNTIME_DEVICE_API_H_

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>

namespace tvm {
namespace runtime {

/*! \brief Device attributes (runtime.GetDeviceAttr kinds). */
enum DeviceAttrKind : int {
  kExist = 0,
  kMaxThreadsPerBlock = 1,
  kWarpSize = 2,
  kMaxSharedMemoryPerBlock = 3,
  kComputeVersion = 4,
  kDeviceName = 5,
  kMaxClockRate = 6,
  kMultiProcessorCount = 7,
  kMaxThreadDimensions = 8,
  kMaxRegistersPerBlock = 9,
  kGcnArch = 10,
  kApiVersion = 11,
  kDriverVersion = 12
};

/*! \brief Alignment of the runtime's allocations. */
constexpr int kAllocAlignment = 128;
/*! \brief Alignment of stack-allocated temporaries of generated code. */
constexpr int kTempAllocaAlignment = 128;
/*! \brief Largest stack allocation of generated code. */
constexpr int kMaxStackAlloca = 1024;
/*! \brief Alignment of workspace allocations. */
constexpr int kDefaultWorkspaceAlignment = 1;

/*!
 * \brief A device type's API. The objects DeviceAPI::Get returns forward to the runtime; the
 * class stays abstract-looking so code written against TVM's interface compiles.
 */
class DeviceAPI {
 public:
  virtual ~DeviceAPI() {}
  virtual void SetDevice(Device dev) = 0;
  virtual void GetAttr(Device dev, DeviceAttrKind kind, TVMRetValue* rv) = 0;
  virtual void GetTargetProperty(Device /*dev*/, const std::string& /*property*/,
                                 TVMRetValue* /*rv*/) {}
  virtual void* AllocDataSpace(Device dev, size_t nbytes, size_t alignment,
                               DLDataType type_hint) = 0;
  virtual void* AllocDataSpace(Device dev, int ndim, const int64_t* shape, DLDataType dtype,
                               Optional<String> mem_scope = NullOpt) = 0;
  virtual void FreeDataSpace(Device dev, void* ptr) = 0;
  virtual void CopyDataFromTo(DLTensor* from, DLTensor* to, TVMStreamHandle stream) = 0;
  virtual TVMStreamHandle CreateStream(Device dev) = 0;
  virtual void FreeStream(Device dev, TVMStreamHandle stream) = 0;
  virtual void StreamSync(Device dev, TVMStreamHandle stream) = 0;
  virtual void SetStream(Device /*dev*/, TVMStreamHandle /*stream*/) {}
  virtual void SyncStreamFromTo(Device dev, TVMStreamHandle event_src,
                                TVMStreamHandle event_dst) = 0;
  virtual void* AllocWorkspace(Device dev, size_t nbytes, DLDataType type_hint = {}) = 0;
  virtual void FreeWorkspace(Device dev, void* ptr) = 0;

  /*!
   * \brief The API of dev's device type; nullptr if the runtime has none and allow_missing,
   * else an error.
   */
  inline static DeviceAPI* Get(Device dev, bool allow_missing = false);

  static bool NeedSetDevice(int device_type) {
    return device_type != kDLCPU && device_type != kDLMicroDev;
  }

 protected:
  virtual void CopyDataFromTo(const void* from, size_t from_offset, void* to, size_t to_offset,
                              size_t num_bytes, Device dev_from, Device dev_to,
                              DLDataType type_hint, TVMStreamHandle stream) = 0;
};

/*! \brief Mask of the device type that marks RPC session devices. */
constexpr int kRPCSessMask = 128;

/*! \brief The name of a device type ("cpu", "cuda", ...). */
inline const char* DeviceName(int type) {
  switch (type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda";
    case kDLCUDAHost:
      return "cuda_host";
    case kDLOpenCL:
      return "opencl";
    case kDLSDAccel:
      return "sdaccel";
    case kDLAOCL:
      return "aocl";
    case kDLVulkan:
      return "vulkan";
    case kDLMetal:
      return "metal";
    case kDLVPI:
      return "vpi";
    case kDLROCM:
      return "rocm";
    case kDLExtDev:
      return "ext_dev";
    case kDLWebGPU:
      return "webgpu";
    case kDLHexagon:
      return "hexagon";
    default:
      LOG(FATAL) << "unknown type =" << type;
  }
  return "Unknown";
}

namespace detail {
// A device type as an int. RPC session devices carry values outside DLDeviceType's enumerators,
// so the field is read and written as bytes rather than as the C++ enum.
inline int DeviceTypeOf(const Device& dev) {
  int t = 0;
  std::memcpy(&t, &dev.device_type, sizeof t);
  return t;
}
inline void SetDeviceType(Device* dev, int t) { std::memcpy(&dev->device_type, &t, sizeof t); }
static_assert(sizeof(DLDeviceType) == sizeof(int), "DLDeviceType is an int");
}  // namespace detail

inline bool IsRPCSessionDevice(Device dev) {
  return (detail::DeviceTypeOf(dev) / kRPCSessMask) > 0;
}

inline int GetRPCSessionIndex(Device dev) {
  ICHECK(IsRPCSessionDevice(dev)) << "GetRPCSessionIndex: dev has no RPC session";
  return detail::DeviceTypeOf(dev) / kRPCSessMask - 1;
}

inline Device RemoveRPCSessionMask(Device dev) {
  detail::SetDeviceType(&dev, detail::DeviceTypeOf(dev) % kRPCSessMask);
  return dev;
}

inline std::ostream& operator<<(std::ostream& os, DLDevice dev) {  // NOLINT(*)
  if (IsRPCSessionDevice(dev)) {
    os << "remote[" << GetRPCSessionIndex(dev) << "]-";
    dev = RemoveRPCSessionMask(dev);
  }
  os << DeviceName(detail::DeviceTypeOf(dev)) << "(" << dev.device_id << ")";
  return os;
}

inline Device AddRPCSessionMask(Device dev, int session_table_index) {
  CHECK(!IsRPCSessionDevice(dev)) << "AddRPCSessionMask: dev already non-zero RPCSessionIndex: "
                                  << dev;
  detail::SetDeviceType(&dev,
                        detail::DeviceTypeOf(dev) | (kRPCSessMask * (session_table_index + 1)));
  return dev;
}

namespace detail {

/*! \brief A device type's API of the runtime, through the C API. */
class RuntimeDeviceAPI final : public DeviceAPI {
 public:
  void SetDevice(Device dev) override {
    TVMValue v[2];
    int c[2] = {kDLInt, kDLInt};
    v[0].v_int64 = dev.device_type;
    v[1].v_int64 = dev.device_id;
    RawRet r;
    CallRaw(TVM_RT_GLOBAL("__tvm_set_device"), v, c, 2, &r);
  }
  void GetAttr(Device dev, DeviceAttrKind kind, TVMRetValue* rv) override {
    TVMValue v[3];
    int c[3] = {kDLInt, kDLInt, kDLInt};
    v[0].v_int64 = dev.device_type;
    v[1].v_int64 = dev.device_id;
    v[2].v_int64 = static_cast<int>(kind);
    RawRet r;
    CallRaw(TVM_RT_GLOBAL("runtime.GetDeviceAttr"), v, c, 3, &r);
    FuncBridge::TakeReturn(&r, rv);
  }
  void* AllocDataSpace(Device dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override {
    void* out = nullptr;
    CheckCall(TVMDeviceAllocDataSpace(dev, nbytes, alignment, type_hint, &out));
    return out;
  }
  void* AllocDataSpace(Device dev, int ndim, const int64_t* shape, DLDataType dtype,
                       Optional<String> mem_scope) override {
    void* out = nullptr;
    std::string scope = mem_scope.defined() ? std::string(mem_scope.value()) : std::string();
    CheckCall(TVMDeviceAllocDataSpaceWithScope(dev, ndim, shape, dtype,
                                               mem_scope.defined() ? scope.c_str() : nullptr,
                                               &out));
    return out;
  }
  void FreeDataSpace(Device dev, void* ptr) override {
    CheckCall(TVMDeviceFreeDataSpace(dev, ptr));
  }
  void CopyDataFromTo(DLTensor* from, DLTensor* to, TVMStreamHandle stream) override {
    CheckCall(TVMDeviceCopyDataFromTo(from, to, stream));
  }
  TVMStreamHandle CreateStream(Device dev) override {
    TVMStreamHandle out = nullptr;
    CheckCall(TVMStreamCreate(dev.device_type, dev.device_id, &out));
    return out;
  }
  void FreeStream(Device dev, TVMStreamHandle stream) override {
    CheckCall(TVMStreamFree(dev.device_type, dev.device_id, stream));
  }
  void StreamSync(Device dev, TVMStreamHandle stream) override {
    CheckCall(TVMSynchronize(dev.device_type, dev.device_id, stream));
  }
  void SetStream(Device dev, TVMStreamHandle stream) override {
    CheckCall(TVMSetStream(dev.device_type, dev.device_id, stream));
  }
  void SyncStreamFromTo(Device dev, TVMStreamHandle event_src,
                        TVMStreamHandle event_dst) override {
    CheckCall(TVMStreamStreamSynchronize(dev.device_type, dev.device_id, event_src, event_dst));
  }
  void* AllocWorkspace(Device dev, size_t nbytes, DLDataType type_hint) override {
    void* p = TVMBackendAllocWorkspace(dev.device_type, dev.device_id, nbytes, type_hint.code,
                                       type_hint.bits);
    if (p == nullptr) ThrowLastError(-1);
    return p;
  }
  void FreeWorkspace(Device dev, void* ptr) override {
    CheckCall(TVMBackendFreeWorkspace(dev.device_type, dev.device_id, ptr));
  }

 protected:
  void CopyDataFromTo(const void* from, size_t from_offset, void* to, size_t to_offset,
                      size_t num_bytes, Device dev_from, Device dev_to, DLDataType type_hint,
                      TVMStreamHandle stream) override {
    int64_t n = static_cast<int64_t>(num_bytes);
    DLDataType u8{kDLUInt, 8, 1};
    DLTensor src{const_cast<void*>(from), dev_from, 1, u8, &n, nullptr, from_offset};
    DLTensor dst{to, dev_to, 1, u8, &n, nullptr, to_offset};
    (void)type_hint;
    CheckCall(TVMDeviceCopyDataFromTo(&src, &dst, stream));
  }
};

}  // namespace detail

inline DeviceAPI* DeviceAPI::Get(Device dev, bool allow_missing) {
  int type = detail::DeviceTypeOf(dev) % kRPCSessMask;
  if (type < 0) type = 0;
  std::string name = std::string("device_api.") + DeviceName(type);
  TVMFunctionHandle h = detail::LookupGlobal(name.c_str());
  if (h == nullptr) {
    ICHECK(allow_missing) << "Device API " << DeviceName(type) << " is not enabled.";
    return nullptr;
  }
  TVMFuncFree(h);
  static std::mutex* mu = new std::mutex();
  static detail::RuntimeDeviceAPI** apis = new detail::RuntimeDeviceAPI*[kRPCSessMask]();
  std::lock_guard<std::mutex> lock(*mu);
  if (apis[type] == nullptr) apis[type] = new detail::RuntimeDeviceAPI();  // one per type, kept
  return apis[type];
}

}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_DEVICE_API_H_
