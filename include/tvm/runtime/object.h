/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/object.h: the object system. An Object starts with TVM's 16-byte header
 * {uint32 type_index, atomic int32 ref_counter, deleter}, which is also this runtime's object
 * header, so objects made in C++ and objects made by the runtime are the same thing: either side
 * counts references through the header and the last one runs the maker's deleter. Type indices
 * beyond the fixed ones (Object=0, Module=1, NDArray=2, String=3, Array=4, Map=5,
 * ShapeTuple=6) come from the runtime by type key (global runtime.ObjectGetOrAllocTypeIndex),
 * once per type.
 */
#ifndef TVM_RUNTIME_OBJECT_H_
#define TVM_RUNTIME_OBJECT_H_

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/detail/capi.h>
#include <tvm/runtime/logging.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

// Reference counting is always atomic: the runtime counts with atomics on the same header.
#ifndef TVM_OBJECT_ATOMIC_REF_COUNTER
#define TVM_OBJECT_ATOMIC_REF_COUNTER 1
#endif

namespace tvm {
namespace runtime {

/*!
 * \brief Static type indices of TVM v0.8. Only Object..ShapeTuple are fixed across releases;
 * the headers look every other type up by key (kRuntimeClosure / kRuntimeADT / kDynamic are
 * kept for source compatibility).
 */
struct TypeIndex {
  enum {
    kRoot = 0,
    kRuntimeModule = 1,
    kRuntimeNDArray = 2,
    kRuntimeString = 3,
    kRuntimeArray = 4,
    kRuntimeMap = 5,
    kRuntimeShapeTuple = 6,
    kRuntimeClosure = 7,
    kRuntimeADT = 8,
    kStaticIndexEnd,
    kDynamic = kStaticIndexEnd
  };
};

namespace detail {
class ObjectUnsafe;
}  // namespace detail

/*! \brief The base of every object: TVM's 16-byte header. */
class Object {
 public:
  typedef void (*FDeleter)(Object* self);
  uint32_t type_index() const { return type_index_; }
  std::string GetTypeKey() const { return TypeIndex2Key(type_index_); }
  size_t GetTypeKeyHash() const { return TypeIndex2KeyHash(type_index_); }
  template <typename TargetType>
  inline bool IsInstance() const;
  inline bool unique() const;

  /*! \brief The type key of a type index (from the runtime). */
  static std::string TypeIndex2Key(uint32_t tindex) {
    char* key = nullptr;
    detail::CheckCall(TVMObjectTypeIndex2Key(tindex, &key));
    std::string out(key != nullptr ? key : "");
    std::free(key);
    return out;
  }
  static size_t TypeIndex2KeyHash(uint32_t tindex) {
    return std::hash<std::string>()(TypeIndex2Key(tindex));
  }
  /*! \brief The type index of a type key (from the runtime); an error if unknown. */
  static uint32_t TypeKey2Index(const std::string& key) {
    unsigned int tindex = 0;
    detail::CheckCall(TVMObjectTypeKey2Index(key.c_str(), &tindex));
    return tindex;
  }

  using RefCounterType = std::atomic<int32_t>;

  static constexpr const char* _type_key = "runtime.Object";
  static uint32_t _GetOrAllocRuntimeTypeIndex() { return TypeIndex::kRoot; }
  static uint32_t RuntimeTypeIndex() { return TypeIndex::kRoot; }
  static constexpr bool _type_final = false;
  static constexpr uint32_t _type_child_slots = 0;
  static constexpr bool _type_child_slots_can_overflow = true;
  static constexpr bool _type_has_method_visit_attrs = true;
  static constexpr bool _type_has_method_sequal_reduce = false;
  static constexpr bool _type_has_method_shash_reduce = false;
  static constexpr uint32_t _type_index = TypeIndex::kDynamic;

  Object() {}
  Object(const Object&) {}  // NOLINT(*): the header is not copied
  Object(Object&&) {}       // NOLINT(*)
  Object& operator=(const Object&) { return *this; }
  Object& operator=(Object&&) { return *this; }

 protected:
  uint32_t type_index_{0};
  RefCounterType ref_counter_{0};
  FDeleter deleter_ = nullptr;
  static_assert(sizeof(int32_t) == sizeof(RefCounterType) &&
                    alignof(int32_t) == sizeof(RefCounterType),
                "RefCounter ABI check.");

