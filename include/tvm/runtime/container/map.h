/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/container/map.h: Map<K, V>. Maps are made and kept by the runtime (insertion
 * ordered; String keys compare by content, other keys by identity, as TVM's ObjectHash /
 * ObjectEqual): lookups go through runtime.MapGetItem / MapCount / MapSize, iteration through
 * runtime.MapItems, and the mutating methods (Set, erase) make a new map with the change.
 * MapNode is read-only.
 */
#ifndef TVM_RUNTIME_CONTAINER_MAP_H_
#define TVM_RUNTIME_CONTAINER_MAP_H_

#include <tvm/runtime/container/array.h>
#include <tvm/runtime/container/base.h>
#include <tvm/runtime/container/optional.h>
#include <tvm/runtime/detail/capi.h>

#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

class MapNode;

namespace detail {

/*! \brief Calls a runtime.Map* global on a map (code 8) and an optional key. */
inline void CallMapGlobal(TVMFunctionHandle f, const Object* map, const ObjectRef* key,
                          RawRet* ret) {
  TVMValue v[2];
  int c[2];
  v[0].v_handle = const_cast<Object*>(map);
  c[0] = kTVMObjectHandle;
  std::vector<ObjectRef> keep;
  int n = 1;
  if (key != nullptr) {
    ObjectToRuntime(*key, &v[1], &c[1], &keep);
    n = 2;
  }
  CallRaw(f, v, c, n, ret);
}

/*! \brief A new runtime map of the given pairs (a repeated key keeps its first value). */
inline ObjectPtr<Object> MakeRuntimeMap(const std::vector<std::pair<ObjectRef, ObjectRef>>& kvs) {
  size_t n = kvs.size() * 2;
  std::vector<TVMValue> values(n);
  std::vector<int> codes(n);
  std::vector<ObjectRef> keep;
  for (size_t i = 0; i < kvs.size(); ++i) {
    ICHECK(kvs[i].first.defined()) << "ValueError: a Map key must not be None";
    ObjectToRuntime(kvs[i].first, &values[2 * i], &codes[2 * i], &keep);
    ObjectToRuntime(kvs[i].second, &values[2 * i + 1], &codes[2 * i + 1], &keep);
  }
  RawRet r;
  CallRaw(TVM_RT_GLOBAL("runtime.Map"), values.data(), codes.data(), static_cast<int>(n), &r);
  if (r.code != kTVMObjectHandle) throw Error("TypeError: runtime.Map did not return an object");
  r.Forget();
  return ObjectUnsafe::FromOwned(static_cast<Object*>(r.value.v_handle));
}

/*! \brief The shared empty map (maps are immutable). */
inline ObjectPtr<Object> EmptyRuntimeMap() {
  static Object* empty = [] {
    ObjectPtr<Object> p = MakeRuntimeMap({});
    return ObjectUnsafe::Release(&p);  // one reference kept for the process
  }();
  return ObjectUnsafe::FromBorrowed(empty);
}

}  // namespace detail

/*! \brief The body of a Map (kept by the runtime; read through its globals). */
class MapNode : public Object {
 public:
  using key_type = ObjectRef;
  using mapped_type = ObjectRef;
  using KVType = std::pair<ObjectRef, ObjectRef>;

  /*! \brief Iterates over a snapshot of the entries (runtime.MapItems), in insertion order. */
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using difference_type = int64_t;
    using value_type = KVType;
    using pointer = KVType*;
    using reference = KVType;

