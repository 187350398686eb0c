/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/container/array.h: Array<T>. Arrays are made by the runtime (global
 * runtime.Array) and read in place through the {data, size} view that starts the runtime's
 * array body. They are immutable: the mutating methods (push_back, Set, erase, ...) make a new
 * array with the change (copy on write as in TVM, but always a copy, so a loop of n push_backs
 * costs O(n^2); build a std::vector and construct the Array from it instead). ArrayNode is
 * read-only (no CopyOnWrite / SetItem).
 */
#ifndef TVM_RUNTIME_CONTAINER_ARRAY_H_
#define TVM_RUNTIME_CONTAINER_ARRAY_H_

#include <tvm/runtime/container/base.h>
#include <tvm/runtime/container/optional.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/detail/capi.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/object.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

namespace detail {
/*!
 * \brief Encodes an object as a C argument: an NDArray as its handle (code 13), a module as
 * its runtime module (code 9; one made for a C++ ModuleNode is added to *keep so that it lives
 * through the call), None as code 4, anything else as code 8. Defined in packed_func.h.
 */
inline void ObjectToRuntime(const ObjectRef& obj, TVMValue* value, int* code,
                            std::vector<ObjectRef>* keep);

/*! \brief Converts element pointers of a runtime container (see ObjectFromRuntime). */
struct ObjectConverter {
  using ResultType = ObjectRef;
  static ObjectRef convert(Object* p) { return ObjectFromRuntime(p); }
};
}  // namespace detail

/*! \brief The body of an Array: a read-only view of the runtime's elements. */
class ArrayNode : public Object {
 public:
  using iterator = IterAdapter<detail::ObjectConverter, Object* const*>;

  size_t size() const { return static_cast<size_t>(size_); }
  /*! \brief Element i (an error when out of range). */
  const ObjectRef at(int64_t i) const {
    ICHECK(0 <= i && static_cast<uint64_t>(i) < size_)
        << "IndexError: indexing " << i << " on an array of size " << size_;
    return detail::ObjectFromRuntime(data_[i]);
  }
  const ObjectRef operator[](size_t i) const { return at(static_cast<int64_t>(i)); }
  iterator begin() const { return iterator(data_); }
  iterator end() const { return iterator(data_ + size_); }

  static constexpr const uint32_t _type_index = TypeIndex::kRuntimeArray;
  static constexpr const char* _type_key = "Array";
  TVM_DECLARE_FINAL_OBJECT_INFO(ArrayNode, Object);

  /*! \brief The raw element pointers (borrowed). */
  Object* const* raw_data() const { return data_; }

 private:
  ArrayNode() = delete;
  // The runtime's layout after the header: a view of its element slots.
  Object* const* data_;
  uint64_t size_;
};

namespace detail {

/*! \brief A new runtime array of the given elements. */
inline ObjectPtr<Object> MakeRuntimeArray(const std::vector<ObjectRef>& elems) {
  size_t n = elems.size();
  std::vector<TVMValue> values(n);
  std::vector<int> codes(n);
  std::vector<ObjectRef> keep;
  for (size_t i = 0; i < n; ++i) ObjectToRuntime(elems[i], &values[i], &codes[i], &keep);
  RawRet r;
  CallRaw(TVM_RT_GLOBAL("runtime.Array"), values.data(), codes.data(), static_cast<int>(n), &r);
  if (r.code != kTVMObjectHandle) throw Error("TypeError: runtime.Array did not return an object");
  r.Forget();
  return ObjectUnsafe::FromOwned(static_cast<Object*>(r.value.v_handle));
}

/*! \brief The shared empty array (arrays are immutable). */
inline ObjectPtr<Object> EmptyRuntimeArray() {
  static Object* empty = [] {
    ObjectPtr<Object> p = MakeRuntimeArray(std::vector<ObjectRef>());
    return ObjectUnsafe::Release(&p);  // one reference kept for the process
  }();
  return ObjectUnsafe::FromBorrowed(empty);
}

}  // namespace detail

/*! \brief An immutable array of T (T an ObjectRef type). */
template <typename T,
          typename = typename std::enable_if<std::is_base_of<ObjectRef, T>::value>::type>
class Array : public ObjectRef {
 public:
  using value_type = T;

  Array() { data_ = detail::EmptyRuntimeArray(); }
  Array(Array<T>&& other) : ObjectRef() { data_ = std::move(other.data_); }  // NOLINT(*)
  Array(const Array<T>& other) : ObjectRef() { data_ = other.data_; }       // NOLINT(*)
  explicit Array(ObjectPtr<Object> n) : ObjectRef(std::move(n)) {}
  template <typename IterType>
  Array(IterType first, IterType last) {
    Assign(first, last);
  }
  Array(std::initializer_list<T> init) { Assign(init.begin(), init.end()); }  // NOLINT(*)
  Array(const std::vector<T>& init) { Assign(init.begin(), init.end()); }    // NOLINT(*)
  explicit Array(const size_t n, const T& val) {
    data_ = detail::MakeRuntimeArray(std::vector<ObjectRef>(n, val));
  }
  Array<T>& operator=(Array<T>&& other) {
    data_ = std::move(other.data_);
    return *this;
  }
  Array<T>& operator=(const Array<T>& other) {
    data_ = other.data_;
    return *this;
  }

