/*
 * Internal to the header-only C++ API of tvm-runtime (part of tvm/runtime/packed_func.h): the
 * C boundary. PackedFuncs to and from runtime function handles (a C++ body becomes a runtime
 * function once, through TVMFuncCreateFromCFunc; its exceptions become the C status and
 * TVMGetLastError()), return values to and from the C API's encoding, and modules (see
 * module.h): proxies of the runtime's modules, and runtime modules made for C++ ModuleNodes
 * through runtime.ModuleFromPackedFunc.
 */
#ifndef TVM_RUNTIME_PACKED_FUNC_H_
#error "include <tvm/runtime/packed_func.h> instead"
#endif
#ifndef TVM_RUNTIME_DETAIL_BRIDGE_H_
#define TVM_RUNTIME_DETAIL_BRIDGE_H_

namespace tvm {
namespace runtime {

// ---------------------------------------------------------------------------------------------
// The C boundary: functions, modules, values.
// ---------------------------------------------------------------------------------------------
namespace detail {

/*! \brief A runtime function handle owned by C++ (freed with the last reference). */
struct FuncHandle {
  TVMFunctionHandle handle;
  explicit FuncHandle(TVMFunctionHandle h) : handle(h) {}
  FuncHandle(const FuncHandle&) = delete;
  FuncHandle& operator=(const FuncHandle&) = delete;
  ~FuncHandle() {
    if (handle != nullptr) TVMFuncFree(handle);
  }
};

/*! \brief What a PackedFunc shares: its body, and its runtime function once it has one. */
struct PackedFuncState {
  PackedFunc::FType body;
  std::mutex mu;
  std::shared_ptr<FuncHandle> handle;  // guarded by mu
};

/*! \brief Moving PackedFuncs, return values and modules across the C API. */
class FuncBridge {
 public:
  /*! \brief A PackedFunc over a runtime function handle it takes over. */
  static PackedFunc FromHandleOwned(TVMFunctionHandle h) {
    if (h == nullptr) return PackedFunc();
    auto fh = std::make_shared<FuncHandle>(h);
    PackedFunc f;
    f.state_ = std::make_shared<PackedFuncState>();
    f.state_->handle = fh;
    f.state_->body = [fh](TVMArgs args, TVMRetValue* rv) {
      TVMValue ret_value;
      int ret_code = kTVMNullptr;
      int rc = TVMFuncCall(fh->handle, const_cast<TVMValue*>(args.values),
                           const_cast<int*>(args.type_codes), args.num_args, &ret_value,
                           &ret_code);
      if (rc != 0) ThrowLastError(rc);
      RawRet r;
      r.value = ret_value;
      r.code = ret_code;
      TakeReturn(&r, rv);
    };
    return f;
  }

  /*! \brief A PackedFunc over a borrowed runtime function handle (a new reference). */
  static PackedFunc FromHandleBorrowed(TVMFunctionHandle h) {
    if (h == nullptr) return PackedFunc();
    TVMValue v;
    v.v_handle = h;
    int c = kTVMPackedFuncHandle;
    CheckCall(TVMCbArgToReturn(&v, &c));  // a new handle of the same function
    return FromHandleOwned(v.v_handle);
  }

  /*! \brief The runtime function of f (made once for a C++ body); valid while f lives. */
  static TVMFunctionHandle Handle(const PackedFunc& f) {
    PackedFuncState* s = f.state_.get();
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->handle == nullptr) {
      TVMFunctionHandle h = nullptr;
      auto* resource = new PackedFunc::FType(s->body);
      int rc = TVMFuncCreateFromCFunc(Trampoline, resource, Deleter, &h);
      if (rc != 0) {
        delete resource;
        ThrowLastError(rc);
      }
      s->handle = std::make_shared<FuncHandle>(h);
    }
    return s->handle->handle;
  }

