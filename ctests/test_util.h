/* Minimal assertion helpers for the C tests: every failed check is printed; main returns
 * non-zero if any failed. A test that needs a fixture skips (exit 77) when it is absent, except
 * under CI=true, where a missing fixture fails. */
#ifndef TVM_RS_CTEST_UTIL_H_
#define TVM_RS_CTEST_UTIL_H_
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

/* Exported by libtvm_runtime.so but declared in no header (as in TVM v0.8). */
#ifdef __cplusplus
extern "C"
#endif
int TVMArrayGetTypeIndex(TVMArrayHandle handle, unsigned* out_tindex);

static int g_failed = 0;
static int g_checks = 0;

#define EXPECT(cond)                                                              \
  do {                                                                            \
    g_checks++;                                                                   \
    if (!(cond)) {                                                                \
      g_failed++;                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__,    \
              #cond, TVMGetLastError());                                          \
    }                                                                             \
  } while (0)

#define OK(call) EXPECT((call) == 0)
#define ERR(call) EXPECT((call) == -1)
#define ERR_HAS(call, text)                                                       \
  do {                                                                            \
    EXPECT((call) == -1);                                                         \
    EXPECT(strstr(TVMGetLastError(), (text)) != NULL);                            \
  } while (0)

static inline int finish(void) {
  printf("%d checks, %d failed\n", g_checks, g_failed);
  return g_failed == 0 ? 0 : 1;
}

/* The fixtures directory, or NULL (after deciding skip/fail) when absent. */
static inline const char* fixtures_dir(void) {
  const char* d = getenv("TVM_FIXTURES");
  if (d == NULL) d = "../shared/fixtures";
  char probe[4096];
  snprintf(probe, sizeof probe, "%s/manifest.json", d);
  FILE* f = fopen(probe, "rb");
  if (f != NULL) {
    fclose(f);
    return d;
  }
  const char* ci = getenv("CI");
  if (ci != NULL && strcmp(ci, "true") == 0) {
    fprintf(stderr, "FAIL: fixtures missing at %s (required under CI)\n", d);
    exit(1);
  }
  printf("SKIP: fixtures not found at %s\n", d);
  exit(77);
}

static inline unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* buf = (unsigned char*)malloc((size_t)n + 1);
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(buf);
    return NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return buf;
}

/* Calls global `name` with the given arguments; returns the call's status. */
static inline int call_global(const char* name, TVMValue* args, int* codes, int n, TVMValue* rv, int* rc) {
  TVMFunctionHandle f = NULL;
  if (TVMFuncGetGlobal(name, &f) != 0 || f == NULL) {
    fprintf(stderr, "global %s not found\n", name);
    return -1;
  }
  int r = TVMFuncCall(f, args, codes, n, rv, rc);
  TVMFuncFree(f);
  return r;
}
/* A float32 .npy file (C order). */
typedef struct {
  int ndim;
  int64_t shape[8];
  float* data;
  size_t n;
} Npy;

static inline int load_npy(const char* path, Npy* out) {
  size_t size = 0;
  unsigned char* buf = read_file(path, &size);
  memset(out, 0, sizeof *out);
  if (buf == NULL || size < 10) { free(buf); return -1; }
  size_t hl = (size_t)buf[8] | ((size_t)buf[9] << 8);
  char* h = (char*)calloc(hl + 1, 1);
  memcpy(h, buf + 10, hl);
  char* s = strstr(h, "'shape': (");
  if (strstr(h, "'<f4'") == NULL || s == NULL) { free(h); free(buf); return -1; }
  s += 10;
  out->n = 1;
  while (*s && *s != ')' && out->ndim < 8) {
    long v = strtol(s, &s, 10);
    out->shape[out->ndim++] = v;
    out->n *= (size_t)v;
    while (*s == ',' || *s == ' ') s++;
  }
  out->data = (float*)malloc(out->n * sizeof(float) + 1);
  if (10 + hl + out->n * 4 > size) { free(h); free(buf); return -1; }
  memcpy(out->data, buf + 10 + hl, out->n * 4);
  free(h);
  free(buf);
  return 0;
}

/* Largest violation of |got - want| <= atol + rtol * |want| (0 when all close). */
static inline double allclose_excess(const float* got, const float* want, size_t n, double rtol, double atol) {
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double d = got[i] - want[i];
    if (d < 0) d = -d;
    double lim = atol + rtol * (want[i] < 0 ? -want[i] : want[i]);
    if (!(d <= lim) && (d - lim > worst || d != d)) worst = (d != d) ? 1e30 : d - lim;
  }
  return worst;
}
#endif
