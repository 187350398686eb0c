/* relax_vm.c: runs a TVM v0.27 Relax export (a `.so` made by `tvm.compile(...).export_library`)
 * through the tvm-ffi C ABI alone (tvm/ffi/c_api.h), the way TVM's Python
 * `tvm.runtime.vm.VirtualMachine` does, and checks its outputs against `.npy` files.
 *
 *   relax_vm MODEL.so FUNC [--in X.npy]... [--expect Y.npy]... [--rtol R] [--atol A]
 *            [--threads N] [--repeat K] [--backtrace]
 *
 *   --in FILE      an argument of FUNC, in call order (a tensor read from a .npy file)
 *   --expect FILE  an expected output; a tuple result is flattened depth first, so the K-th
 *                  --expect is the K-th tensor met that way. Without --expect the outputs are
 *                  printed instead.
 *   --rtol, --atol floating-point outputs pass when |got - want| <= atol + rtol * |want|
 *                  (default 1e-5 each); integer and bool outputs must match exactly.
 *   --threads N    N threads, each with its own VM made from the ONE loaded module, each
 *                  calling FUNC --repeat times (default 5) and checking every result
 *                  (needs --expect).
 *   --repeat K     calls per VM (default 1 single-threaded, 5 with --threads).
 *   --backtrace    also print the backtrace of a tvm-ffi error.
 *
 * Exit status: 0 when every call succeeded and every output matched, 1 on any error or
 * mismatch, 2 on a usage error.
 *
 * The steps, each a call of a global function or of a module's function:
 *
 *   exec = ffi.ModuleLoadFromFile("MODEL.so")               a relax.VMExecutable module
 *   load = ffi.ModuleGetFunction(exec, "vm_load_executable", 1)
 *   vm   = load()                                            a relax.VirtualMachine module
 *   init = ffi.ModuleGetFunction(vm, "vm_initialization", 1)
 *   init(1, 0, 2)                  (device type kDLCPU, device id 0, allocator 2 = pooled)
 *   f    = ffi.ModuleGetFunction(vm, "FUNC", 1)
 *   out  = f(tensor0, tensor1, ...)                          an ffi.Tensor or an ffi.Array
 *
 * Ownership rules of the tvm-ffi C ABI this program follows throughout:
 *  - Every object (module, function, tensor, array, error) starts with a TVMFFIObject header
 *    holding a reference count; whoever holds a reference gives it back with
 *    TVMFFIObjectDecRef.
 *  - TVMFFIFunctionGetGlobal hands out a new reference (or NULL when no such global).
 *  - Arguments of TVMFFIFunctionCall are borrowed views: the callee takes no reference.
 *  - Its result is owned: the caller must release it when it holds an object (type index
 *    >= kTVMFFIStaticObjectBegin). The result cell must be None before the call.
 *  - A failing call returns non-zero and leaves an ffi.Error in a thread-local slot; it is
 *    taken (and then owned) with TVMFFIErrorMoveFromRaised.
 *
 * Build (see scripts/test-relax-c.sh):
 *   cc -Wall -Werror -std=c11 -Iinclude examples/relax_vm.c -o relax_vm \
 *      -Ltarget/release -ltvm_runtime -lpthread -lm
 */
#include <tvm/ffi/c_api.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* DLPack type code of bool (kDLBool, added in DLPack 0.8; the dlpack.h shipped next to
 * c_api.h may be older). TVM's "bool" is {kDLBool, 8 bits, 1 lane}: one byte per element,
 * like numpy's. */
#define DTYPE_CODE_BOOL 6
/* The DLPack major version TVMFFITensorFromDLPackVersioned accepts. */
#define DLPACK_MAJOR 1
/* The alignment TVM's kernels assume for tensor data (TVM's kAllocAlignment). */
#define DATA_ALIGNMENT 64
/* The most dimensions a .npy file may have here. */
#define MAX_NDIM 32
/* The most elements printed per output. */
#define MAX_PRINTED 64

/* ------------------------------------------------------------------------------------------ */
/* Messages. Each thread prefixes its messages with its tag; a message is written with one
 * fputs so that lines of different threads do not interleave. */

static _Thread_local char g_tag[32] = "";
static int g_backtrace = 0; /* --backtrace */

static void errorf(const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  int n = snprintf(buf, sizeof buf, "%serror: ", g_tag);
  va_start(ap, fmt);
  vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  size_t len = strlen(buf);
  if (len + 1 < sizeof buf) { buf[len] = '\n'; buf[len + 1] = '\0'; }
  fputs(buf, stderr);
}

/* The cell of an ffi.Error follows its header (c_api.h defines TVMFFIErrorGetCellPtr for
 * C++ only; in C the offset is spelled out). */
static const TVMFFIErrorCell* error_cell(void* err) {
  return (const TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
}

/* Prints the error raised on this thread by a failed tvm-ffi call ("while WHAT: Kind: msg")
 * and releases it. `rc` is the call's return value: -1 when an error was raised, -2 when a
 * frontend signal (such as Ctrl-C seen by TVMFFIEnvCheckSignals) interrupted the call. */
static void report_ffi_error(int rc, const char* what) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err); /* takes the thread's raised error: we now own it */
  if (err == NULL) {
    errorf("%s failed (return code %d) without raising an error", what, rc);
    return;
  }
  const TVMFFIErrorCell* cell = error_cell(err);
  errorf("%s: %.*s: %.*s", what, (int)cell->kind.size, cell->kind.data, (int)cell->message.size,
         cell->message.data);
  if (g_backtrace && cell->backtrace.size > 0) {
    fprintf(stderr, "%sbacktrace:\n%.*s\n", g_tag, (int)cell->backtrace.size,
            cell->backtrace.data);
  }
  TVMFFIObjectDecRef(err);
}