  /*! \brief A new owned runtime handle of f. */
  static TVMFunctionHandle NewHandle(const PackedFunc& f) {
    TVMValue v;
    v.v_handle = Handle(f);
    int c = kTVMPackedFuncHandle;
    CheckCall(TVMCbArgToReturn(&v, &c));
    return v.v_handle;
  }

  /*! \brief The C callback of C++ bodies (TVMPackedCFunc). */
  static int Trampoline(TVMValue* args, int* type_codes, int num_args, TVMRetValueHandle ret,
                        void* resource) {
    try {
      const auto* body = static_cast<const PackedFunc::FType*>(resource);
      TVMRetValue rv;
      (*body)(TVMArgs(args, type_codes, num_args), &rv);
      if (rv.type_code() != kTVMNullptr) {
        TVMValue v;
        int c;
        std::vector<ObjectRef> keep;
        TVMByteArray bytes;
        Encode(rv, &v, &c, &keep, &bytes);
        CheckCall(TVMCFuncSetReturn(ret, &v, &c, 1));  // copies (or retains) the value
      }
      return 0;
    } catch (...) {
      return SetLastErrorFromException();
    }
  }

  static void Deleter(void* resource) { delete static_cast<PackedFunc::FType*>(resource); }

  /*!
   * \brief A return value in the C API's encoding, borrowed from rv (and from *keep, for a
   * runtime module made for a C++ module; *bytes, for bytes).
   */
  static void Encode(const TVMRetValue& rv, TVMValue* v, int* c, std::vector<ObjectRef>* keep,
                     TVMByteArray* bytes) {
    switch (rv.type_code()) {
      case kTVMStr:
        v->v_str = rv.ptr<std::string>()->c_str();
        *c = kTVMStr;
        break;
      case kTVMBytes: {
        const std::string* s = rv.ptr<std::string>();
        ICHECK(bytes != nullptr) << "bytes return values cannot be passed as arguments";
        bytes->data = s->data();
        bytes->size = s->size();
        v->v_handle = bytes;
        *c = kTVMBytes;
        break;
      }
      case kTVMPackedFuncHandle:
        v->v_handle = Handle(*rv.ptr<PackedFunc>());
        *c = kTVMPackedFuncHandle;
        break;
      case kTVMModuleHandle:
      case kTVMObjectHandle:
        ObjectToRuntime(ObjectRef(ObjectUnsafe::FromBorrowed(rv.ptr<Object>())), v, c, keep);
        break;
      default:
        *v = rv.value_;
        *c = rv.type_code();
        break;
    }
  }

