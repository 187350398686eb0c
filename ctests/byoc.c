/* BYOC through the C API: TVM v0.8's cnn_dnnl.so (GraphExecutorFactory > metadata >
 * [dnnl_json, dnnl_json, library]) against cnn.output.0.npy with the manifest's tolerance, alone
 * and as 4 executors of one factory on 4 threads; and a C-source BYOC library
 * (tests/fixtures/dnnl_csrc.cc, built by CMake without linking the runtime) whose dnnl_* calls
 * resolve to this runtime, against a plain C reference. Needs oneDNN: skips (77) when it cannot
 * be opened, except under CI=true. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include "test_util.h"

static const char* g_dir;
static Npy g_in, g_want;

static int have_dnnl(void) {
  const char* names[] = {getenv("TVM_DNNL_LIBRARY"), "libdnnl.so.3", "libdnnl.so.2", "libdnnl.so"};
  for (int i = 0; i < 4; i++) {
    if (names[i] == NULL) continue;
    void* h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
    if (h != NULL) {
      dlclose(h);
      return 1;
    }
  }
  return 0;
}

static TVMFunctionHandle get_fn(TVMModuleHandle m, const char* name) {
  TVMFunctionHandle f = NULL;
  if (TVMModGetFunction(m, name, 0, &f) != 0) return NULL;
  return f;
}

static TVMArrayHandle array_of(const int64_t* shape, int ndim, const float* data, size_t n) {
  TVMArrayHandle h = NULL;
  if (TVMArrayAlloc(shape, ndim, kDLFloat, 32, 1, kDLCPU, 0, &h) != 0) return NULL;
  if (data != NULL) TVMArrayCopyFromBytes(h, (void*)data, n * 4);
  return h;
}

/* Creates an executor of the factory and runs it `runs` times; 0 when every output matches. */
static int run_cnn(TVMModuleHandle factory, int runs) {
  TVMFunctionHandle fdefault = get_fn(factory, "default");
  if (fdefault == NULL) return 1;
  TVMValue v[2], rv;
  int c[2], rc, bad = 0;
  v[0].v_device.device_type = kDLCPU;
  v[0].v_device.device_id = 0;
  c[0] = kDLDevice;
  if (TVMFuncCall(fdefault, v, c, 1, &rv, &rc) != 0 || rc != kTVMModuleHandle) return 1;
  TVMModuleHandle ex = rv.v_handle;
  TVMFunctionHandle set_input = get_fn(ex, "set_input"), run = get_fn(ex, "run"), get_output = get_fn(ex, "get_output");
  TVMArrayHandle x = array_of(g_in.shape, g_in.ndim, g_in.data, g_in.n);
  TVMArrayHandle y = array_of(g_want.shape, g_want.ndim, NULL, 0);
  float* got = (float*)malloc(g_want.n * 4);
  v[0].v_str = "data"; c[0] = kTVMStr;
  v[1].v_handle = x; c[1] = kTVMNDArrayHandle;
  bad |= TVMFuncCall(set_input, v, c, 2, &rv, &rc) != 0;
  for (int r = 0; r < runs && !bad; r++) {
    bad |= TVMFuncCall(run, NULL, NULL, 0, &rv, &rc) != 0;
    v[0].v_int64 = 0; c[0] = kDLInt;
    v[1].v_handle = y; c[1] = kTVMNDArrayHandle;
    bad |= TVMFuncCall(get_output, v, c, 2, &rv, &rc) != 0;
    bad |= TVMArrayCopyToBytes(y, got, g_want.n * 4) != 0;
    if (!bad && allclose_excess(got, g_want.data, g_want.n, 1e-4, 1e-4) != 0) bad = 1;
  }
  free(got);
  TVMArrayFree(x); TVMArrayFree(y);
  TVMFuncFree(set_input); TVMFuncFree(run); TVMFuncFree(get_output); TVMFuncFree(fdefault);
  TVMModFree(ex);
  return bad;
}

static void* thread_main(void* factory) {
  return (void*)(intptr_t)run_cnn((TVMModuleHandle)factory, 20);
}

