# libFuzzer targets (STOKER_FUZZ=ON, clang only). The parsers under test are
# compiled again with coverage instrumentation (fuzzer-no-link) plus
# ASan/UBSan, so the fuzzer sees inside them; the normal libraries are
# untouched. CI builds every target and runs each for a bounded time over
# its corpus in the tree (.ci/fuzz); see README "Reliability".
#
#   cmake -S . -B build-fuzz -G Ninja -DSTOKER_FUZZ=ON -DSTOKER_TESTS=OFF \
#     -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14
#   ninja -C build-fuzz stoker_fuzzers
#   build-fuzz/decode/fuzz/jpeg_probe_fuzz -max_total_time=30 NEW_DIR \
#     decode/fuzz/corpus/jpeg_probe
# (NEW_DIR first keeps what the fuzzer finds out of the tree).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "STOKER_FUZZ=ON needs clang (-DCMAKE_CXX_COMPILER=clang++-14)")
endif()

set(STOKER_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -g)
add_custom_target(stoker_fuzzers)

# stoker_fuzz_library(NAME SOURCES...): the code under test, instrumented.
function(stoker_fuzz_library name)
  add_library(${name} STATIC ${ARGN})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR})
  target_compile_options(${name} PUBLIC ${STOKER_FUZZ_FLAGS} PRIVATE -fsanitize=fuzzer-no-link)
  target_link_options(${name} PUBLIC ${STOKER_FUZZ_FLAGS})
endfunction()

# stoker_fuzz_target(NAME LIBRARY): NAME.cc in the current directory.
function(stoker_fuzz_target name library)
  add_executable(${name} ${name}.cc)
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${name} PRIVATE ${library})
  add_dependencies(stoker_fuzzers ${name})
endfunction()
