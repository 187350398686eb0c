/* The object system: type table, reference counting and the container globals. */
#include <stdint.h>
#include "test_util.h"

static TVMObjectHandle str_obj(const char* s) {
  TVMValue v, rv; int c = kTVMStr, rc;
  v.v_str = s;
  if (call_global("runtime.String", &v, &c, 1, &rv, &rc) != 0 || rc != kTVMObjectHandle) return NULL;
  return rv.v_handle;
}

static void test_type_table(void) {
  static const char* keys[] = {"runtime.Object", "runtime.Module", "runtime.NDArray", "runtime.String", "Array",
                               "Map", "runtime.ShapeTuple", "runtime.Closure", "runtime.ADT"};
  for (unsigned i = 0; i < 9; i++) {
    char* key = NULL;
    OK(TVMObjectTypeIndex2Key(i, &key));
    EXPECT(key != NULL && strcmp(key, keys[i]) == 0);
    free(key);
    unsigned idx = 99;
    if (i == 0) {
      ERR_HAS(TVMObjectTypeKey2Index(keys[i], &idx), "Cannot find type runtime.Object");
    } else {
      OK(TVMObjectTypeKey2Index(keys[i], &idx));
      EXPECT(idx == i);
    }
  }
  unsigned idx;
  ERR_HAS(TVMObjectTypeKey2Index("IRModule", &idx), "Did you forget to register");
  ERR(TVMObjectTypeKey2Index("runtime.Array", &idx));
  char* key;
  ERR_HAS(TVMObjectTypeIndex2Key(1000000, &key), "Unknown type index 1000000");
  int d = -1;
  OK(TVMObjectDerivedFrom(3, 3, &d)); EXPECT(d == 1);
  OK(TVMObjectDerivedFrom(3, 0, &d)); EXPECT(d == 1);
  OK(TVMObjectDerivedFrom(3, 4, &d)); EXPECT(d == 0);
  OK(TVMObjectTypeKey2Index("vm.Closure", &idx));
  OK(TVMObjectDerivedFrom(idx, 7, &d)); EXPECT(d == 1);
  d = -5;
  ERR(TVMObjectDerivedFrom(1000000, 3, &d));
  EXPECT(d == -5);
  ERR(TVMObjectTypeKey2Index(NULL, &idx));
  ERR(TVMObjectTypeKey2Index("Map", NULL));
}

static void test_refcount(void) {
  TVMObjectHandle s = str_obj("counted");
  unsigned tindex = 0;
  OK(TVMObjectGetTypeIndex(s, &tindex));
  EXPECT(tindex == 3);
  /* The header is TVM's: type index at 0, count at 4. */
  EXPECT(*(uint32_t*)s == 3 && ((int32_t*)s)[1] == 1);
  OK(TVMObjectRetain(s));
  EXPECT(((int32_t*)s)[1] == 2);
  OK(TVMObjectFree(s));
  EXPECT(((int32_t*)s)[1] == 1);
  OK(TVMObjectFree(s));
  OK(TVMObjectFree(NULL));
  OK(TVMObjectRetain(NULL));
  ERR(TVMObjectGetTypeIndex(NULL, &tindex));
}

