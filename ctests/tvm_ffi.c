/* The tvm-ffi C ABI of libtvm_runtime.so (libtvm_ffi.so): values, objects and their reference
 * counts, global functions, C callbacks, errors, the type table. Written against the generated
 * tvm/ffi/c_api.h only, as a C client of apache-tvm-ffi would be. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

static int g_failed = 0, g_checks = 0;
#define EXPECT(cond)                                                         \
  do {                                                                       \
    g_checks++;                                                              \
    if (!(cond)) {                                                           \
      g_failed++;                                                            \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
    }                                                                        \
  } while (0)

static TVMFFIByteArray ba(const char* s) {
  TVMFFIByteArray b = {s, strlen(s)};
  return b;
}

/* The raised error's kind and message, consumed. */
static void take_error(char* kind, char* msg, size_t n) {
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  kind[0] = msg[0] = 0;
  if (err == NULL) return;
  TVMFFIErrorCell* cell = (TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
  snprintf(kind, n, "%.*s", (int)cell->kind.size, cell->kind.data);
  snprintf(msg, n, "%.*s", (int)cell->message.size, cell->message.data);
  TVMFFIObjectDecRef(err);
}

static int g_deleted = 0;
static void on_delete(void* self) { g_deleted += *(int*)self; }

/* add(a, b) in C: ints only, else a TypeError. */
static int c_add(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  if (n != 2 || args[0].type_index != kTVMFFIInt || args[1].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "c_add takes two ints");
    return -1;
  }
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = args[0].v_int64 + args[1].v_int64;
  return 0;
}

