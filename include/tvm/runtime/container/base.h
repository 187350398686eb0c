/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/container/base.h: ObjectHash / ObjectEqual (defined in string.h), the in-place
 * array base of C++-made objects with trailing elements, and the iterator adapters of the
 * containers.
 */
#ifndef TVM_RUNTIME_CONTAINER_BASE_H_
#define TVM_RUNTIME_CONTAINER_BASE_H_

#include <tvm/runtime/logging.h>
#include <tvm/runtime/memory.h>
#include <tvm/runtime/object.h>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>
#include <utility>

namespace tvm {
namespace runtime {

/*! \brief Hash of an object: a String by content, any other object by address. */
struct ObjectHash {
  size_t operator()(const ObjectRef& a) const;
};

/*! \brief Equality of objects: Strings by content, any other object by address. */
struct ObjectEqual {
  bool operator()(const ObjectRef& a, const ObjectRef& b) const;
};

/*!
 * \brief Elements stored right after an object made with make_inplace_array_object (C++-made
 * objects only). ArrayType provides GetSize().
 */
template <typename ArrayType, typename ElemType>
class InplaceArrayBase {
 public:
  const ElemType& operator[](size_t idx) const {
    size_t size = Self()->GetSize();
    ICHECK_LT(idx, size) << "Index " << idx << " out of bounds " << size << "\n";
    return *(reinterpret_cast<ElemType*>(AddressOf(idx)));
  }
  ElemType& operator[](size_t idx) {
    size_t size = Self()->GetSize();
    ICHECK_LT(idx, size) << "Index " << idx << " out of bounds " << size << "\n";
    return *(reinterpret_cast<ElemType*>(AddressOf(idx)));
  }
  ~InplaceArrayBase() {
    if (!(std::is_standard_layout<ElemType>::value && std::is_trivial<ElemType>::value)) {
      size_t size = Self()->GetSize();
      for (size_t i = 0; i < size; ++i) {
        reinterpret_cast<ElemType*>(AddressOf(i))->ElemType::~ElemType();
      }
    }
  }

 protected:
  template <typename... Args>
  void EmplaceInit(size_t idx, Args&&... args) {
    new (AddressOf(idx)) ElemType(std::forward<Args>(args)...);
  }
  inline ArrayType* Self() const {
    return static_cast<ArrayType*>(const_cast<InplaceArrayBase*>(this));
  }
  void* AddressOf(size_t idx) const {
    static_assert(
        alignof(ArrayType) % alignof(ElemType) == 0 && sizeof(ArrayType) % alignof(ElemType) == 0,
        "The size and alignment of ArrayType should respect ElemType's alignment.");
    char* data_start = reinterpret_cast<char*>(Self()) + sizeof(ArrayType);
    return data_start + idx * sizeof(ElemType);
  }
};

/*! \brief Adapts an iterator by converting what it points to (Converter::convert). */
template <typename Converter, typename TIter>
class IterAdapter {
 public:
  using difference_type = typename std::iterator_traits<TIter>::difference_type;
  using value_type = typename Converter::ResultType;
  using pointer = typename Converter::ResultType*;
  using reference = typename Converter::ResultType&;
  using iterator_category = typename std::iterator_traits<TIter>::iterator_category;

  explicit IterAdapter(TIter iter) : iter_(iter) {}
  IterAdapter& operator++() {
    ++iter_;
    return *this;
  }
  IterAdapter& operator--() {
    --iter_;
    return *this;
  }
  IterAdapter operator++(int) {
    IterAdapter copy = *this;
    ++iter_;
    return copy;
  }
  IterAdapter operator--(int) {
    IterAdapter copy = *this;
    --iter_;
    return copy;
  }
  IterAdapter operator+(difference_type offset) const { return IterAdapter(iter_ + offset); }
  IterAdapter operator-(difference_type offset) const { return IterAdapter(iter_ - offset); }
  IterAdapter& operator+=(difference_type offset) {
    iter_ += offset;
    return *this;
  }
  IterAdapter& operator-=(difference_type offset) {
    iter_ -= offset;
    return *this;
  }
  template <typename T = IterAdapter>
  typename std::enable_if<std::is_same<iterator_category, std::random_access_iterator_tag>::value,
                          typename T::difference_type>::type inline
  operator-(const IterAdapter& rhs) const {
    return iter_ - rhs.iter_;
  }
  bool operator==(IterAdapter other) const { return iter_ == other.iter_; }
  bool operator!=(IterAdapter other) const { return !(*this == other); }
  const value_type operator*() const { return Converter::convert(*iter_); }

 private:
  TIter iter_;
};

/*! \brief IterAdapter backwards. */
template <typename Converter, typename TIter>
class ReverseIterAdapter {
 public:
  using difference_type = typename std::iterator_traits<TIter>::difference_type;
  using value_type = typename Converter::ResultType;
  using pointer = typename Converter::ResultType*;
  using reference = typename Converter::ResultType&;  // NOLINT(*)
  using iterator_category = typename std::iterator_traits<TIter>::iterator_category;

  explicit ReverseIterAdapter(TIter iter) : iter_(iter) {}
  ReverseIterAdapter& operator++() {
    --iter_;
    return *this;
  }
  ReverseIterAdapter& operator--() {
    ++iter_;
    return *this;
  }
  ReverseIterAdapter operator++(int) {
    ReverseIterAdapter copy = *this;
    --iter_;
    return copy;
  }
  ReverseIterAdapter operator--(int) {
    ReverseIterAdapter copy = *this;
    ++iter_;
    return copy;
  }
  ReverseIterAdapter operator+(difference_type offset) const {
    return ReverseIterAdapter(iter_ - offset);
  }
  template <typename T = ReverseIterAdapter>
  typename std::enable_if<std::is_same<iterator_category, std::random_access_iterator_tag>::value,
                          typename T::difference_type>::type inline
  operator-(const ReverseIterAdapter& rhs) const {
    return rhs.iter_ - iter_;
  }
  bool operator==(ReverseIterAdapter other) const { return iter_ == other.iter_; }
  bool operator!=(ReverseIterAdapter other) const { return !(*this == other); }
  const value_type operator*() const { return Converter::convert(*iter_); }

 private:
  TIter iter_;
};

/*!
 * \brief Checks an object against an ObjectRef type T (Check, CheckAndGetMismatch, TypeName);
 * defined in packed_func.h, specialized for Array and Map in their headers.
 */
template <typename T>
struct ObjectTypeChecker;

namespace detail {
/*!
 * \brief An object the runtime handed out (an element of a runtime container, a returned
 * object) as a C++ reference: a runtime module becomes a C++ ModuleNode (see module.h);
 * anything else is shared as is. Defined in packed_func.h.
 */
inline ObjectRef ObjectFromRuntime(Object* borrowed);
/*! \brief Same, taking over a reference the caller owns. */
inline ObjectRef ObjectFromRuntimeOwned(Object* owned);
}  // namespace detail

}  // namespace runtime

using runtime::Downcast;
using runtime::IterAdapter;
using runtime::make_object;
using runtime::Object;
using runtime::ObjectEqual;
using runtime::ObjectHash;
using runtime::ObjectPtr;
using runtime::ObjectPtrEqual;
using runtime::ObjectPtrHash;
using runtime::ObjectRef;
}  // namespace tvm

#endif  // TVM_RUNTIME_CONTAINER_BASE_H_