  /*!
   * \brief The runtime's index of a type key, registered under `parent_tindex` when new
   * (global runtime.ObjectGetOrAllocTypeIndex).
   */
  static uint32_t GetOrAllocRuntimeTypeIndex(const std::string& key, uint32_t static_tindex,
                                             uint32_t parent_tindex, uint32_t type_child_slots,
                                             bool type_child_slots_can_overflow) {
    TVMValue v[5];
    int c[5] = {kTVMStr, kDLInt, kDLInt, kDLInt, kDLInt};
    v[0].v_str = key.c_str();
    // -1: a new index of the runtime's choosing (the runtime's numbering may differ from v0.8's).
    v[1].v_int64 = static_tindex == TypeIndex::kDynamic ? -1 : static_cast<int64_t>(static_tindex);
    v[2].v_int64 = parent_tindex;
    v[3].v_int64 = type_child_slots;
    v[4].v_int64 = type_child_slots_can_overflow ? 1 : 0;
    detail::RawRet r;
    detail::CallRaw(TVM_RT_GLOBAL("runtime.ObjectGetOrAllocTypeIndex"), v, c, 5, &r);
    return static_cast<uint32_t>(detail::RetInt(r, "runtime.ObjectGetOrAllocTypeIndex"));
  }

  inline void IncRef();
  inline void DecRef();

 private:
  inline int use_count() const;
  /*! \brief Whether this object's type derives from `parent_tindex` (asks the runtime). */
  bool DerivedFrom(uint32_t parent_tindex) const {
    int derived = 0;
    detail::CheckCall(TVMObjectDerivedFrom(type_index_, parent_tindex, &derived));
    return derived != 0;
  }
  template <typename>
  friend class ObjAllocatorBase;
  template <typename>
  friend class ObjectPtr;
  friend class TVMRetValue;
  friend class ObjectInternal;
  friend class detail::ObjectUnsafe;
};

template <typename RelayRefType, typename ObjectType>
inline RelayRefType GetRef(const ObjectType* ptr);

template <typename SubRef, typename BaseRef>
inline SubRef Downcast(BaseRef ref);

/*! \brief A counted pointer to an object. */
template <typename T>
class ObjectPtr {
 public:
  ObjectPtr() {}
  ObjectPtr(std::nullptr_t) {}  // NOLINT(*)
  ObjectPtr(const ObjectPtr<T>& other) : ObjectPtr(other.data_) {}  // NOLINT(*)
  template <typename U>
  ObjectPtr(const ObjectPtr<U>& other)  // NOLINT(*)
      : ObjectPtr(other.data_) {
    static_assert(std::is_base_of<T, U>::value,
                  "can only assign of child class ObjectPtr to parent");
  }
  ObjectPtr(ObjectPtr<T>&& other) : data_(other.data_) {  // NOLINT(*)
    other.data_ = nullptr;
  }
  template <typename Y>
  ObjectPtr(ObjectPtr<Y>&& other) : data_(other.data_) {  // NOLINT(*)
    static_assert(std::is_base_of<T, Y>::value,
                  "can only assign of child class ObjectPtr to parent");
    other.data_ = nullptr;
  }
  ~ObjectPtr() { this->reset(); }
  void swap(ObjectPtr<T>& other) { std::swap(data_, other.data_); }  // NOLINT(*)
  T* get() const { return static_cast<T*>(data_); }
  T* operator->() const { return get(); }
  T& operator*() const { return *get(); }  // NOLINT(*)
  ObjectPtr<T>& operator=(const ObjectPtr<T>& other) {  // NOLINT(*)
    ObjectPtr(other).swap(*this);
    return *this;
  }
  ObjectPtr<T>& operator=(ObjectPtr<T>&& other) {  // NOLINT(*)
    ObjectPtr(std::move(other)).swap(*this);
    return *this;
  }
  void reset() {
    if (data_ != nullptr) {
      data_->DecRef();
      data_ = nullptr;
    }
  }
  int use_count() const { return data_ != nullptr ? data_->use_count() : 0; }
  bool unique() const { return data_ != nullptr && data_->use_count() == 1; }
  bool operator==(const ObjectPtr<T>& other) const { return data_ == other.data_; }
  bool operator!=(const ObjectPtr<T>& other) const { return data_ != other.data_; }
  bool operator==(std::nullptr_t) const { return data_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return data_ != nullptr; }