int main(void) {
  char kind[256], msg[256];
  TVMFFIVersion v;
  TVMFFIGetVersion(&v);
  EXPECT(v.major == 0 && v.minor == 1);

  /* Strings: small in the cell, long ones as ffi.String objects; echo through ffi.String. */
  TVMFFIByteArray s7 = ba("1234567"), s8 = ba("a longer string");
  TVMFFIAny small, big;
  EXPECT(TVMFFIStringFromByteArray(&s7, &small) == 0);
  EXPECT(small.type_index == kTVMFFISmallStr && small.small_str_len == 7);
  EXPECT(TVMFFIStringFromByteArray(&s8, &big) == 0);
  EXPECT(big.type_index == kTVMFFIStr);
  TVMFFIByteArray* cell = (TVMFFIByteArray*)((char*)big.v_obj + sizeof(TVMFFIObject));
  EXPECT(cell->size == s8.size && memcmp(cell->data, s8.data, s8.size) == 0);
  EXPECT(cell->data[cell->size] == 0);
  /* One strong reference, freed by the last DecRef. */
  EXPECT((big.v_obj->combined_ref_count & 0xffffffffu) == 1);
  EXPECT(TVMFFIObjectIncRef(big.v_obj) == 0);
  EXPECT((big.v_obj->combined_ref_count & 0xffffffffu) == 2);
  EXPECT(TVMFFIObjectDecRef(big.v_obj) == 0);

  TVMFFIObjectHandle f_string = NULL;
  TVMFFIByteArray name = ba("ffi.String");
  EXPECT(TVMFFIFunctionGetGlobal(&name, &f_string) == 0 && f_string != NULL);
  TVMFFIAny arg = {.type_index = kTVMFFIRawStr, .v_c_str = "from a raw C string"};
  TVMFFIAny out = {.type_index = kTVMFFINone};
  EXPECT(TVMFFIFunctionCall(f_string, &arg, 1, &out) == 0);
  EXPECT(out.type_index == kTVMFFIStr);
  if (out.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(out.v_obj);
  EXPECT(TVMFFIObjectDecRef(big.v_obj) == 0);

  /* A missing global is NULL, not an error. */
  TVMFFIObjectHandle none = (TVMFFIObjectHandle)1;
  TVMFFIByteArray missing = ba("no.such.function");
  EXPECT(TVMFFIFunctionGetGlobal(&missing, &none) == 0 && none == NULL);

  /* A C callback as a function object, registered as a global, called, its deleter run once. */
  static int weight = 1;
  TVMFFIObjectHandle f = NULL;
  EXPECT(TVMFFIFunctionCreate(&weight, c_add, on_delete, &f) == 0);
  TVMFFIByteArray gname = ba("ctest.add");
  EXPECT(TVMFFIFunctionSetGlobal(&gname, f, 0) == 0);
  EXPECT(TVMFFIFunctionSetGlobal(&gname, f, 0) == -1);
  take_error(kind, msg, sizeof msg);
  EXPECT(strstr(msg, "already registered") != NULL);
  TVMFFIObjectHandle g = NULL;
  EXPECT(TVMFFIFunctionGetGlobal(&gname, &g) == 0 && g == f);
  TVMFFIAny args[2] = {{.type_index = kTVMFFIInt, .v_int64 = 40}, {.type_index = kTVMFFIInt, .v_int64 = 2}};
  out.type_index = kTVMFFINone;
  EXPECT(TVMFFIFunctionCall(g, args, 2, &out) == 0);
  EXPECT(out.type_index == kTVMFFIInt && out.v_int64 == 42);
  args[1].type_index = kTVMFFIFloat;
  args[1].v_float64 = 2.0;
  EXPECT(TVMFFIFunctionCall(g, args, 2, &out) == -1);
  take_error(kind, msg, sizeof msg);
  EXPECT(strcmp(kind, "TypeError") == 0 && strstr(msg, "two ints") != NULL);
  TVMFFIObjectDecRef(g);
  TVMFFIObjectHandle remove = NULL;
  TVMFFIByteArray rname = ba("ffi.FunctionRemoveGlobal");
  EXPECT(TVMFFIFunctionGetGlobal(&rname, &remove) == 0 && remove != NULL);
  TVMFFIAny rarg = {.type_index = kTVMFFIRawStr, .v_c_str = "ctest.add"};
  out.type_index = kTVMFFINone;
  EXPECT(TVMFFIFunctionCall(remove, &rarg, 1, &out) == 0);
  TVMFFIObjectDecRef(remove);
  EXPECT(g_deleted == 0);
  TVMFFIObjectDecRef(f);
  EXPECT(g_deleted == 1);

  /* Errors: made, raised, moved; parts joined. */
  TVMFFIByteArray k = ba("ValueError"), m = ba("bad value"), bt = ba("");
  TVMFFIObjectHandle e = NULL;
  EXPECT(TVMFFIErrorCreate(&k, &m, &bt, &e) == 0);
  TVMFFIErrorSetRaised(e);
  TVMFFIObjectDecRef(e);
  take_error(kind, msg, sizeof msg);
  EXPECT(strcmp(kind, "ValueError") == 0 && strcmp(msg, "bad value") == 0);
  const char* parts[3] = {"a", "b", "c"};
  TVMFFIErrorSetRaisedFromCStrParts("RuntimeError", parts, 3);
  take_error(kind, msg, sizeof msg);
  EXPECT(strcmp(msg, "abc") == 0);
  TVMFFIObjectHandle nothing = (TVMFFIObjectHandle)1;
  TVMFFIErrorMoveFromRaised(&nothing);
  EXPECT(nothing == NULL);

  /* Bad input: a NULL function handle, an unknown type key. */
  EXPECT(TVMFFIFunctionCall(NULL, args, 0, &out) == -1);
  take_error(kind, msg, sizeof msg);
  EXPECT(strstr(msg, "NULL") != NULL);
  int32_t idx = -1;
  TVMFFIByteArray unknown = ba("no.such.Type");
  EXPECT(TVMFFITypeKeyToIndex(&unknown, &idx) == -1);
  take_error(kind, msg, sizeof msg);
  EXPECT(strstr(msg, "no.such.Type") != NULL);

  /* The type table: static indices, a new type under ffi.Object, its ancestors. */
  TVMFFIByteArray arr = ba("ffi.Array");
  EXPECT(TVMFFITypeKeyToIndex(&arr, &idx) == 0 && idx == kTVMFFIArray);
  TVMFFIByteArray mine = ba("ctest.MyObject");
  int32_t t = TVMFFITypeGetOrAllocIndex(&mine, -1, 1, 0, 1, kTVMFFIObject);
  EXPECT(t >= kTVMFFIDynObjectBegin);
  EXPECT(TVMFFITypeGetOrAllocIndex(&mine, -1, 1, 0, 1, kTVMFFIObject) == t);
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(t);
  EXPECT(info != NULL && info->type_depth == 1 && info->type_ancestors[0]->type_index == kTVMFFIObject);
  EXPECT(info != NULL && info->type_key.size == mine.size);
  EXPECT(TVMFFIGetTypeInfo(1 << 20) == NULL);

  /* Data types. */
  TVMFFIByteArray f16 = ba("float16x4");
  DLDataType dt;
  EXPECT(TVMFFIDataTypeFromString(&f16, &dt) == 0 && dt.code == kDLFloat && dt.bits == 16 && dt.lanes == 4);
  TVMFFIByteArray bad = ba("float16xq");
  EXPECT(TVMFFIDataTypeFromString(&bad, &dt) == -1);
  take_error(kind, msg, sizeof msg);
  EXPECT(strcmp(kind, "ValueError") == 0);

  /* Streams are per thread and per device. */
  void* old = (void*)1;
  EXPECT(TVMFFIEnvSetStream(kDLCUDA, 0, (void*)0x1234, &old) == 0 && old == NULL);
  EXPECT(TVMFFIEnvGetStream(kDLCUDA, 0) == (void*)0x1234);
  EXPECT(TVMFFIEnvGetStream(kDLCUDA, 1) == NULL);

  printf("%d checks, %d failed\n", g_checks, g_failed);
  return g_failed ? 1 : 0;
}
