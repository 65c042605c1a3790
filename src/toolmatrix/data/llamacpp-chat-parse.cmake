# Adds toolmatrix's two programs to llama.cpp's own CMake tree (passed as -DCMAKE_PROJECT_llama.cpp_INCLUDE=this):
# the replay harness, compiled with the flags llama-server gets and linked against server-context, the library
# llama-server links, so replay runs the server's own request and output parsing code; and the CPU check, linked
# against ggml as llama-server is, which proves the CPU module ggml picks on a machine before a server uses it.
set(TOOLMATRIX_CHAT_PARSE_SOURCE "${CMAKE_CURRENT_LIST_DIR}/llamacpp-chat-parse.cpp")
set(TOOLMATRIX_CPU_CHECK_SOURCE "${CMAKE_CURRENT_LIST_DIR}/llamacpp-cpu-check.cpp")

function(toolmatrix_targets)
  add_executable(toolmatrix-chat-parse "${TOOLMATRIX_CHAT_PARSE_SOURCE}")
  # server-context's headers are found through a directory-level include, which does not travel with the target.
  target_include_directories(toolmatrix-chat-parse PRIVATE "${PROJECT_SOURCE_DIR}/tools/server"
                             "${PROJECT_SOURCE_DIR}/tools/mtmd" "${PROJECT_SOURCE_DIR}")
  target_link_libraries(toolmatrix-chat-parse PRIVATE server-context)
  target_compile_features(toolmatrix-chat-parse PRIVATE cxx_std_17)
  add_executable(toolmatrix-cpu-check "${TOOLMATRIX_CPU_CHECK_SOURCE}")
  target_link_libraries(toolmatrix-cpu-check PRIVATE ggml)
  target_compile_features(toolmatrix-cpu-check PRIVATE cxx_std_17)
endfunction()

# project() includes this before any target exists: add both once the whole top-level file has run.
cmake_language(DEFER CALL toolmatrix_targets)