/* ------------------------------------------------------------------------------------------ */
/* TVMFFIAny cells. */

static TVMFFIAny any_none(void) {
  TVMFFIAny v;
  memset(&v, 0, sizeof v);
  v.type_index = kTVMFFINone;
  return v;
}

static TVMFFIAny any_int(int64_t x) {
  TVMFFIAny v = any_none();
  v.type_index = kTVMFFIInt;
  v.v_int64 = x;
  return v;
}

static TVMFFIAny any_bool(int x) {
  TVMFFIAny v = any_none();
  v.type_index = kTVMFFIBool;
  v.v_int64 = x != 0;
  return v;
}

/* A borrowed C string: the callee copies it if it keeps it. */
static TVMFFIAny any_str(const char* s) {
  TVMFFIAny v = any_none();
  v.type_index = kTVMFFIRawStr;
  v.v_c_str = s;
  return v;
}

/* A borrowed object: its type index is read from its header. */
static TVMFFIAny any_obj(void* obj) {
  TVMFFIAny v = any_none();
  v.type_index = ((TVMFFIObject*)obj)->type_index;
  v.v_obj = (TVMFFIObject*)obj;
  return v;
}

/* Releases an owned cell: only objects hold a reference. */
static void any_release(TVMFFIAny* v) {
  if (v->type_index >= kTVMFFIStaticObjectBegin && v->v_obj != NULL) TVMFFIObjectDecRef(v->v_obj);
  *v = any_none();
}

/* The registered name of a type index ("ffi.Tensor", "relax.VirtualMachine", ...). */
static void type_key(int32_t type_index, char* buf, size_t n) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(type_index);
  if (info != NULL) {
    snprintf(buf, n, "%.*s", (int)info->type_key.size, info->type_key.data);
  } else {
    snprintf(buf, n, "type index %d", (int)type_index);
  }
}

/* Calls `f(args...)` into `*out` (owned by the caller on success, None on failure); on failure
 * prints the raised error as "while calling WHAT". */
