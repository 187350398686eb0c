/* Concurrency stress: THREADS application threads (default 8) for SECONDS (default 2) or at
 * least MIN_ROUNDS rounds each, every thread mixing
 *   - an executor of the shared mlp.so factory: create, set_input, run, get_output (checked), free;
 *   - its own mlp.so: load, create, run (checked), free everything;
 *   - one executor shared by all threads: set_input / run / get_output interleaved (no check of
 *     the values, which the threads overwrite: only that every call succeeds);
 *   - the registry: a C callback registered under a fresh name, looked up, called (a callback
 *     into C from the runtime), called through a kernel-style parallel launch, removed; names
 *     listed now and then;
 *   - parallel launches from this application thread (TVMBackendParallelLaunch) whose tasks
 *     sum into per-task slots (checked), with a barrier between two phases;
 *   - NDArray alloc / copy / free.
 *
 *   hardening_stress [SECONDS [THREADS [MIN_ROUNDS]]]
 *
 * Run under ASan (ctest) and under valgrind's helgrind/DRD (scripts/test-hardening.sh, short
 * configuration). Fixtures from TVM_FIXTURES. */
#include <pthread.h>
#include <time.h>
#include <tvm/runtime/c_backend_api.h>
#include "test_util.h"

static char g_lib_path[4096];
static TVMModuleHandle g_lib;       /* shared factory library */
static TVMModuleHandle g_shared_ex; /* one executor used by every thread */
static Npy g_in, g_want;
static double g_deadline;
static long g_min_rounds = 3;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static TVMFunctionHandle fn(TVMModuleHandle m, const char* name) {
  TVMFunctionHandle f = NULL;
  if (TVMModGetFunction(m, name, 0, &f) != 0) return NULL;
  return f;
}

/* set_input("data", x), run, get_output(0, y) on executor `ex`; 0 on success. */
static int run_executor(TVMModuleHandle ex, int check) {
  TVMFunctionHandle set_input = fn(ex, "set_input"), run = fn(ex, "run"), get_output = fn(ex, "get_output");
  int bad = set_input == NULL || run == NULL || get_output == NULL;
  TVMArrayHandle x = NULL, y = NULL;
  bad |= TVMArrayAlloc(g_in.shape, g_in.ndim, kDLFloat, 32, 1, kDLCPU, 0, &x) != 0;
  bad |= TVMArrayAlloc(g_want.shape, g_want.ndim, kDLFloat, 32, 1, kDLCPU, 0, &y) != 0;
  if (!bad) {
    TVMValue v[2], rv;
    int c[2], rc;
    bad |= TVMArrayCopyFromBytes(x, g_in.data, g_in.n * 4) != 0;
    v[0].v_str = "data"; c[0] = kTVMStr; v[1].v_handle = x; c[1] = kTVMNDArrayHandle;
    bad |= TVMFuncCall(set_input, v, c, 2, &rv, &rc) != 0;
    bad |= TVMFuncCall(run, NULL, NULL, 0, &rv, &rc) != 0;
    v[0].v_int64 = 0; c[0] = kDLInt; v[1].v_handle = y; c[1] = kTVMNDArrayHandle;
    bad |= TVMFuncCall(get_output, v, c, 2, &rv, &rc) != 0;
    if (!bad && check) {
      float* got = (float*)malloc(g_want.n * 4);
      bad |= TVMArrayCopyToBytes(y, got, g_want.n * 4) != 0;
      bad |= allclose_excess(got, g_want.data, g_want.n, 1e-5, 1e-5) != 0;
      free(got);
    }
  }
  if (x) TVMArrayFree(x);
  if (y) TVMArrayFree(y);
  if (set_input) TVMFuncFree(set_input);
  if (run) TVMFuncFree(run);
  if (get_output) TVMFuncFree(get_output);
  return bad;
}

/* An executor of factory `lib` on the CPU, run and checked, freed. */
static int factory_round(TVMModuleHandle lib) {
  TVMFunctionHandle def = fn(lib, "default");
  if (def == NULL) return 1;
  TVMValue v, rv;
  int c = kDLDevice, rc, bad = 0;
  v.v_device.device_type = kDLCPU;
  v.v_device.device_id = 0;
  if (TVMFuncCall(def, &v, &c, 1, &rv, &rc) != 0 || rc != kTVMModuleHandle) {
    bad = 1;
  } else {
    bad = run_executor(rv.v_handle, 1);
    bad |= TVMModFree(rv.v_handle) != 0;
  }
  TVMFuncFree(def);
  return bad;
}

static int own_library_round(void) {
  TVMModuleHandle m = NULL;
  if (TVMModLoadFromFile(g_lib_path, "so", &m) != 0) return 1;
  int bad = factory_round(m);
  bad |= TVMModFree(m) != 0;
  return bad;
}

/* A C callback: returns its first argument plus the resource value. */
static int add_res(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  if (n != 1 || codes[0] != kDLInt) {
    TVMAPISetLastError("add_res: one int expected");
    return -1;
  }
  TVMValue v;
  int c = kDLInt;
  v.v_int64 = args[0].v_int64 + (int64_t)(intptr_t)res;
  return TVMCFuncSetReturn(ret, &v, &c, 1);
}

typedef struct {
  TVMFunctionHandle f;
  int64_t sums[64];
  int num_task;
  int failed;
} LaunchData;

/* Each task calls the callback (a call into C from a pool thread) for its id, twice with a
 * barrier in between. */