 private:
  Object* data_{nullptr};
  explicit ObjectPtr(Object* data) : data_(data) {
    if (data != nullptr) data_->IncRef();
  }
  static ObjectPtr<T> MoveFromRValueRefArg(Object** ref) {
    ObjectPtr<T> ptr;
    ptr.data_ = *ref;
    *ref = nullptr;
    return ptr;
  }
  friend class Object;
  friend class ObjectRef;
  friend struct ObjectPtrHash;
  template <typename>
  friend class ObjectPtr;
  template <typename>
  friend class ObjAllocatorBase;
  friend class TVMPODValue_;
  friend class TVMArgsSetter;
  friend class TVMRetValue;
  friend class TVMArgValue;
  friend class TVMMovableArgValue_;
  friend class detail::ObjectUnsafe;
  template <typename RelayRefType, typename ObjType>
  friend RelayRefType GetRef(const ObjType* ptr);
  template <typename BaseType, typename ObjType>
  friend ObjectPtr<BaseType> GetObjectPtr(ObjType* ptr);
};

/*! \brief The base of all object references. */
class ObjectRef {
 public:
  ObjectRef() = default;
  explicit ObjectRef(ObjectPtr<Object> data) : data_(std::move(data)) {}
  bool same_as(const ObjectRef& other) const { return data_ == other.data_; }
  bool operator==(const ObjectRef& other) const { return data_ == other.data_; }
  bool operator!=(const ObjectRef& other) const { return data_ != other.data_; }
  bool operator<(const ObjectRef& other) const { return data_.get() < other.data_.get(); }
  bool defined() const { return data_ != nullptr; }
  const Object* get() const { return data_.get(); }
  const Object* operator->() const { return get(); }
  bool unique() const { return data_.unique(); }
  int use_count() const { return data_.use_count(); }
  template <typename ObjectType>
  inline const ObjectType* as() const;

  using ContainerType = Object;
  static constexpr bool _type_is_nullable = true;