static int call(void* f, TVMFFIAny* args, int32_t n, TVMFFIAny* out, const char* what) {
  *out = any_none();
  int rc = TVMFFIFunctionCall(f, args, n, out);
  if (rc != 0) {
    char buf[256];
    snprintf(buf, sizeof buf, "calling %s", what);
    report_ffi_error(rc, buf);
    *out = any_none();
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The global functions this program uses, looked up once and shared by all threads (calling
 * one function object from several threads at once is allowed). */

typedef struct {
  void* load_from_file; /* ffi.ModuleLoadFromFile(path) -> Module */
  void* get_function;   /* ffi.ModuleGetFunction(module, name, query_imports) -> Function|None */
  void* array_size;     /* ffi.ArraySize(array) -> int */
  void* array_get_item; /* ffi.ArrayGetItem(array, i) -> Any */
} Api;

static void* get_global(const char* name) {
  TVMFFIByteArray n = {name, strlen(name)};
  void* f = NULL;
  int rc = TVMFFIFunctionGetGlobal(&n, &f); /* a new reference, or NULL when not registered */
  if (rc != 0) {
    report_ffi_error(rc, name);
    return NULL;
  }
  if (f == NULL) errorf("the global function %s is not registered", name);
  return f;
}

static void api_release(Api* api) {
  void* fs[] = {api->load_from_file, api->get_function, api->array_size, api->array_get_item};
  for (size_t i = 0; i < sizeof fs / sizeof fs[0]; ++i) {
    if (fs[i] != NULL) TVMFFIObjectDecRef(fs[i]);
  }
  memset(api, 0, sizeof *api);
}

static int api_init(Api* api) {
  memset(api, 0, sizeof *api);
  if ((api->load_from_file = get_global("ffi.ModuleLoadFromFile")) == NULL ||
      (api->get_function = get_global("ffi.ModuleGetFunction")) == NULL ||
      (api->array_size = get_global("ffi.ArraySize")) == NULL ||
      (api->array_get_item = get_global("ffi.ArrayGetItem")) == NULL) {
    api_release(api);
    return -1;
  }
  return 0;
}

/* Loads a module file; returns a new reference or NULL. */
static void* load_module(const Api* api, const char* path) {
  TVMFFIAny arg = any_str(path), out;
  if (call(api->load_from_file, &arg, 1, &out, "ffi.ModuleLoadFromFile") != 0) return NULL;
  if (out.type_index != kTVMFFIModule) {
    char key[128];
    type_key(out.type_index, key, sizeof key);
    errorf("ffi.ModuleLoadFromFile(\"%s\") returned a %s, not a module", path, key);
    any_release(&out);
    return NULL;
  }
  return out.v_obj; /* the reference moves from `out` to the caller */
}

/* A module's function; a new reference or NULL (with a message) when it has none. The third
 * argument of ffi.ModuleGetFunction says whether the module's imports are searched too. */
static void* module_function(const Api* api, void* mod, const char* name, const char* what) {
  TVMFFIAny args[3] = {any_obj(mod), any_str(name), any_bool(1)}, out;
  if (call(api->get_function, args, 3, &out, "ffi.ModuleGetFunction") != 0) return NULL;
  if (out.type_index == kTVMFFINone) {
    errorf("the %s has no function \"%s\"", what, name);
    return NULL;
  }
  if (out.type_index != kTVMFFIFunction) {
    errorf("ffi.ModuleGetFunction(\"%s\") returned type index %d", name, (int)out.type_index);
    any_release(&out);
    return NULL;
  }
  return out.v_obj;
}

/* ------------------------------------------------------------------------------------------ */
/* A strict .npy reader: format versions 1.0, 2.0 and 3.0, little-endian or single-byte dtypes,
 * C order, the data exactly filling the rest of the file. */

typedef struct {
  const char* descr; /* numpy's dtype string */
  DLDataType dtype;  /* the DLPack dtype */
  const char* name;  /* TVM's name of it */
} DTypeEntry;

static const DTypeEntry kDTypes[] = {
    {"<f4", {kDLFloat, 32, 1}, "float32"}, {"<f8", {kDLFloat, 64, 1}, "float64"},
    {"<i4", {kDLInt, 32, 1}, "int32"},     {"<i8", {kDLInt, 64, 1}, "int64"},
    {"<i2", {kDLInt, 16, 1}, "int16"},     {"|i1", {kDLInt, 8, 1}, "int8"},
    {"<u4", {kDLUInt, 32, 1}, "uint32"},   {"<u8", {kDLUInt, 64, 1}, "uint64"},
    {"<u2", {kDLUInt, 16, 1}, "uint16"},   {"|u1", {kDLUInt, 8, 1}, "uint8"},
    {"|b1", {DTYPE_CODE_BOOL, 8, 1}, "bool"},
};
#define NUM_DTYPES (sizeof kDTypes / sizeof kDTypes[0])

static const DTypeEntry* dtype_entry(DLDataType t) {
  for (size_t i = 0; i < NUM_DTYPES; ++i) {
    const DLDataType d = kDTypes[i].dtype;
    if (d.code == t.code && d.bits == t.bits && d.lanes == t.lanes) return &kDTypes[i];
  }
  return NULL;
}

static void dtype_str(DLDataType t, char* buf, size_t n) {
  const DTypeEntry* e = dtype_entry(t);
  if (e != NULL) {
    snprintf(buf, n, "%s", e->name);
  } else {
    snprintf(buf, n, "dtype(code=%u, bits=%u, lanes=%u)", t.code, t.bits, t.lanes);
  }
}

typedef struct {
  DLDataType dtype;
  int ndim;
  int64_t shape[MAX_NDIM];
  int64_t numel;
  size_t nbytes;
  void* data; /* DATA_ALIGNMENT-aligned, from aligned_alloc; owned */
} Npy;

static void npy_free(Npy* a) {
  free(a->data);
  a->data = NULL;
}

/* The header is a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 16), }
 * This small parser accepts exactly those three keys, each once, in any order. */
typedef struct {
  const char* p;
  const char* end;
} Cursor;

static void skip_spaces(Cursor* c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) ++c->p;
}

static int expect_char(Cursor* c, char ch) {
  skip_spaces(c);
  if (c->p < c->end && *c->p == ch) {
    ++c->p;
    return 0;
  }
  return -1;
}

/* A quoted Python string without escapes into buf. */
static int parse_str(Cursor* c, char* buf, size_t n) {
  skip_spaces(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return -1;
  char q = *c->p++;
  size_t len = 0;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\' || len + 1 >= n) return -1;
    buf[len++] = *c->p++;
  }
  if (c->p >= c->end) return -1;
  ++c->p;
  buf[len] = '\0';
  return 0;
}

static int parse_word(Cursor* c, const char* w) {
  skip_spaces(c);
  size_t n = strlen(w);
  if ((size_t)(c->end - c->p) < n || strncmp(c->p, w, n) != 0) return -1;
  c->p += n;
  return 0;
}

/* A shape tuple: "()", "(5,)", "(2, 16)". */
static int parse_shape(Cursor* c, Npy* a, const char* path) {
  if (expect_char(c, '(') != 0) return -1;
  a->ndim = 0;
  for (;;) {
    skip_spaces(c);
    if (c->p < c->end && *c->p == ')') break;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return -1;
    int64_t d = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (d > (INT64_MAX - 9) / 10) return -1;
      d = d * 10 + (*c->p++ - '0');
    }
    if (a->ndim == MAX_NDIM) {
      errorf("%s: more than %d dimensions", path, MAX_NDIM);
      return -2;
    }
    a->shape[a->ndim++] = d;
    skip_spaces(c);
    if (c->p < c->end && *c->p == ',') {
      ++c->p;
    } else if (c->p < c->end && *c->p == ')') {
      /* "(5)" is a parenthesized int, not a tuple; numpy writes "(5,)". */
      if (a->ndim == 1) return -1;
      break;
    } else {
      return -1;
    }
  }
  ++c->p; /* ')' */
  return 0;
}

