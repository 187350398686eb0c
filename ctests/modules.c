/* Module loading from C: TVM v0.8's add_one.so through TVMModLoadFromFile (compared with its
 * .npy output), and a blob loader written in C: a library built from tests/fixtures (testlib.c +
 * the generated c_loader_blob.c) whose __tvm_dev_mblob holds a `test_c` module that this
 * program's loader reads through runtime.module.blob_stream_read / blob_stream_skip. */
#include <stdint.h>
#include "test_util.h"
#include <tvm/runtime/c_backend_api.h>

#ifndef TVM_CTEST_BLOB_LIB
#error "TVM_CTEST_BLOB_LIB (path of the generated test library) must be defined"
#endif

/* --- the C blob loader ------------------------------------------------------------------ */
static int return_resource(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)args; (void)codes; (void)n;
  TVMValue v;
  v.v_int64 = (int64_t)(intptr_t)res;
  int code = kTVMArgInt;
  return TVMCFuncSetReturn(ret, &v, &code, 1);
}

/* Calls runtime.module.blob_stream_read(stream, n) and copies the bytes to `dst`. */
static int stream_read(void* stream, size_t n, void* dst) {
  TVMValue a[2], r;
  int c[2] = {kTVMOpaqueHandle, kTVMArgInt}, rc;
  a[0].v_handle = stream;
  a[1].v_int64 = (int64_t)n;
  if (call_global("runtime.module.blob_stream_read", a, c, 2, &r, &rc) != 0) return -1;
  if (rc != kTVMBytes) return -1;
  const TVMByteArray* b = (const TVMByteArray*)r.v_handle;
  if (b->size != n) return -1;
  memcpy(dst, b->data, n);
  return 0;
}

static int g_loader_calls = 0;

/* runtime.module.loadbinary_test_c(stream, rest): data = u64 value, str function name. The value
 * comes from the `rest` view (then skipped), the name through the stream. Returns a module
 * `test_c` whose function <name> returns the value. */
static int load_test_c(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)res;
  g_loader_calls++;
  if (n != 2 || codes[0] != kTVMOpaqueHandle || codes[1] != kTVMBytes) {
    TVMAPISetLastError("load_test_c: expected (stream, bytes)");
    return -1;
  }
  void* stream = args[0].v_handle;
  const TVMByteArray* rest = (const TVMByteArray*)args[1].v_handle;
  uint64_t value = 0, len = 0;
  if (rest->size < 8) {
    TVMAPISetLastError("load_test_c: short data");
    return -1;
  }
  memcpy(&value, rest->data, 8);
  TVMValue a[2], r;
  int c[2] = {kTVMOpaqueHandle, kTVMArgInt}, rc;
  a[0].v_handle = stream;
  a[1].v_int64 = 8;
  if (call_global("runtime.module.blob_stream_skip", a, c, 2, &r, &rc) != 0) return -1;
  if (stream_read(stream, 8, &len) != 0 || len > 64) return -1;
  char name[65];
  if (stream_read(stream, (size_t)len, name) != 0) return -1;
  name[len] = 0;

  TVMFunctionHandle f = NULL;
  if (TVMFuncCreateFromCFunc(return_resource, (void*)(intptr_t)value, NULL, &f) != 0) return -1;
  TVMValue m[3];
  int mc[3] = {kTVMStr, kTVMStr, kTVMPackedFuncHandle};
  m[0].v_str = "test_c";
  m[1].v_str = name;
  m[2].v_handle = f;
  int status = call_global("runtime.ModuleFromFunctions", m, mc, 3, &r, &rc);
  TVMFuncFree(f);
  if (status != 0) return -1;
  status = TVMCFuncSetReturn(ret, &r, &rc, 1); /* takes its own reference */
  TVMModFree(r.v_handle);
  return status;
}

static const char* type_key(TVMModuleHandle m) {
  static char buf[64];
  TVMValue a, r;
  int c = kTVMModuleHandle, rc;
  a.v_handle = m;
  if (call_global("runtime.ModuleGetTypeKey", &a, &c, 1, &r, &rc) != 0 || rc != kTVMStr) return "?";
  snprintf(buf, sizeof buf, "%s", r.v_str);
  return buf;
}

static int64_t call_int(TVMFunctionHandle f, TVMValue* args, int* codes, int n) {
  TVMValue r;
  int rc;
  if (f == NULL || TVMFuncCall(f, args, codes, n, &r, &rc) != 0 || rc != kTVMArgInt) return -999;
  return r.v_int64;
}