static void test_containers(void) {
  TVMValue v[4], rv; int c[4], rc;
  TVMObjectHandle a = str_obj("a"), b = str_obj("b");
  /* Array of [a, None, b]. */
  v[0].v_handle = a; c[0] = kTVMObjectHandle;
  c[1] = kTVMNullptr;
  v[2].v_handle = b; c[2] = kTVMObjectHandle;
  OK(call_global("runtime.Array", v, c, 3, &rv, &rc));
  EXPECT(rc == kTVMObjectHandle);
  TVMObjectHandle arr = rv.v_handle;
  v[0].v_handle = arr; c[0] = kTVMObjectHandle;
  OK(call_global("runtime.ArraySize", v, c, 1, &rv, &rc));
  EXPECT(rc == kTVMArgInt && rv.v_int64 == 3);
  v[1].v_int64 = 1; c[1] = kTVMArgInt;
  OK(call_global("runtime.ArrayGetItem", v, c, 2, &rv, &rc));
  EXPECT(rc == kTVMNullptr);
  v[1].v_int64 = 2;
  OK(call_global("runtime.ArrayGetItem", v, c, 2, &rv, &rc));
  EXPECT(rc == kTVMObjectHandle && rv.v_handle == b);
  OK(TVMObjectFree(rv.v_handle));
  v[1].v_int64 = 3;
  ERR_HAS(call_global("runtime.ArrayGetItem", v, c, 2, &rv, &rc), "out of bound");
  /* A string becomes a String element (TVM v0.9+; v0.8 refused it). */
  v[0].v_str = "x"; c[0] = kTVMStr;
  OK(call_global("runtime.Array", v, c, 1, &rv, &rc));
  EXPECT(rc == kTVMObjectHandle);
  if (rc == kTVMObjectHandle) OK(TVMObjectFree(rv.v_handle));

  /* Map {"k": arr, b: a}; string keys compare by content. */
  v[0].v_str = "k"; c[0] = kTVMStr;
  v[1].v_handle = arr; c[1] = kTVMObjectHandle;
  v[2].v_handle = b; c[2] = kTVMObjectHandle;
  v[3].v_handle = a; c[3] = kTVMObjectHandle;
  OK(call_global("runtime.Map", v, c, 4, &rv, &rc));
  TVMObjectHandle map = rv.v_handle;
  ERR(call_global("runtime.Map", v, c, 3, &rv, &rc));
  v[0].v_handle = map; c[0] = kTVMObjectHandle;
  OK(call_global("runtime.MapSize", v, c, 1, &rv, &rc));
  EXPECT(rv.v_int64 == 2);
  v[1].v_str = "k"; c[1] = kTVMStr;
  OK(call_global("runtime.MapGetItem", v, c, 2, &rv, &rc));
  EXPECT(rc == kTVMObjectHandle && rv.v_handle == arr);
  OK(TVMObjectFree(rv.v_handle));
  OK(call_global("runtime.MapCount", v, c, 2, &rv, &rc));
  EXPECT(rv.v_int64 == 1);
  v[1].v_str = "missing";
  ERR_HAS(call_global("runtime.MapGetItem", v, c, 2, &rv, &rc), "cannot find the corresponding key");
  OK(call_global("runtime.MapCount", v, c, 2, &rv, &rc));
  EXPECT(rv.v_int64 == 0);
  OK(call_global("runtime.MapItems", v, c, 1, &rv, &rc));
  TVMObjectHandle items = rv.v_handle;
  v[0].v_handle = items;
  OK(call_global("runtime.ArraySize", v, c, 1, &rv, &rc));
  EXPECT(rv.v_int64 == 4);
  v[1].v_int64 = 0; c[1] = kTVMArgInt;
  OK(call_global("runtime.ArrayGetItem", v, c, 2, &rv, &rc));
  TVMValue sv = rv; int sc = rc;
  OK(call_global("runtime.GetFFIString", &sv, &sc, 1, &rv, &rc));
  EXPECT(rc == kTVMStr && strcmp(rv.v_str, "k") == 0);
  OK(TVMObjectFree(sv.v_handle));
  OK(TVMObjectFree(items));

  /* ShapeTuple and ADT. */
  v[0].v_int64 = 2; v[1].v_int64 = 7; c[0] = c[1] = kTVMArgInt;
  OK(call_global("runtime.ShapeTuple", v, c, 2, &rv, &rc));
  EXPECT(rc == kTVMObjectHandle);
  TVMObjectHandle st = rv.v_handle;
  v[0].v_handle = st; c[0] = kTVMObjectHandle;
  OK(call_global("runtime.GetShapeTupleSize", v, c, 1, &rv, &rc));
  EXPECT(rv.v_int64 == 2);
  v[1].v_int64 = 1; c[1] = kTVMArgInt;
  OK(call_global("runtime.GetShapeTupleElem", v, c, 2, &rv, &rc));
  EXPECT(rv.v_int64 == 7);
  v[1].v_int64 = 2;
  ERR(call_global("runtime.GetShapeTupleElem", v, c, 2, &rv, &rc));
  /* C++ body layout: {int64_t* data; uint64_t size}. */
  EXPECT(((uint64_t*)st)[3] == 2 && ((int64_t**)st)[2][1] == 7);
  v[0].v_int64 = 5; c[0] = kTVMArgInt;
  v[1].v_handle = a; c[1] = kTVMObjectHandle;
  v[2].v_handle = st; c[2] = kTVMObjectHandle;
  OK(call_global("runtime.ADT", v, c, 3, &rv, &rc));
  TVMObjectHandle adt = rv.v_handle;
  v[0].v_handle = adt; c[0] = kTVMObjectHandle;
  OK(call_global("runtime.GetADTTag", v, c, 1, &rv, &rc)); EXPECT(rv.v_int64 == 5);
  OK(call_global("runtime.GetADTSize", v, c, 1, &rv, &rc)); EXPECT(rv.v_int64 == 2);
  v[1].v_int64 = 1; c[1] = kTVMArgInt;
  OK(call_global("runtime.GetADTFields", v, c, 2, &rv, &rc));
  EXPECT(rv.v_handle == st);
  OK(TVMObjectFree(rv.v_handle));
  OK(call_global("runtime.ObjectPtrHash", v, c, 1, &rv, &rc));
  EXPECT(rc == kTVMArgInt && rv.v_int64 == (int64_t)(intptr_t)adt);
  v[0].v_int64 = 0; c[0] = kTVMArgInt;
  OK(call_global("runtime.DumpTypeTable", v, c, 1, &rv, &rc));
  EXPECT(rc == kTVMNullptr);

  OK(TVMObjectFree(adt)); OK(TVMObjectFree(st)); OK(TVMObjectFree(map));
  OK(TVMObjectFree(arr)); OK(TVMObjectFree(a)); OK(TVMObjectFree(b));
}

int main(void) {
  test_type_table();
  test_refcount();
  test_containers();
  return finish();
}
