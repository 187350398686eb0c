/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/container/adt.h: ADT (algebraic data type values and tuples, as the VM returns
 * them). ADTs are made and kept by the runtime (runtime.ADT, runtime.GetADTTag / GetADTSize /
 * GetADTFields); fields are returned by value, and ADTObj has no public fields.
 */
#ifndef TVM_RUNTIME_CONTAINER_ADT_H_
#define TVM_RUNTIME_CONTAINER_ADT_H_

#include <tvm/runtime/container/base.h>
#include <tvm/runtime/detail/capi.h>

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

namespace detail {
inline void ObjectToRuntime(const ObjectRef& obj, TVMValue* value, int* code,
                            std::vector<ObjectRef>* keep);
}  // namespace detail

/*! \brief The body of an ADT (kept by the runtime; read through its globals). */
class ADTObj : public Object {
 public:
  static constexpr const uint32_t _type_index = TypeIndex::kDynamic;
  static constexpr const char* _type_key = "runtime.ADT";
  TVM_DECLARE_FINAL_OBJECT_INFO(ADTObj, Object);

  /*! \brief The constructor tag. */
  int32_t GetTag() const {
    detail::RawRet r;
    Call(TVM_RT_GLOBAL("runtime.GetADTTag"), -1, &r);
    return static_cast<int32_t>(detail::RetInt(r, "runtime.GetADTTag"));
  }
  /*! \brief The number of fields. */
  size_t GetSize() const {
    detail::RawRet r;
    Call(TVM_RT_GLOBAL("runtime.GetADTSize"), -1, &r);
    return static_cast<size_t>(detail::RetInt(r, "runtime.GetADTSize"));
  }
  /*! \brief Field i (an error when out of range). */
  ObjectRef operator[](size_t i) const {
    detail::RawRet r;
    Call(TVM_RT_GLOBAL("runtime.GetADTFields"), static_cast<int64_t>(i), &r);
    if (r.code == kTVMNullptr) return ObjectRef();
    Object* p = static_cast<Object*>(r.value.v_handle);
    if (r.code == kTVMNDArrayHandle) {
      p = reinterpret_cast<Object*>(static_cast<char*>(r.value.v_handle) - sizeof(Object));
    } else {
      ICHECK(r.code == kTVMObjectHandle || r.code == kTVMModuleHandle)
          << "TypeError: runtime.GetADTFields returned a non-object";
    }
    r.Forget();
    return detail::ObjectFromRuntimeOwned(p);
  }

 private:
  ADTObj() = delete;
  void Call(TVMFunctionHandle f, int64_t index, detail::RawRet* r) const {
    TVMValue v[2];
    int c[2] = {kTVMObjectHandle, kDLInt};
    v[0].v_handle = const_cast<ADTObj*>(this);
    v[1].v_int64 = index;
    detail::CallRaw(f, v, c, index < 0 ? 1 : 2, r);
  }
};

/*! \brief An algebraic data type value: a tag and fields. */
class ADT : public ObjectRef {
 public:
  ADT(int32_t tag, std::vector<ObjectRef> fields) : ADT(tag, fields.begin(), fields.end()) {}
  template <typename Iterator>
  ADT(int32_t tag, Iterator begin, Iterator end) {
    std::vector<ObjectRef> fields(begin, end);
    size_t n = fields.size() + 1;
    std::vector<TVMValue> values(n);
    std::vector<int> codes(n);
    std::vector<ObjectRef> keep;
    values[0].v_int64 = tag;
    codes[0] = kDLInt;
    for (size_t i = 0; i < fields.size(); ++i) {
      detail::ObjectToRuntime(fields[i], &values[i + 1], &codes[i + 1], &keep);
    }
    detail::RawRet r;
    detail::CallRaw(TVM_RT_GLOBAL("runtime.ADT"), values.data(), codes.data(),
                    static_cast<int>(n), &r);
    ICHECK_EQ(r.code, kTVMObjectHandle) << "TypeError: runtime.ADT did not return an object";
    r.Forget();
    data_ = detail::ObjectUnsafe::FromOwned(static_cast<Object*>(r.value.v_handle));
  }
  ADT(int32_t tag, std::initializer_list<ObjectRef> init) : ADT(tag, init.begin(), init.end()) {}

  /*! \brief Field idx (by value: the fields live in the runtime). */
  ObjectRef operator[](size_t idx) const { return (*operator->())[idx]; }
  int32_t tag() const { return operator->()->GetTag(); }
  size_t size() const { return operator->()->GetSize(); }

  /*! \brief A tuple (tag 0) of the arguments. */
  template <typename... Args>
  static ADT Tuple(Args&&... args) {
    return ADT(0, std::forward<Args>(args)...);
  }

  TVM_DEFINE_OBJECT_REF_METHODS(ADT, ObjectRef, ADTObj);
};

}  // namespace runtime
}  // namespace tvm

#include <tvm/runtime/packed_func.h>  // NOLINT(*): defines the conversions declared in base.h

#endif  // TVM_RUNTIME_CONTAINER_ADT_H_