  /*! \brief Takes over a value TVMFuncCall returned (owned) into rv. */
  static void TakeReturn(RawRet* r, TVMRetValue* rv) {
    switch (r->code) {
      case kTVMStr:
        *rv = std::string(r->value.v_str != nullptr ? r->value.v_str : "");
        break;
      case kTVMBytes: {
        const TVMByteArray* arr = static_cast<const TVMByteArray*>(r->value.v_handle);
        TVMByteArray copy{"", 0};
        if (arr != nullptr && arr->data != nullptr) copy = *arr;
        *rv = copy;
        break;
      }
      case kTVMPackedFuncHandle: {
        TVMFunctionHandle h = r->value.v_handle;
        r->Forget();
        *rv = FromHandleOwned(h);
        break;
      }
      case kTVMObjectHandle:
      case kTVMModuleHandle: {
        Object* p = static_cast<Object*>(r->value.v_handle);
        r->Forget();
        ObjectRef obj = ObjectFromRuntimeOwned(p);
        int code = obj.defined() && ObjectUnsafe::TypeIndex(ObjectUnsafe::Raw(obj)) ==
                                        TypeIndex::kRuntimeModule
                       ? kTVMModuleHandle
                       : kTVMObjectHandle;
        rv->SwitchToObject(code, std::move(obj));
        break;
      }
      case kTVMNDArrayHandle: {
        TVMArrayHandle h = static_cast<TVMArrayHandle>(r->value.v_handle);
        r->Forget();
        *rv = NDArray(NDArray::Internal::FromFFIHandleOwned(h));
        break;
      }
      default:
        rv->SwitchToPOD(r->code);
        rv->value_ = r->value;
        r->Forget();
        break;
    }
  }
};

/*! \brief A module of the runtime seen from C++. */
class RuntimeModuleNode final : public ModuleNode {
 public:
  explicit RuntimeModuleNode(TVMModuleHandle owned) { rt_handle_ = owned; }
  ~RuntimeModuleNode() override;
  const char* type_key() const override {
    std::call_once(type_key_once_, [this]() {
      TVMValue v;
      int c = kTVMModuleHandle;
      v.v_handle = rt_handle_;
      RawRet r;
      CallRaw(TVM_RT_GLOBAL("runtime.ModuleGetTypeKey"), &v, &c, 1, &r);
      type_key_ = RetStr(r, "runtime.ModuleGetTypeKey");
    });
    return type_key_.c_str();
  }
  PackedFunc GetFunction(const std::string& name, const ObjectPtr<Object>&) override {
    return Lookup(name, false);
  }
  PackedFunc Lookup(const std::string& name, bool query_imports) const {
    TVMFunctionHandle h = nullptr;
    CheckCall(TVMModGetFunction(rt_handle_, name.c_str(), query_imports ? 1 : 0, &h));
    return FuncBridge::FromHandleOwned(h);
  }
  void SaveToFile(const std::string& file_name, const std::string& format) override {
    TVMValue v[3];
    int c[3] = {kTVMModuleHandle, kTVMStr, kTVMStr};
    v[0].v_handle = rt_handle_;
    v[1].v_str = file_name.c_str();
    v[2].v_str = format.c_str();
    RawRet r;
    CallRaw(TVM_RT_GLOBAL("runtime.ModuleSaveToFile"), v, c, 3, &r);
  }
  void SaveToBinary(dmlc::Stream* stream) override {
    TVMValue v;
    int c = kTVMModuleHandle;
    v.v_handle = rt_handle_;
    RawRet r;
    CallRaw(TVM_RT_GLOBAL("runtime.ModuleSaveToBinary"), &v, &c, 1, &r);
    ICHECK_EQ(r.code, kTVMBytes) << "runtime.ModuleSaveToBinary returned no bytes";
    const TVMByteArray* arr = static_cast<const TVMByteArray*>(r.value.v_handle);
    stream->Write(arr->data, arr->size);
  }
  std::string GetSource(const std::string& format) override {
    TVMValue v[2];
    int c[2] = {kTVMModuleHandle, kTVMStr};
    v[0].v_handle = rt_handle_;
    v[1].v_str = format.c_str();
    RawRet r;
    CallRaw(TVM_RT_GLOBAL("runtime.ModuleGetSource"), v, c, 2, &r);
    return RetStr(r, "runtime.ModuleGetSource");
  }
  TVMModuleHandle handle() const { return rt_handle_; }