static int parse_header(const char* text, size_t len, Npy* a, const char* path) {
  Cursor c = {text, text + len};
  int have_descr = 0, have_order = 0, have_shape = 0, rc;
  char key[32], descr[32];
  if (len == 0 || text[len - 1] != '\n') goto bad;
  c.end = text + len - 1; /* the newline */
  if (expect_char(&c, '{') != 0) goto bad;
  for (;;) {
    skip_spaces(&c);
    if (c.p < c.end && *c.p == '}') break;
    if (parse_str(&c, key, sizeof key) != 0 || expect_char(&c, ':') != 0) goto bad;
    if (strcmp(key, "descr") == 0 && !have_descr) {
      if (parse_str(&c, descr, sizeof descr) != 0) goto bad;
      have_descr = 1;
    } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
      if (parse_word(&c, "False") == 0) {
        have_order = 1;
      } else if (parse_word(&c, "True") == 0) {
        errorf("%s: the array is in Fortran order; save a C-ordered array "
               "(np.ascontiguousarray)", path);
        return -1;
      } else {
        goto bad;
      }
    } else if (strcmp(key, "shape") == 0 && !have_shape) {
      if ((rc = parse_shape(&c, a, path)) != 0) {
        if (rc == -2) return -1;
        goto bad;
      }
      have_shape = 1;
    } else {
      goto bad; /* an unknown or repeated key */
    }
    skip_spaces(&c);
    if (c.p < c.end && *c.p == ',') {
      ++c.p;
    } else if (c.p >= c.end || *c.p != '}') {
      goto bad;
    }
  }
  ++c.p; /* '}' */
  skip_spaces(&c);
  if (c.p != c.end || !have_descr || !have_order || !have_shape) goto bad;

  for (size_t i = 0; i < NUM_DTYPES; ++i) {
    if (strcmp(descr, kDTypes[i].descr) == 0) {
      a->dtype = kDTypes[i].dtype;
      return 0;
    }
  }
  if (descr[0] == '>') {
    errorf("%s: dtype '%s' is not little-endian; save it as '<%s'", path, descr, descr + 1);
  } else {
    errorf("%s: unsupported dtype '%s' (supported: float32/64, int8/16/32/64, "
           "uint8/16/32/64, bool)", path, descr);
  }
  return -1;
bad:
  errorf("%s: malformed .npy header: %.*s", path, (int)(len > 200 ? 200 : len), text);
  return -1;
}