    iterator() {}
    bool operator==(const iterator& other) const { return index_ == other.index_; }
    bool operator!=(const iterator& other) const { return index_ != other.index_; }
    KVType operator*() const {
      ICHECK(items_.defined() && 2 * index_ + 1 < items_.size())
          << "IndexError: Map iterator out of range";
      Object* const* d = static_cast<const ArrayNode*>(items_.get())->raw_data();
      return KVType(detail::ObjectFromRuntime(d[2 * index_]),
                    detail::ObjectFromRuntime(d[2 * index_ + 1]));
    }
    struct ArrowProxy {
      KVType kv;
      const KVType* operator->() const { return &kv; }
    };
    ArrowProxy operator->() const { return ArrowProxy{**this}; }
    iterator& operator++() {
      ++index_;
      return *this;
    }
    iterator operator++(int) {
      iterator copy = *this;
      ++index_;
      return copy;
    }

   private:
    iterator(Array<ObjectRef> items, size_t index) : items_(std::move(items)), index_(index) {}
    Array<ObjectRef> items_{ObjectPtr<Object>(nullptr)};
    size_t index_ = 0;
    friend class MapNode;
  };

  size_t size() const {
    detail::RawRet r;
    detail::CallMapGlobal(TVM_RT_GLOBAL("runtime.MapSize"), this, nullptr, &r);
    return static_cast<size_t>(detail::RetInt(r, "runtime.MapSize"));
  }
  size_t count(const key_type& key) const {
    detail::RawRet r;
    detail::CallMapGlobal(TVM_RT_GLOBAL("runtime.MapCount"), this, &key, &r);
    return static_cast<size_t>(detail::RetInt(r, "runtime.MapCount"));
  }
  /*! \brief The value of key (an error if absent). */
  const mapped_type at(const key_type& key) const {
    detail::RawRet r;
    detail::CallMapGlobal(TVM_RT_GLOBAL("runtime.MapGetItem"), this, &key, &r);
    return TakeObject(&r);
  }
  const mapped_type operator[](const key_type& key) const { return at(key); }
  iterator begin() const {
    detail::RawRet r;
    detail::CallMapGlobal(TVM_RT_GLOBAL("runtime.MapItems"), this, nullptr, &r);
    return iterator(Downcast<Array<ObjectRef>>(TakeObject(&r)), 0);
  }
  iterator end() const { return iterator(Array<ObjectRef>(ObjectPtr<Object>(nullptr)), size()); }
  /*! \brief The entry of key, or end(). */
  iterator find(const key_type& key) const {
    iterator it = begin();
    size_t n = it.items_.size() / 2;
    ObjectEqual eq;
    for (; it.index_ < n; ++it.index_) {
      if (eq((*it).first, key)) return it;
    }
    return it;
  }

  static constexpr const uint32_t _type_index = TypeIndex::kRuntimeMap;
  static constexpr const char* _type_key = "Map";
  TVM_DECLARE_FINAL_OBJECT_INFO(MapNode, Object);

 private:
  MapNode() = delete;
  static ObjectRef TakeObject(detail::RawRet* r) {
    if (r->code == kTVMNullptr) return ObjectRef();
    ICHECK(r->code == kTVMObjectHandle || r->code == kTVMModuleHandle ||
           r->code == kTVMNDArrayHandle)
        << "TypeError: a Map global returned a non-object";
    Object* p = static_cast<Object*>(r->value.v_handle);
    if (r->code == kTVMNDArrayHandle) {
      p = reinterpret_cast<Object*>(static_cast<char*>(r->value.v_handle) - sizeof(Object));
    }
    r->Forget();
    return detail::ObjectFromRuntimeOwned(p);
  }
};

/*! \brief An immutable map from K to V (both ObjectRef types). */
template <typename K, typename V,
          typename = typename std::enable_if<std::is_base_of<ObjectRef, K>::value>::type,
          typename = typename std::enable_if<std::is_base_of<ObjectRef, V>::value>::type>
class Map : public ObjectRef {
 public:
  using key_type = K;
  using mapped_type = V;
  class iterator;