 private:
  mutable std::once_flag type_key_once_;
  mutable std::string type_key_;
};

/*!
 * \brief The C boundary of modules (see module.h): runtime module <-> C++ ModuleNode. One lock
 * guards the table from runtime modules to the C++ nodes standing for them (proxies, weakly;
 * user nodes, while the runtime module made for them lives) and the user nodes' rt_wrapper_.
 * Nothing that may release an object (and so run a finalizer that takes the lock) is done
 * while it is held.
 */
class ModuleBridge {
 public:
  /*! \brief The C++ node for a module of the runtime (a borrowed or owned reference). */
  static ObjectPtr<Object> FromRuntime(Object* h, bool owned) {
    if (h == nullptr) return ObjectPtr<Object>();
    State& st = Get();
    Object* node = nullptr;
    {
      std::lock_guard<std::mutex> lock(st.mu);
      auto it = st.nodes.find(h);
      if (it != st.nodes.end() && ObjectUnsafe::TryIncRef(it->second)) node = it->second;
    }
    if (node != nullptr) {
      // Outside the lock: this may free the runtime module, whose finalizer takes the lock.
      if (owned) TVMObjectFree(h);
      return ObjectUnsafe::FromOwned(node);
    }
    if (!owned) CheckCall(TVMObjectRetain(h));
    ObjectPtr<RuntimeModuleNode> proxy;
    try {
      proxy = make_object<RuntimeModuleNode>(static_cast<TVMModuleHandle>(h));
    } catch (...) {
      TVMObjectFree(h);
      throw;
    }
    Object* existing = nullptr;
    {
      std::lock_guard<std::mutex> lock(st.mu);
      Object*& slot = st.nodes[h];
      if (slot != nullptr && ObjectUnsafe::TryIncRef(slot)) {
        existing = slot;  // another thread made one meanwhile: keep one node per module
      } else {
        slot = proxy.get();  // new, or replacing a dying proxy's entry
      }
    }
    if (existing != nullptr) return ObjectUnsafe::FromOwned(existing);  // ours goes
    return ObjectPtr<Object>(std::move(proxy));
  }

  /*!
   * \brief The runtime module for a C++ node (borrowed: valid while the node lives, or while
   * *keep does for a runtime module made here; without keep it is never freed).
   */
  static TVMModuleHandle ToRuntime(ModuleNode* node, std::vector<ObjectRef>* keep) {
    if (node->rt_handle_ != nullptr) return node->rt_handle_;
    State& st = Get();
    Object* w = nullptr;
    {
      std::lock_guard<std::mutex> lock(st.mu);
      w = node->rt_wrapper_;
      if (w != nullptr && !ObjectUnsafe::TryIncRef(w)) w = nullptr;
    }
    if (w != nullptr) {
      Keep(w, keep);
      return w;
    }
    w = MakeWrapper(node);
    Keep(w, keep);
    return w;
  }

  /*! \brief Forgets a proxy (from its destructor). */
  static void Forget(Object* h, Object* node) {
    State& st = Get();
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.nodes.find(h);
    if (it != st.nodes.end() && it->second == node) st.nodes.erase(it);
  }

  /*! \brief The lock of imports and import caches of modules. */
  static std::mutex& ImportsLock() { return Get().imports_mu; }

 private:
  struct State {
    std::mutex mu;
    std::unordered_map<Object*, Object*> nodes;
    std::mutex imports_mu;
  };
  static State& Get() {
    static State* st = new State();  // never destroyed: finalizers may run at exit
    return *st;
  }
  static void Keep(Object* w, std::vector<ObjectRef>* keep) {
    if (keep != nullptr) keep->push_back(ObjectRef(ObjectUnsafe::FromOwned(w)));
    // else: the reference is never given back (see TVMArgsSetter).
  }

  /*! \brief Unregisters a runtime module made for a C++ node when the runtime frees it. */
  struct WrapperLink {
    ObjectPtr<Object> node;
    Object* wrapper = nullptr;
    ~WrapperLink() {
      if (wrapper != nullptr) {
        State& st = Get();
        std::lock_guard<std::mutex> lock(st.mu);
        auto it = st.nodes.find(wrapper);
        if (it != st.nodes.end() && it->second == node.get()) st.nodes.erase(it);
        ModuleNode* n = static_cast<ModuleNode*>(node.get());
        if (n->rt_wrapper_ == wrapper) n->rt_wrapper_ = nullptr;
      }
    }
  };

