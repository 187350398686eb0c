/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/memory.h: make_object / make_inplace_array_object and the allocator behind them.
 * The object's deleter is a function of this header, so whoever drops the last reference (C++
 * code or the runtime) frees the object the way it was allocated.
 */
#ifndef TVM_RUNTIME_MEMORY_H_
#define TVM_RUNTIME_MEMORY_H_

#include <tvm/runtime/object.h>

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace tvm {
namespace runtime {

template <typename T, typename... Args>
inline ObjectPtr<T> make_object(Args&&... args);

/*! \brief The base of object allocators (CRTP): sets the header of what they make. */
template <typename Derived>
class ObjAllocatorBase {
 public:
  template <typename T, typename... Args>
  inline ObjectPtr<T> make_object(Args&&... args) {
    using Handler = typename Derived::template Handler<T>;
    static_assert(std::is_base_of<Object, T>::value, "make can only be used to create Object");
    T* ptr = Handler::New(static_cast<Derived*>(this), std::forward<Args>(args)...);
    ptr->type_index_ = T::RuntimeTypeIndex();
    ptr->deleter_ = Handler::Deleter();
    return ObjectPtr<T>(ptr);
  }

  template <typename ArrayType, typename ElemType, typename... Args>
  inline ObjectPtr<ArrayType> make_inplace_array(size_t num_elems, Args&&... args) {
    using Handler = typename Derived::template ArrayHandler<ArrayType, ElemType>;
    static_assert(std::is_base_of<Object, ArrayType>::value,
                  "make_inplace_array can only be used to create Object");
    ArrayType* ptr =
        Handler::New(static_cast<Derived*>(this), num_elems, std::forward<Args>(args)...);
    ptr->type_index_ = ArrayType::RuntimeTypeIndex();
    ptr->deleter_ = Handler::Deleter();
    return ObjectPtr<ArrayType>(ptr);
  }
};

/*! \brief Allocates with the global operator new (aligned for the type). */
class SimpleObjAllocator : public ObjAllocatorBase<SimpleObjAllocator> {
 public:
  template <typename T>
  class Handler {
   public:
    template <typename... Args>
    static T* New(SimpleObjAllocator*, Args&&... args) {
      void* mem = ::operator new(sizeof(T));
      try {
        return new (mem) T(std::forward<Args>(args)...);
      } catch (...) {
        ::operator delete(mem);
        throw;
      }
    }
    static Object::FDeleter Deleter() { return Deleter_; }

   private:
    static void Deleter_(Object* objptr) {
      T* tptr = static_cast<T*>(objptr);
      tptr->T::~T();
      ::operator delete(static_cast<void*>(tptr));
    }
  };

  /*! \brief An object followed in the same block by `num_elems` elements. */
  template <typename ArrayType, typename ElemType>
  class ArrayHandler {
   public:
    static_assert(alignof(ArrayType) % alignof(ElemType) == 0 &&
                      sizeof(ArrayType) % alignof(ElemType) == 0,
                  "element alignment constraint");
    template <typename... Args>
    static ArrayType* New(SimpleObjAllocator*, size_t num_elems, Args&&... args) {
      size_t bytes = sizeof(ArrayType) + num_elems * sizeof(ElemType);
      void* mem = ::operator new(bytes);
      try {
        return new (mem) ArrayType(std::forward<Args>(args)...);
      } catch (...) {
        ::operator delete(mem);
        throw;
      }
    }
    static Object::FDeleter Deleter() { return Deleter_; }

   private:
    static void Deleter_(Object* objptr) {
      ArrayType* tptr = static_cast<ArrayType*>(objptr);
      tptr->ArrayType::~ArrayType();
      ::operator delete(static_cast<void*>(tptr));
    }
  };
};

/*! \brief Allocates a new object of type T. */
template <typename T, typename... Args>
inline ObjectPtr<T> make_object(Args&&... args) {
  return SimpleObjAllocator().make_object<T>(std::forward<Args>(args)...);
}

/*! \brief Allocates an object of ArrayType followed by num_elems ElemType slots. */
template <typename ArrayType, typename ElemType, typename... Args>
inline ObjectPtr<ArrayType> make_inplace_array_object(size_t num_elems, Args&&... args) {
  return SimpleObjAllocator().make_inplace_array<ArrayType, ElemType>(num_elems,
                                                                      std::forward<Args>(args)...);
}

}  // namespace runtime
}  // namespace tvm
#endif  // TVM_RUNTIME_MEMORY_H_