static uint32_t read_le(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

static int npy_load(const char* path, Npy* a) {
  memset(a, 0, sizeof *a);
  FILE* f = fopen(path, "rb");
  char* header = NULL;
  if (f == NULL) {
    errorf("%s: %s", path, strerror(errno));
    return -1;
  }
  unsigned char pre[12];
  /* Magic "\x93NUMPY", major and minor version, then the header length: 2 bytes (1.0) or
   * 4 bytes (2.0, 3.0), little-endian. */
  if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    errorf("%s: not a .npy file (bad magic)", path);
    goto fail;
  }
  int len_bytes = pre[6] == 1 ? 2 : (pre[6] == 2 || pre[6] == 3) ? 4 : 0;
  if (len_bytes == 0 || pre[7] != 0) {
    errorf("%s: unsupported .npy format version %u.%u", path, pre[6], pre[7]);
    goto fail;
  }
  if (fread(pre + 8, 1, (size_t)len_bytes, f) != (size_t)len_bytes) {
    errorf("%s: truncated .npy header", path);
    goto fail;
  }
  uint32_t hlen = read_le(pre + 8, len_bytes);
  if (hlen > (1u << 20)) {
    errorf("%s: .npy header of %u bytes is implausibly large", path, hlen);
    goto fail;
  }
  header = malloc(hlen + 1u);
  if (header == NULL || fread(header, 1, hlen, f) != hlen) {
    errorf("%s: truncated .npy header", path);
    goto fail;
  }
  header[hlen] = '\0';
  if (parse_header(header, hlen, a, path) != 0) goto fail;

  /* Element count and size, refusing overflow. */
  size_t itemsize = a->dtype.bits / 8u;
  a->numel = 1;
  for (int i = 0; i < a->ndim; ++i) {
    if (a->shape[i] != 0 && a->numel > INT64_MAX / a->shape[i]) {
      errorf("%s: the shape overflows", path);
      goto fail;
    }
    a->numel *= a->shape[i];
  }
  if ((uint64_t)a->numel > SIZE_MAX / itemsize) {
    errorf("%s: the data size overflows", path);
    goto fail;
  }
  a->nbytes = (size_t)a->numel * itemsize;
  /* aligned_alloc wants a size that is a multiple of the alignment (and not zero). */
  size_t alloc = (a->nbytes + DATA_ALIGNMENT - 1) / DATA_ALIGNMENT * DATA_ALIGNMENT;
  a->data = aligned_alloc(DATA_ALIGNMENT, alloc == 0 ? DATA_ALIGNMENT : alloc);
  if (a->data == NULL) {
    errorf("%s: out of memory for %zu bytes", path, a->nbytes);
    goto fail;
  }
  if (fread(a->data, 1, a->nbytes, f) != a->nbytes) {
    errorf("%s: truncated data (%zu bytes expected for the shape)", path, a->nbytes);
    goto fail;
  }
  if (fgetc(f) != EOF) {
    errorf("%s: trailing bytes after the data", path);
    goto fail;
  }
  free(header);
  fclose(f);
  return 0;
fail:
  free(header);
  npy_free(a);
  fclose(f);
  return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Input tensors: an ffi.Tensor adopting a .npy's buffer through DLPack.
 *
 * TVMFFITensorFromDLPackVersioned takes over a DLManagedTensorVersioned: the tensor calls its
 * `deleter` once its last reference is gone, and the deleter frees what the producer
 * allocated. The DLTensor's `shape` must stay valid that long too, so it lives in the same
 * block as the managed tensor. Ownership moves only on success: on failure the producer
 * still owns it and calls the deleter itself. */

typedef struct {
  DLManagedTensorVersioned managed; /* managed.manager_ctx points back to this block */
  int64_t shape[MAX_NDIM];
  void* data;
} HostTensor;

static void host_tensor_deleter(DLManagedTensorVersioned* self) {
  HostTensor* h = (HostTensor*)self->manager_ctx;
  free(h->data);
  free(h);
}

/* Moves `a`'s buffer into a new ffi.Tensor (returned, a new reference; NULL on failure).
 * `a->data` is NULL afterwards either way. */
static void* tensor_from_npy(Npy* a, const char* path) {
  HostTensor* h = calloc(1, sizeof *h);
  if (h == NULL) {
    errorf("out of memory");
    npy_free(a);
    return NULL;
  }
  memcpy(h->shape, a->shape, sizeof a->shape);
  h->data = a->data;
  a->data = NULL;
  h->managed.version.major = DLPACK_MAJOR;
  h->managed.version.minor = 0;
  h->managed.manager_ctx = h;
  h->managed.deleter = host_tensor_deleter;
  h->managed.flags = 0; /* writable, not a copy */
  DLTensor* t = &h->managed.dl_tensor;
  t->data = h->data;
  t->device.device_type = kDLCPU;
  t->device.device_id = 0;
  t->ndim = a->ndim;
  t->dtype = a->dtype;
  t->shape = h->shape;
  t->strides = NULL; /* compact, C order */
  t->byte_offset = 0;
  void* tensor = NULL;
  int rc = TVMFFITensorFromDLPackVersioned(&h->managed, DATA_ALIGNMENT, /*require_contiguous=*/1,
                                           &tensor);
  if (rc != 0) {
    char what[512];
    snprintf(what, sizeof what, "making a tensor of %s", path);
    report_ffi_error(rc, what);
    host_tensor_deleter(&h->managed); /* not adopted: still ours */
    return NULL;
  }
  return tensor;
}

/* ------------------------------------------------------------------------------------------ */
/* Outputs. */

/* The DLTensor of an ffi.Tensor follows its header (TVMFFITensorGetDLTensorPtr is C++ only). */
static const DLTensor* dltensor(void* tensor) {
  return (const DLTensor*)((char*)tensor + sizeof(TVMFFIObject));
}

typedef struct {
  void** items; /* ffi.Tensor references, owned */
  int n, cap;
} TensorList;

static void tensor_list_release(TensorList* l) {
  for (int i = 0; i < l->n; ++i) TVMFFIObjectDecRef(l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}

/* Flattens `v` (an owned Tensor or Array, consumed here) depth first into `out`. Arrays are
 * read through the globals ffi.ArraySize / ffi.ArrayGetItem; ffi.ArrayGetItem returns an
 * owned item. (c_api.h also documents the array layout, TVMFFISeqCell after the header,
 * which a program may read directly instead.) */
static int flatten(const Api* api, TVMFFIAny* v, TensorList* out, int depth) {
  int rc = -1;
  if (v->type_index == kTVMFFITensor) {
    if (out->n == out->cap) {
      int cap = out->cap ? out->cap * 2 : 8;
      void** items = realloc(out->items, (size_t)cap * sizeof *items);
      if (items == NULL) {
        errorf("out of memory");
        goto done;
      }
      out->items = items;
      out->cap = cap;
    }
    out->items[out->n++] = v->v_obj; /* the reference moves into the list */
    *v = any_none();
    return 0;
  }
  if (v->type_index == kTVMFFIArray) {
    TVMFFIAny size;
    if (depth > 64) {
      errorf("the result nests arrays more than 64 deep");
      goto done;
    }
    if (call(api->array_size, v, 1, &size, "ffi.ArraySize") != 0) goto done;
    if (size.type_index != kTVMFFIInt) {
      errorf("ffi.ArraySize returned type index %d, not an int", (int)size.type_index);
      any_release(&size);
      goto done;
    }
    for (int64_t i = 0; i < size.v_int64; ++i) {
      TVMFFIAny args[2] = {*v, any_int(i)}, item;
      if (call(api->array_get_item, args, 2, &item, "ffi.ArrayGetItem") != 0) goto done;
      int item_rc = flatten(api, &item, out, depth + 1);
      any_release(&item); /* a no-op when flatten moved it */
      if (item_rc != 0) goto done;
    }
    rc = 0;
    goto done;
  }
  char key[128];
  type_key(v->type_index, key, sizeof key);
  errorf("output %d is a %s; this example handles tensors and (nested) arrays of tensors",
         out->n, key);
done:
  any_release(v);
  return rc;
}

/* Element i of a compact tensor as a double, a signed or an unsigned integer. */
static double elem_f64(const void* p, DLDataType t, int64_t i) {
  return t.bits == 32 ? (double)((const float*)p)[i] : ((const double*)p)[i];
}

static int64_t elem_i64(const void* p, DLDataType t, int64_t i) {
  switch (t.bits) {
    case 8: return ((const int8_t*)p)[i];
    case 16: return ((const int16_t*)p)[i];
    case 32: return ((const int32_t*)p)[i];
    default: return ((const int64_t*)p)[i];
  }
}

static uint64_t elem_u64(const void* p, DLDataType t, int64_t i) {
  switch (t.bits) {
    case 8: return ((const uint8_t*)p)[i];
    case 16: return ((const uint16_t*)p)[i];
    case 32: return ((const uint32_t*)p)[i];
    default: return ((const uint64_t*)p)[i];
  }
}

static void shape_str(const int64_t* shape, int ndim, char* buf, size_t n) {
  size_t len = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && len < n; ++i) {
    len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, i ? ", " : "", shape[i]);
  }
  if (len < n) snprintf(buf + len, n - len, "]");
}

