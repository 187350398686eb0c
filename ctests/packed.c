/* PackedFunc marshalling through C callbacks: every type code in both directions, ownership
 * (SetReturn copies, CbArgToReturn acquires, rvalue refs move), finalizers, error propagation. */
#include <stdint.h>
#include "test_util.h"

static int g_fin_calls = 0;
static void fin(void* res) { g_fin_calls += (int)(intptr_t)res; }

/* Returns its first argument unchanged (copy semantics of TVMCFuncSetReturn). */
static int echo(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)res;
  if (n < 1) return 0;
  return TVMCFuncSetReturn(ret, &args[0], &codes[0], 1);
}

/* Fails with a typed error message. */
static int fail_kind(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)args; (void)codes; (void)n; (void)ret; (void)res;
  TVMAPISetLastError("ValueError: bad input from callback");
  return -1;
}

/* Returns -2: a frontend error is pending, the slot must stay untouched. */
static int fail_pending(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)args; (void)codes; (void)n; (void)ret; (void)res;
  return -2;
}

/* Keeps its argument past the call through TVMCbArgToReturn. */
static TVMValue g_kept;
static int g_kept_code = -1;
static int keep(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)n; (void)ret; (void)res;
  g_kept = args[0];
  g_kept_code = codes[0];
  return TVMCbArgToReturn(&g_kept, &g_kept_code);
}

/* Calls `echo` through TVMFuncCall from inside a callback (nested calls). */
static int nested(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)n;
  TVMFunctionHandle inner = (TVMFunctionHandle)res;
  TVMValue rv; int rc;
  if (TVMFuncCall(inner, args, codes, 1, &rv, &rc) != 0) return -1;
  return TVMCFuncSetReturn(ret, &rv, &rc, 1);
}

static TVMFunctionHandle make(TVMPackedCFunc f, void* res, TVMPackedCFuncFinalizer fn) {
  TVMFunctionHandle h = NULL;
  OK(TVMFuncCreateFromCFunc(f, res, fn, &h));
  EXPECT(h != NULL);
  return h;
}

static void call1(TVMFunctionHandle f, TVMValue v, int code, TVMValue* rv, int* rc) {
  OK(TVMFuncCall(f, &v, &code, 1, rv, rc));
}

static void test_pod_codes(void) {
  TVMFunctionHandle f = make(echo, NULL, NULL);
  TVMValue v, rv; int rc;
  v.v_int64 = -42; call1(f, v, kTVMArgInt, &rv, &rc);
  EXPECT(rc == kTVMArgInt && rv.v_int64 == -42);
  v.v_float64 = 2.5; call1(f, v, kTVMArgFloat, &rv, &rc);
  EXPECT(rc == kTVMArgFloat && rv.v_float64 == 2.5);
  v.v_handle = (void*)&rv; call1(f, v, kTVMOpaqueHandle, &rv, &rc);
  EXPECT(rc == kTVMOpaqueHandle);
  v.v_handle = NULL; call1(f, v, kTVMNullptr, &rv, &rc);
  EXPECT(rc == kTVMNullptr);
  v.v_device.device_type = kDLCPU; v.v_device.device_id = 3; call1(f, v, kDLDevice, &rv, &rc);
  EXPECT(rc == kDLDevice && rv.v_device.device_type == kDLCPU && rv.v_device.device_id == 3);
  /* A data type comes back as its text form (code 11). */
  v.v_type.code = kDLFloat; v.v_type.bits = 32; v.v_type.lanes = 4; call1(f, v, kTVMDataType, &rv, &rc);
  EXPECT(rc == kTVMStr && strcmp(rv.v_str, "float32x4") == 0);
  v.v_type.code = kDLUInt; v.v_type.bits = 1; v.v_type.lanes = 1; call1(f, v, kTVMDataType, &rv, &rc);
  EXPECT(rc == kTVMStr && strcmp(rv.v_str, "bool") == 0);
  v.v_type.bits = 0; call1(f, v, kTVMDataType, &rv, &rc);
  EXPECT(rc == kTVMStr && strcmp(rv.v_str, "") == 0);
  /* Strings are copied into a thread-local slot. */
  char buf[8] = "hello";
  v.v_str = buf; call1(f, v, kTVMStr, &rv, &rc);
  buf[0] = 'j';
  EXPECT(rc == kTVMStr && strcmp(rv.v_str, "hello") == 0);
  /* Bytes with an embedded NUL survive. */
  TVMByteArray ba = {"a\0b", 3};
  v.v_handle = &ba; call1(f, v, kTVMBytes, &rv, &rc);
  EXPECT(rc == kTVMBytes);
  TVMByteArray* out = (TVMByteArray*)rv.v_handle;
  EXPECT(out->size == 3 && memcmp(out->data, "a\0b", 3) == 0);
  OK(TVMByteArrayFree(out));
  /* A raw DLTensor pointer passes through. */
  DLTensor t; memset(&t, 0, sizeof t);
  v.v_handle = &t; call1(f, v, kTVMDLTensorHandle, &rv, &rc);
  EXPECT(rc == kTVMDLTensorHandle && rv.v_handle == &t);
  /* Extension codes are copied bit-wise. */
  v.v_int64 = 77; call1(f, v, kTVMExtBegin + 1, &rv, &rc);
  EXPECT(rc == kTVMExtBegin + 1 && rv.v_int64 == 77);
  /* No arguments, no result: null. */
  OK(TVMFuncCall(f, NULL, NULL, 0, &rv, &rc));
  EXPECT(rc == kTVMNullptr);
  OK(TVMFuncFree(f));
}

