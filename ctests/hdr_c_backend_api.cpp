/* Compiles tvm/runtime/c_backend_api.h alone. */
#include <tvm/runtime/c_backend_api.h>
int main(void) { return 0; }
