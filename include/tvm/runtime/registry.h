/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/registry.h: the global function registry from C++ (TVM_REGISTER_GLOBAL,
 * Registry::Register / Get / Remove / ListNames), over TVMFuncRegisterGlobal and friends, so a
 * function registered from C++ is the runtime's global, seen from C and from TVM's Python.
 *
 * Blob loaders (runtime.module.loadbinary_<key>) registered from C++ get TVM's calling
 * convention back: their `void*` argument is a dmlc::Stream* over the blob entry; what they
 * read is consumed from the runtime's blob (runtime.module.blob_stream_skip).
 *
 * Registry::Get returns a pointer that stays valid for the process: the function registered
 * under the name at the first Get (a later re-registration through Registry in this program
 * updates it; one made through the C API after that first Get is not seen by it).
 */
#ifndef TVM_RUNTIME_REGISTRY_H_
#define TVM_RUNTIME_REGISTRY_H_

#include <dmlc/memory_io.h>
#include <tvm/runtime/packed_func.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

/*!
 * \brief Checks for a pending frontend signal (e.g. Ctrl-C in Python); throws
 * EnvErrorAlreadySet when there is one.
 */
inline void EnvCheckSignals() {
  detail::RawRet r;
  detail::CallRaw(TVM_RT_GLOBAL("runtime.EnvCheckSignals"), nullptr, nullptr, 0, &r);
}

/*! \brief A global function's registration. */
class Registry {
 public:
  /*! \brief Sets the body and registers it with the runtime. */
  inline Registry& set_body(PackedFunc f);  // NOLINT(*)
  Registry& set_body(PackedFunc::FType f) { return set_body(PackedFunc(f)); }  // NOLINT(*)
  template <typename FLambda>
  Registry& set_body_typed(FLambda f) {
    using FType = typename detail::function_signature<FLambda>::FType;
    return set_body(TypedPackedFunc<FType>(std::move(f), name_).packed());
  }
  template <typename T, typename R, typename... Args>
  Registry& set_body_method(R (T::*f)(Args...)) {
    auto fwrap = [f](T target, Args... params) -> R { return (target.*f)(params...); };
    return set_body(TypedPackedFunc<R(T, Args...)>(fwrap, name_));
  }
  template <typename T, typename R, typename... Args>
  Registry& set_body_method(R (T::*f)(Args...) const) {
    auto fwrap = [f](const T target, Args... params) -> R { return (target.*f)(params...); };
    return set_body(TypedPackedFunc<R(const T, Args...)>(fwrap, name_));
  }
  template <typename TObjectRef, typename TNode, typename R, typename... Args,
            typename = typename std::enable_if<std::is_base_of<ObjectRef, TObjectRef>::value>::type>
  Registry& set_body_method(R (TNode::*f)(Args...)) {
    auto fwrap = [f](TObjectRef ref, Args... params) {
      TNode* target = ref.operator->();
      return (target->*f)(params...);
    };
    return set_body(TypedPackedFunc<R(TObjectRef, Args...)>(fwrap, name_));
  }
  template <typename TObjectRef, typename TNode, typename R, typename... Args,
            typename = typename std::enable_if<std::is_base_of<ObjectRef, TObjectRef>::value>::type>
  Registry& set_body_method(R (TNode::*f)(Args...) const) {
    auto fwrap = [f](TObjectRef ref, Args... params) {
      const TNode* target = ref.operator->();
      return (target->*f)(params...);
    };
    return set_body(TypedPackedFunc<R(TObjectRef, Args...)>(fwrap, name_));
  }

  /*!
   * \brief Starts registering `name` (an error if it exists and `override` is false); the
   * function is registered by set_body.
   */
  inline static Registry& Register(const std::string& name, bool override = false);  // NOLINT
  /*! \brief Removes a global; false if there was none. */
  inline static bool Remove(const std::string& name);
  /*! \brief The global `name`, or nullptr. */
  inline static const PackedFunc* Get(const std::string& name);  // NOLINT(*)
  /*! \brief The names of all globals. */
  inline static std::vector<std::string> ListNames();

  struct Manager;

 protected:
  std::string name_;
  PackedFunc func_;
  bool override_ = false;
  friend struct Manager;
};

/*! \brief The registrations and Get results of this program (never destroyed). */
struct Registry::Manager {
  std::mutex mu;
  std::unordered_map<std::string, std::unique_ptr<Registry>> regs;
  std::unordered_map<std::string, std::unique_ptr<PackedFunc>> got;
  static Manager* Global() {
    static Manager* m = new Manager();
    return m;
  }
};