  Map() { data_ = detail::EmptyRuntimeMap(); }
  Map(Map<K, V>&& other) { data_ = std::move(other.data_); }             // NOLINT(*)
  Map(const Map<K, V>& other) : ObjectRef(other.data_) {}                // NOLINT(*)
  Map<K, V>& operator=(Map<K, V>&& other) {
    data_ = std::move(other.data_);
    return *this;
  }
  Map<K, V>& operator=(const Map<K, V>& other) {
    data_ = other.data_;
    return *this;
  }
  explicit Map(ObjectPtr<Object> n) : ObjectRef(std::move(n)) {}
  template <typename IterType>
  Map(IterType begin, IterType end) {
    std::vector<std::pair<ObjectRef, ObjectRef>> kvs;
    for (; begin != end; ++begin) kvs.emplace_back(K((*begin).first), V((*begin).second));
    data_ = detail::MakeRuntimeMap(Dedup(kvs));
  }
  Map(std::initializer_list<std::pair<K, V>> init) : Map(init.begin(), init.end()) {}  // NOLINT
  template <typename Hash, typename Equal>
  Map(const std::unordered_map<K, V, Hash, Equal>& init)  // NOLINT(*)
      : Map(init.begin(), init.end()) {}

  /*! \brief The value of key (an error if absent). */
  const V at(const K& key) const { return DowncastNoCheck<V>(GetMapNode()->at(key)); }
  const V operator[](const K& key) const { return this->at(key); }
  size_t size() const {
    MapNode* n = GetMapNode();
    return n == nullptr ? 0 : n->size();
  }
  size_t count(const K& key) const {
    MapNode* n = GetMapNode();
    return n == nullptr ? 0 : n->count(key);
  }
  bool empty() const { return size() == 0; }
  void clear() {
    if (GetMapNode() != nullptr) data_ = detail::EmptyRuntimeMap();
  }
  /*! \brief Sets key to value (a new map; an existing key keeps its place). */
  void Set(const K& key, const V& value) {
    std::vector<std::pair<ObjectRef, ObjectRef>> kvs = Entries();
    ObjectEqual eq;
    bool found = false;
    for (auto& kv : kvs) {
      if (eq(kv.first, key)) {
        kv.second = value;
        found = true;
        break;
      }
    }
    if (!found) kvs.emplace_back(key, value);
    data_ = detail::MakeRuntimeMap(kvs);
  }
  iterator begin() const { return iterator(GetMapNode()->begin()); }
  iterator end() const { return iterator(GetMapNode()->end()); }
  iterator find(const K& key) const { return iterator(GetMapNode()->find(key)); }
  /*! \brief The value of key, or None. */
  Optional<V> Get(const K& key) const {
    MapNode* n = GetMapNode();
    if (n == nullptr || n->count(key) == 0) return NullOptType{};
    return DowncastNoCheck<V>(n->at(key));
  }
  /*! \brief Removes key (a new map). */
  void erase(const K& key) {
    std::vector<std::pair<ObjectRef, ObjectRef>> kvs = Entries();
    ObjectEqual eq;
    std::vector<std::pair<ObjectRef, ObjectRef>> out;
    for (auto& kv : kvs) {
      if (!eq(kv.first, key)) out.push_back(std::move(kv));
    }
    if (out.size() != kvs.size()) data_ = detail::MakeRuntimeMap(out);
  }
  MapNode* GetMapNode() const { return static_cast<MapNode*>(data_.get()); }

  using ContainerType = MapNode;

  /*! \brief Iterates over (key, value) pairs. */
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using difference_type = int64_t;
    using value_type = const std::pair<K, V>;
    using pointer = value_type*;
    using reference = value_type;

    iterator() : itr() {}
    bool operator==(const iterator& other) const { return itr == other.itr; }
    bool operator!=(const iterator& other) const { return itr != other.itr; }
    pointer operator->() const = delete;
    reference operator*() const {
      auto kv = *itr;
      return std::make_pair(DowncastNoCheck<K>(kv.first), DowncastNoCheck<V>(kv.second));
    }
    iterator& operator++() {
      ++itr;
      return *this;
    }
    iterator operator++(int) {
      iterator copy = *this;
      ++(*this);
      return copy;
    }