  /*! \brief A new runtime module for node (one reference, the caller's). */
  static Object* MakeWrapper(ModuleNode* node) {
    auto link = std::make_shared<WrapperLink>();
    link->node = ObjectUnsafe::FromBorrowed(node);
    PackedFunc dispatch(PackedFunc::FType([link](TVMArgs args, TVMRetValue* rv) {
      Dispatch(static_cast<ModuleNode*>(link->node.get()), args, rv);
    }));
    std::string key = node->type_key();
    TVMValue v[2];
    int c[2] = {kTVMStr, kTVMPackedFuncHandle};
    v[0].v_str = key.c_str();
    v[1].v_handle = FuncBridge::Handle(dispatch);
    RawRet r;
    CallRaw(TVM_RT_GLOBAL("runtime.ModuleFromPackedFunc"), v, c, 2, &r);
    ICHECK_EQ(r.code, kTVMModuleHandle) << "runtime.ModuleFromPackedFunc returned no module";
    Object* w = static_cast<Object*>(r.value.v_handle);
    r.Forget();
    State& st = Get();
    std::lock_guard<std::mutex> lock(st.mu);
    link->wrapper = w;
    st.nodes[w] = node;
    node->rt_wrapper_ = w;
    return w;
  }

  /*! \brief The dispatch protocol of runtime.ModuleFromPackedFunc. */
  static void Dispatch(ModuleNode* node, TVMArgs args, TVMRetValue* rv) {
    ICHECK_GE(args.size(), 1) << "module dispatch: missing operation";
    std::string op = args[0];
    if (op == "get_function") {
      ICHECK_EQ(args.size(), 2);
      std::string name = args[1];
      *rv = node->GetFunction(name, true);
    } else if (op == "save_to_file") {
      ICHECK_EQ(args.size(), 3);
      node->SaveToFile(args[1].operator std::string(), args[2].operator std::string());
    } else if (op == "save_to_binary") {
      std::string out;
      dmlc::MemoryStringStream strm(&out);
      node->SaveToBinary(&strm);
      TVMByteArray arr;
      arr.data = out.data();
      arr.size = out.size();
      *rv = arr;
    } else if (op == "get_source") {
      ICHECK_EQ(args.size(), 2);
      *rv = node->GetSource(args[1].operator std::string());
    } else {
      LOG(FATAL) << "ValueError: unknown module operation " << op;
    }
  }
};

inline RuntimeModuleNode::~RuntimeModuleNode() {
  ModuleBridge::Forget(static_cast<Object*>(rt_handle_), this);
  TVMModFree(rt_handle_);
}

inline ObjectRef ObjectFromRuntime(Object* borrowed) {
  if (borrowed == nullptr) return ObjectRef();
  if (ObjectUnsafe::TypeIndex(borrowed) == TypeIndex::kRuntimeModule) {
    return ObjectRef(ModuleBridge::FromRuntime(borrowed, false));
  }
  return ObjectRef(ObjectUnsafe::FromBorrowed(borrowed));
}

inline ObjectRef ObjectFromRuntimeOwned(Object* owned) {
  if (owned == nullptr) return ObjectRef();
  if (ObjectUnsafe::TypeIndex(owned) == TypeIndex::kRuntimeModule) {
    return ObjectRef(ModuleBridge::FromRuntime(owned, true));
  }
  return ObjectRef(ObjectUnsafe::FromOwned(owned));
}

inline void ObjectToRuntime(const ObjectRef& obj, TVMValue* value, int* code,
                            std::vector<ObjectRef>* keep) {
  Object* p = ObjectUnsafe::Raw(obj);
  if (p == nullptr) {
    value->v_handle = nullptr;
    *code = kTVMNullptr;
    return;
  }
  switch (ObjectUnsafe::TypeIndex(p)) {
    case TypeIndex::kRuntimeNDArray:
      value->v_handle = NDArray::Internal::GetHandle(obj);
      *code = kTVMNDArrayHandle;
      return;
    case TypeIndex::kRuntimeModule:
      value->v_handle = ModuleBridge::ToRuntime(static_cast<ModuleNode*>(p), keep);
      *code = kTVMModuleHandle;
      return;
    default:
      value->v_handle = p;
      *code = kTVMObjectHandle;
      return;
  }
}

}  // namespace detail

}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_DETAIL_BRIDGE_H_
