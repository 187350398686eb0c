/* Minimal assertion helpers for the C tests: every failed check is printed; main returns
 * non-zero if any failed. A test that needs a fixture skips (exit 77) when it is absent, except
 * under CI=true, where a missing fixture fails. */
#ifndef TVM_RS_CTEST_UTIL_H_
#define TVM_RS_CTEST_UTIL_H_
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

/* Exported by libtvm_runtime.so but declared in no header (as in TVM v0.8). */
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
#endif
