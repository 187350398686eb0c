/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/packed_func.h: PackedFunc, TypedPackedFunc, TVMArgs / TVMArgValue /
 * TVMRetValue with TVM's conversions, TVMArgsSetter, and the C boundary.
 *
 * How C++ meets the runtime:
 * - Arguments (TVMArgs) are always in the C API's encoding: functions, modules and arrays as
 *   runtime handles, so a TVMArgs goes to TVMFuncCall as it is and a callback's arguments are
 *   read as they come.
 * - A PackedFunc made from a C++ callable becomes a runtime function (TVMFuncCreateFromCFunc)
 *   the first time it crosses, once; a function of the runtime is called with TVMFuncCall.
 *   Exceptions cross both ways: a C++ exception thrown in a callback becomes -1 with its
 *   message in TVMGetLastError() ("Kind: message", TVM's normalization), -2 for
 *   EnvErrorAlreadySet; a failing C call throws tvm::runtime::Error with the message (or
 *   EnvErrorAlreadySet for -2).
 * - TVMRetValue holds values the C++ way (std::string, PackedFunc, C++ ModuleNode) and owns them.
 * - Modules: see module.h.
 */
#ifndef TVM_RUNTIME_PACKED_FUNC_H_
#define TVM_RUNTIME_PACKED_FUNC_H_

#include <dmlc/memory_io.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/container/array.h>
#include <tvm/runtime/container/map.h>
#include <tvm/runtime/data_type.h>
#include <tvm/runtime/detail/capi.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/object.h>

#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#ifndef TVM_RUNTIME_HEADER_ONLY
#define TVM_RUNTIME_HEADER_ONLY 1
#endif

namespace tvm {
namespace runtime {

class TVMArgs;
class TVMArgValue;
class TVMMovableArgValueWithContext_;
class TVMRetValue;
class TVMArgsSetter;

namespace detail {
struct PackedFuncState;
class FuncBridge;
}  // namespace detail

/*! \brief A type-erased function of the PackedFunc calling convention. */
class PackedFunc {
 public:
  using FType = std::function<void(TVMArgs args, TVMRetValue* rv)>;
  PackedFunc() {}
  PackedFunc(std::nullptr_t) {}  // NOLINT(*)
  /*! \brief A function with a C++ body. */
  explicit PackedFunc(FType body);
  /*! \brief Calls with C++ values. */
  template <typename... Args>
  inline TVMRetValue operator()(Args&&... args) const;
  /*! \brief Calls with encoded arguments. */
  inline void CallPacked(TVMArgs args, TVMRetValue* rv) const;
  /*! \brief The body (for a function of the runtime: a call through the C API). */
  inline FType body() const;
  bool operator==(std::nullptr_t) const { return state_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::PackedFuncState> state_;
  friend class detail::FuncBridge;
};

template <typename FType>
class TypedPackedFunc;

/*! \brief A PackedFunc with a C++ signature. */
template <typename R, typename... Args>
class TypedPackedFunc<R(Args...)> {
 public:
  using TSelf = TypedPackedFunc<R(Args...)>;
  TypedPackedFunc() {}
  TypedPackedFunc(std::nullptr_t) {}                                // NOLINT(*)
  inline TypedPackedFunc(PackedFunc packed);                        // NOLINT(*)
  inline TypedPackedFunc(const TVMRetValue& value);                 // NOLINT(*)
  inline TypedPackedFunc(const TVMArgValue& value);                 // NOLINT(*)
  inline TypedPackedFunc(TVMMovableArgValueWithContext_&& value);  // NOLINT(*)
  template <typename FLambda, typename = typename std::enable_if<std::is_convertible<
                                  FLambda, std::function<R(Args...)>>::value>::type>
  TypedPackedFunc(const FLambda& typed_lambda, std::string name) {  // NOLINT(*)
    this->AssignTypedLambda(typed_lambda, name);
  }
  template <typename FLambda, typename = typename std::enable_if<std::is_convertible<
                                  FLambda, std::function<R(Args...)>>::value>::type>
  TypedPackedFunc(const FLambda& typed_lambda) {  // NOLINT(*)
    this->AssignTypedLambda(typed_lambda);
  }
  template <typename FLambda, typename = typename std::enable_if<std::is_convertible<
                                  FLambda, std::function<R(Args...)>>::value>::type>
  TSelf& operator=(FLambda typed_lambda) {  // NOLINT(*)
    this->AssignTypedLambda(typed_lambda);
    return *this;
  }
  TSelf& operator=(PackedFunc packed) {
    packed_ = packed;
    return *this;
  }
  TVM_ALWAYS_INLINE R operator()(Args... args) const;
  operator PackedFunc() const { return packed(); }  // NOLINT(*)
  const PackedFunc& packed() const { return packed_; }
  bool operator==(std::nullptr_t) const { return packed_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return packed_ != nullptr; }

 private:
  friend class TVMRetValue;
  PackedFunc packed_;
  template <typename FLambda>
  inline void AssignTypedLambda(FLambda flambda, std::string name);
  template <typename FLambda>
  inline void AssignTypedLambda(FLambda flambda);
};

/*! \brief Arguments of a packed call (in the C API's encoding). */
class TVMArgs {
 public:
  const TVMValue* values;
  const int* type_codes;
  int num_args;
  TVMArgs(const TVMValue* values, const int* type_codes, int num_args)
      : values(values), type_codes(type_codes), num_args(num_args) {}
  inline int size() const;
  inline TVMArgValue operator[](int i) const;
};

inline const char* ArgTypeCode2Str(int type_code);

#define TVM_CHECK_TYPE_CODE(CODE, T) \
  ICHECK_EQ(CODE, T) << "expected " << ArgTypeCode2Str(T) << " but got " << ArgTypeCode2Str(CODE)

/*! \brief Type checks against an ObjectRef type (by its ContainerType). */
template <typename T>
struct ObjectTypeChecker {
  static Optional<String> CheckAndGetMismatch(const Object* ptr) {
    using ContainerType = typename T::ContainerType;
    if (ptr == nullptr) {
      if (T::_type_is_nullable) return NullOpt;
      return String("nullptr");
    }
    if (ptr->IsInstance<ContainerType>()) return NullOpt;
    return String(ptr->GetTypeKey());
  }
  static bool Check(const Object* ptr) {
    using ContainerType = typename T::ContainerType;
    if (ptr == nullptr) return T::_type_is_nullable;
    return ptr->IsInstance<ContainerType>();
  }
  static std::string TypeName() {
    using ContainerType = typename T::ContainerType;
    return ContainerType::_type_key;
  }
};

namespace detail {
/*! \brief kTVMArgBool of later TVM releases (an int in v_int64), accepted where ints are. */
constexpr int kArgBoolCode = 15;
}  // namespace detail

/*! \brief The common part of argument and return values. */
class TVMPODValue_ {
 public:
  operator double() const {
    if (IsIntCode()) return static_cast<double>(value_.v_int64);
    TVM_CHECK_TYPE_CODE(type_code_, kDLFloat);
    return value_.v_float64;
  }
  operator int64_t() const {
    if (!IsIntCode()) TVM_CHECK_TYPE_CODE(type_code_, kDLInt);
    return value_.v_int64;
  }
  operator uint64_t() const {
    if (!IsIntCode()) TVM_CHECK_TYPE_CODE(type_code_, kDLInt);
    return value_.v_int64;
  }
  operator int() const {
    if (!IsIntCode()) TVM_CHECK_TYPE_CODE(type_code_, kDLInt);
    ICHECK_LE(value_.v_int64, std::numeric_limits<int>::max());
    ICHECK_GE(value_.v_int64, std::numeric_limits<int>::min());
    return static_cast<int>(value_.v_int64);
  }
  operator bool() const {
    if (!IsIntCode()) TVM_CHECK_TYPE_CODE(type_code_, kDLInt);
    return value_.v_int64 != 0;
  }
  operator void*() const {
    if (type_code_ == kTVMNullptr) return nullptr;
    if (type_code_ == kTVMDLTensorHandle) return value_.v_handle;
    TVM_CHECK_TYPE_CODE(type_code_, kTVMOpaqueHandle);
    return value_.v_handle;
  }
  operator DLTensor*() const {
    if (type_code_ == kTVMDLTensorHandle || type_code_ == kTVMNDArrayHandle) {
      return static_cast<DLTensor*>(value_.v_handle);
    }
    if (type_code_ == kTVMNullptr) return nullptr;
    LOG(FATAL) << "Expected DLTensor* or NDArray but got " << ArgTypeCode2Str(type_code_);
    return nullptr;
  }
  operator NDArray() const {
    if (type_code_ == kTVMNullptr) return NDArray(ObjectPtr<Object>(nullptr));
    TVM_CHECK_TYPE_CODE(type_code_, kTVMNDArrayHandle);
    return NDArray(NDArray::FFIDataFromHandle(static_cast<TVMArrayHandle>(value_.v_handle)));
  }
  inline operator Module() const;
  operator Device() const {
    TVM_CHECK_TYPE_CODE(type_code_, kDLDevice);
    return value_.v_device;
  }
  int type_code() const { return type_code_; }
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(value_.v_handle);
  }
  template <typename TObjectRef,
            typename = typename std::enable_if<std::is_base_of<ObjectRef, TObjectRef>::value>::type>
  inline bool IsObjectRef() const;
  template <typename TObjectRef>
  inline TObjectRef AsObjectRef() const;

 protected:
  friend class TVMArgsSetter;
  friend class TVMRetValue;
  friend class TVMMovableArgValue_;
  TVMPODValue_() : type_code_(kTVMNullptr) { value_.v_handle = nullptr; }
  bool IsIntCode() const { return type_code_ == kDLInt || type_code_ == detail::kArgBoolCode; }
  TVMPODValue_(TVMValue value, int type_code, bool cxx = false)
      : value_(value), type_code_(type_code), cxx_(cxx) {}
  /*! \brief The raw object pointer of codes 8, 9, 13 and 14 (nullptr otherwise). */
  inline Object* RawObject() const;
  /*! \brief A new reference to the object of codes 4, 8, 9, 13, 14. */
  inline ObjectRef ObjectOf() const;

  TVMValue value_;
  int type_code_;
  // Whether the value holds C++ objects (a TVMRetValue) rather than the C API's encoding.
  bool cxx_ = false;
};

/*! \brief An argument of a packed call (borrowed). */
class TVMArgValue : public TVMPODValue_ {
 public:
  TVMArgValue() {}
  TVMArgValue(TVMValue value, int type_code) : TVMPODValue_(value, type_code) {}
  using TVMPODValue_::operator double;
  using TVMPODValue_::operator int64_t;
  using TVMPODValue_::operator uint64_t;
  using TVMPODValue_::operator int;
  using TVMPODValue_::operator bool;
  using TVMPODValue_::operator void*;
  using TVMPODValue_::operator DLTensor*;
  using TVMPODValue_::operator NDArray;
  using TVMPODValue_::operator Device;
  using TVMPODValue_::operator Module;
  using TVMPODValue_::AsObjectRef;
  using TVMPODValue_::IsObjectRef;

  operator std::string() const {
    if (type_code_ == kTVMDataType) return DLDataType2String(operator DLDataType());
    if (type_code_ == kTVMBytes) {
      TVMByteArray* arr = static_cast<TVMByteArray*>(value_.v_handle);
      ICHECK(arr != nullptr && (arr->data != nullptr || arr->size == 0))
          << "ValueError: null byte array";
      return arr->size == 0 ? std::string() : std::string(arr->data, arr->size);
    }
    if (type_code_ == kTVMStr) {
      ICHECK(value_.v_str != nullptr) << "ValueError: null string";
      return std::string(value_.v_str);
    }
    ICHECK(IsObjectRef<tvm::runtime::String>())
        << "Could not convert TVM object of type " << ArgTypeCode2Str(type_code_)
        << " to a string.";
    return AsObjectRef<tvm::runtime::String>().operator std::string();
  }
  inline operator PackedFunc() const;
  template <typename FType>
  operator TypedPackedFunc<FType>() const {
    return TypedPackedFunc<FType>(operator PackedFunc());
  }
  const TVMValue& value() const { return value_; }

  template <typename T, typename = typename std::enable_if<std::is_class<T>::value>::type>
  inline operator T() const;
  inline operator DLDataType() const;
  inline operator DataType() const;
};

/*! \brief An argument that may be moved from (rvalue references of objects). */
class TVMMovableArgValue_ : public TVMPODValue_ {
 public:
  TVMMovableArgValue_(TVMValue value, int type_code) : TVMPODValue_(value, type_code) {}
  using TVMPODValue_::operator double;
  using TVMPODValue_::operator int64_t;
  using TVMPODValue_::operator uint64_t;
  using TVMPODValue_::operator int;
  using TVMPODValue_::operator bool;
  using TVMPODValue_::operator void*;
  using TVMPODValue_::operator DLTensor*;
  using TVMPODValue_::operator NDArray;
  using TVMPODValue_::operator Device;
  using TVMPODValue_::operator Module;
  operator std::string() const { return AsArgValue().operator std::string(); }
  operator PackedFunc() const { return AsArgValue().operator PackedFunc(); }
  template <typename FType>
  operator TypedPackedFunc<FType>() const {
    return TypedPackedFunc<FType>(operator PackedFunc());
  }
  operator DLDataType() const { return AsArgValue().operator DLDataType(); }
  operator DataType() const { return AsArgValue().operator DataType(); }
  operator TVMArgValue() const { return AsArgValue(); }
  template <typename T,
            typename = typename std::enable_if<std::is_base_of<ObjectRef, T>::value>::type>
  inline operator T() const;

 private:
  TVMArgValue AsArgValue() const { return TVMArgValue(value_, type_code_); }
};

/*! \brief An argument with its position and function name, for error messages. */
class TVMMovableArgValueWithContext_ {
 public:
  TVMMovableArgValueWithContext_(TVMValue value, int type_code, int arg_index,
                                 const std::string* optional_name)
      : value_(value, type_code), arg_index_(arg_index), optional_name_(optional_name) {}
  template <typename T>
  operator T() const {
    try {
      return value_;  // implicit conversion happens here
    } catch (dmlc::Error& e) {
      LOG(FATAL) << "In function " << (optional_name_ == nullptr ? "<anonymous>" : *optional_name_)
                 << ": error while converting argument " << arg_index_ << ": " << e.what();
      throw;  // never reached: LOG(FATAL) throws
    }
  }

 private:
  TVMMovableArgValue_ value_;
  int arg_index_;
  const std::string* optional_name_;
};

/*! \brief A return value: owns what it holds (strings, functions, objects). */
class TVMRetValue : public TVMPODValue_ {
 public:
  TVMRetValue() { cxx_ = true; }
  TVMRetValue(TVMRetValue&& other) : TVMPODValue_(other.value_, other.type_code_, true) {
    other.value_.v_handle = nullptr;
    other.type_code_ = kTVMNullptr;
  }
  ~TVMRetValue() { this->Clear(); }
  using TVMPODValue_::operator double;
  using TVMPODValue_::operator int64_t;
  using TVMPODValue_::operator uint64_t;
  using TVMPODValue_::operator int;
  using TVMPODValue_::operator bool;
  using TVMPODValue_::operator void*;
  using TVMPODValue_::operator DLTensor*;
  using TVMPODValue_::operator Device;
  using TVMPODValue_::operator NDArray;
  using TVMPODValue_::operator Module;
  using TVMPODValue_::AsObjectRef;
  using TVMPODValue_::IsObjectRef;

  TVMRetValue(const TVMRetValue& other) : TVMPODValue_() {
    cxx_ = true;
    this->Assign(other);
  }
  operator std::string() const {
    if (type_code_ == kTVMDataType) return DLDataType2String(operator DLDataType());
    if (type_code_ == kTVMBytes || type_code_ == kTVMStr) return *ptr<std::string>();
    if (type_code_ == kTVMObjectHandle && IsObjectRef<tvm::runtime::String>()) {
      return AsObjectRef<tvm::runtime::String>().operator std::string();
    }
    TVM_CHECK_TYPE_CODE(type_code_, kTVMStr);
    return *ptr<std::string>();
  }
  operator DLDataType() const {
    if (type_code_ == kTVMStr) return String2DLDataType(operator std::string());
    TVM_CHECK_TYPE_CODE(type_code_, kTVMDataType);
    return value_.v_type;
  }
  operator DataType() const { return DataType(operator DLDataType()); }
  operator PackedFunc() const {
    if (type_code_ == kTVMNullptr) return PackedFunc();
    TVM_CHECK_TYPE_CODE(type_code_, kTVMPackedFuncHandle);
    return *ptr<PackedFunc>();
  }
  template <typename FType>
  operator TypedPackedFunc<FType>() const {
    return TypedPackedFunc<FType>(operator PackedFunc());
  }

  TVMRetValue& operator=(TVMRetValue&& other) {
    this->Clear();
    value_ = other.value_;
    type_code_ = other.type_code_;
    other.type_code_ = kTVMNullptr;
    return *this;
  }
  TVMRetValue& operator=(double value) {
    this->SwitchToPOD(kDLFloat);
    value_.v_float64 = value;
    return *this;
  }
  TVMRetValue& operator=(std::nullptr_t value) {
    this->SwitchToPOD(kTVMNullptr);
    value_.v_handle = value;
    return *this;
  }
  TVMRetValue& operator=(void* value) {
    this->SwitchToPOD(kTVMOpaqueHandle);
    value_.v_handle = value;
    return *this;
  }
  TVMRetValue& operator=(int64_t value) {
    this->SwitchToPOD(kDLInt);
    value_.v_int64 = value;
    return *this;
  }
  TVMRetValue& operator=(int value) {
    this->SwitchToPOD(kDLInt);
    value_.v_int64 = value;
    return *this;
  }
  TVMRetValue& operator=(DLDevice value) {
    this->SwitchToPOD(kDLDevice);
    value_.v_device = value;
    return *this;
  }
  TVMRetValue& operator=(DLDataType t) {
    this->SwitchToPOD(kTVMDataType);
    value_.v_type = t;
    return *this;
  }
  TVMRetValue& operator=(const DataType& other) { return operator=(other.operator DLDataType()); }
  TVMRetValue& operator=(bool value) {
    this->SwitchToPOD(kDLInt);
    value_.v_int64 = value;
    return *this;
  }
  TVMRetValue& operator=(std::string value) {
    this->SwitchToClass(kTVMStr, std::move(value));
    return *this;
  }
  TVMRetValue& operator=(TVMByteArray value) {
    this->SwitchToClass(kTVMBytes, std::string(value.data, value.size));
    return *this;
  }
  TVMRetValue& operator=(NDArray other) {
    if (other.defined()) {
      this->Clear();
      type_code_ = kTVMNDArrayHandle;
      value_.v_handle = NDArray::FFIGetHandle(other);
      ObjectRef::FFIClearAfterMove(&other);
    } else {
      SwitchToPOD(kTVMNullptr);
    }
    return *this;
  }
  TVMRetValue& operator=(Module m) {
    SwitchToObject(kTVMModuleHandle, std::move(m));
    return *this;
  }
  TVMRetValue& operator=(PackedFunc f) {
    if (f == nullptr) {
      this->SwitchToPOD(kTVMNullptr);
    } else {
      this->SwitchToClass(kTVMPackedFuncHandle, std::move(f));
    }
    return *this;
  }
  template <typename FType>
  TVMRetValue& operator=(const TypedPackedFunc<FType>& f) {
    return operator=(f.packed());
  }
  TVMRetValue& operator=(const TVMRetValue& other) {  // NOLINT(*)
    this->Assign(other);
    return *this;
  }
  TVMRetValue& operator=(const TVMArgValue& other) {
    this->AssignArg(other, false);
    return *this;
  }
  TVMRetValue& operator=(TVMMovableArgValue_&& other) {
    this->AssignArg(other, true);
    return *this;
  }
  /*!
   * \brief Moves the value out in the C API's encoding, ownership included (objects, modules,
   * arrays and functions as owned runtime handles). Strings and bytes cannot be moved out.
   */
  inline void MoveToCHost(TVMValue* ret_value, int* ret_type_code);
  /*! \brief Takes over a value in the C API's encoding (owned handles). */
  inline static TVMRetValue MoveFromCHost(TVMValue value, int type_code);
  const TVMValue& value() const {
    ICHECK(type_code_ != kTVMObjectHandle && type_code_ != kTVMPackedFuncHandle &&
           type_code_ != kTVMModuleHandle && type_code_ != kTVMStr)
        << "TVMRetValue.value can only be used for POD data";
    return value_;
  }
  template <typename TObjectRef,
            typename = typename std::enable_if<std::is_base_of<ObjectRef, TObjectRef>::value>::type>
  inline TVMRetValue& operator=(TObjectRef other);
  template <typename T, typename = typename std::enable_if<std::is_class<T>::value>::type>
  inline operator T() const;

 private:
  friend class detail::FuncBridge;
  void Assign(const TVMRetValue& other) {
    switch (other.type_code()) {
      case kTVMStr:
      case kTVMBytes:
        SwitchToClass<std::string>(other.type_code(), *other.ptr<std::string>());
        break;
      case kTVMPackedFuncHandle:
        SwitchToClass<PackedFunc>(kTVMPackedFuncHandle, *other.ptr<PackedFunc>());
        break;
      case kTVMModuleHandle:
      case kTVMObjectHandle:
        SwitchToObject(other.type_code(),
                       ObjectRef(detail::ObjectUnsafe::FromBorrowed(other.ptr<Object>())));
        break;
      case kTVMNDArrayHandle:
        operator=(NDArray(NDArray::FFIDataFromHandle(other.ptr<DLTensor>())));
        break;
      default:
        SwitchToPOD(other.type_code());
        value_ = other.value_;
        break;
    }
  }
  // From an argument (the C API's encoding); `move` takes rvalue references over.
  inline void AssignArg(const TVMPODValue_& other, bool move);
  void SwitchToPOD(int type_code) {
    if (type_code_ != type_code) {
      this->Clear();
      type_code_ = type_code;
    }
  }
  template <typename T>
  void SwitchToClass(int type_code, T v) {
    if (type_code_ != type_code) {
      this->Clear();
      type_code_ = type_code;
      value_.v_handle = new T(std::move(v));
    } else {
      *static_cast<T*>(value_.v_handle) = std::move(v);
    }
  }
  void SwitchToObject(int type_code, ObjectRef other) {
    if (other.defined()) {
      this->Clear();
      type_code_ = type_code;
      value_.v_handle = detail::ObjectUnsafe::Release(&other);
    } else {
      SwitchToPOD(kTVMNullptr);
    }
  }
  void Clear() {
    if (type_code_ == kTVMNullptr) return;
    switch (type_code_) {
      case kTVMStr:
      case kTVMBytes:
        delete ptr<std::string>();
        break;
      case kTVMPackedFuncHandle:
        delete ptr<PackedFunc>();
        break;
      case kTVMNDArrayHandle:
        NDArray::FFIDecRef(static_cast<TVMArrayHandle>(value_.v_handle));
        break;
      case kTVMModuleHandle:
      case kTVMObjectHandle:
        detail::ObjectUnsafe::DecRef(static_cast<Object*>(value_.v_handle));
        break;
      default:
        break;
    }
    type_code_ = kTVMNullptr;
  }
};

/*! \brief How a TVMArgValue / TVMRetValue becomes an ObjectRef type (specializable). */
template <typename TObjectRef>
struct PackedFuncValueConverter {
  static TObjectRef From(const TVMArgValue& val) { return val.AsObjectRef<TObjectRef>(); }
  static TObjectRef From(const TVMRetValue& val) { return val.AsObjectRef<TObjectRef>(); }
};

namespace detail {
/*! \brief Sets TVMGetLastError() from a C++ exception and returns the C status. */
inline int SetLastErrorFromException() {
  try {
    throw;
  } catch (const EnvErrorAlreadySet&) {
    return -2;
  } catch (const std::exception& e) {
    TVMAPISetLastError(NormalizeError(e.what()).c_str());
  } catch (...) {
    TVMAPISetLastError("TVMError: unknown C++ exception");
  }
  return -1;
}
}  // namespace detail

/*! \brief Exports a PackedFunc body as a C function of TVM's backend convention. */
#define TVM_DLL_EXPORT_PACKED_FUNC(ExportName, Function)                                    \
  extern "C" {                                                                              \
  TVM_DLL int ExportName(TVMValue* args, int* type_code, int num_args, TVMValue* out_value, \
                         int* out_type_code, void* resource_handle);                        \
  int ExportName(TVMValue* args, int* type_code, int num_args, TVMValue* out_value,         \
                 int* out_type_code, void* resource_handle) {                               \
    (void)resource_handle;                                                                  \
    try {                                                                                   \
      ::tvm::runtime::TVMRetValue rv;                                                       \
      Function(::tvm::runtime::TVMArgs(args, type_code, num_args), &rv);                    \
      rv.MoveToCHost(out_value, out_type_code);                                             \
      return 0;                                                                             \
    } catch (...) {                                                                         \
      return ::tvm::runtime::detail::SetLastErrorFromException();                           \
    }                                                                                       \
  }                                                                                         \
  }

/*! \brief Exports a typed C++ function as a C function of TVM's backend convention. */
#define TVM_DLL_EXPORT_TYPED_FUNC(ExportName, Function)                                     \
  extern "C" {                                                                              \
  TVM_DLL int ExportName(TVMValue* args, int* type_code, int num_args, TVMValue* out_value, \
                         int* out_type_code, void* resource_handle) {                       \
    (void)resource_handle;                                                                  \
    try {                                                                                   \
      auto f = Function;                                                                    \
      using FType = ::tvm::runtime::detail::function_signature<decltype(f)>::FType;         \
      ::tvm::runtime::TVMRetValue rv;                                                       \
      ::tvm::runtime::detail::unpack_call_by_signature<FType>::run(                         \
          f, ::tvm::runtime::TVMArgs(args, type_code, num_args), &rv);                      \
      rv.MoveToCHost(out_value, out_type_code);                                             \
      return 0;                                                                             \
    } catch (...) {                                                                         \
      return ::tvm::runtime::detail::SetLastErrorFromException();                           \
    }                                                                                       \
  }                                                                                         \
  }

inline TVMArgValue TVMArgs::operator[](int i) const {
  ICHECK_LT(i, num_args) << "not enough argument passed, " << num_args << " passed"
                         << " but request arg[" << i << "].";
  return TVMArgValue(values[i], type_codes[i]);
}

inline int TVMArgs::size() const { return num_args; }

inline const char* ArgTypeCode2Str(int type_code) {
  switch (type_code) {
    case kDLInt:
      return "int";
    case kDLUInt:
      return "uint";
    case kDLFloat:
      return "float";
    case kTVMStr:
      return "str";
    case kTVMBytes:
      return "bytes";
    case kTVMOpaqueHandle:
      return "handle";
    case kTVMNullptr:
      return "NULL";
    case kTVMDLTensorHandle:
      return "ArrayHandle";
    case kTVMDataType:
      return "DLDataType";
    case kDLDevice:
      return "DLDevice";
    case kTVMPackedFuncHandle:
      return "FunctionHandle";
    case kTVMModuleHandle:
      return "ModuleHandle";
    case kTVMNDArrayHandle:
      return "NDArrayContainer";
    case kTVMObjectHandle:
      return "Object";
    case kTVMObjectRValueRefArg:
      return "ObjectRValueRefArg";
    case detail::kArgBoolCode:
      return "bool";
    default:
      // Not fatal (as in TVM): this text is written into other errors' messages.
      return type_code >= kTVMExtBegin && type_code < kTVMExtEnd ? "ext" : "unknown type code";
  }
}

namespace detail {

template <bool stop, std::size_t I, typename F>
struct for_each_dispatcher {
  template <typename T, typename... Args>
  static void run(const F& f, T&& value, Args&&... args) {  // NOLINT(*)
    f(I, std::forward<T>(value));
    for_each_dispatcher<sizeof...(Args) == 0, (I + 1), F>::run(f, std::forward<Args>(args)...);
  }
};

template <std::size_t I, typename F>
struct for_each_dispatcher<true, I, F> {
  static void run(const F&) {}  // NOLINT(*)
};

template <typename F, typename... Args>
inline void for_each(const F& f, Args&&... args) {  // NOLINT(*)
  for_each_dispatcher<sizeof...(Args) == 0, 0, F>::run(f, std::forward<Args>(args)...);
}

template <typename T>
struct func_signature_helper {
  using FType = void;
};

template <typename T, typename R, typename... Args>
struct func_signature_helper<R (T::*)(Args...)> {
  using FType = R(Args...);
  static_assert(!std::is_reference<R>::value, "TypedPackedFunc return reference");
};

template <typename T, typename R, typename... Args>
struct func_signature_helper<R (T::*)(Args...) const> {
  using FType = R(Args...);
  static_assert(!std::is_reference<R>::value, "TypedPackedFunc return reference");
};

template <typename T>
struct function_signature {
  using FType = typename func_signature_helper<decltype(&T::operator())>::FType;
};

template <typename R, typename... Args>
struct function_signature<R(Args...)> {
  using FType = R(Args...);
  static_assert(!std::is_reference<R>::value, "TypedPackedFunc return reference");
};

template <typename R, typename... Args>
struct function_signature<R (*)(Args...)> {
  using FType = R(Args...);
  static_assert(!std::is_reference<R>::value, "TypedPackedFunc return reference");
};

}  // namespace detail

/*! \brief Encodes C++ values as arguments (in the C API's encoding). */
class TVMArgsSetter {
 public:
  /*!
   * \brief A setter over caller arrays. A C++ ModuleNode argument that has no runtime module
   * yet gets one here that is never freed (the arrays give no place to keep it); calls through
   * PackedFunc::operator() keep and free it.
   */
  TVMArgsSetter(TVMValue* values, int* type_codes)
      : values_(values), type_codes_(type_codes), keep_(nullptr) {}
  TVMArgsSetter(TVMValue* values, int* type_codes, std::vector<ObjectRef>* keep)
      : values_(values), type_codes_(type_codes), keep_(keep) {}
  template <typename T, typename = typename std::enable_if<std::is_integral<T>::value>::type>
  TVM_ALWAYS_INLINE void operator()(size_t i, T value) const {
    values_[i].v_int64 = static_cast<int64_t>(value);
    type_codes_[i] = kDLInt;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, uint64_t value) const {
    values_[i].v_int64 = static_cast<int64_t>(value);
    ICHECK_LE(value, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    type_codes_[i] = kDLInt;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, double value) const {
    values_[i].v_float64 = value;
    type_codes_[i] = kDLFloat;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, std::nullptr_t value) const {
    values_[i].v_handle = value;
    type_codes_[i] = kTVMNullptr;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, const TVMArgValue& value) const {
    values_[i] = value.value_;
    type_codes_[i] = value.type_code_;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, void* value) const {
    values_[i].v_handle = value;
    type_codes_[i] = kTVMOpaqueHandle;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, DLTensor* value) const {
    values_[i].v_handle = value;
    type_codes_[i] = kTVMDLTensorHandle;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, Device value) const {
    values_[i].v_device = value;
    type_codes_[i] = kDLDevice;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, DLDataType value) const {
    values_[i].v_type = value;
    type_codes_[i] = kTVMDataType;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, DataType dtype) const {
    operator()(i, dtype.operator DLDataType());
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, const char* value) const {
    values_[i].v_str = value;
    type_codes_[i] = kTVMStr;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, const std::string& value) const {
    values_[i].v_str = value.c_str();
    type_codes_[i] = kTVMStr;
  }
  TVM_ALWAYS_INLINE void operator()(size_t i, const TVMByteArray& value) const {
    values_[i].v_handle = const_cast<TVMByteArray*>(&value);
    type_codes_[i] = kTVMBytes;
  }
  inline void operator()(size_t i, const PackedFunc& value) const;
  template <typename FType>
  TVM_ALWAYS_INLINE void operator()(size_t i, const TypedPackedFunc<FType>& value) const {
    operator()(i, value.packed());
  }
  inline void operator()(size_t i, const TVMRetValue& value) const;
  template <typename TObjectRef,
            typename = typename std::enable_if<std::is_base_of<ObjectRef, TObjectRef>::value>::type>
  TVM_ALWAYS_INLINE void operator()(size_t i, const TObjectRef& value) const {
    this->SetObject(i, value, false);
  }
  template <typename TObjectRef,
            typename = typename std::enable_if<std::is_base_of<
                ObjectRef, typename std::remove_reference<TObjectRef>::type>::value>::type>
  TVM_ALWAYS_INLINE void operator()(size_t i, TObjectRef&& value) const {
    this->SetObject(i, value, std::is_rvalue_reference<decltype(value)>::value);
  }

 private:
  inline void SetObject(size_t i, const ObjectRef& value, bool rvalue) const;
  TVMValue* values_;
  int* type_codes_;
  std::vector<ObjectRef>* keep_;
};

}  // namespace runtime
}  // namespace tvm

#include <tvm/runtime/detail/bridge.h>          // NOLINT(*): the C boundary
#include <tvm/runtime/detail/packed_func_inl.h>  // NOLINT(*): the inline bodies

#endif  // TVM_RUNTIME_PACKED_FUNC_H_