namespace detail {

/*! \brief A dmlc::Stream over a blob entry given to a C++ blob loader (read only). */
class BlobLoaderStream : public dmlc::Stream {
 public:
  BlobLoaderStream(const char* data, size_t size) : data_(data), size_(size) {}
  size_t Read(void* ptr, size_t size) override {
    size_t n = size < size_ - pos_ ? size : size_ - pos_;
    if (n != 0) std::memcpy(ptr, data_ + pos_, n);
    pos_ += n;
    return n;
  }
  void Write(const void*, size_t) override {
    throw Error("TVMError: a blob loader's stream is read-only");
  }
  size_t consumed() const { return pos_; }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

/*!
 * \brief Gives a C++ blob loader TVM's convention: called by the runtime with (stream handle,
 * remaining bytes), it calls the loader with a dmlc::Stream* over the bytes, then consumes
 * what the loader read from the runtime's stream.
 */
inline PackedFunc WrapBlobLoader(PackedFunc loader) {
  return PackedFunc([loader](TVMArgs args, TVMRetValue* rv) {
    if (args.size() == 2 && args.type_codes[0] == kTVMOpaqueHandle &&
        args.type_codes[1] == kTVMBytes) {
      const TVMByteArray* rest = static_cast<const TVMByteArray*>(args.values[1].v_handle);
      BlobLoaderStream strm(rest->data, rest->size);
      TVMValue v;
      int c = kTVMOpaqueHandle;
      v.v_handle = static_cast<dmlc::Stream*>(&strm);
      loader.CallPacked(TVMArgs(&v, &c, 1), rv);
      TVMValue sv[2];
      int sc[2] = {kTVMOpaqueHandle, kDLInt};
      sv[0] = args.values[0];
      sv[1].v_int64 = static_cast<int64_t>(strm.consumed());
      RawRet r;
      CallRaw(TVM_RT_GLOBAL("runtime.module.blob_stream_skip"), sv, sc, 2, &r);
      return;
    }
    loader.CallPacked(args, rv);
  });
}

}  // namespace detail

inline Registry& Registry::set_body(PackedFunc f) {  // NOLINT(*)
  static const char kLoaderPrefix[] = "runtime.module.loadbinary_";
  PackedFunc body = f;
  if (f != nullptr && name_.compare(0, sizeof(kLoaderPrefix) - 1, kLoaderPrefix) == 0) {
    body = detail::WrapBlobLoader(f);
  }
  detail::CheckCall(TVMFuncRegisterGlobal(name_.c_str(), detail::FuncBridge::Handle(body),
                                          override_ ? 1 : 0));
  func_ = f;
  override_ = true;  // a later set_body on this registration replaces the function
  PackedFunc old;    // released after the lock (releasing may run finalizers)
  Manager* m = Manager::Global();
  {
    std::lock_guard<std::mutex> lock(m->mu);
    auto it = m->got.find(name_);
    if (it != m->got.end()) {
      old = *it->second;
      *it->second = body;
    }
  }
  return *this;
}

inline Registry& Registry::Register(const std::string& name, bool override) {  // NOLINT(*)
  TVMFunctionHandle h = detail::LookupGlobal(name.c_str());
  if (h != nullptr) {
    TVMFuncFree(h);
    ICHECK(override) << "Global PackedFunc " << name << " is already registered";
  }
  Manager* m = Manager::Global();
  std::lock_guard<std::mutex> lock(m->mu);
  std::unique_ptr<Registry>& slot = m->regs[name];
  if (slot == nullptr) slot.reset(new Registry());
  slot->name_ = name;
  slot->override_ = override;
  return *slot;
}

inline bool Registry::Remove(const std::string& name) {
  TVMFunctionHandle h = detail::LookupGlobal(name.c_str());
  if (h == nullptr) return false;
  TVMFuncFree(h);
  detail::CheckCall(TVMFuncRemoveGlobal(name.c_str()));
  return true;
}

inline const PackedFunc* Registry::Get(const std::string& name) {
  TVMFunctionHandle h = detail::LookupGlobal(name.c_str());
  if (h == nullptr) return nullptr;
  PackedFunc f = detail::FuncBridge::FromHandleOwned(h);
  Manager* m = Manager::Global();
  std::lock_guard<std::mutex> lock(m->mu);
  std::unique_ptr<PackedFunc>& slot = m->got[name];
  if (slot == nullptr) slot.reset(new PackedFunc(std::move(f)));
  return slot.get();
}

inline std::vector<std::string> Registry::ListNames() {
  int size = 0;
  const char** names = nullptr;
  detail::CheckCall(TVMFuncListGlobalNames(&size, &names));
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) out.emplace_back(names[i]);
  return out;
}

#define TVM_FUNC_REG_VAR_DEF static TVM_ATTRIBUTE_UNUSED ::tvm::runtime::Registry& __mk_##TVM

/*! \brief Registers a global function at static initialization: TVM_REGISTER_GLOBAL("name")
 * .set_body(...) / .set_body_typed(...) / .set_body_method(...). */
#define TVM_REGISTER_GLOBAL(OpName) \
  TVM_STR_CONCAT(TVM_FUNC_REG_VAR_DEF, __COUNTER__) = ::tvm::runtime::Registry::Register(OpName)

#define TVM_STRINGIZE_DETAIL(x) #x
#define TVM_STRINGIZE(x) TVM_STRINGIZE_DETAIL(x)
#define TVM_DESCRIBE(...) describe(__VA_ARGS__ "\n\nFrom:" __FILE__ ":" TVM_STRINGIZE(__LINE__))
#define TVM_ADD_FILELINE "\n\nDefined in " __FILE__ ":L" TVM_STRINGIZE(__LINE__)

}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_REGISTRY_H_
