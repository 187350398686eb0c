/* TVM v0.8's mlp2_opencl.so (graph executor factory + OpenCL kernels) on kDLOpenCL device 0,
 * from C: load, create the executor on OpenCL, set_input from a CPU array, run on two threads'
 * executors, read the output back and compare with the manifest's expected output (rtol/atol
 * 1e-4). Skips (77) without an OpenCL device, except under CI=true, where that fails. */
#include <pthread.h>
#include "test_util.h"

static const char* g_dir;
static TVMModuleHandle g_lib;
static Npy g_in, g_want;

static int device_exists(void) {
  TVMValue a[3], rv; int c[3] = {kDLInt, kDLInt, kDLInt}, rc;
  a[0].v_int64 = kDLOpenCL; a[1].v_int64 = 0; a[2].v_int64 = 0;
  if (call_global("runtime.GetDeviceAttr", a, c, 3, &rv, &rc) != 0) return 0;
  return rc == kDLInt && rv.v_int64 == 1;
}

static TVMFunctionHandle fn(TVMModuleHandle m, const char* name) {
  TVMFunctionHandle f = NULL;
  OK(TVMModGetFunction(m, name, 0, &f));
  EXPECT(f != NULL);
  return f;
}

/* Creates an executor on OpenCL, runs it `rounds` times, returns the worst tolerance excess. */
static double run_once(int rounds) {
  TVMFunctionHandle def = fn(g_lib, "default");
  TVMValue v[2], rv; int c[2], rc;
  v[0].v_device.device_type = kDLOpenCL; v[0].v_device.device_id = 0; c[0] = kDLDevice;
  if (TVMFuncCall(def, v, c, 1, &rv, &rc) != 0 || rc != kTVMModuleHandle) return -1;
  TVMModuleHandle ex = rv.v_handle;
  TVMFunctionHandle set_input = fn(ex, "set_input"), run = fn(ex, "run"), get_output = fn(ex, "get_output");
  TVMArrayHandle x = NULL, y = NULL;
  OK(TVMArrayAlloc(g_in.shape, g_in.ndim, kDLFloat, 32, 1, kDLCPU, 0, &x));
  OK(TVMArrayCopyFromBytes(x, g_in.data, g_in.n * 4));
  OK(TVMArrayAlloc(g_want.shape, g_want.ndim, kDLFloat, 32, 1, kDLCPU, 0, &y));
  double worst = 0;
  float* got = (float*)malloc(g_want.n * 4);
  for (int r = 0; r < rounds; r++) {
    v[0].v_str = "data"; c[0] = kTVMStr; v[1].v_handle = x; c[1] = kTVMNDArrayHandle;
    OK(TVMFuncCall(set_input, v, c, 2, &rv, &rc));
    OK(TVMFuncCall(run, NULL, NULL, 0, &rv, &rc));
    /* get_output(0, out): copies into a CPU array. */
    v[0].v_int64 = 0; c[0] = kDLInt; v[1].v_handle = y; c[1] = kTVMNDArrayHandle;
    OK(TVMFuncCall(get_output, v, c, 2, &rv, &rc));
    OK(TVMArrayCopyToBytes(y, got, g_want.n * 4));
    double e = allclose_excess(got, g_want.data, g_want.n, 1e-4, 1e-4);
    if (e > worst || e < 0) worst = e;
  }
  free(got);
  OK(TVMArrayFree(x)); OK(TVMArrayFree(y));
  OK(TVMFuncFree(set_input)); OK(TVMFuncFree(run)); OK(TVMFuncFree(get_output)); OK(TVMFuncFree(def));
  OK(TVMModFree(ex));
  return worst;
}

static void* worker(void* arg) {
  (void)arg;
  double e = run_once(10);
  EXPECT(e == 0);
  return NULL;
}

int main(void) {
  g_dir = fixtures_dir();
  if (!device_exists()) {
    const char* ci = getenv("CI");
    if (ci != NULL && strcmp(ci, "true") == 0) {
      fprintf(stderr, "FAIL: no OpenCL device under CI=true (%s)\n", TVMGetLastError());
      return 1;
    }
    printf("SKIP: no OpenCL device (install pocl-opencl-icd)\n");
    return 77;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/mlp2_opencl.input.data.npy", g_dir);
  EXPECT(load_npy(path, &g_in) == 0);
  snprintf(path, sizeof path, "%s/mlp2.output.0.npy", g_dir);
  EXPECT(load_npy(path, &g_want) == 0);
  snprintf(path, sizeof path, "%s/mlp2_opencl.so", g_dir);
  OK(TVMModLoadFromFile(path, "", &g_lib));
  if (g_lib == NULL) return finish();

  double e = run_once(3);
  if (e != 0) fprintf(stderr, "mlp2_opencl: excess %g\n", e);
  EXPECT(e == 0);

  /* Executors of one factory on several threads at once (per-thread kernels). */
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);

  /* A device id beyond the platform's devices is an error, not a crash. */
  TVMFunctionHandle def = fn(g_lib, "default");
  TVMValue v, rv; int c = kDLDevice, rc;
  v.v_device.device_type = kDLOpenCL; v.v_device.device_id = 64;
  ERR_HAS(TVMFuncCall(def, &v, &c, 1, &rv, &rc), "Invalid OpenCL device_id=64");
  OK(TVMFuncFree(def));
  OK(TVMModFree(g_lib));
  free(g_in.data); free(g_want.data);
  return finish();
}