/* Checks that an output is a host tensor this program can read (CPU, compact, a known dtype)
 * and returns its data and element count. */
static int host_view(const DLTensor* t, int k, const void** data, int64_t* numel) {
  char dt[64];
  if (t->device.device_type != kDLCPU) {
    errorf("output %d is on device type %d; this example reads CPU tensors", k,
           (int)t->device.device_type);
    return -1;
  }
  if (dtype_entry(t->dtype) == NULL) {
    dtype_str(t->dtype, dt, sizeof dt);
    errorf("output %d has dtype %s, which this example does not read", k, dt);
    return -1;
  }
  int64_t n = 1, stride = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->strides != NULL && t->shape[i] != 1 && t->strides[i] != stride) {
      errorf("output %d is not compact (strided)", k);
      return -1;
    }
    stride *= t->shape[i];
    n *= t->shape[i];
  }
  *data = (const char*)t->data + t->byte_offset;
  *numel = n;
  return 0;
}

static int print_output(const DLTensor* t, int k) {
  const void* data;
  int64_t n;
  char dt[64], sh[256];
  if (host_view(t, k, &data, &n) != 0) return -1;
  dtype_str(t->dtype, dt, sizeof dt);
  shape_str(t->shape, t->ndim, sh, sizeof sh);
  printf("output %d: %s%s =", k, dt, sh);
  for (int64_t i = 0; i < n && i < MAX_PRINTED; ++i) {
    switch (t->dtype.code) {
      case kDLFloat: printf(" %.9g", elem_f64(data, t->dtype, i)); break;
      case kDLInt: printf(" %" PRId64, elem_i64(data, t->dtype, i)); break;
      default: printf(" %" PRIu64, elem_u64(data, t->dtype, i)); break;
    }
  }
  printf("%s\n", n > MAX_PRINTED ? " ..." : "");
  return 0;
}

/* Compares output k with the expected array: same dtype and shape, floats within the
 * tolerances (NaN matches NaN, infinities match exactly), integers and bools exactly. */
