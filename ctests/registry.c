/* The global registry: register (with and without override), get, list, remove, and
 * concurrent use from several threads. */
#include <pthread.h>
#include <stdint.h>
#include "test_util.h"

static int ret_res(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)args; (void)codes; (void)n;
  TVMValue v; int c = kTVMArgInt;
  v.v_int64 = (int64_t)(intptr_t)res;
  return TVMCFuncSetReturn(ret, &v, &c, 1);
}

static int64_t call0(TVMFunctionHandle f) {
  TVMValue rv; int rc;
  if (TVMFuncCall(f, NULL, NULL, 0, &rv, &rc) != 0 || rc != kTVMArgInt) return -1;
  return rv.v_int64;
}

static void* worker(void* arg) {
  intptr_t t = (intptr_t)arg;
  char name[64];
  for (int i = 0; i < 300; i++) {
    snprintf(name, sizeof name, "ctest.conc.%d.%d", (int)t, i);
    TVMFunctionHandle f = NULL, g = NULL;
    if (TVMFuncCreateFromCFunc(ret_res, (void*)(intptr_t)i, NULL, &f) != 0) return (void*)1;
    if (TVMFuncRegisterGlobal(name, f, 0) != 0) return (void*)2;
    if (TVMFuncGetGlobal(name, &g) != 0 || g == NULL || call0(g) != i) return (void*)3;
    int n; const char** names;
    if (i % 50 == 0 && TVMFuncListGlobalNames(&n, &names) != 0) return (void*)4;
    TVMFuncFree(g);
    TVMFuncFree(f);
    if (TVMFuncRemoveGlobal(name) != 0) return (void*)5;
  }
  return NULL;
}

int main(void) {
  TVMFunctionHandle f1 = NULL, f2 = NULL, g = NULL, old = NULL;
  OK(TVMFuncCreateFromCFunc(ret_res, (void*)1, NULL, &f1));
  OK(TVMFuncCreateFromCFunc(ret_res, (void*)2, NULL, &f2));
  OK(TVMFuncRegisterGlobal("ctest.reg", f1, 0));
  ERR_HAS(TVMFuncRegisterGlobal("ctest.reg", f2, 0), "Global PackedFunc ctest.reg is already registered");
  OK(TVMFuncGetGlobal("ctest.reg", &old));
  EXPECT(call0(old) == 1);
  OK(TVMFuncRegisterGlobal("ctest.reg", f2, 1));
  OK(TVMFuncGetGlobal("ctest.reg", &g));
  EXPECT(call0(g) == 2);
  /* The handle taken before the override keeps calling the old function. */
  EXPECT(call0(old) == 1);
  /* Every get is an independent handle. */
  TVMFunctionHandle g2 = NULL;
  OK(TVMFuncGetGlobal("ctest.reg", &g2));
  EXPECT(g2 != g);
  OK(TVMFuncFree(g2));
  EXPECT(call0(g) == 2);
  /* The caller keeps (and may free) its own handle after registering. */
  OK(TVMFuncFree(f1)); OK(TVMFuncFree(f2));
  EXPECT(call0(g) == 2);

  int n = 0; const char** names = NULL;
  OK(TVMFuncListGlobalNames(&n, &names));
  int seen = 0, runtime_string = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i], "ctest.reg") == 0) seen = 1;
    if (strcmp(names[i], "runtime.String") == 0) runtime_string = 1;
  }
  EXPECT(seen && runtime_string && n > 30);
  /* Names Python registers itself must not be pre-registered. */
  TVMFunctionHandle none = (TVMFunctionHandle)1;
  OK(TVMFuncGetGlobal("tvm.default_trace_action", &none));
  EXPECT(none == NULL);

  OK(TVMFuncRemoveGlobal("ctest.reg"));
  OK(TVMFuncRemoveGlobal("ctest.reg"));
  none = (TVMFunctionHandle)1;
  OK(TVMFuncGetGlobal("ctest.reg", &none));
  EXPECT(none == NULL);
  EXPECT(call0(g) == 2);
  OK(TVMFuncFree(g)); OK(TVMFuncFree(old));
  ERR(TVMFuncGetGlobal(NULL, &g));
  ERR(TVMFuncRegisterGlobal("x", NULL, 0));

  pthread_t th[4];
  for (intptr_t t = 0; t < 4; t++) pthread_create(&th[t], NULL, worker, (void*)t);
  for (int t = 0; t < 4; t++) {
    void* r = NULL;
    pthread_join(th[t], &r);
    EXPECT(r == NULL);
  }
  return finish();
}
