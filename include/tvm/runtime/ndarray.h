/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/ndarray.h: NDArray. Arrays are made by the runtime (TVMArrayAlloc,
 * TVMArrayFromDLPack, runtime.TVMArrayCreateView); C++ reads the {DLTensor dl_tensor,
 * void* manager_ctx} that follows their object header, exactly where TVM's NDArray::Container
 * has them, and an NDArray handle is the address of dl_tensor. NDArray::Container cannot be
 * made in C++ (wrap foreign memory with FromDLPack).
 */
#ifndef TVM_RUNTIME_NDARRAY_H_
#define TVM_RUNTIME_NDARRAY_H_

#include <dmlc/io.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/container/optional.h>
#include <tvm/runtime/container/shape_tuple.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/data_type.h>
#include <tvm/runtime/detail/capi.h>
#include <tvm/runtime/object.h>
#include <tvm/runtime/serializer.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

namespace tvm {

/*! \brief A device (DLPack's DLDevice). */
using Device = DLDevice;

constexpr DLDeviceType kNullDeviceType = static_cast<DLDeviceType>(0);
constexpr DLDeviceType kInvalidDeviceType = static_cast<DLDeviceType>(-1);

namespace runtime {

/*! \brief A counted n-dimensional array. */
class NDArray : public ObjectRef {
 public:
  class ContainerBase;
  class Container;
  using ContainerType = Container;

  NDArray() {}
  explicit NDArray(ObjectPtr<Object> data) : ObjectRef(std::move(data)) {}

  inline void reset();
  inline int use_count() const;
  inline const DLTensor* operator->() const;
  inline bool IsContiguous() const;
  inline void CopyFrom(const DLTensor* other);
  inline void CopyFrom(const NDArray& other);
  /*! \brief Copies nbytes of host memory in (nbytes must be the array's size). */
  inline void CopyFromBytes(const void* data, size_t nbytes);
  inline void CopyTo(DLTensor* other) const;
  inline void CopyTo(const NDArray& other) const;
  /*! \brief Copies the array to nbytes of host memory. */
  inline void CopyToBytes(void* data, size_t nbytes) const;
  inline NDArray CopyTo(const Device& dev) const;
  inline bool Load(dmlc::Stream* stream);
  inline void Save(dmlc::Stream* stream) const;
  /*! \brief A view of the same data with another shape / dtype (not larger; compact only). */
  inline NDArray CreateView(ShapeTuple shape, DLDataType dtype);
  /*! \brief A DLPack tensor holding a reference to this array. */
  inline DLManagedTensor* ToDLPack() const;
  /*! \brief A new array with uninitialized data (in mem_scope when given). */
  inline static NDArray Empty(ShapeTuple shape, DLDataType dtype, Device dev,
                              Optional<String> mem_scope = NullOpt);
  /*! \brief An array over a DLPack tensor (no copy; its deleter runs with the array's end). */
  inline static NDArray FromDLPack(DLManagedTensor* tensor);
  /*! \brief Copies between tensors (equal sizes, compatible devices). */
  inline static void CopyFromTo(const DLTensor* from, DLTensor* to,
                                TVMStreamHandle stream = nullptr);
  inline ShapeTuple Shape() const;
  inline runtime::DataType DataType() const;

  struct Internal;

 protected:
  friend class TVMPODValue_;
  friend class TVMRetValue;
  friend class TVMArgsSetter;
  inline Container* get_mutable() const;
  inline static ObjectPtr<Object> FFIDataFromHandle(TVMArrayHandle handle);
  inline static void FFIDecRef(TVMArrayHandle handle);
  inline static TVMArrayHandle FFIGetHandle(const ObjectRef& nd);
  /*! \brief Takes over a handle's reference. */
  inline static ObjectPtr<Object> FFIDataFromHandleOwned(TVMArrayHandle handle);
};

inline bool SaveDLTensor(dmlc::Stream* strm, const DLTensor* tensor);

/*! \brief What follows the object header of every NDArray. */
class NDArray::ContainerBase {
 public:
  DLTensor dl_tensor;
  void* manager_ctx{nullptr};
};

/*! \brief The body of an NDArray (made by the runtime only). */
class NDArray::Container : public Object, public NDArray::ContainerBase {
 public:
  using Object::DecRef;
  using Object::IncRef;

  static constexpr const uint32_t _type_index = TypeIndex::kRuntimeNDArray;
  static constexpr const uint32_t _type_child_slots = 0;
  static constexpr const uint32_t _type_child_slots_can_overflow = true;
  static constexpr const char* _type_key = "runtime.NDArray";
  TVM_DECLARE_BASE_OBJECT_INFO(NDArray::Container, Object);