 protected:
  ObjectPtr<Object> data_;
  Object* get_mutable() const { return data_.get(); }
  template <typename T>
  static T DowncastNoCheck(ObjectRef ref) {
    return T(std::move(ref.data_));
  }
  static void FFIClearAfterMove(ObjectRef* ref) { ref->data_.data_ = nullptr; }
  template <typename ObjectType>
  static ObjectPtr<ObjectType> GetDataPtr(const ObjectRef& ref) {
    return ObjectPtr<ObjectType>(ref.data_.data_);
  }
  friend struct ObjectPtrHash;
  friend class TVMRetValue;
  friend class TVMArgsSetter;
  friend class ObjectInternal;
  friend class detail::ObjectUnsafe;
  template <typename SubRef, typename BaseRef>
  friend SubRef Downcast(BaseRef ref);
};

template <typename BaseType, typename ObjectType>
inline ObjectPtr<BaseType> GetObjectPtr(ObjectType* ptr);

struct ObjectPtrHash {
  size_t operator()(const ObjectRef& a) const { return operator()(a.data_); }
  template <typename T>
  size_t operator()(const ObjectPtr<T>& a) const {
    return std::hash<Object*>()(a.get());
  }
};

struct ObjectPtrEqual {
  bool operator()(const ObjectRef& a, const ObjectRef& b) const { return a.same_as(b); }
  template <typename T>
  size_t operator()(const ObjectPtr<T>& a, const ObjectPtr<T>& b) const {
    return a == b;
  }
};

#define TVM_DECLARE_BASE_OBJECT_INFO(TypeName, ParentType)                                     \
  static_assert(!ParentType::_type_final, "ParentObj marked as final");                        \
  static uint32_t RuntimeTypeIndex() {                                                         \
    static_assert(TypeName::_type_child_slots == 0 || ParentType::_type_child_slots == 0 ||    \
                      TypeName::_type_child_slots < ParentType::_type_child_slots,             \
                  "Need to set _type_child_slots when parent specifies it.");                  \
    if (TypeName::_type_index != ::tvm::runtime::TypeIndex::kDynamic) {                        \
      return TypeName::_type_index;                                                            \
    }                                                                                          \
    return _GetOrAllocRuntimeTypeIndex();                                                      \
  }                                                                                            \
  static uint32_t _GetOrAllocRuntimeTypeIndex() {                                              \
    static uint32_t tindex = Object::GetOrAllocRuntimeTypeIndex(                               \
        TypeName::_type_key, TypeName::_type_index, ParentType::_GetOrAllocRuntimeTypeIndex(), \
        TypeName::_type_child_slots, TypeName::_type_child_slots_can_overflow);                \
    return tindex;                                                                             \
  }

#define TVM_DECLARE_FINAL_OBJECT_INFO(TypeName, ParentType) \
  static const constexpr bool _type_final = true;           \
  static const constexpr int _type_child_slots = 0;         \
  TVM_DECLARE_BASE_OBJECT_INFO(TypeName, ParentType)

#if defined(__GNUC__)
#define TVM_ATTRIBUTE_UNUSED __attribute__((unused))
#else
#define TVM_ATTRIBUTE_UNUSED
#endif

#define TVM_STR_CONCAT_(__x, __y) __x##__y
#define TVM_STR_CONCAT(__x, __y) TVM_STR_CONCAT_(__x, __y)

#define TVM_OBJECT_REG_VAR_DEF static TVM_ATTRIBUTE_UNUSED uint32_t __make_Object_tid

#define TVM_REGISTER_OBJECT_TYPE(TypeName) \
  TVM_STR_CONCAT(TVM_OBJECT_REG_VAR_DEF, __COUNTER__) = TypeName::_GetOrAllocRuntimeTypeIndex()

#define TVM_DEFINE_DEFAULT_COPY_MOVE_AND_ASSIGN(TypeName) \
  TypeName(const TypeName& other) = default;              \
  TypeName(TypeName&& other) = default;                   \
  TypeName& operator=(const TypeName& other) = default;   \
  TypeName& operator=(TypeName&& other) = default;

#define TVM_DEFINE_OBJECT_REF_METHODS(TypeName, ParentType, ObjectName)                        \
  TypeName() = default;                                                                        \
  explicit TypeName(::tvm::runtime::ObjectPtr<::tvm::runtime::Object> n)                      \
      : ParentType(::std::move(n)) {}                                                          \
  TVM_DEFINE_DEFAULT_COPY_MOVE_AND_ASSIGN(TypeName)                                            \
  const ObjectName* operator->() const { return static_cast<const ObjectName*>(data_.get()); } \
  const ObjectName* get() const { return operator->(); }                                       \
  using ContainerType = ObjectName

#define TVM_DEFINE_NOTNULLABLE_OBJECT_REF_METHODS(TypeName, ParentType, ObjectName)            \
  explicit TypeName(::tvm::runtime::ObjectPtr<::tvm::runtime::Object> n)                      \
      : ParentType(::std::move(n)) {}                                                          \
  TVM_DEFINE_DEFAULT_COPY_MOVE_AND_ASSIGN(TypeName)                                            \
  const ObjectName* operator->() const { return static_cast<const ObjectName*>(data_.get()); } \
  const ObjectName* get() const { return operator->(); }                                       \
  static constexpr bool _type_is_nullable = false;                                             \
  using ContainerType = ObjectName

#define TVM_DEFINE_MUTABLE_OBJECT_REF_METHODS(TypeName, ParentType, ObjectName)             \
  TypeName() = default;                                                                     \
  TVM_DEFINE_DEFAULT_COPY_MOVE_AND_ASSIGN(TypeName)                                         \
  explicit TypeName(::tvm::runtime::ObjectPtr<::tvm::runtime::Object> n)                   \
      : ParentType(::std::move(n)) {}                                                       \
  ObjectName* operator->() const { return static_cast<ObjectName*>(data_.get()); }          \
  using ContainerType = ObjectName

#define TVM_DEFINE_MUTABLE_NOTNULLABLE_OBJECT_REF_METHODS(TypeName, ParentType, ObjectName) \
  explicit TypeName(::tvm::runtime::ObjectPtr<::tvm::runtime::Object> n)                   \
      : ParentType(::std::move(n)) {}                                                       \
  TVM_DEFINE_DEFAULT_COPY_MOVE_AND_ASSIGN(TypeName)                                         \
  ObjectName* operator->() const { return static_cast<ObjectName*>(data_.get()); }          \
  ObjectName* get() const { return operator->(); }                                          \
  static constexpr bool _type_is_nullable = false;                                          \
  using ContainerType = ObjectName

#define TVM_DEFINE_OBJECT_REF_COW_METHOD(ObjectName)     \
  ObjectName* CopyOnWrite() {                            \
    ICHECK(data_ != nullptr);                            \
    if (!data_.unique()) {                               \
      auto n = make_object<ObjectName>(*(operator->())); \
      ObjectPtr<Object>(std::move(n)).swap(data_);       \
    }                                                    \
    return static_cast<ObjectName*>(data_.get());        \
  }

inline void Object::IncRef() { ref_counter_.fetch_add(1, std::memory_order_relaxed); }

inline void Object::DecRef() {
  // acq_rel rather than release + acquire fence: the same on x86, and visible to TSan.
  if (ref_counter_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (this->deleter_ != nullptr) (*this->deleter_)(this);
  }
}

inline int Object::use_count() const { return ref_counter_.load(std::memory_order_relaxed); }

template <typename TargetType>
inline bool Object::IsInstance() const {
  const Object* self = this;
  if (self == nullptr) return false;
  if (std::is_same<TargetType, Object>::value) return true;
  uint32_t begin = TargetType::RuntimeTypeIndex();
  if (self->type_index_ == begin) return true;
  if (TargetType::_type_final) return false;
  // Child slots are not reserved by the runtime: derivation is always asked of it.
  if (self->type_index_ < begin) return false;
  return self->DerivedFrom(begin);
}

inline bool Object::unique() const { return use_count() == 1; }

namespace detail {
/*!
 * \brief The cast of ObjectRef::as once the type index matched; module.h specializes it for
 * ModuleNode subclasses, which all share one type index.
 */
template <typename ObjectType, typename Enable = void>
struct ObjectAs {
  static const ObjectType* Cast(const Object* p) { return static_cast<const ObjectType*>(p); }
};
}  // namespace detail

template <typename ObjectType>
inline const ObjectType* ObjectRef::as() const {
  if (data_ != nullptr && data_->IsInstance<ObjectType>()) {
    return detail::ObjectAs<ObjectType>::Cast(data_.get());
  }
  return nullptr;
}

template <typename RefType, typename ObjType>
inline RefType GetRef(const ObjType* ptr) {
  static_assert(std::is_base_of<typename RefType::ContainerType, ObjType>::value,
                "Can only cast to the ref of same container type");
  if (!RefType::_type_is_nullable) {
    ICHECK(ptr != nullptr);
  }
  return RefType(ObjectPtr<Object>(const_cast<Object*>(static_cast<const Object*>(ptr))));
}

template <typename BaseType, typename ObjType>
inline ObjectPtr<BaseType> GetObjectPtr(ObjType* ptr) {
  static_assert(std::is_base_of<BaseType, ObjType>::value,
                "Can only cast to the ref of same container type");
  return ObjectPtr<BaseType>(static_cast<Object*>(ptr));
}

template <typename SubRef, typename BaseRef>
inline SubRef Downcast(BaseRef ref) {
  if (ref.defined()) {
    ICHECK(ref->template IsInstance<typename SubRef::ContainerType>())
        << "Downcast from " << ref->GetTypeKey() << " to " << SubRef::ContainerType::_type_key
        << " failed.";
  } else {
    ICHECK(SubRef::_type_is_nullable) << "Downcast from nullptr to not nullable reference of "
                                      << SubRef::ContainerType::_type_key;
  }
  return SubRef(std::move(ref.data_));
}

namespace detail {

/*!
 * \brief Raw access for the C boundary (not part of TVM's API): object pointers in and out of
 * references without touching the count, and "retain if still alive" for weak caches.
 */
class ObjectUnsafe {
 public:
  /*! \brief Takes over a reference the caller owns (no increment). */
  template <typename T = Object>
  static ObjectPtr<T> FromOwned(Object* p) {
    ObjectPtr<T> out;
    out.data_ = p;
    return out;
  }
  /*! \brief A new reference (increment). */
  template <typename T = Object>
  static ObjectPtr<T> FromBorrowed(Object* p) {
    return ObjectPtr<T>(p);
  }
  /*! \brief Moves a reference's pointer out (the reference becomes null). */
  static Object* Release(ObjectRef* ref) {
    Object* p = ref->data_.data_;
    ref->data_.data_ = nullptr;
    return p;
  }
  template <typename T>
  static Object* Release(ObjectPtr<T>* ptr) {
    Object* p = ptr->data_;
    ptr->data_ = nullptr;
    return p;
  }
  static Object* Raw(const ObjectRef& ref) { return ref.data_.data_; }
  static Object** Slot(ObjectRef* ref) { return &ref->data_.data_; }
  static ObjectPtr<Object>& Data(ObjectRef& ref) { return ref.data_; }  // NOLINT(*)
  /*! \brief Adds a reference unless the count already reached zero (the object is dying). */
  static bool TryIncRef(Object* p) {
    int32_t n = p->ref_counter_.load(std::memory_order_relaxed);
    while (n > 0) {
      if (p->ref_counter_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
    }
    return false;
  }
  static void IncRef(Object* p) { p->IncRef(); }
  static void DecRef(Object* p) { p->DecRef(); }
  static uint32_t TypeIndex(const Object* p) { return p->type_index_; }
};

static_assert(sizeof(Object) == 16, "TVM's object header is 16 bytes");

}  // namespace detail
}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_OBJECT_H_