static void test_cnn_dnnl(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/cnn_dnnl.input.data.npy", g_dir);
  EXPECT(load_npy(path, &g_in) == 0);
  snprintf(path, sizeof path, "%s/cnn.output.0.npy", g_dir);
  EXPECT(load_npy(path, &g_want) == 0);
  snprintf(path, sizeof path, "%s/cnn_dnnl.so", g_dir);
  TVMModuleHandle lib = NULL;
  OK(TVMModLoadFromFile(path, "", &lib));
  if (lib == NULL) return;
  EXPECT(run_cnn(lib, 3) == 0);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) EXPECT(pthread_create(&t[i], NULL, thread_main, lib) == 0);
  for (int i = 0; i < 4; i++) {
    void* r = NULL;
    pthread_join(t[i], &r);
    EXPECT(r == NULL);
  }
  OK(TVMModFree(lib));
  free(g_in.data);
  free(g_want.data);
}

/* Deterministic data in [-1, 1). */
static void fill(float* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

static void test_c_source_library(void) {
  TVMModuleHandle m = NULL;
  OK(TVMModLoadFromFile(TVM_CTEST_DNNL_CSRC_LIB, "", &m));
  if (m == NULL) return;
  TVMFunctionHandle f = get_fn(m, "dnnl_0");
  EXPECT(f != NULL);
  static float x[2 * 3 * 6 * 6], w[4 * 3 * 3 * 3], b[4], wd[3 * 144], conv[2 * 4 * 6 * 6], want[6], got[6];
  fill(x, sizeof x / 4, 1); fill(w, sizeof w / 4, 2); fill(b, 4, 3); fill(wd, sizeof wd / 4, 4);
  /* conv2d (pad 1, stride 1) + bias, relu; then conv + relu(conv) = 2 * conv; then dense. */
  for (int n = 0; n < 2; n++)
    for (int o = 0; o < 4; o++)
      for (int y = 0; y < 6; y++)
        for (int xx = 0; xx < 6; xx++) {
          double acc = b[o];
          for (int ci = 0; ci < 3; ci++)
            for (int ky = 0; ky < 3; ky++)
              for (int kx = 0; kx < 3; kx++) {
                int iy = y + ky - 1, ix = xx + kx - 1;
                if (iy < 0 || iy >= 6 || ix < 0 || ix >= 6) continue;
                acc += (double)x[((n * 3 + ci) * 6 + iy) * 6 + ix] * w[((o * 3 + ci) * 3 + ky) * 3 + kx];
              }
          float v = acc > 0 ? (float)acc : 0.0f;
          conv[((n * 4 + o) * 6 + y) * 6 + xx] = v + v;
        }
  for (int n = 0; n < 2; n++)
    for (int j = 0; j < 3; j++) {
      double acc = 0;
      for (int k = 0; k < 144; k++) acc += (double)conv[n * 144 + k] * wd[j * 144 + k];
      want[n * 3 + j] = (float)acc;
    }
  int64_t sx[4] = {2, 3, 6, 6}, sw[4] = {4, 3, 3, 3}, sb[1] = {4}, swd[2] = {3, 144}, so[2] = {2, 3};
  TVMArrayHandle a[5] = {array_of(sx, 4, x, sizeof x / 4), array_of(sw, 4, w, sizeof w / 4), array_of(sb, 1, b, 4),
                         array_of(swd, 2, wd, sizeof wd / 4), array_of(so, 2, NULL, 0)};
  TVMValue v[5], rv;
  int c[5], rc;
  for (int i = 0; i < 5; i++) {
    v[i].v_handle = a[i];
    c[i] = kTVMNDArrayHandle;
  }
  for (int r = 0; r < 2 && f != NULL; r++) {
    OK(TVMFuncCall(f, v, c, 5, &rv, &rc));
    OK(TVMArrayCopyToBytes(a[4], got, sizeof got));
    EXPECT(allclose_excess(got, want, 6, 1e-4, 1e-4) == 0);
  }
  for (int i = 0; i < 5; i++) TVMArrayFree(a[i]);
  if (f != NULL) TVMFuncFree(f);
  OK(TVMModFree(m));
}

int main(void) {
  if (!have_dnnl()) {
    const char* ci = getenv("CI");
    if (ci != NULL && strcmp(ci, "true") == 0) {
      fprintf(stderr, "FAIL: oneDNN (libdnnl) missing under CI\n");
      return 1;
    }
    printf("SKIP: oneDNN (libdnnl) not found\n");
    return 77;
  }
  test_c_source_library();
  g_dir = fixtures_dir();
  test_cnn_dnnl();
  return finish();
}
