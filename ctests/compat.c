/* Exports and conventions of TVM v0.9-v0.19 from a C program: TVM v0.18's AOT export
 * (aot_mlp.so: AotExecutorFactory > metadata_module > library) against its manifest output,
 * two prefixed system-library models linked into this program (compat_syslib_models.c), bool
 * arguments (kTVMArgBool), and the error functions that v0.14 added to the header. The v0.18
 * fixtures are looked for beside TVM_FIXTURES (../fixtures-v0.18); the AOT part skips when they
 * are absent, or fails under CI=true. */
#include <stdint.h>
#include "test_util.h"

static TVMFunctionHandle get(TVMModuleHandle m, const char* name) {
  TVMFunctionHandle f = NULL;
  OK(TVMModGetFunction(m, name, 0, &f));
  EXPECT(f != NULL);
  return f;
}

static int64_t call_int(TVMFunctionHandle f, TVMValue* args, int* codes, int n) {
  TVMValue r;
  int rc = -1;
  OK(TVMFuncCall(f, args, codes, n, &r, &rc));
  EXPECT(rc == kTVMArgInt);
  return rc == kTVMArgInt ? r.v_int64 : -1;
}

static TVMModuleHandle system_lib(const char* prefix) {
  TVMValue a, r;
  int code = kTVMStr, rc = -1;
  a.v_str = prefix;
  OK(call_global("runtime.SystemLib", &a, &code, prefix ? 1 : 0, &r, &rc));
  EXPECT(rc == kTVMModuleHandle);
  return r.v_handle;
}

static void prefixed_system_libraries(void) {
  TVMModuleHandle a = system_lib("modela_"), b = system_lib("modelb_");
  EXPECT(a != b);
  TVMFunctionHandle fa = get(a, "compute"), fb = get(b, "compute");
  EXPECT(call_int(fa, NULL, NULL, 0) == 1);
  EXPECT(call_int(fb, NULL, NULL, 0) == 2);
  /* Each model's module context names its own module. */
  TVMFunctionHandle ca = get(a, "context");
  TVMValue r;
  int rc;
  OK(TVMFuncCall(ca, NULL, NULL, 0, &r, &rc));
  EXPECT(rc == kTVMOpaqueHandle && r.v_handle == a);
  /* The unprefixed system library does not see the prefixed names. */
  TVMModuleHandle plain = system_lib(NULL);
  TVMFunctionHandle none = NULL;
  OK(TVMModGetFunction(plain, "compute", 0, &none));
  EXPECT(none == NULL);
  TVMFuncFree(fa);
  TVMFuncFree(fb);
  TVMFuncFree(ca);
  TVMModFree(a);
  TVMModFree(b);
  TVMModFree(plain);
}

static void bools_and_error_functions(void) {
  EXPECT(kTVMArgBool == 15);
  /* runtime.ShapeTuple(true, false): bools are read as 1 and 0. */
  TVMValue args[2], r;
  int codes[2] = {kTVMArgBool, kTVMArgBool}, rc = -1;
  args[0].v_int64 = 1;
  args[1].v_int64 = 0;
  OK(call_global("runtime.ShapeTuple", args, codes, 2, &r, &rc));
  EXPECT(rc == kTVMObjectHandle);
  TVMValue q[2];
  int qc[2] = {kTVMObjectHandle, kTVMArgInt};
  q[0].v_handle = r.v_handle;
  q[1].v_int64 = 0;
  TVMValue e;
  int ec = -1;
  OK(call_global("runtime.GetShapeTupleElem", q, qc, 2, &e, &ec));
  EXPECT(ec == kTVMArgInt && e.v_int64 == 1);
  TVMObjectFree(r.v_handle);
  /* The v0.14 error functions: no Python error pending, no backtrace. */
  ERR(call_global("runtime.ModuleGetImport", NULL, NULL, 0, &r, &rc));
  EXPECT(TVMGetLastPythonError() == NULL);
  EXPECT(TVMGetLastBacktrace() == NULL);
  TVMDropLastPythonError();
  TVMThrowLastError();
  EXPECT(strstr(TVMGetLastError(), "ModuleGetImport") != NULL);
}

