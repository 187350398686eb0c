/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/module.h: Module and ModuleNode.
 *
 * A Module always refers to a C++ ModuleNode: either one written by the user (a subclass with
 * type_key() and GetFunction()), or a proxy of a module of the runtime (a library, a graph
 * executor, ...) that forwards to the C API. The two meet at the C boundary (packed_func.h):
 * - a module of the runtime coming into C++ gets a proxy (one per runtime module while the
 *   proxy lives, so Modules compare equal as they should);
 * - a user's ModuleNode going to the runtime gets a runtime module made with the global
 *   runtime.ModuleFromPackedFunc, whose dispatch callback owns the node (and calls its
 *   GetFunction, SaveToFile, SaveToBinary, GetSource); it is made once and reused while it
 *   lives, and coming back it turns into the user's node again.
 */
#ifndef TVM_RUNTIME_MODULE_H_
#define TVM_RUNTIME_MODULE_H_

#include <dmlc/io.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/container/base.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/memory.h>
#include <tvm/runtime/object.h>

#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

class ModuleNode;
class PackedFunc;

namespace detail {
class ModuleBridge;
class RuntimeModuleNode;
}  // namespace detail

/*! \brief A reference to a module. */
class Module : public ObjectRef {
 public:
  Module() {}
  explicit Module(ObjectPtr<Object> n) : ObjectRef(std::move(n)) {}
  /*! \brief Function `name` of this module (and its imports if asked); nullptr if absent. */
  inline PackedFunc GetFunction(const std::string& name, bool query_imports = false);
  /*! \brief Adds `other` to this module's imports. */
  inline void Import(Module other);
  inline ModuleNode* operator->();
  inline const ModuleNode* operator->() const;
  /*! \brief Loads a module file (format from the extension when empty). */
  inline static Module LoadFromFile(const std::string& file_name, const std::string& format = "");

  using ContainerType = ModuleNode;
  friend class ModuleNode;
};

/*!
 * \brief The base of modules. Subclass it with type_key() and GetFunction(name, sptr_to_self)
 * (and SaveToFile / SaveToBinary / GetSource if the module supports them).
 */
class ModuleNode : public Object {
 public:
  virtual ~ModuleNode() {}
  /*! \brief The module kind; selects the loader of its SaveToBinary form. */
  virtual const char* type_key() const = 0;
  /*!
   * \brief Function `name` of this module itself, or a null PackedFunc. A returned function
   * that needs the module should keep `sptr_to_self`.
   */
  virtual PackedFunc GetFunction(const std::string& name,
                                 const ObjectPtr<Object>& sptr_to_self) = 0;
  virtual void SaveToFile(const std::string& file_name, const std::string& format);
  virtual void SaveToBinary(dmlc::Stream* stream);
  virtual std::string GetSource(const std::string& format = "");
  /*! \brief GetFunction of this module, then (if asked) of its imports, depth first. */
  inline PackedFunc GetFunction(const std::string& name, bool query_imports = false);
  /*! \brief Adds an import (an error if it would make a cycle). */
  inline void Import(Module other);
  /*! \brief Function `name` of the imports or the global registry (an error if absent). */
  inline const PackedFunc* GetFuncFromEnv(const std::string& name);
  /*! \brief The imported modules. */
  inline const std::vector<Module>& imports() const;

  static constexpr const uint32_t _type_index = TypeIndex::kRuntimeModule;
  static constexpr const char* _type_key = "runtime.Module";
  TVM_DECLARE_FINAL_OBJECT_INFO(ModuleNode, Object);

 protected:
  friend class Module;
  friend class ModuleInternal;
  friend class detail::ModuleBridge;
  std::vector<Module> imports_;

 private:
  std::unordered_map<std::string, std::shared_ptr<PackedFunc> > import_cache_;
  // The C boundary (see the file comment): a proxy's module of the runtime (one reference), or
  // the runtime module made for a user's node (no reference; guarded by the bridge's lock).
  TVMModuleHandle rt_handle_ = nullptr;
  Object* rt_wrapper_ = nullptr;
  friend class detail::RuntimeModuleNode;
};

/*! \brief Whether a target's runtime is available ("cpu", "cuda", "opencl", ...). */
inline bool RuntimeEnabled(const std::string& target);

/*! \brief Names of the symbols a compiled module library has. */
namespace symbol {
constexpr const char* tvm_module_ctx = "__tvm_module_ctx";
constexpr const char* tvm_dev_mblob = "__tvm_dev_mblob";
constexpr const char* tvm_dev_mblob_nbytes = "__tvm_dev_mblob_nbytes";
constexpr const char* tvm_set_device = "__tvm_set_device";
constexpr const char* tvm_global_barrier_state = "__tvm_global_barrier_state";
constexpr const char* tvm_prepare_global_barrier = "__tvm_prepare_global_barrier";
constexpr const char* tvm_module_main = "__tvm_main__";
constexpr const char* tvm_param_prefix = "__tvm_param__";
constexpr const char* tvm_lookup_linked_param = "_lookup_linked_param";
constexpr const char* tvm_run_func_suffix = "run_model";
constexpr const char* tvm_entrypoint_suffix = "run";
}  // namespace symbol

namespace detail {
#if defined(__GXX_RTTI) || defined(_CPPRTTI) || defined(__cpp_rtti)
/*!
 * \brief as<T>() for a subclass T of ModuleNode: every module has the type index of ModuleNode,
 * so the C++ type decides (nullptr for a module of another kind, e.g. one of the runtime).
 */
template <typename T>
struct ObjectAs<T, typename std::enable_if<std::is_base_of<ModuleNode, T>::value &&
                                           !std::is_same<ModuleNode, T>::value>::type> {
  static const T* Cast(const Object* p) {
    return dynamic_cast<const T*>(static_cast<const ModuleNode*>(p));
  }
};
#endif
}  // namespace detail

inline ModuleNode* Module::operator->() { return static_cast<ModuleNode*>(get_mutable()); }

inline const ModuleNode* Module::operator->() const {
  return static_cast<const ModuleNode*>(get());
}

}  // namespace runtime
}  // namespace tvm

#include <tvm/runtime/packed_func.h>  // NOLINT(*): the bodies of Module and ModuleNode

#endif  // TVM_RUNTIME_MODULE_H_
