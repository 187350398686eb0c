// The structural visit and mutate hooks of the built-in types, for tvm-ffi 0.1.15's header
// engines (StructuralVisitorObj / StructuralMutatorObj of extra/structural_visit.h and
// extra/structural_mutate.h, inline in C++ programs and in libraries such as
// libtvm_ffi_testing.so): registered as native type attributes, as tvm-ffi's own library
// registers them, while libtvm_ffi.so loads:
//   __s_visit__                    ffi.Array, ffi.List (items), ffi.Map, ffi.Dict (values)
//   __s_mutate__                   the same, copy on write: a new container from the first
//                                  changed item on, the input untouched; ffi.String, ffi.Bytes
//                                  and ffi.BigInt are leaves (unchanged)
//   __s_maybe_inplace_mutate__     the same, the container itself updated in place
// The runtime's own traversals (ffi.StructuralVisit & co., crates/tvm-ffi/src/structural) handle these
// types natively and leave the hooks to the header engines.

#include <tvm/ffi/big_int.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/dict.h>
#include <tvm/ffi/container/list.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/extra/structural_mutate.h>
#include <tvm/ffi/extra/structural_visit.h>
#include <tvm/ffi/reflection/registry.h>

#include <utility>

namespace tvm_rt_cxx {
namespace {

using namespace tvm::ffi;  // NOLINT(build/namespaces)
namespace refl = tvm::ffi::reflection;
using tvm::ffi::detail::AnyUnsafe;

// ---- visit

template <typename Seq>
Expected<Optional<VisitInterrupt>> VisitItems(StructuralVisitorObj* visitor, AnyView value) noexcept {
  const Seq* seq = AnyUnsafe::RawObjectPtrFromAnyViewAfterCheck<const Seq>(value);
  for (const Any& item : *seq) {
    TVM_FFI_S_VISIT_MAYBE_EARLY_RETURN(visitor->VisitExpected(item));
  }
  return Optional<VisitInterrupt>();
}

template <typename MapT>
Expected<Optional<VisitInterrupt>> VisitValues(StructuralVisitorObj* visitor, AnyView value) noexcept {
  const MapT* map = AnyUnsafe::RawObjectPtrFromAnyViewAfterCheck<const MapT>(value);
  for (const auto& kv : *map) {
    TVM_FFI_S_VISIT_MAYBE_EARLY_RETURN(visitor->VisitExpected(kv.second));
  }
  return Optional<VisitInterrupt>();
}

// ---- mutate

Expected<UnchangedOr<Any>> Leaf(StructuralMutatorObj*, AnyView) noexcept { return Unchanged(); }

// Items are mutated in order; the first one that changes starts a copy holding the items
// before it, and every later item goes into the copy (mutated or not).
template <typename Seq>
Expected<UnchangedOr<Any>> MutateItems(StructuralMutatorObj* mutator, AnyView value) noexcept {
  const Seq* seq = AnyUnsafe::RawObjectPtrFromAnyViewAfterCheck<const Seq>(value);
  const int64_t n = static_cast<int64_t>(seq->size());
  const Any* items = seq->begin();
  ObjectPtr<Seq> copy;
  for (int64_t i = 0; i < n; ++i) {
    TVM_FFI_S_MUTATE_ASSIGN_OR_RETURN(UnchangedOr<Any>, r,
                                      mutator->MutateExpected(items[i], InplaceMode::kDisallow));
    bool same = r.UnchangedOrSameAs(items[i]);
    if (copy == nullptr) {
      if (same) continue;
      copy = Seq::CreateRepeated(n, Any());
      copy->InitRange(0, items, items + i);
    }
    copy->SetItemAfterCheck(i, same ? Any(items[i]) : std::move(r).ValueUnchecked());
  }
  if (copy == nullptr) return Unchanged();
  return Any(ObjectRef(std::move(copy)));
}

template <typename Seq>
Expected<UnchangedOr<Any>> MutateItemsInPlace(StructuralMutatorObj* mutator, AnyView value) noexcept {
  Seq* seq = AnyUnsafe::RawObjectPtrFromAnyViewAfterCheck<Seq>(value);
  for (int64_t i = 0; i < static_cast<int64_t>(seq->size()); ++i) {
    const Any& item = seq->begin()[i];
    TVM_FFI_S_MUTATE_ASSIGN_OR_RETURN(UnchangedOr<Any>, r,
                                      mutator->MutateExpected(item, InplaceMode::kAllow));
    if (!r.UnchangedOrSameAs(item)) seq->SetItemAfterCheck(i, std::move(r).ValueUnchecked());
  }
  return Unchanged();
}

// Values only (keys are not structural children); a changed value starts a shallow copy of the
// map (same keys, same order), whose entries from there on are written as they come.
template <typename MapT>
Expected<UnchangedOr<Any>> MutateValues(StructuralMutatorObj* mutator, AnyView value) noexcept {
  const MapT* map = AnyUnsafe::RawObjectPtrFromAnyViewAfterCheck<const MapT>(value);
  ObjectPtr<Object> copy;
  MapBaseObj::iterator out;
  for (auto it = map->begin(); it != map->end(); ++it) {
    const Any& old = it->second;
    TVM_FFI_S_MUTATE_ASSIGN_OR_RETURN(UnchangedOr<Any>, r,
                                      mutator->MutateExpected(old, InplaceMode::kDisallow));
    bool same = r.UnchangedOrSameAs(old);
    if (copy == nullptr) {
      if (same) continue;
      copy = MapT::ShallowCopy(map);
      out = static_cast<MapBaseObj*>(copy.get())->begin();
      for (auto j = map->begin(); j != it; ++j) ++out;
    }
    if (!same) out->second = std::move(r).ValueUnchecked();
    ++out;
  }
  if (copy == nullptr) return Unchanged();
  return Any(ObjectRef(std::move(copy)));
}

template <typename MapT>
Expected<UnchangedOr<Any>> MutateValuesInPlace(StructuralMutatorObj* mutator, AnyView value) noexcept {
  MapT* map = AnyUnsafe::RawObjectPtrFromAnyViewAfterCheck<MapT>(value);
  for (auto it = map->begin(); it != map->end(); ++it) {
    TVM_FFI_S_MUTATE_ASSIGN_OR_RETURN(UnchangedOr<Any>, r,
                                      mutator->MutateExpected(it->second, InplaceMode::kAllow));
    if (!r.UnchangedOrSameAs(it->second)) it->second = std::move(r).ValueUnchecked();
  }
  return Unchanged();
}

template <typename T, auto Visit, auto Mutate, auto InPlace>
void Container() {
  refl::TypeAttrDef<T>()
      .template native_fn_attr<Visit>(type_attr::kStructuralVisit)
      .template native_fn_attr<Mutate>(type_attr::kStructuralMutate)
      .template native_fn_attr<InPlace>(type_attr::kStructuralMaybeInplaceMutate);
}

template <typename T>
void LeafType() {
  refl::TypeAttrDef<T>()
      .template native_fn_attr<&Leaf>(type_attr::kStructuralMutate)
      .template native_fn_attr<&Leaf>(type_attr::kStructuralMaybeInplaceMutate);
}

struct Register {
  Register() {
    refl::EnsureTypeAttrColumn(type_attr::kStructuralVisit);
    refl::EnsureTypeAttrColumn(type_attr::kStructuralMutate);
    refl::EnsureTypeAttrColumn(type_attr::kStructuralMaybeInplaceMutate);
    Container<ArrayObj, &VisitItems<ArrayObj>, &MutateItems<ArrayObj>, &MutateItemsInPlace<ArrayObj>>();
    Container<ListObj, &VisitItems<ListObj>, &MutateItems<ListObj>, &MutateItemsInPlace<ListObj>>();
    Container<MapObj, &VisitValues<MapObj>, &MutateValues<MapObj>, &MutateValuesInPlace<MapObj>>();
    Container<DictObj, &VisitValues<DictObj>, &MutateValues<DictObj>, &MutateValuesInPlace<DictObj>>();
    LeafType<tvm::ffi::details::StringObj>();
    LeafType<tvm::ffi::details::BytesObj>();
    LeafType<tvm::ffi::details::BigIntObj>();
  }
} register_hooks;

}  // namespace
}  // namespace tvm_rt_cxx
