/* Compiles tvm/ffi/c_api.h and tvm/ffi/extra/c_env_api.h alone. */
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>
int main(void) { return sizeof(TVMFFIAny) == 16 && sizeof(TVMFFIObject) == 24 ? 0 : 1; }