  struct ValueConverter {
    using ResultType = T;
    static T convert(Object* n) { return DowncastNoCheck<T>(detail::ObjectFromRuntime(n)); }
  };
  using iterator = IterAdapter<ValueConverter, Object* const*>;
  using reverse_iterator = ReverseIterAdapter<ValueConverter, Object* const*>;

  iterator begin() const { return iterator(Elems()); }
  iterator end() const { return iterator(Elems() + size()); }
  reverse_iterator rbegin() const { return reverse_iterator(Elems() + size() - 1); }
  reverse_iterator rend() const { return reverse_iterator(Elems() - 1); }

  const T operator[](int64_t i) const {
    ArrayNode* p = GetArrayNode();
    ICHECK(p != nullptr) << "ValueError: cannot index a null array";
    ICHECK(0 <= i && static_cast<size_t>(i) < p->size())
        << "IndexError: indexing " << i << " on an array of size " << p->size();
    return ValueConverter::convert(p->raw_data()[i]);
  }
  size_t size() const {
    ArrayNode* p = GetArrayNode();
    return p == nullptr ? 0 : p->size();
  }
  size_t capacity() const { return size(); }
  bool empty() const { return size() == 0; }
  const T front() const {
    ICHECK(GetArrayNode() != nullptr) << "ValueError: cannot index a null array";
    ICHECK_GT(size(), 0) << "IndexError: cannot index an empty array";
    return (*this)[0];
  }
  const T back() const {
    ICHECK(GetArrayNode() != nullptr) << "ValueError: cannot index a null array";
    ICHECK_GT(size(), 0) << "IndexError: cannot index an empty array";
    return (*this)[static_cast<int64_t>(size()) - 1];
  }

  void push_back(const T& item) {
    std::vector<ObjectRef> v = Elements();
    v.push_back(item);
    data_ = detail::MakeRuntimeArray(v);
  }
  void insert(iterator position, const T& val) {
    ICHECK(data_ != nullptr) << "ValueError: cannot insert a null array";
    int64_t idx = std::distance(begin(), position);
    std::vector<ObjectRef> v = Elements();
    ICHECK(0 <= idx && static_cast<size_t>(idx) <= v.size())
        << "ValueError: cannot insert at index " << idx;
    v.insert(v.begin() + idx, val);
    data_ = detail::MakeRuntimeArray(v);
  }
  template <typename IterType>
  void insert(iterator position, IterType first, IterType last) {
    if (first == last) return;
    ICHECK(data_ != nullptr) << "ValueError: cannot insert a null array";
    int64_t idx = std::distance(begin(), position);
    std::vector<ObjectRef> v = Elements();
    ICHECK(0 <= idx && static_cast<size_t>(idx) <= v.size())
        << "ValueError: cannot insert at index " << idx;
    std::vector<ObjectRef> extra;
    for (; first != last; ++first) extra.push_back(*first);
    v.insert(v.begin() + idx, extra.begin(), extra.end());
    data_ = detail::MakeRuntimeArray(v);
  }
  void pop_back() {
    ICHECK(data_ != nullptr) << "ValueError: cannot pop_back because array is null";
    ICHECK_GT(size(), 0) << "ValueError: cannot pop_back because array is empty";
    std::vector<ObjectRef> v = Elements();
    v.pop_back();
    data_ = detail::MakeRuntimeArray(v);
  }
  void erase(iterator position) {
    ICHECK(data_ != nullptr) << "ValueError: cannot erase a null array";
    int64_t st = std::distance(begin(), position);
    int64_t size = static_cast<int64_t>(this->size());
    ICHECK(0 <= st && st < size) << "ValueError: cannot erase at index " << st
                                 << ", because Array size is " << size;
    std::vector<ObjectRef> v = Elements();
    v.erase(v.begin() + st);
    data_ = detail::MakeRuntimeArray(v);
  }
  void erase(iterator first, iterator last) {
    if (first == last) return;
    ICHECK(data_ != nullptr) << "ValueError: cannot erase a null array";
    int64_t size = static_cast<int64_t>(this->size());
    int64_t st = std::distance(begin(), first);
    int64_t ed = std::distance(begin(), last);
    ICHECK_LT(st, ed) << "ValueError: cannot erase array in range [" << st << ", " << ed << ")";
    ICHECK(0 <= st && st <= size && 0 <= ed && ed <= size)
        << "ValueError: cannot erase array in range [" << st << ", " << ed << ")"
        << ", because array size is " << size;
    std::vector<ObjectRef> v = Elements();
    v.erase(v.begin() + st, v.begin() + ed);
    data_ = detail::MakeRuntimeArray(v);
  }
  void resize(int64_t n) {
    ICHECK_GE(n, 0) << "ValueError: cannot resize an Array to negative size";
    std::vector<ObjectRef> v = Elements();
    v.resize(static_cast<size_t>(n));
    data_ = detail::MakeRuntimeArray(v);
  }
  /*! \brief Nothing to reserve (arrays are rebuilt on change); makes a null array empty. */
  void reserve(int64_t n) {
    ICHECK_GE(n, 0) << "ValueError: cannot reserve a negative capacity";
    if (data_ == nullptr) data_ = detail::EmptyRuntimeArray();
  }
  void clear() {
    if (data_ != nullptr) data_ = detail::EmptyRuntimeArray();
  }
  void Set(int64_t i, T value) {
    ICHECK(data_ != nullptr) << "ValueError: cannot set an element of a null array";
    ICHECK(0 <= i && static_cast<size_t>(i) < size())
        << "ValueError: cannot set index " << i << ", because Array size is " << size();
    std::vector<ObjectRef> v = Elements();
    v[static_cast<size_t>(i)] = std::move(value);
    data_ = detail::MakeRuntimeArray(v);
  }
  ArrayNode* GetArrayNode() const { return static_cast<ArrayNode*>(data_.get()); }

