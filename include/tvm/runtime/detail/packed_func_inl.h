/*
 * Internal to the header-only C++ API of tvm-runtime (part of tvm/runtime/packed_func.h): the
 * inline bodies of PackedFunc, the value conversions, TVMArgsSetter, typed functions, and of
 * Module / ModuleNode (declared in module.h).
 */
#ifndef TVM_RUNTIME_PACKED_FUNC_H_
#error "include <tvm/runtime/packed_func.h> instead"
#endif
#ifndef TVM_RUNTIME_DETAIL_PACKED_FUNC_INL_H_
#define TVM_RUNTIME_DETAIL_PACKED_FUNC_INL_H_

namespace tvm {
namespace runtime {

// ---------------------------------------------------------------------------------------------
// PackedFunc, values.
// ---------------------------------------------------------------------------------------------

inline PackedFunc::PackedFunc(FType body) {
  if (body) {
    state_ = std::make_shared<detail::PackedFuncState>();
    state_->body = std::move(body);
  }
}

template <typename... Args>
inline TVMRetValue PackedFunc::operator()(Args&&... args) const {
  const int kNumArgs = sizeof...(Args);
  const int kArraySize = kNumArgs > 0 ? kNumArgs : 1;
  TVMValue values[kArraySize];
  int type_codes[kArraySize];
  std::vector<ObjectRef> keep;
  TVMArgsSetter setter(values, type_codes, &keep);
  detail::for_each(setter, std::forward<Args>(args)...);
  TVMRetValue rv;
  CallPacked(TVMArgs(values, type_codes, kNumArgs), &rv);
  return rv;
}

inline void PackedFunc::CallPacked(TVMArgs args, TVMRetValue* rv) const {
  ICHECK(state_ != nullptr) << "calling a null PackedFunc";
  state_->body(args, rv);
}

inline PackedFunc::FType PackedFunc::body() const {
  return state_ == nullptr ? FType() : state_->body;
}

inline Object* TVMPODValue_::RawObject() const {
  switch (type_code_) {
    case kTVMObjectHandle:
    case kTVMModuleHandle:
      return static_cast<Object*>(value_.v_handle);
    case kTVMNDArrayHandle:
      return TVMArrayHandleToObjectHandle(static_cast<TVMArrayHandle>(value_.v_handle));
    case kTVMObjectRValueRefArg:
      return value_.v_handle == nullptr ? nullptr : *static_cast<Object**>(value_.v_handle);
    default:
      return nullptr;
  }
}

inline ObjectRef TVMPODValue_::ObjectOf() const {
  Object* p = RawObject();
  if (p == nullptr) return ObjectRef();
  if (cxx_) return ObjectRef(detail::ObjectUnsafe::FromBorrowed(p));
  return detail::ObjectFromRuntime(p);
}

inline TVMPODValue_::operator Module() const {
  if (type_code_ == kTVMNullptr) return Module(ObjectPtr<Object>(nullptr));
  TVM_CHECK_TYPE_CODE(type_code_, kTVMModuleHandle);
  ObjectRef obj = ObjectOf();
  return Module(detail::ObjectUnsafe::Data(obj));
}

template <typename TObjectRef, typename>
inline bool TVMPODValue_::IsObjectRef() const {
  using ContainerType = typename TObjectRef::ContainerType;
  if (std::is_base_of<NDArray::ContainerType, ContainerType>::value) {
    return type_code_ == kTVMNDArrayHandle &&
           TVMArrayHandleToObjectHandle(static_cast<TVMArrayHandle>(value_.v_handle))
               ->IsInstance<ContainerType>();
  }
  if (std::is_base_of<Module::ContainerType, ContainerType>::value) {
    return type_code_ == kTVMModuleHandle &&
           static_cast<Object*>(value_.v_handle)->IsInstance<ContainerType>();
  }
  if (type_code_ == kTVMObjectRValueRefArg) {
    return ObjectTypeChecker<TObjectRef>::Check(*static_cast<Object**>(value_.v_handle));
  }
  return (std::is_base_of<ContainerType, NDArray::ContainerType>::value &&
          type_code_ == kTVMNDArrayHandle) ||
         (std::is_base_of<ContainerType, Module::ContainerType>::value &&
          type_code_ == kTVMModuleHandle) ||
         (type_code_ == kTVMObjectHandle &&
          ObjectTypeChecker<TObjectRef>::Check(static_cast<Object*>(value_.v_handle)));
}

template <typename TObjectRef>
inline TObjectRef TVMPODValue_::AsObjectRef() const {
  static_assert(std::is_base_of<ObjectRef, TObjectRef>::value,
                "Conversion only works for ObjectRef");
  using ContainerType = typename TObjectRef::ContainerType;
  if (type_code_ == kTVMNullptr) {
    CHECK(TObjectRef::_type_is_nullable)
        << "Expect a not null value of " << ContainerType::_type_key;
    return TObjectRef(ObjectPtr<Object>(nullptr));
  }
  if (std::is_base_of<NDArray::ContainerType, ContainerType>::value) {
    TVM_CHECK_TYPE_CODE(type_code_, kTVMNDArrayHandle);
    ObjectPtr<Object> data =
        NDArray::FFIDataFromHandle(static_cast<TVMArrayHandle>(value_.v_handle));
    CHECK(data->IsInstance<ContainerType>())
        << "Expected " << ContainerType::_type_key << " but got " << data->GetTypeKey();
    return TObjectRef(data);
  }
  if (std::is_base_of<Module::ContainerType, ContainerType>::value) {
    TVM_CHECK_TYPE_CODE(type_code_, kTVMModuleHandle);
    ObjectRef obj = ObjectOf();
    CHECK(obj->IsInstance<ContainerType>())
        << "Expected " << ContainerType::_type_key << " but got " << obj->GetTypeKey();
    return TObjectRef(detail::ObjectUnsafe::Data(obj));
  }
  if (type_code_ == kTVMObjectHandle || type_code_ == kTVMObjectRValueRefArg) {
    Object* ptr = RawObject();
    Optional<String> checked_type = ObjectTypeChecker<TObjectRef>::CheckAndGetMismatch(ptr);
    ICHECK(!checked_type.defined()) << "Expected " << ObjectTypeChecker<TObjectRef>::TypeName()
                                    << ", but got " << checked_type.value();
    ObjectRef obj = ObjectOf();
    return TObjectRef(detail::ObjectUnsafe::Data(obj));
  }
  if (std::is_base_of<ContainerType, NDArray::ContainerType>::value &&
      type_code_ == kTVMNDArrayHandle) {
    return TObjectRef(NDArray::FFIDataFromHandle(static_cast<TVMArrayHandle>(value_.v_handle)));
  }
  if (std::is_base_of<ContainerType, Module::ContainerType>::value &&
      type_code_ == kTVMModuleHandle) {
    ObjectRef obj = ObjectOf();
    return TObjectRef(detail::ObjectUnsafe::Data(obj));
  }
  TVM_CHECK_TYPE_CODE(type_code_, kTVMObjectHandle);
  return TObjectRef(ObjectPtr<Object>(nullptr));
}

inline TVMArgValue::operator PackedFunc() const {
  if (type_code_ == kTVMNullptr) return PackedFunc();
  TVM_CHECK_TYPE_CODE(type_code_, kTVMPackedFuncHandle);
  return detail::FuncBridge::FromHandleBorrowed(value_.v_handle);
}

template <typename T, typename>
inline TVMArgValue::operator T() const {
  return PackedFuncValueConverter<T>::From(*this);
}

template <typename T, typename>
inline TVMMovableArgValue_::operator T() const {
  if (type_code_ == kTVMObjectRValueRefArg) {
    auto** ref = static_cast<Object**>(value_.v_handle);
    if (ObjectTypeChecker<T>::Check(*ref)) {
      if (*ref != nullptr && detail::ObjectUnsafe::TypeIndex(*ref) == TypeIndex::kRuntimeModule) {
        return PackedFuncValueConverter<T>::From(AsArgValue());
      }
      Object* p = *ref;
      *ref = nullptr;
      return T(detail::ObjectUnsafe::FromOwned(p));
    }
  }
  return PackedFuncValueConverter<T>::From(AsArgValue());
}

template <typename T, typename>
inline TVMRetValue::operator T() const {
  return PackedFuncValueConverter<T>::From(*this);
}

inline void TVMRetValue::AssignArg(const TVMPODValue_& other, bool move) {
  switch (other.type_code()) {
    case kTVMStr:
    case kTVMBytes:
      SwitchToClass<std::string>(other.type_code(),
                                 TVMArgValue(other.value_, other.type_code_).operator std::string());
      break;
    case kTVMPackedFuncHandle:
      SwitchToClass<PackedFunc>(kTVMPackedFuncHandle,
                                detail::FuncBridge::FromHandleBorrowed(other.value_.v_handle));
      break;
    case kTVMNDArrayHandle:
      operator=(NDArray(NDArray::FFIDataFromHandle(other.ptr<DLTensor>())));
      break;
    case kTVMModuleHandle:
    case kTVMObjectHandle:
    case kTVMObjectRValueRefArg: {
      ObjectRef obj;
      if (move && other.type_code() == kTVMObjectRValueRefArg && other.value_.v_handle != nullptr &&
          *other.ptr<Object*>() != nullptr &&
          detail::ObjectUnsafe::TypeIndex(*other.ptr<Object*>()) != TypeIndex::kRuntimeModule) {
        Object** slot = other.ptr<Object*>();
        obj = ObjectRef(detail::ObjectUnsafe::FromOwned(*slot));
        *slot = nullptr;
      } else {
        obj = other.ObjectOf();
      }
      operator=(std::move(obj));
      break;
    }
    default:
      SwitchToPOD(other.type_code());
      value_ = other.value_;
      break;
  }
}

inline void TVMRetValue::MoveToCHost(TVMValue* ret_value, int* ret_type_code) {
  ICHECK(type_code_ != kTVMStr && type_code_ != kTVMBytes)
      << "strings and bytes cannot be moved to C";
  switch (type_code_) {
    case kTVMPackedFuncHandle:
      ret_value->v_handle = detail::FuncBridge::NewHandle(*ptr<PackedFunc>());
      *ret_type_code = kTVMPackedFuncHandle;
      Clear();
      return;
    case kTVMModuleHandle: {
      std::vector<ObjectRef> keep;
      TVMModuleHandle h =
          detail::ModuleBridge::ToRuntime(static_cast<ModuleNode*>(ptr<Object>()), &keep);
      detail::CheckCall(TVMObjectRetain(h));
      ret_value->v_handle = h;
      *ret_type_code = kTVMModuleHandle;
      Clear();
      return;
    }
    default:
      // Objects and NDArrays: the reference moves with the pointer.
      *ret_value = value_;
      *ret_type_code = type_code_;
      type_code_ = kTVMNullptr;
      return;
  }
}

inline TVMRetValue TVMRetValue::MoveFromCHost(TVMValue value, int type_code) {
  ICHECK(type_code <= kTVMPackedFuncHandle || type_code == kTVMNDArrayHandle);
  detail::RawRet r;
  r.value = value;
  r.code = type_code;
  TVMRetValue ret;
  detail::FuncBridge::TakeReturn(&r, &ret);
  return ret;
}

template <typename TObjectRef, typename>
inline TVMRetValue& TVMRetValue::operator=(TObjectRef other) {
  using ContainerType = typename TObjectRef::ContainerType;
  const Object* ptr = other.get();
  if (ptr != nullptr) {
    if (std::is_base_of<NDArray::ContainerType, ContainerType>::value ||
        (std::is_base_of<ContainerType, NDArray::ContainerType>::value &&
         ptr->IsInstance<NDArray::ContainerType>())) {
      return operator=(NDArray(detail::ObjectUnsafe::Data(other)));
    }
    if (std::is_base_of<Module::ContainerType, ContainerType>::value ||
        (std::is_base_of<ContainerType, Module::ContainerType>::value &&
         ptr->IsInstance<Module::ContainerType>())) {
      SwitchToObject(kTVMModuleHandle, std::move(other));
      return *this;
    }
    SwitchToObject(kTVMObjectHandle, std::move(other));
  } else {
    SwitchToPOD(kTVMNullptr);
  }
  return *this;
}

inline void TVMArgsSetter::operator()(size_t i, const PackedFunc& value) const {
  if (value != nullptr) {
    values_[i].v_handle = detail::FuncBridge::Handle(value);
    type_codes_[i] = kTVMPackedFuncHandle;
  } else {
    values_[i].v_handle = nullptr;
    type_codes_[i] = kTVMNullptr;
  }
}

inline void TVMArgsSetter::operator()(size_t i, const TVMRetValue& value) const {
  detail::FuncBridge::Encode(value, &values_[i], &type_codes_[i], keep_, nullptr);
}

inline void TVMArgsSetter::SetObject(size_t i, const ObjectRef& value, bool rvalue) const {
  Object* p = detail::ObjectUnsafe::Raw(value);
  if (p != nullptr && rvalue && detail::ObjectUnsafe::TypeIndex(p) != TypeIndex::kRuntimeModule &&
      detail::ObjectUnsafe::TypeIndex(p) != TypeIndex::kRuntimeNDArray) {
    values_[i].v_handle = detail::ObjectUnsafe::Slot(const_cast<ObjectRef*>(&value));
    type_codes_[i] = kTVMObjectRValueRefArg;
    return;
  }
  detail::ObjectToRuntime(value, &values_[i], &type_codes_[i], keep_);
}

template <>
struct PackedFuncValueConverter<::tvm::runtime::String> {
  static String From(const TVMArgValue& val) {
    if (val.IsObjectRef<tvm::runtime::String>()) return val.AsObjectRef<tvm::runtime::String>();
    return tvm::runtime::String(val.operator std::string());
  }
  static String From(const TVMRetValue& val) {
    if (val.IsObjectRef<tvm::runtime::String>()) return val.AsObjectRef<tvm::runtime::String>();
    return tvm::runtime::String(val.operator std::string());
  }
};

template <typename T>
struct PackedFuncValueConverter<Optional<T>> {
  static Optional<T> From(const TVMArgValue& val) {
    if (val.type_code() == kTVMNullptr) return Optional<T>(nullptr);
    return PackedFuncValueConverter<T>::From(val);
  }
  static Optional<T> From(const TVMRetValue& val) {
    if (val.type_code() == kTVMNullptr) return Optional<T>(nullptr);
    return PackedFuncValueConverter<T>::From(val);
  }
};

inline bool String::CanConvertFrom(const TVMArgValue& val) {
  return val.type_code() == kTVMStr || val.IsObjectRef<tvm::runtime::String>();
}

inline TVMArgValue::operator DLDataType() const {
  if (String::CanConvertFrom(*this)) {
    return String2DLDataType(PackedFuncValueConverter<String>::From(*this).operator std::string());
  }
  if (type_code_ == kTVMNullptr) {
    DLDataType t;
    t.code = kTVMOpaqueHandle;
    t.bits = 0;
    t.lanes = 0;
    return t;
  }
  TVM_CHECK_TYPE_CODE(type_code_, kTVMDataType);
  return value_.v_type;
}

inline TVMArgValue::operator DataType() const { return DataType(operator DLDataType()); }

// ---------------------------------------------------------------------------------------------
// Typed functions.
// ---------------------------------------------------------------------------------------------
namespace detail {

template <typename R, int nleft, int index, typename F>
struct unpack_call_dispatcher {
  template <typename... Args>
  TVM_ALWAYS_INLINE static void run(const std::string* optional_name, const F& f,
                                    const TVMArgs& args_pack, TVMRetValue* rv,
                                    Args&&... unpacked_args) {
    unpack_call_dispatcher<R, nleft - 1, index + 1, F>::run(
        optional_name, f, args_pack, rv, std::forward<Args>(unpacked_args)...,
        TVMMovableArgValueWithContext_(args_pack.values[index], args_pack.type_codes[index], index,
                                       optional_name));
  }
};

template <typename R, int index, typename F>
struct unpack_call_dispatcher<R, 0, index, F> {
  template <typename... Args>
  TVM_ALWAYS_INLINE static void run(const std::string*, const F& f, const TVMArgs&,
                                    TVMRetValue* rv, Args&&... unpacked_args) {
    using RetType = decltype(f(std::forward<Args>(unpacked_args)...));
    if (std::is_same<RetType, R>::value) {
      *rv = f(std::forward<Args>(unpacked_args)...);
    } else {
      *rv = R(f(std::forward<Args>(unpacked_args)...));
    }
  }
};

template <int index, typename F>
struct unpack_call_dispatcher<void, 0, index, F> {
  template <typename... Args>
  TVM_ALWAYS_INLINE static void run(const std::string*, const F& f, const TVMArgs&, TVMRetValue*,
                                    Args&&... unpacked_args) {
    f(std::forward<Args>(unpacked_args)...);
  }
};

template <typename R, int nargs, typename F>
TVM_ALWAYS_INLINE void unpack_call(const std::string* optional_name, const F& f,
                                   const TVMArgs& args, TVMRetValue* rv) {
  CHECK_EQ(nargs, args.size()) << "Function "
                               << (optional_name == nullptr ? "<anonymous>" : *optional_name)
                               << " expects " << nargs << " arguments but " << args.size()
                               << " were provided";
  unpack_call_dispatcher<R, nargs, 0, F>::run(optional_name, f, args, rv);
}

template <typename FType>
struct unpack_call_by_signature {};

template <typename R, typename... Args>
struct unpack_call_by_signature<R(Args...)> {
  template <typename F>
  TVM_ALWAYS_INLINE static void run(const F& f, const TVMArgs& args, TVMRetValue* rv) {
    unpack_call<R, sizeof...(Args)>(nullptr, f, args, rv);
  }
};

template <typename R, typename... Args>
TVM_ALWAYS_INLINE R call_packed(const PackedFunc& pf, Args&&... args) {
  return R(pf(std::forward<Args>(args)...));
}

template <typename R>
struct typed_packed_call_dispatcher {
  template <typename... Args>
  TVM_ALWAYS_INLINE static R run(const PackedFunc& pf, Args&&... args) {
    return pf(std::forward<Args>(args)...);
  }
};

template <>
struct typed_packed_call_dispatcher<void> {
  template <typename... Args>
  TVM_ALWAYS_INLINE static void run(const PackedFunc& pf, Args&&... args) {
    pf(std::forward<Args>(args)...);
  }
};

}  // namespace detail

template <typename R, typename... Args>
TypedPackedFunc<R(Args...)>::TypedPackedFunc(PackedFunc packed) : packed_(packed) {}

template <typename R, typename... Args>
TypedPackedFunc<R(Args...)>::TypedPackedFunc(const TVMRetValue& value)
    : packed_(value.operator PackedFunc()) {}

template <typename R, typename... Args>
TypedPackedFunc<R(Args...)>::TypedPackedFunc(const TVMArgValue& value)
    : packed_(value.operator PackedFunc()) {}

template <typename R, typename... Args>
TypedPackedFunc<R(Args...)>::TypedPackedFunc(TVMMovableArgValueWithContext_&& value)
    : packed_(value.operator PackedFunc()) {}

template <typename R, typename... Args>
template <typename FType>
inline void TypedPackedFunc<R(Args...)>::AssignTypedLambda(FType flambda, std::string name) {
  packed_ = PackedFunc([flambda, name](const TVMArgs& args, TVMRetValue* rv) {
    if (args.size() != sizeof...(Args)) {
      LOG(FATAL) << "Function " << name << " expects " << sizeof...(Args) << " arguments, but "
                 << args.size() << " were provided.";
    }
    detail::unpack_call<R, sizeof...(Args)>(&name, flambda, args, rv);
  });
}

template <typename R, typename... Args>
template <typename FType>
inline void TypedPackedFunc<R(Args...)>::AssignTypedLambda(FType flambda) {
  packed_ = PackedFunc([flambda](const TVMArgs& args, TVMRetValue* rv) {
    if (args.size() != sizeof...(Args)) {
      LOG(FATAL) << "Function <anonymous> expects " << sizeof...(Args) << " arguments, but "
                 << args.size() << " were provided.";
    }
    detail::unpack_call<R, sizeof...(Args)>(nullptr, flambda, args, rv);
  });
}

template <typename R, typename... Args>
TVM_ALWAYS_INLINE R TypedPackedFunc<R(Args...)>::operator()(Args... args) const {
  return detail::typed_packed_call_dispatcher<R>::run(packed_, std::forward<Args>(args)...);
}

// ---------------------------------------------------------------------------------------------
// Module and ModuleNode (declared in module.h).
// ---------------------------------------------------------------------------------------------

inline PackedFunc Module::GetFunction(const std::string& name, bool query_imports) {
  return (*this)->GetFunction(name, query_imports);
}

inline void Module::Import(Module other) { return (*this)->Import(other); }

inline Module Module::LoadFromFile(const std::string& file_name, const std::string& format) {
  TVMModuleHandle h = nullptr;
  detail::CheckCall(TVMModLoadFromFile(file_name.c_str(), format.c_str(), &h));
  return Module(detail::ModuleBridge::FromRuntime(static_cast<Object*>(h), true));
}

inline void ModuleNode::SaveToFile(const std::string& /*file_name*/,
                                   const std::string& /*format*/) {
  LOG(FATAL) << "Module[" << type_key() << "] does not support SaveToFile";
}

inline void ModuleNode::SaveToBinary(dmlc::Stream* /*stream*/) {
  LOG(FATAL) << "Module[" << type_key() << "] does not support SaveToBinary";
}

inline std::string ModuleNode::GetSource(const std::string& /*format*/) {
  LOG(FATAL) << "Module[" << type_key() << "] does not support GetSource";
  return "";
}

inline PackedFunc ModuleNode::GetFunction(const std::string& name, bool query_imports) {
  if (rt_handle_ != nullptr) {
    return static_cast<detail::RuntimeModuleNode*>(this)->Lookup(name, query_imports);
  }
  PackedFunc pf = this->GetFunction(name, GetObjectPtr<Object>(this));
  if (pf != nullptr) return pf;
  if (query_imports) {
    for (Module& m : imports_) {
      pf = m.operator->()->GetFunction(name, true);
      if (pf != nullptr) return pf;
    }
  }
  return pf;
}

inline void ModuleNode::Import(Module other) {
  ICHECK(other.defined()) << "cannot import a null module";
  if (rt_handle_ != nullptr) {
    std::vector<ObjectRef> keep;
    TVMModuleHandle dep = detail::ModuleBridge::ToRuntime(other.operator->(), &keep);
    detail::CheckCall(TVMModImport(rt_handle_, dep));
    return;
  }
  // Cycle check: this module must not be reachable from `other`.
  std::vector<const ModuleNode*> stack{other.operator->()};
  while (!stack.empty()) {
    const ModuleNode* n = stack.back();
    stack.pop_back();
    ICHECK(n != this) << "Cyclic dependency detected during import";
    for (const Module& m : n->imports()) stack.push_back(m.operator->());
  }
  std::lock_guard<std::mutex> lock(detail::ModuleBridge::ImportsLock());
  imports_.emplace_back(std::move(other));
}

inline const std::vector<Module>& ModuleNode::imports() const {
  if (rt_handle_ != nullptr) {
    // Imports of a module of the runtime only grow: fetch the new ones.
    TVMValue v;
    int c = kTVMModuleHandle;
    v.v_handle = rt_handle_;
    detail::RawRet r;
    detail::CallRaw(TVM_RT_GLOBAL("runtime.ModuleImportsSize"), &v, &c, 1, &r);
    size_t n = static_cast<size_t>(detail::RetInt(r, "runtime.ModuleImportsSize"));
    auto* self = const_cast<ModuleNode*>(this);
    size_t have = 0;
    {
      std::lock_guard<std::mutex> lock(detail::ModuleBridge::ImportsLock());
      have = self->imports_.size();
    }
    // Fetched without the lock (the runtime is called), appended with it.
    std::vector<Module> fresh;
    for (size_t i = have; i < n; ++i) {
      TVMValue a[2];
      int ac[2] = {kTVMModuleHandle, kDLInt};
      a[0].v_handle = rt_handle_;
      a[1].v_int64 = static_cast<int64_t>(i);
      detail::RawRet m;
      detail::CallRaw(TVM_RT_GLOBAL("runtime.ModuleGetImport"), a, ac, 2, &m);
      ICHECK_EQ(m.code, kTVMModuleHandle) << "runtime.ModuleGetImport returned no module";
      m.Forget();
      fresh.emplace_back(
          detail::ModuleBridge::FromRuntime(static_cast<Object*>(m.value.v_handle), true));
    }
    std::lock_guard<std::mutex> lock(detail::ModuleBridge::ImportsLock());
    for (size_t i = self->imports_.size(); i < n && i >= have && i - have < fresh.size(); ++i) {
      self->imports_.push_back(fresh[i - have]);
    }
  }
  return imports_;
}

inline const PackedFunc* ModuleNode::GetFuncFromEnv(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(detail::ModuleBridge::ImportsLock());
    auto it = import_cache_.find(name);
    if (it != import_cache_.end()) return it->second.get();
  }
  PackedFunc pf;
  for (const Module& m : this->imports()) {
    pf = const_cast<ModuleNode*>(m.operator->())->GetFunction(name, true);
    if (pf != nullptr) break;
  }
  if (pf == nullptr) {
    TVMFunctionHandle h = detail::LookupGlobal(name.c_str());
    ICHECK(h != nullptr) << "Cannot find function " << name
                         << " in the imported modules or global registry";
    pf = detail::FuncBridge::FromHandleOwned(h);
  }
  std::lock_guard<std::mutex> lock(detail::ModuleBridge::ImportsLock());
  auto& slot = import_cache_[name];
  if (slot == nullptr) slot = std::make_shared<PackedFunc>(std::move(pf));
  return slot.get();
}

inline bool RuntimeEnabled(const std::string& target) {
  TVMValue v;
  int c = kTVMStr;
  v.v_str = target.c_str();
  detail::RawRet r;
  detail::CallRaw(TVM_RT_GLOBAL("runtime.RuntimeEnabled"), &v, &c, 1, &r);
  return detail::RetInt(r, "runtime.RuntimeEnabled") != 0;
}

}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_DETAIL_PACKED_FUNC_INL_H_