static int compare_output(const DLTensor* t, int k, const Npy* want, double rtol, double atol) {
  const void* data;
  int64_t n;
  char got_s[256], want_s[256];
  if (host_view(t, k, &data, &n) != 0) return -1;
  if (t->dtype.code != want->dtype.code || t->dtype.bits != want->dtype.bits ||
      t->dtype.lanes != want->dtype.lanes) {
    dtype_str(t->dtype, got_s, sizeof got_s);
    dtype_str(want->dtype, want_s, sizeof want_s);
    errorf("output %d: dtype %s, expected %s", k, got_s, want_s);
    return -1;
  }
  int same_shape = t->ndim == want->ndim;
  for (int i = 0; same_shape && i < t->ndim; ++i) same_shape = t->shape[i] == want->shape[i];
  if (!same_shape) {
    shape_str(t->shape, t->ndim, got_s, sizeof got_s);
    shape_str(want->shape, want->ndim, want_s, sizeof want_s);
    errorf("output %d: shape %s, expected %s", k, got_s, want_s);
    return -1;
  }
  int64_t bad = 0, first = -1;
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    int ok;
    if (t->dtype.code == kDLFloat) {
      double g = elem_f64(data, t->dtype, i), w = elem_f64(want->data, want->dtype, i);
      ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= atol + rtol * fabs(w);
      if (!ok && fabs(g - w) > worst) worst = fabs(g - w);
    } else if (t->dtype.code == kDLInt) {
      ok = elem_i64(data, t->dtype, i) == elem_i64(want->data, want->dtype, i);
    } else {
      ok = elem_u64(data, t->dtype, i) == elem_u64(want->data, want->dtype, i);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad != 0) {
    if (t->dtype.code == kDLFloat) {
      errorf("output %d: %" PRId64 " of %" PRId64 " elements differ (first at flat index %" PRId64
             ": %.9g, expected %.9g; largest difference %.3g; rtol %g, atol %g)",
             k, bad, n, first, elem_f64(data, t->dtype, first),
             elem_f64(want->data, want->dtype, first), worst, rtol, atol);
    } else {
      errorf("output %d: %" PRId64 " of %" PRId64 " elements differ (first at flat index %" PRId64
             ": %" PRId64 ", expected %" PRId64 ")",
             k, bad, n, first, elem_i64(data, t->dtype, first),
             elem_i64(want->data, want->dtype, first));
    }
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* A VM session: a relax.VirtualMachine made from the shared executable, initialized on the
 * CPU, and the function to call. */

typedef struct {
  const char* model; /* MODEL.so */
  const char* func;  /* FUNC */
  double rtol, atol;
  int threads, repeat;
} Options;

typedef struct {
  void* vm;   /* relax.VirtualMachine module */
  void* func; /* its function FUNC */
} Session;

static void session_close(Session* s) {
  if (s->func != NULL) TVMFFIObjectDecRef(s->func);
  if (s->vm != NULL) TVMFFIObjectDecRef(s->vm);
  memset(s, 0, sizeof *s);
}

static int session_open(const Api* api, void* exec, const char* func_name, Session* s) {
  TVMFFIAny out;
  memset(s, 0, sizeof *s);
  /* vm_load_executable() makes a new VM over the executable (each VM keeps the executable
   * alive; VMs made from one executable share its code and constants). */
  void* load = module_function(api, exec, "vm_load_executable", "executable");
  if (load == NULL) return -1;
  int rc = call(load, NULL, 0, &out, "vm_load_executable");
  TVMFFIObjectDecRef(load);
  if (rc != 0) return -1;
  if (out.type_index != kTVMFFIModule) {
    errorf("vm_load_executable returned type index %d, not a module", (int)out.type_index);
    any_release(&out);
    return -1;
  }
  s->vm = out.v_obj;

  /* vm_initialization takes (device_type, device_id, allocator_type) triples, one per
   * device the VM uses; the last must be the CPU (TVM's Python appends it when the first
   * device is not the CPU). Allocator 1 is the naive allocator, 2 the pooled one. */
  void* init = module_function(api, s->vm, "vm_initialization", "virtual machine");
  if (init == NULL) goto fail;
  TVMFFIAny args[3] = {any_int(kDLCPU), any_int(0), any_int(2)};
  rc = call(init, args, 3, &out, "vm_initialization");
  TVMFFIObjectDecRef(init);
  if (rc != 0) goto fail;
  any_release(&out); /* None */

  s->func = module_function(api, s->vm, func_name, "virtual machine");
  if (s->func == NULL) goto fail;
  return 0;
fail:
  session_close(s);
  return -1;
}

/* One call of FUNC on the inputs; its outputs are compared with `expects` (or printed when
 * there are none and `print` is set). */
static int run_once(const Api* api, const Session* s, const Options* o, void* const* inputs,
                    int n_inputs, const Npy* expects, int n_expects, int print) {
  TVMFFIAny* args = calloc((size_t)(n_inputs ? n_inputs : 1), sizeof *args);
  TVMFFIAny result;
  TensorList outs = {0};
  int rc = -1;
  if (args == NULL) {
    errorf("out of memory");
    return -1;
  }
  for (int i = 0; i < n_inputs; ++i) args[i] = any_obj(inputs[i]); /* borrowed views */
  if (call(s->func, args, n_inputs, &result, o->func) != 0) goto done;
  if (flatten(api, &result, &outs, 0) != 0) goto done;
  if (n_expects > 0) {
    if (outs.n != n_expects) {
      errorf("%s returned %d tensor(s), %d expected (--expect)", o->func, outs.n, n_expects);
      goto done;
    }
    rc = 0;
    for (int k = 0; k < outs.n; ++k) {
      if (compare_output(dltensor(outs.items[k]), k, &expects[k], o->rtol, o->atol) != 0) rc = -1;
    }
  } else {
    rc = 0;
    for (int k = 0; print && k < outs.n; ++k) {
      if (print_output(dltensor(outs.items[k]), k) != 0) rc = -1;
    }
  }
done:
  tensor_list_release(&outs);
  free(args);
  return rc;
}

/* Everything a run needs, shared read-only by the threads. Input tensors are only read by
 * the VMs, so the threads pass the same tensor objects (reference counts are atomic). */
typedef struct {
  const Api* api;
  void* exec;
  const Options* opt;
  void* const* inputs;
  int n_inputs;
  const Npy* expects;
  int n_expects;
} Job;

static int run_session(const Job* j, int print) {
  Session s;
  if (session_open(j->api, j->exec, j->opt->func, &s) != 0) return -1;
  int rc = 0;
  for (int r = 0; r < j->opt->repeat && rc == 0; ++r) {
    rc = run_once(j->api, &s, j->opt, j->inputs, j->n_inputs, j->expects, j->n_expects,
                  print && r == 0);
    if (rc != 0 && r > 0) errorf("(in call %d of %d)", r + 1, j->opt->repeat);
  }
  session_close(&s);
  return rc;
}

typedef struct {
  const Job* job;
  int id;
  int rc;
  pthread_t thread;
} Worker;

static void* worker_main(void* arg) {
  Worker* w = arg;
  snprintf(g_tag, sizeof g_tag, "[thread %d] ", w->id);
  w->rc = run_session(w->job, 0);
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */

static void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s MODEL.so FUNC [--in X.npy]... [--expect Y.npy]... [--rtol R] [--atol A]\n"
          "          [--threads N] [--repeat K] [--backtrace]\n",
          argv0);
}

static int parse_double(const char* s, double* out) {
  char* end;
  errno = 0;
  *out = strtod(s, &end);
  return (errno != 0 || end == s || *end != '\0' || !(*out >= 0)) ? -1 : 0;
}

static int parse_count(const char* s, int* out) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 1 || v > 1024) return -1;
  *out = (int)v;
  return 0;
}