static void v018_aot_export(void) {
  const char* base = fixtures_dir();
  char dir[4096], path[4096 + 64];
  snprintf(dir, sizeof dir, "%s/../fixtures-v0.18", base);
  snprintf(path, sizeof path, "%s/aot_mlp.so", dir);
  FILE* probe = fopen(path, "rb");
  if (probe == NULL) {
    const char* ci = getenv("CI");
    EXPECT(ci == NULL || strcmp(ci, "true") != 0);
    printf("SKIP: %s not found\n", path);
    return;
  }
  fclose(probe);
  Npy x, want;
  snprintf(path, sizeof path, "%s/aot_mlp.input.data.npy", dir);
  EXPECT(load_npy(path, &x) == 0);
  snprintf(path, sizeof path, "%s/aot_mlp.output.0.npy", dir);
  EXPECT(load_npy(path, &want) == 0);
  snprintf(path, sizeof path, "%s/aot_mlp.so", dir);
  TVMModuleHandle lib = NULL;
  OK(TVMModLoadFromFile(path, "", &lib));
  if (lib == NULL || g_failed) return;
  TVMFunctionHandle create = get(lib, "default");
  TVMValue a, r;
  int code = kDLDevice, rc = -1;
  a.v_device.device_type = kDLCPU;
  a.v_device.device_id = 0;
  OK(TVMFuncCall(create, &a, &code, 1, &r, &rc));
  EXPECT(rc == kTVMModuleHandle);
  TVMModuleHandle ex = r.v_handle;
  TVMFunctionHandle num_inputs = get(ex, "get_num_inputs");
  EXPECT(call_int(num_inputs, NULL, NULL, 0) == 1);
  TVMFuncFree(num_inputs);
  TVMArrayHandle in = NULL, out = NULL;
  OK(TVMArrayAlloc(x.shape, x.ndim, kDLFloat, 32, 1, kDLCPU, 0, &in));
  OK(TVMArrayAlloc(want.shape, want.ndim, kDLFloat, 32, 1, kDLCPU, 0, &out));
  OK(TVMArrayCopyFromBytes(in, x.data, x.n * 4));
  TVMValue sargs[2];
  int scodes[2] = {kTVMStr, kTVMNDArrayHandle};
  sargs[0].v_str = "data";
  sargs[1].v_handle = in;
  TVMFunctionHandle set_input = get(ex, "set_input"), run = get(ex, "run"), get_output = get(ex, "get_output");
  OK(TVMFuncCall(set_input, sargs, scodes, 2, &r, &rc));
  OK(TVMFuncCall(run, NULL, NULL, 0, &r, &rc));
  TVMValue oargs[2];
  int ocodes[2] = {kTVMArgInt, kTVMNDArrayHandle};
  oargs[0].v_int64 = 0;
  oargs[1].v_handle = out;
  OK(TVMFuncCall(get_output, oargs, ocodes, 2, &r, &rc));
  float* got = (float*)malloc(want.n * 4);
  OK(TVMArrayCopyToBytes(out, got, want.n * 4));
  EXPECT(allclose_excess(got, want.data, want.n, 1e-5, 1e-5) == 0);
  free(got);
  TVMFuncFree(set_input);
  TVMFuncFree(run);
  TVMFuncFree(get_output);
  TVMFuncFree(create);
  TVMArrayFree(in);
  TVMArrayFree(out);
  TVMModFree(ex);
  TVMModFree(lib);
  free(x.data);
  free(want.data);
}

int main(void) {
  prefixed_system_libraries();
  bools_and_error_functions();
  v018_aot_export();
  return finish();
}
