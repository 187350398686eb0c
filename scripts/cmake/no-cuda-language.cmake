# Included by scripts/build-tvm-cuda.sh (CMAKE_PROJECT_INCLUDE_BEFORE) when it builds TVM v0.18+:
# their CMake enables the CUDA language (nvcc) although the runtime has no .cu file to compile.
# The PyPI wheels have no nvcc, so `enable_language(CUDA)` is skipped; other languages pass.
macro(enable_language)
  set(_tvmrt_langs ${ARGV})
  list(REMOVE_ITEM _tvmrt_langs CUDA)
  if(_tvmrt_langs)
    _enable_language(${_tvmrt_langs})
  endif()
endmacro()