int main(int argc, char** argv) {
  Options o = {NULL, NULL, 1e-5, 1e-5, 0, 0};
  const char** in_paths = calloc((size_t)argc, sizeof *in_paths);
  const char** exp_paths = calloc((size_t)argc, sizeof *exp_paths);
  Npy* in_arrays = calloc((size_t)argc, sizeof *in_arrays);
  Npy* expects = calloc((size_t)argc, sizeof *expects);
  void** inputs = calloc((size_t)argc, sizeof *inputs);
  int n_in = 0, n_exp = 0, n_inputs = 0, status = 1;
  Api api = {0};
  void* exec = NULL;

  if (!in_paths || !exp_paths || !in_arrays || !expects || !inputs) {
    errorf("out of memory");
    goto cleanup;
  }
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--backtrace") == 0) {
      g_backtrace = 1;
      continue;
    }
    if (a[0] != '-' && (o.model == NULL || o.func == NULL)) {
      *(o.model == NULL ? &o.model : &o.func) = a;
      continue;
    }
    /* Every other argument is an option with a value. */
    const char* v = i + 1 < argc ? argv[++i] : NULL;
    int ok = v != NULL;
    if (strcmp(a, "--in") == 0) {
      if (ok) in_paths[n_in++] = v;
    } else if (strcmp(a, "--expect") == 0) {
      if (ok) exp_paths[n_exp++] = v;
    } else if (strcmp(a, "--rtol") == 0 || strcmp(a, "--atol") == 0) {
      ok = ok && parse_double(v, a[2] == 'r' ? &o.rtol : &o.atol) == 0;
    } else if (strcmp(a, "--threads") == 0 || strcmp(a, "--repeat") == 0) {
      ok = ok && parse_count(v, a[2] == 't' ? &o.threads : &o.repeat) == 0;
    } else {
      usage(argv[0]);
      errorf("unknown argument: %s", a);
      status = 2;
      goto cleanup;
    }
    if (!ok) {
      usage(argv[0]);
      errorf(v == NULL ? "%s needs a value" : "%s: bad value %s", a, v);
      status = 2;
      goto cleanup;
    }
  }
  if (o.model == NULL || o.func == NULL) {
    usage(argv[0]);
    status = 2;
    goto cleanup;
  }
  if (o.threads > 0 && n_exp == 0) {
    usage(argv[0]);
    errorf("--threads checks the outputs: give them with --expect");
    status = 2;
    goto cleanup;
  }
  if (o.repeat == 0) o.repeat = o.threads > 0 ? 5 : 1;
  {
    const uint16_t probe = 1;
    if (*(const uint8_t*)&probe != 1) {
      errorf("this example reads little-endian .npy data and runs on little-endian hosts only");
      goto cleanup;
    }
  }

  /* 1. The .npy files. */
  for (int i = 0; i < n_in; ++i) {
    if (npy_load(in_paths[i], &in_arrays[i]) != 0) goto cleanup;
  }
  for (int i = 0; i < n_exp; ++i) {
    if (npy_load(exp_paths[i], &expects[i]) != 0) goto cleanup;
  }

  /* 2. The globals, the executable, the input tensors. */
  if (api_init(&api) != 0) goto cleanup;
  exec = load_module(&api, o.model);
  if (exec == NULL) goto cleanup;
  for (; n_inputs < n_in; ++n_inputs) {
    inputs[n_inputs] = tensor_from_npy(&in_arrays[n_inputs], in_paths[n_inputs]);
    if (inputs[n_inputs] == NULL) goto cleanup;
  }

  /* 3. Run: one VM on this thread, or one VM per thread. */
  Job job = {&api, exec, &o, inputs, n_inputs, expects, n_exp};
  if (o.threads == 0) {
    if (run_session(&job, 1) != 0) goto cleanup;
    printf("%s: %s %s: %d call(s), %s\n", argv[0], o.model, o.func, o.repeat,
           n_exp ? "all outputs match" : "done");
  } else {
    Worker* ws = calloc((size_t)o.threads, sizeof *ws);
    int started = 0, failed = 0;
    if (ws == NULL) {
      errorf("out of memory");
      goto cleanup;
    }
    for (; started < o.threads; ++started) {
      ws[started].job = &job;
      ws[started].id = started;
      int err = pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]);
      if (err != 0) {
        errorf("pthread_create: %s", strerror(err));
        failed = 1;
        break;
      }
    }
    for (int t = 0; t < started; ++t) {
      pthread_join(ws[t].thread, NULL);
      if (ws[t].rc != 0) failed = 1;
    }
    free(ws);
    if (failed) goto cleanup;
    printf("%s: %s %s: %d thread(s) x %d call(s), all outputs match\n", argv[0], o.model, o.func,
           o.threads, o.repeat);
  }
  status = 0;

cleanup:
  /* Every reference taken above is given back, on success and on every error path alike. */
  for (int i = 0; i < n_inputs; ++i) TVMFFIObjectDecRef(inputs[i]);
  if (exec != NULL) TVMFFIObjectDecRef(exec);
  api_release(&api);
  for (int i = 0; i < n_in && in_arrays; ++i) npy_free(&in_arrays[i]);
  for (int i = 0; i < n_exp && expects; ++i) npy_free(&expects[i]);
  free(inputs);
  free(expects);
  free(in_arrays);
  free(exp_paths);
  free(in_paths);
  return status;
}
