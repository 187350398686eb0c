/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/container/closure.h: Closure, the base of the VM's closures (type index from the
 * runtime by key).
 */
#ifndef TVM_RUNTIME_CONTAINER_CLOSURE_H_
#define TVM_RUNTIME_CONTAINER_CLOSURE_H_

#include <tvm/runtime/container/base.h>

namespace tvm {
namespace runtime {

/*! \brief The body of a closure (made by the runtime's VM). */
class ClosureObj : public Object {
 public:
  static constexpr const uint32_t _type_index = TypeIndex::kDynamic;
  static constexpr const char* _type_key = "runtime.Closure";
  TVM_DECLARE_BASE_OBJECT_INFO(ClosureObj, Object);
};

/*! \brief A reference to a closure. */
class Closure : public ObjectRef {
 public:
  TVM_DEFINE_OBJECT_REF_METHODS(Closure, ObjectRef, ClosureObj);
};

}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_CONTAINER_CLOSURE_H_