  /*! \brief Replaces every element e by fmutate(e); the array is rebuilt only if one changed. */
  template <typename F>
  void MutateByApply(F fmutate) {
    if (data_ == nullptr) return;
    std::vector<ObjectRef> v = Elements();
    bool changed = false;
    for (auto& e : v) {
      T next = fmutate(DowncastNoCheck<T>(e));
      if (!next.same_as(e)) {
        e = std::move(next);
        changed = true;
      }
    }
    if (changed) data_ = detail::MakeRuntimeArray(v);
  }

  /*! \brief A new array of fmap(e) for every element e. */
  template <typename F, typename U = decltype(std::declval<F>()(std::declval<T>()))>
  Array<U> Map(F fmap) const {
    std::vector<U> out;
    out.reserve(size());
    for (const T& e : *this) out.push_back(fmap(e));
    return Array<U>(out);
  }

  using ContainerType = ArrayNode;

 private:
  Object* const* Elems() const {
    ArrayNode* p = GetArrayNode();
    return p == nullptr ? nullptr : p->raw_data();
  }
  std::vector<ObjectRef> Elements() const {
    std::vector<ObjectRef> v;
    v.reserve(size());
    Object* const* d = Elems();
    for (size_t i = 0; i < size(); ++i) v.push_back(detail::ObjectFromRuntime(d[i]));
    return v;
  }
  template <typename IterType>
  void Assign(IterType first, IterType last) {
    std::vector<ObjectRef> v;
    for (; first != last; ++first) v.push_back(T(*first));
    data_ = detail::MakeRuntimeArray(v);
  }
};

template <typename T>
struct ObjectTypeChecker<Array<T>> {
  static Optional<String> CheckAndGetMismatch(const Object* ptr) {
    if (ptr == nullptr) return NullOpt;
    if (!ptr->IsInstance<ArrayNode>()) return String(ptr->GetTypeKey());
    const ArrayNode* n = static_cast<const ArrayNode*>(ptr);
    for (size_t i = 0; i < n->size(); i++) {
      Optional<String> check_subtype = ObjectTypeChecker<T>::CheckAndGetMismatch(n->raw_data()[i]);
      if (check_subtype.defined()) {
        return String("Array[index " + std::to_string(i) + ": " +
                      std::string(check_subtype.value()) + "]");
      }
    }
    return NullOpt;
  }
  static bool Check(const Object* ptr) {
    if (ptr == nullptr) return true;
    if (!ptr->IsInstance<ArrayNode>()) return false;
    const ArrayNode* n = static_cast<const ArrayNode*>(ptr);
    for (size_t i = 0; i < n->size(); i++) {
      if (!ObjectTypeChecker<T>::Check(n->raw_data()[i])) return false;
    }
    return true;
  }
  static std::string TypeName() { return "Array[" + ObjectTypeChecker<T>::TypeName() + "]"; }
};

/*! \brief lhs followed by rhs. */
template <typename T,
          typename = typename std::enable_if<std::is_base_of<ObjectRef, T>::value>::type>
inline Array<T> Concat(Array<T> lhs, const Array<T>& rhs) {
  std::vector<T> v(lhs.begin(), lhs.end());
  v.insert(v.end(), rhs.begin(), rhs.end());
  return Array<T>(v);
}

}  // namespace runtime

using runtime::Array;
using runtime::ArrayNode;

}  // namespace tvm

#include <tvm/runtime/packed_func.h>  // NOLINT(*): defines the conversions declared above

#endif  // TVM_RUNTIME_CONTAINER_ARRAY_H_
