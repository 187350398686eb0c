/* Load/run/unload loop: load a model library, create a graph executor, set the input, run,
 * read and check the output, free everything; N times. The resident set size after the loop
 * must be within 2 MB of what it was after the first 100 iterations (unless "norss": under
 * valgrind or ASan, whose own bookkeeping grows).
 *
 *   hardening_loop cpu|opencl ITERATIONS [norss]
 *
 * cpu: TVM's mlp.so on the CPU; opencl: mlp2_opencl.so on OpenCL device 0 (skips, 77, without
 * a device, except under CI=true). Fixtures from TVM_FIXTURES. */
#include <unistd.h>
#include "test_util.h"

static TVMFunctionHandle fn(TVMModuleHandle m, const char* name) {
  TVMFunctionHandle f = NULL;
  OK(TVMModGetFunction(m, name, 0, &f));
  EXPECT(f != NULL);
  return f;
}

static long rss_kb(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One iteration; returns the output's worst tolerance excess, or -1 on failure. */
static double iteration(const char* lib, int dev_type, const Npy* in, const Npy* want) {
  TVMModuleHandle m = NULL, ex = NULL;
  if (TVMModLoadFromFile(lib, "so", &m) != 0) {
    fprintf(stderr, "load %s: %s\n", lib, TVMGetLastError());
    return -1;
  }
  TVMFunctionHandle def = fn(m, "default");
  TVMValue v[2], rv;
  int c[2], rc;
  v[0].v_device.device_type = dev_type;
  v[0].v_device.device_id = 0;
  c[0] = kDLDevice;
  double worst = -1;
  if (def != NULL && TVMFuncCall(def, v, c, 1, &rv, &rc) == 0 && rc == kTVMModuleHandle) {
    ex = rv.v_handle;
    TVMFunctionHandle set_input = fn(ex, "set_input"), run = fn(ex, "run"), get_output = fn(ex, "get_output");
    TVMArrayHandle x = NULL, y = NULL;
    OK(TVMArrayAlloc(in->shape, in->ndim, kDLFloat, 32, 1, kDLCPU, 0, &x));
    OK(TVMArrayCopyFromBytes(x, in->data, in->n * 4));
    OK(TVMArrayAlloc(want->shape, want->ndim, kDLFloat, 32, 1, kDLCPU, 0, &y));
    v[0].v_str = "data";
    c[0] = kTVMStr;
    v[1].v_handle = x;
    c[1] = kTVMNDArrayHandle;
    OK(TVMFuncCall(set_input, v, c, 2, &rv, &rc));
    OK(TVMFuncCall(run, NULL, NULL, 0, &rv, &rc));
    v[0].v_int64 = 0;
    c[0] = kDLInt;
    v[1].v_handle = y;
    OK(TVMFuncCall(get_output, v, c, 2, &rv, &rc));
    float* got = (float*)malloc(want->n * 4);
    OK(TVMArrayCopyToBytes(y, got, want->n * 4));
    worst = allclose_excess(got, want->data, want->n, 1e-4, 1e-4);
    free(got);
    OK(TVMArrayFree(x));
    OK(TVMArrayFree(y));
    OK(TVMFuncFree(set_input));
    OK(TVMFuncFree(run));
    OK(TVMFuncFree(get_output));
    OK(TVMModFree(ex));
  } else {
    fprintf(stderr, "create: %s\n", TVMGetLastError());
  }
  if (def != NULL) OK(TVMFuncFree(def));
  OK(TVMModFree(m));
  return worst;
}

static int opencl_exists(void) {
  TVMValue a[3], rv;
  int c[3] = {kDLInt, kDLInt, kDLInt}, rc;
  a[0].v_int64 = kDLOpenCL;
  a[1].v_int64 = 0;
  a[2].v_int64 = 0;
  if (call_global("runtime.GetDeviceAttr", a, c, 3, &rv, &rc) != 0) return 0;
  return rc == kDLInt && rv.v_int64 == 1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s cpu|opencl ITERATIONS [norss]\n", argv[0]);
    return 2;
  }
  const char* dir = fixtures_dir();
  int opencl = strcmp(argv[1], "opencl") == 0;
  long iters = strtol(argv[2], NULL, 10);
  int check_rss = !(argc > 3 && strcmp(argv[3], "norss") == 0);
  if (opencl && !opencl_exists()) {
    const char* ci = getenv("CI");
    if (ci != NULL && strcmp(ci, "true") == 0) {
      fprintf(stderr, "FAIL: no OpenCL device under CI=true (%s)\n", TVMGetLastError());
      return 1;
    }
    printf("SKIP: no OpenCL device\n");
    return 77;
  }
  char lib[4096], path[4096];
  Npy in, want;
  snprintf(lib, sizeof lib, "%s/%s", dir, opencl ? "mlp2_opencl.so" : "mlp.so");
  snprintf(path, sizeof path, "%s/%s", dir, opencl ? "mlp2_opencl.input.data.npy" : "mlp.input.data.npy");
  EXPECT(load_npy(path, &in) == 0);
  snprintf(path, sizeof path, "%s/%s", dir, opencl ? "mlp2.output.0.npy" : "mlp.output.0.npy");
  EXPECT(load_npy(path, &want) == 0);
  if (g_failed) return finish();

  long base = -1, peak = 0;
  int bad = 0;
  for (long i = 0; i < iters; i++) {
    double e = iteration(lib, opencl ? kDLOpenCL : kDLCPU, &in, &want);
    if (e != 0 && bad++ < 3) fprintf(stderr, "iteration %ld: output excess %g\n", i, e);
    if (i + 1 == 100 || (iters < 100 && i == 0)) base = rss_kb();
    long r = rss_kb();
    if (r > peak) peak = r;
  }
  EXPECT(bad == 0);
  long end = rss_kb();
  printf("%s: %ld iterations, RSS after %ld: %ld kB, after the loop: %ld kB (growth %ld kB), peak %ld kB\n",
         argv[1], iters, iters < 100 ? 1L : 100L, base, end, end - base, peak);
  if (check_rss) EXPECT(end - base <= 2048);
  free(in.data);
  free(want.data);
  return finish();
}
