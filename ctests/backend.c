/* The backend API on the CPU: workspaces, run-once, parallel launch and the env lookup. */
#include <stdint.h>
#include "test_util.h"
#include <tvm/runtime/c_backend_api.h>

static int g_once_calls = 0;
static int once_fn(void* cdata) { g_once_calls++; return *(int*)cdata; }

static int g_seen[64];
static int mark_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)cdata;
  if (task_id < 0 || task_id >= penv->num_task || task_id >= 64) return -1;
  __atomic_add_fetch(&g_seen[task_id], 1, __ATOMIC_SEQ_CST);
  return TVMBackendParallelBarrier(task_id, penv);
}
static int fail_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)penv; (void)cdata;
  if (task_id == 0) {
    TVMAPISetLastError("task zero failed");
    return -1;
  }
  return 0;
}

int main(void) {
  /* Workspaces: aligned, LIFO reuse, unknown pointers refused. */
  void* a = TVMBackendAllocWorkspace(kDLCPU, 0, 100, kDLFloat, 32);
  void* b = TVMBackendAllocWorkspace(kDLCPU, 0, 5000, kDLFloat, 32);
  EXPECT(a != NULL && b != NULL && ((uintptr_t)a % 128) == 0 && ((uintptr_t)b % 128) == 0);
  memset(b, 0, 5000);
  OK(TVMBackendFreeWorkspace(kDLCPU, 0, b));
  OK(TVMBackendFreeWorkspace(kDLCPU, 0, a));
  int local;
  ERR(TVMBackendFreeWorkspace(kDLCPU, 0, &local));
  OK(TVMBackendFreeWorkspace(kDLCPU, 0, NULL));
  EXPECT(TVMBackendAllocWorkspace(kDLVulkan, 0, 100, kDLFloat, 32) == NULL);
  EXPECT(strstr(TVMGetLastError(), "vulkan") != NULL);

  /* Run once: first call runs f and returns its value, later calls do nothing. */
  void* handle = NULL;
  int rv = 0;
  OK(TVMBackendRunOnce(&handle, once_fn, &rv, 0));
  OK(TVMBackendRunOnce(&handle, once_fn, &rv, 0));
  EXPECT(g_once_calls == 1 && handle != NULL);

  /* Parallel launch: every task id exactly once, barrier reached by all. */
  memset(g_seen, 0, sizeof g_seen);
  OK(TVMBackendParallelLaunch(mark_task, NULL, 2));
  for (int i = 0; i < 2; i++) EXPECT(g_seen[i] == 1);
  memset(g_seen, 0, sizeof g_seen);
  OK(TVMBackendParallelLaunch(mark_task, NULL, 0));
  EXPECT(g_seen[0] == 1);
  EXPECT(TVMBackendParallelLaunch(fail_task, NULL, 2) != 0);
  EXPECT(strstr(TVMGetLastError(), "task zero failed") != NULL);
  /* A synchronising launch larger than the pool is an error, never a hang. */
  EXPECT(TVMBackendParallelLaunch(mark_task, NULL, 64) != 0);

  /* Env lookup: NULL module goes to the registry; missing names are errors. */
  TVMFunctionHandle f = NULL;
  OK(TVMBackendGetFuncFromEnv(NULL, "__tvm_set_device", &f));
  EXPECT(f != NULL);
  TVMValue args[2]; int codes[2] = {kTVMArgInt, kTVMArgInt}; TVMValue r; int rc;
  args[0].v_int64 = kDLCPU; args[1].v_int64 = 0;
  OK(TVMFuncCall(f, args, codes, 2, &r, &rc));
  ERR_HAS(TVMBackendGetFuncFromEnv(NULL, "no.such.function", &f), "Cannot find function no.such.function");
  OK(TVMBackendRegisterEnvCAPI("PyErr_CheckSignals", NULL));
  ERR_HAS(TVMBackendRegisterEnvCAPI("Other", NULL), "Unknown env API Other");
  OK(TVMBackendRegisterSystemLibSymbol("ctest_symbol", &local));
  return finish();
}