static void test_object_codes(void) {
  TVMFunctionHandle f = make(echo, NULL, NULL);
  TVMValue v, rv; int rc;
  /* NDArray: the result is a new reference owned by the caller. */
  int64_t shape[1] = {4};
  TVMArrayHandle a = NULL;
  OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &a));
  v.v_handle = a; call1(f, v, kTVMNDArrayHandle, &rv, &rc);
  EXPECT(rc == kTVMNDArrayHandle && rv.v_handle == a);
  OK(TVMArrayFree((TVMArrayHandle)rv.v_handle));
  unsigned tindex = 0;
  OK(TVMArrayGetTypeIndex(a, &tindex));
  EXPECT(tindex == 2);
  /* Object (a String): new reference. */
  TVMValue sv; int sc = kTVMStr; sv.v_str = "obj";
  OK(call_global("runtime.String", &sv, &sc, 1, &rv, &rc));
  EXPECT(rc == kTVMObjectHandle);
  TVMObjectHandle s = rv.v_handle;
  v.v_handle = s; call1(f, v, kTVMObjectHandle, &rv, &rc);
  EXPECT(rc == kTVMObjectHandle && rv.v_handle == s);
  OK(TVMObjectFree(rv.v_handle));
  /* Function: a new handle each time, freed independently. */
  TVMFunctionHandle g = make(echo, NULL, NULL);
  v.v_handle = g; call1(f, v, kTVMPackedFuncHandle, &rv, &rc);
  EXPECT(rc == kTVMPackedFuncHandle && rv.v_handle != NULL && rv.v_handle != g);
  TVMFunctionHandle g2 = rv.v_handle;
  OK(TVMFuncFree(g));
  v.v_int64 = 5; call1(g2, v, kTVMArgInt, &rv, &rc);
  EXPECT(rc == kTVMArgInt && rv.v_int64 == 5);
  OK(TVMFuncFree(g2));
  /* An rvalue reference is read, not moved, by SetReturn. */
  void* slot = s;
  v.v_handle = &slot; call1(f, v, kTVMObjectRValueRefArg, &rv, &rc);
  EXPECT(rc == kTVMObjectHandle && rv.v_handle == s && slot == s);
  OK(TVMObjectFree(rv.v_handle));

  /* CbArgToReturn: keep an NDArray beyond the call. */
  TVMFunctionHandle k = make(keep, NULL, NULL);
  v.v_handle = a; call1(k, v, kTVMNDArrayHandle, &rv, &rc);
  EXPECT(g_kept_code == kTVMNDArrayHandle && g_kept.v_handle == a);
  OK(TVMArrayFree(a));
  /* Still alive through the kept reference. */
  EXPECT(((DLTensor*)g_kept.v_handle)->shape[0] == 4);
  OK(TVMArrayFree((TVMArrayHandle)g_kept.v_handle));
  /* Rvalue ref through CbArgToReturn moves the object out. */
  slot = s;
  v.v_handle = &slot; call1(k, v, kTVMObjectRValueRefArg, &rv, &rc);
  EXPECT(g_kept_code == kTVMObjectHandle && g_kept.v_handle == s && slot == NULL);
  OK(TVMObjectFree(g_kept.v_handle));
  /* Strings cannot be kept this way. */
  TVMValue sv2; int sc2 = kTVMStr; sv2.v_str = "x";
  ERR(TVMCbArgToReturn(&sv2, &sc2));
  OK(TVMFuncFree(k));
  OK(TVMFuncFree(f));
}