static int task(int id, TVMParallelGroupEnv* penv, void* cdata) {
  LaunchData* d = (LaunchData*)cdata;
  if (id >= 64) return -1;
  if (id == 0) d->num_task = penv->num_task;
  for (int phase = 0; phase < 2; phase++) {
    TVMValue a, rv;
    int c = kDLInt, rc;
    a.v_int64 = id;
    if (TVMFuncCall(d->f, &a, &c, 1, &rv, &rc) != 0 || rc != kDLInt) {
      d->failed = 1;
      return -1;
    }
    d->sums[id] += rv.v_int64;
    if (TVMBackendParallelBarrier(id, penv) != 0) return -1;
  }
  return 0;
}

static int registry_round(long tid, long round) {
  char name[96];
  snprintf(name, sizeof name, "hardening.stress.%ld.%ld", tid, round);
  TVMFunctionHandle f = NULL, g = NULL;
  int bad = TVMFuncCreateFromCFunc(add_res, (void*)(intptr_t)(tid + 1), NULL, &f) != 0;
  bad |= TVMFuncRegisterGlobal(name, f, 0) != 0;
  bad |= TVMFuncGetGlobal(name, &g) != 0 || g == NULL;
  if (!bad) {
    TVMValue a, rv;
    int c = kDLInt, rc;
    a.v_int64 = round;
    bad |= TVMFuncCall(g, &a, &c, 1, &rv, &rc) != 0 || rc != kDLInt || rv.v_int64 != round + tid + 1;
    /* Parallel launch from this application thread, the tasks calling back into C. */
    LaunchData d;
    memset(&d, 0, sizeof d);
    d.f = g;
    /* As many tasks as the pool has workers (the barrier needs them all running at once). */
    bad |= TVMBackendParallelLaunch(task, &d, 0) != 0 || d.failed || d.num_task < 1;
    for (int i = 0; i < d.num_task; i++) bad |= d.sums[i] != 2 * (i + tid + 1);
  }
  if (round % 16 == 0) {
    int n;
    const char** names;
    bad |= TVMFuncListGlobalNames(&n, &names) != 0;
  }
  if (g) TVMFuncFree(g);
  if (f) TVMFuncFree(f);
  bad |= TVMFuncRemoveGlobal(name) != 0;
  return bad;
}

static int ndarray_round(void) {
  int64_t shape[2] = {16, 33};
  TVMArrayHandle a = NULL, b = NULL;
  int bad = TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &a) != 0;
  bad |= TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &b) != 0;
  if (!bad) {
    float buf[16 * 33];
    for (int i = 0; i < 16 * 33; i++) buf[i] = (float)i;
    bad |= TVMArrayCopyFromBytes(a, buf, sizeof buf) != 0;
    bad |= TVMArrayCopyFromTo(a, b, NULL) != 0;
    memset(buf, 0, sizeof buf);
    bad |= TVMArrayCopyToBytes(b, buf, sizeof buf) != 0;
    bad |= buf[100] != 100.0f;
  }
  if (a) TVMArrayFree(a);
  if (b) TVMArrayFree(b);
  return bad;
}

static void* worker(void* arg) {
  long tid = (long)(intptr_t)arg, failures = 0, round = 0;
  for (; round < g_min_rounds || now() < g_deadline; round++) {
    int kind = (int)((round + tid) % 5);
    int bad = 0;
    switch (kind) {
      case 0: bad = factory_round(g_lib); break;
      case 1: bad = own_library_round(); break;
      case 2: bad = run_executor(g_shared_ex, 0); break;
      case 3: bad = registry_round(tid, round); break;
      default: bad = ndarray_round(); break;
    }
    if (bad && failures++ < 3) fprintf(stderr, "thread %ld round %ld kind %d failed: %s\n", tid, round, kind, TVMGetLastError());
  }
  printf("thread %ld: %ld rounds, %ld failed\n", tid, round, failures);
  return (void*)(intptr_t)(failures != 0);
}

int main(int argc, char** argv) {
  double secs = argc > 1 ? atof(argv[1]) : 2.0;
  int nthreads = argc > 2 ? atoi(argv[2]) : 8;
  if (argc > 3) g_min_rounds = atol(argv[3]);
  if (nthreads < 1 || nthreads > 64) nthreads = 8;
  const char* dir = fixtures_dir();
  char path[4096];
  snprintf(g_lib_path, sizeof g_lib_path, "%s/mlp.so", dir);
  snprintf(path, sizeof path, "%s/mlp.input.data.npy", dir);
  EXPECT(load_npy(path, &g_in) == 0);
  snprintf(path, sizeof path, "%s/mlp.output.0.npy", dir);
  EXPECT(load_npy(path, &g_want) == 0);
  OK(TVMModLoadFromFile(g_lib_path, "so", &g_lib));
  if (g_failed) return finish();
  TVMFunctionHandle def = fn(g_lib, "default");
  TVMValue v, rv;
  int c = kDLDevice, rc;
  v.v_device.device_type = kDLCPU;
  v.v_device.device_id = 0;
  OK(TVMFuncCall(def, &v, &c, 1, &rv, &rc));
  g_shared_ex = rv.v_handle;
  OK(TVMFuncFree(def));

  g_deadline = now() + secs;
  pthread_t t[64];
  for (long i = 0; i < nthreads; i++) EXPECT(pthread_create(&t[i], NULL, worker, (void*)(intptr_t)i) == 0);
  for (int i = 0; i < nthreads; i++) {
    void* r = NULL;
    pthread_join(t[i], &r);
    EXPECT(r == NULL);
  }
  /* Everything still works, and the shared executor gives the right answer again. */
  EXPECT(run_executor(g_shared_ex, 1) == 0);
  OK(TVMModFree(g_shared_ex));
  OK(TVMModFree(g_lib));
  free(g_in.data);
  free(g_want.data);
  return finish();
}