static void test_c_loader(void) {
  TVMFunctionHandle loader = NULL;
  OK(TVMFuncCreateFromCFunc(load_test_c, NULL, NULL, &loader));
  OK(TVMFuncRegisterGlobal("runtime.module.loadbinary_test_c", loader, 0));
  TVMFuncFree(loader);

  TVMModuleHandle mod = NULL;
  OK(TVMModLoadFromFile(TVM_CTEST_BLOB_LIB, "", &mod));
  EXPECT(mod != NULL && g_loader_calls == 1);
  if (mod == NULL) return;
  EXPECT(strcmp(type_key(mod), "library") == 0);
  TVMValue a[2], r;
  int c[2] = {kTVMModuleHandle, kTVMArgInt}, rc;
  a[0].v_handle = mod;
  a[1].v_int64 = 0;
  OK(call_global("runtime.ModuleGetImport", a, c, 2, &r, &rc));
  EXPECT(rc == kTVMModuleHandle && strcmp(type_key(r.v_handle), "test_c") == 0);
  TVMModFree(r.v_handle);

  /* The C module's function, directly and through the imports. */
  TVMFunctionHandle f = NULL;
  OK(TVMModGetFunction(mod, "c_value", 0, &f));
  EXPECT(f == NULL);
  OK(TVMModGetFunction(mod, "c_value", 1, &f));
  EXPECT(call_int(f, NULL, NULL, 0) == 123);
  TVMFuncFree(f);
  /* Generated code's TVMBackendGetFuncFromEnv finds it in the imports. */
  OK(TVMModGetFunction(mod, "test_call_env", 0, &f));
  TVMValue e;
  int ec = kTVMStr;
  e.v_str = "c_value";
  EXPECT(call_int(f, &e, &ec, 1) == 123);
  e.v_str = "no_such_function";
  ERR_HAS(TVMFuncCall(f, &e, &ec, 1, &r, &rc),
          "Check failed: ret == 0 (-1 vs. 0) : Cannot find function no_such_function");
  TVMFuncFree(f);
  OK(TVMModGetFunction(mod, "__tvm_main__", 0, &f));
  EXPECT(call_int(f, NULL, NULL, 0) == 42);
  TVMFuncFree(f);
  OK(TVMModFree(mod));

  /* The stream functions refuse a handle outside a loader call. */
  int dummy = 0;
  a[0].v_handle = &dummy;
  c[0] = kTVMOpaqueHandle;
  a[1].v_int64 = 1;
  c[1] = kTVMArgInt;
  ERR_HAS(call_global("runtime.module.blob_stream_read", a, c, 2, &r, &rc), "is not the stream of a blob loader");
}

/* --- add_one.so exported by TVM v0.8 ---------------------------------------------------- */
static void test_add_one(const char* dir) {
  char path[4096];
  Npy a, b;
  snprintf(path, sizeof path, "%s/add_one.A.npy", dir);
  EXPECT(load_npy(path, &a) == 0);
  snprintf(path, sizeof path, "%s/add_one.B.npy", dir);
  EXPECT(load_npy(path, &b) == 0);
  snprintf(path, sizeof path, "%s/add_one.so", dir);
  TVMModuleHandle mod = NULL;
  OK(TVMModLoadFromFile(path, "", &mod));
  if (mod == NULL || a.data == NULL || b.data == NULL) return;
  EXPECT(strcmp(type_key(mod), "library") == 0);

  size_t nbytes = b.n * sizeof(float);
  TVMArrayHandle x = NULL, y = NULL;
  OK(TVMArrayAlloc(a.shape, a.ndim, kDLFloat, 32, 1, kDLCPU, 0, &x));
  OK(TVMArrayAlloc(b.shape, b.ndim, kDLFloat, 32, 1, kDLCPU, 0, &y));
  OK(TVMArrayCopyFromBytes(x, a.data, a.n * sizeof(float)));
  const char* names[2] = {"add_one", "__tvm_main__"};
  for (int k = 0; k < 2; k++) {
    TVMFunctionHandle f = NULL;
    OK(TVMModGetFunction(mod, names[k], 0, &f));
    EXPECT(f != NULL);
    if (f == NULL) continue;
    TVMValue args[2], r;
    int codes[2] = {kTVMNDArrayHandle, kTVMNDArrayHandle}, rc = -1;
    args[0].v_handle = x;
    args[1].v_handle = y;
    OK(TVMFuncCall(f, args, codes, 2, &r, &rc));
    EXPECT(rc == kTVMNullptr);
    float* got = (float*)malloc(nbytes);
    OK(TVMArrayCopyToBytes(y, got, nbytes));
    EXPECT(memcmp(got, b.data, nbytes) == 0); /* bit-exact: the same kernel made the .npy */
    free(got);
    /* A wrong argument count comes back as an error, not a crash. */
    ERR_HAS(TVMFuncCall(f, args, codes, 1, &r, &rc), "num_args should be 2");
    TVMFuncFree(f);
  }
  TVMFunctionHandle none = NULL;
  OK(TVMModGetFunction(mod, "no_such_symbol", 1, &none));
  EXPECT(none == NULL);
  OK(TVMArrayFree(x));
  OK(TVMArrayFree(y));
  OK(TVMModFree(mod));

  /* Not a shared library: a clear error, out untouched. */
  snprintf(path, sizeof path, "%s/add_one.A.npy", dir);
  TVMModuleHandle bad = (TVMModuleHandle)&mod;
  ERR_HAS(TVMModLoadFromFile(path, "so", &bad), "Failed to load dynamic shared library");
  EXPECT(bad == (TVMModuleHandle)&mod);
  free(a.data);
  free(b.data);
}

int main(void) {
  test_c_loader();
  if (g_failed) return finish(); /* report these failures even if the fixtures are absent */
  test_add_one(fixtures_dir());
  return finish();
}
