/* Compiles tvm/runtime/c_runtime_api.h alone. */
#include <tvm/runtime/c_runtime_api.h>
int main(void) { return 0; }
