/* Compiles dlpack/dlpack.h alone. */
#include <dlpack/dlpack.h>
int main(void) { return 0; }