 private:
  Container() = delete;
  friend class NDArray;
};

/*! \brief Bytes of a compact tensor. */
inline size_t GetDataSize(const DLTensor& arr) {
  size_t size = 1;
  for (tvm_index_t i = 0; i < arr.ndim; ++i) size *= static_cast<size_t>(arr.shape[i]);
  size *= (arr.dtype.bits * arr.dtype.lanes + 7) / 8;
  return size;
}

/*! \brief Whether a tensor is compact (row-major, no gaps). */
inline bool IsContiguous(const DLTensor& arr) {
  if (arr.strides == nullptr) return true;
  int64_t expected_stride = 1;
  for (int32_t i = arr.ndim; i != 0; --i) {
    int32_t k = i - 1;
    if (arr.strides[k] != expected_stride) return false;
    expected_stride *= arr.shape[k];
  }
  return true;
}

inline void NDArray::reset() { data_.reset(); }

inline int NDArray::use_count() const { return data_.use_count(); }

inline const DLTensor* NDArray::operator->() const { return &(get_mutable()->dl_tensor); }

inline NDArray::Container* NDArray::get_mutable() const {
  return static_cast<NDArray::Container*>(data_.get());
}

inline bool NDArray::IsContiguous() const {
  return ::tvm::runtime::IsContiguous(get_mutable()->dl_tensor);
}

inline void NDArray::CopyFrom(const DLTensor* other) {
  ICHECK(data_ != nullptr);
  CopyFromTo(other, &(get_mutable()->dl_tensor));
}

inline void NDArray::CopyFrom(const NDArray& other) {
  ICHECK(data_ != nullptr);
  ICHECK(other.data_ != nullptr);
  CopyFromTo(&(other.get_mutable()->dl_tensor), &(get_mutable()->dl_tensor));
}

inline void NDArray::CopyFromBytes(const void* data, size_t nbytes) {
  ICHECK(data_ != nullptr);
  detail::CheckCall(
      TVMArrayCopyFromBytes(&(get_mutable()->dl_tensor), const_cast<void*>(data), nbytes));
}

inline void NDArray::CopyTo(DLTensor* other) const {
  ICHECK(data_ != nullptr);
  CopyFromTo(&(get_mutable()->dl_tensor), other);
}

inline void NDArray::CopyTo(const NDArray& other) const {
  ICHECK(data_ != nullptr);
  ICHECK(other.data_ != nullptr);
  CopyFromTo(&(get_mutable()->dl_tensor), &(other.get_mutable()->dl_tensor));
}

inline void NDArray::CopyToBytes(void* data, size_t nbytes) const {
  ICHECK(data_ != nullptr);
  detail::CheckCall(TVMArrayCopyToBytes(&(get_mutable()->dl_tensor), data, nbytes));
}

inline NDArray NDArray::CopyTo(const Device& dev) const {
  ICHECK(data_ != nullptr);
  const DLTensor* dptr = operator->();
  NDArray ret = Empty(ShapeTuple(dptr->shape, dptr->shape + dptr->ndim), dptr->dtype, dev);
  this->CopyTo(ret);
  return ret;
}

inline NDArray NDArray::Empty(ShapeTuple shape, DLDataType dtype, Device dev,
                              Optional<String> mem_scope) {
  if (!mem_scope.defined()) {
    TVMArrayHandle out = nullptr;
    detail::CheckCall(TVMArrayAlloc(shape.data(), static_cast<int>(shape.size()), dtype.code,
                                    dtype.bits, dtype.lanes, dev.device_type, dev.device_id,
                                    &out));
    return NDArray(FFIDataFromHandleOwned(out));
  }
  std::string scope = mem_scope.value();
  TVMValue v[5];
  int c[5] = {kTVMOpaqueHandle, kDLInt, kTVMDataType, kDLDevice, kTVMStr};
  v[0].v_handle = const_cast<int64_t*>(shape.data());
  v[1].v_int64 = static_cast<int64_t>(shape.size());
  v[2].v_type = dtype;
  v[3].v_device = dev;
  v[4].v_str = scope.c_str();
  detail::RawRet r;
  detail::CallRaw(TVM_RT_GLOBAL("runtime.TVMArrayAllocWithScope"), v, c, 5, &r);
  ICHECK_EQ(r.code, kTVMNDArrayHandle) << "runtime.TVMArrayAllocWithScope returned no NDArray";
  r.Forget();
  return NDArray(FFIDataFromHandleOwned(static_cast<TVMArrayHandle>(r.value.v_handle)));
}

inline NDArray NDArray::FromDLPack(DLManagedTensor* tensor) {
  TVMArrayHandle out = nullptr;
  detail::CheckCall(TVMArrayFromDLPack(tensor, &out));
  return NDArray(FFIDataFromHandleOwned(out));
}

inline DLManagedTensor* NDArray::ToDLPack() const {
  ICHECK(data_ != nullptr);
  DLManagedTensor* out = nullptr;
  detail::CheckCall(TVMArrayToDLPack(&(get_mutable()->dl_tensor), &out));
  return out;
}

inline NDArray NDArray::CreateView(ShapeTuple shape, DLDataType dtype) {
  ICHECK(data_ != nullptr);
  TVMValue v[3];
  int c[3] = {kTVMNDArrayHandle, kTVMObjectHandle, kTVMDataType};
  v[0].v_handle = &(get_mutable()->dl_tensor);
  v[1].v_handle = const_cast<Object*>(static_cast<const Object*>(shape.get()));
  v[2].v_type = dtype;
  detail::RawRet r;
  detail::CallRaw(TVM_RT_GLOBAL("runtime.TVMArrayCreateView"), v, c, 3, &r);
  ICHECK_EQ(r.code, kTVMNDArrayHandle) << "runtime.TVMArrayCreateView returned no NDArray";
  r.Forget();
  return NDArray(FFIDataFromHandleOwned(static_cast<TVMArrayHandle>(r.value.v_handle)));
}

inline void NDArray::CopyFromTo(const DLTensor* from, DLTensor* to, TVMStreamHandle stream) {
  detail::CheckCall(TVMArrayCopyFromTo(const_cast<DLTensor*>(from), to, stream));
}

inline ShapeTuple NDArray::Shape() const {
  const DLTensor* t = operator->();
  return ShapeTuple(t->shape, t->shape + t->ndim);
}

inline runtime::DataType NDArray::DataType() const {
  return runtime::DataType(operator->()->dtype);
}

/*! \brief Internal helpers of the C boundary (TVM's NDArray::Internal, in part). */
struct NDArray::Internal {
  /*! \brief Gives a reference to C as a handle. */
  static TVMArrayHandle MoveToFFIHandle(NDArray arr) {
    TVMArrayHandle h = FFIGetHandle(arr);
    ObjectRef::FFIClearAfterMove(&arr);
    return h;
  }
  static void FFIDecRef(TVMArrayHandle handle) { NDArray::FFIDecRef(handle); }
  /*! \brief The handle of an NDArray reference (borrowed). */
  static TVMArrayHandle GetHandle(const ObjectRef& nd) { return NDArray::FFIGetHandle(nd); }
  static ObjectPtr<Object> FromFFIHandleOwned(TVMArrayHandle handle) {
    return NDArray::FFIDataFromHandleOwned(handle);
  }
};

inline ObjectPtr<Object> NDArray::FFIDataFromHandle(TVMArrayHandle handle) {
  return GetObjectPtr<Object>(
      static_cast<NDArray::Container*>(reinterpret_cast<NDArray::ContainerBase*>(handle)));
}

inline ObjectPtr<Object> NDArray::FFIDataFromHandleOwned(TVMArrayHandle handle) {
  return detail::ObjectUnsafe::FromOwned(
      static_cast<NDArray::Container*>(reinterpret_cast<NDArray::ContainerBase*>(handle)));
}

inline TVMArrayHandle NDArray::FFIGetHandle(const ObjectRef& nd) {
  return reinterpret_cast<TVMArrayHandle>(static_cast<NDArray::ContainerBase*>(
      static_cast<NDArray::Container*>(const_cast<Object*>(nd.get()))));
}

inline void NDArray::FFIDecRef(TVMArrayHandle handle) {
  static_cast<NDArray::Container*>(reinterpret_cast<NDArray::ContainerBase*>(handle))->DecRef();
}

/*! \brief The object header of an NDArray handle. */
inline Object* TVMArrayHandleToObjectHandle(TVMArrayHandle handle) {
  return static_cast<NDArray::Container*>(reinterpret_cast<NDArray::ContainerBase*>(handle));
}

constexpr uint64_t kTVMNDArrayMagic = 0xDD5E40F096B4A13F;

/*! \brief Writes a tensor in TVM's NDArray format (as a CPU tensor). */
inline bool SaveDLTensor(dmlc::Stream* strm, const DLTensor* tensor) {
  uint64_t header = kTVMNDArrayMagic, reserved = 0;
  strm->Write(header);
  strm->Write(reserved);
  Device cpu_dev;
  cpu_dev.device_type = kDLCPU;
  cpu_dev.device_id = 0;
  strm->Write(cpu_dev);
  strm->Write(tensor->ndim);
  strm->Write(tensor->dtype);
  int ndim = tensor->ndim;
  strm->WriteArray(tensor->shape, ndim);
  // As TVM v0.8 (and its files): the record counts bits per lane, not per vector element.
  int type_bytes = (tensor->dtype.bits + 7) / 8;
  int64_t num_elems = 1;
  for (int i = 0; i < ndim; ++i) num_elems *= tensor->shape[i];
  int64_t data_byte_size = type_bytes * num_elems;
  strm->Write(data_byte_size);
  if (DMLC_IO_NO_ENDIAN_SWAP && tensor->device.device_type == kDLCPU &&
      tensor->strides == nullptr && tensor->byte_offset == 0) {
    strm->Write(tensor->data, static_cast<size_t>(data_byte_size));
  } else {
    std::vector<uint8_t> bytes(GetDataSize(*tensor));
    detail::CheckCall(
        TVMArrayCopyToBytes(const_cast<DLTensor*>(tensor), dmlc::BeginPtr(bytes), bytes.size()));
    if (!DMLC_IO_NO_ENDIAN_SWAP) {
      dmlc::ByteSwap(dmlc::BeginPtr(bytes), type_bytes, static_cast<size_t>(num_elems));
    }
    strm->Write(dmlc::BeginPtr(bytes), static_cast<size_t>(data_byte_size));
  }
  return true;
}

inline void NDArray::Save(dmlc::Stream* strm) const { SaveDLTensor(strm, operator->()); }

inline bool NDArray::Load(dmlc::Stream* strm) {
  uint64_t header, reserved;
  ICHECK(strm->Read(&header)) << "Invalid DLTensor file format";
  ICHECK(strm->Read(&reserved)) << "Invalid DLTensor file format";
  ICHECK(header == kTVMNDArrayMagic) << "Invalid DLTensor file format";
  Device dev;
  int ndim;
  DLDataType dtype;
  ICHECK(strm->Read(&dev)) << "Invalid DLTensor file format";
  ICHECK(strm->Read(&ndim)) << "Invalid DLTensor file format";
  ICHECK(strm->Read(&dtype)) << "Invalid DLTensor file format";
  ICHECK_EQ(dev.device_type, kDLCPU) << "Invalid DLTensor device: can only save as CPU tensor";
  ICHECK(ndim >= 0 && ndim <= 64) << "Invalid DLTensor file format: ndim " << ndim;
  std::vector<int64_t> shape(static_cast<size_t>(ndim));
  if (ndim != 0) {
    ICHECK(strm->ReadArray(&shape[0], static_cast<size_t>(ndim)))
        << "Invalid DLTensor file format";
  }
  int64_t data_byte_size;
  ICHECK(strm->Read(&data_byte_size)) << "Invalid DLTensor file format";
  // Checked before allocating: the runtime refuses impossible shapes and dtypes.
  NDArray ret = NDArray::Empty(ShapeTuple(shape), dtype, dev);
  int64_t num_elems = 1;
  int elem_bytes = (ret->dtype.bits + 7) / 8;
  for (int i = 0; i < ret->ndim; ++i) num_elems *= ret->shape[i];
  ICHECK(data_byte_size == num_elems * elem_bytes) << "Invalid DLTensor file format";
  size_t nread = strm->Read(ret->data, static_cast<size_t>(data_byte_size));
  ICHECK(nread == static_cast<size_t>(data_byte_size)) << "Invalid DLTensor file format";
  if (!DMLC_IO_NO_ENDIAN_SWAP) {
    dmlc::ByteSwap(ret->data, elem_bytes, static_cast<size_t>(num_elems));
  }
  *this = ret;
  return true;
}

}  // namespace runtime
}  // namespace tvm

namespace std {
template <>
struct hash<tvm::Device> {
  std::size_t operator()(const tvm::Device& dev) const {
    return ((dev.device_id << 8) | dev.device_type);
  }
};

template <>
struct equal_to<tvm::Device> {
  bool operator()(const tvm::Device& lhs, const tvm::Device& rhs) const {
    return (lhs.device_type == rhs.device_type && lhs.device_id == rhs.device_id);
  }
};
}  // namespace std

#endif  // TVM_RUNTIME_NDARRAY_H_