static void test_finalizer_and_errors(void) {
  g_fin_calls = 0;
  TVMFunctionHandle f = make(echo, (void*)(intptr_t)1, fin);
  TVMFunctionHandle copy = NULL;
  TVMValue v, rv; int rc;
  v.v_handle = f; call1(f, v, kTVMPackedFuncHandle, &rv, &rc);
  copy = rv.v_handle;
  OK(TVMFuncFree(f));
  EXPECT(g_fin_calls == 0);
  OK(TVMFuncFree(copy));
  EXPECT(g_fin_calls == 1);
  OK(TVMFuncFree(NULL));

  TVMFunctionHandle bad = make(fail_kind, NULL, NULL);
  v.v_int64 = 1; int code = kTVMArgInt;
  ERR(TVMFuncCall(bad, &v, &code, 1, &rv, &rc));
  EXPECT(strncmp(TVMGetLastError(), "ValueError: bad input from callback", 35) == 0);
  /* A nested call carries the inner error out with its kind. */
  TVMFunctionHandle outer = make(nested, bad, NULL);
  ERR(TVMFuncCall(outer, &v, &code, 1, &rv, &rc));
  EXPECT(strncmp(TVMGetLastError(), "ValueError: ", 12) == 0);
  TVMFunctionHandle e = make(echo, NULL, NULL);
  TVMFunctionHandle outer_ok = make(nested, e, NULL);
  v.v_int64 = 9; OK(TVMFuncCall(outer_ok, &v, &code, 1, &rv, &rc));
  EXPECT(rc == kTVMArgInt && rv.v_int64 == 9);

  TVMFunctionHandle pend = make(fail_pending, NULL, NULL);
  TVMAPISetLastError("marker");
  EXPECT(TVMFuncCall(pend, &v, &code, 1, &rv, &rc) == -2);
  EXPECT(strcmp(TVMGetLastError(), "marker") == 0);

  /* Null handles and pointers are errors, not crashes. */
  ERR(TVMFuncCall(NULL, &v, &code, 1, &rv, &rc));
  ERR(TVMFuncCall(e, &v, &code, 1, NULL, &rc));
  ERR(TVMFuncCreateFromCFunc(NULL, NULL, NULL, &f));
  ERR(TVMFuncCreateFromCFunc(echo, NULL, NULL, NULL));
  ERR(TVMCFuncSetReturn(NULL, &v, &code, 1));
  TVMAPISetLastError(NULL);
  EXPECT(strcmp(TVMGetLastError(), "") == 0);
  OK(TVMFuncFree(bad)); OK(TVMFuncFree(outer)); OK(TVMFuncFree(e)); OK(TVMFuncFree(outer_ok)); OK(TVMFuncFree(pend));
}

static void test_builtin_coercions(void) {
  TVMValue v[2], rv; int c[2], rc;
  /* A typed global rejects a wrong type code with TVM's wording. */
  v[0].v_str = "s"; c[0] = kTVMStr;
  v[1].v_str = "x"; c[1] = kTVMStr;
  ERR_HAS(call_global("runtime.GetShapeTupleElem", v, c, 2, &rv, &rc), "Object");
  ERR_HAS(call_global("runtime.RuntimeEnabled", v, c, 0, &rv, &rc), "expects 1 arguments, but 0 were provided");
  /* Unknown type codes are errors. */
  v[0].v_int64 = 1; c[0] = 999;
  ERR_HAS(call_global("runtime.Tuple", v, c, 1, &rv, &rc), "999");
  /* Strings as bytes and bytes as strings. */
  TVMByteArray ba = {"abc", 3};
  v[0].v_handle = &ba; c[0] = kTVMBytes;
  OK(call_global("runtime.String", v, c, 1, &rv, &rc));
  TVMObjectHandle s = rv.v_handle;
  v[0].v_handle = s; c[0] = kTVMObjectHandle;
  OK(call_global("runtime.GetFFIString", v, c, 1, &rv, &rc));
  EXPECT(rc == kTVMStr && strcmp(rv.v_str, "abc") == 0);
  OK(TVMObjectFree(s));
}

int main(void) {
  test_pod_codes();
  test_object_codes();
  test_finalizer_and_errors();
  test_builtin_coercions();
  return finish();
}