   private:
    iterator(const MapNode::iterator& itr) : itr(itr) {}  // NOLINT(*)
    template <typename, typename, typename, typename>
    friend class Map;
    MapNode::iterator itr;
  };

 private:
  std::vector<std::pair<ObjectRef, ObjectRef>> Entries() const {
    std::vector<std::pair<ObjectRef, ObjectRef>> kvs;
    MapNode* n = GetMapNode();
    if (n == nullptr) return kvs;
    for (auto it = n->begin(), e = n->end(); it != e; ++it) kvs.push_back(*it);
    return kvs;
  }
  // A later pair overrides an earlier one with the same key (as TVM's Map construction).
  static std::vector<std::pair<ObjectRef, ObjectRef>> Dedup(
      const std::vector<std::pair<ObjectRef, ObjectRef>>& kvs) {
    std::vector<std::pair<ObjectRef, ObjectRef>> out;
    ObjectEqual eq;
    for (const auto& kv : kvs) {
      bool found = false;
      for (auto& o : out) {
        if (eq(o.first, kv.first)) {
          o.second = kv.second;
          found = true;
          break;
        }
      }
      if (!found) out.push_back(kv);
    }
    return out;
  }
};

template <typename K, typename V>
struct ObjectTypeChecker<Map<K, V>> {
  static Optional<String> CheckAndGetMismatch(const Object* ptr) {
    if (ptr == nullptr) return NullOpt;
    if (!ptr->IsInstance<MapNode>()) return String(ptr->GetTypeKey());
    const MapNode* n = static_cast<const MapNode*>(ptr);
    for (auto it = n->begin(), e = n->end(); it != e; ++it) {
      MapNode::KVType kv = *it;
      Optional<String> key_type = ObjectTypeChecker<K>::CheckAndGetMismatch(kv.first.get());
      Optional<String> value_type = ObjectTypeChecker<V>::CheckAndGetMismatch(kv.second.get());
      if (key_type.defined() || value_type.defined()) {
        std::string key_name =
            key_type.defined() ? std::string(key_type.value()) : ObjectTypeChecker<K>::TypeName();
        std::string value_name = value_type.defined() ? std::string(value_type.value())
                                                      : ObjectTypeChecker<V>::TypeName();
        return String("Map[" + key_name + ", " + value_name + "]");
      }
    }
    return NullOpt;
  }
  static bool Check(const Object* ptr) {
    if (ptr == nullptr) return true;
    if (!ptr->IsInstance<MapNode>()) return false;
    const MapNode* n = static_cast<const MapNode*>(ptr);
    for (auto it = n->begin(), e = n->end(); it != e; ++it) {
      MapNode::KVType kv = *it;
      if (!ObjectTypeChecker<K>::Check(kv.first.get())) return false;
      if (!ObjectTypeChecker<V>::Check(kv.second.get())) return false;
    }
    return true;
  }
  static std::string TypeName() {
    return "Map[" + ObjectTypeChecker<K>::TypeName() + ", " + ObjectTypeChecker<V>::TypeName() +
           ']';
  }
};

/*! \brief lhs with every entry of rhs set. */
template <typename K, typename V,
          typename = typename std::enable_if<std::is_base_of<ObjectRef, K>::value>::type,
          typename = typename std::enable_if<std::is_base_of<ObjectRef, V>::value>::type>
inline Map<K, V> Merge(Map<K, V> lhs, const Map<K, V>& rhs) {
  for (const auto& p : rhs) lhs.Set(p.first, p.second);
  return lhs;
}

}  // namespace runtime

using runtime::Map;
using runtime::MapNode;

}  // namespace tvm

#include <tvm/runtime/packed_func.h>  // NOLINT(*): defines the conversions declared in base.h

#endif  // TVM_RUNTIME_CONTAINER_MAP_H_
