# WALWATCH_FUZZ=ON (tests/fuzz/run-fuzz.sh configures build-fuzz/ so): the
# whole build, product libraries included, is compiled with libFuzzer's
# coverage instrumentation, ASan and UBSan, so that the fuzz targets
# (tests/fuzz/CMakeLists.txt) run the product's own objects. Included by the
# root CMakeLists.txt before any target is defined. Needs clang (14) and
# libclang-rt-14-dev.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "WALWATCH_FUZZ needs clang: configure with "
                      "-DCMAKE_CXX_COMPILER=clang++-14 (tests/fuzz/run-fuzz.sh does)")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined
                    -fno-sanitize-recover=undefined -fno-omit-frame-pointer
                    -O1 -g)
add_link_options(-fsanitize=address,undefined)
# Out-of-order simdjson On-Demand access aborts instead of reading garbage.
# Defined for every object so that simdjson's inline code is compiled one way.
add_compile_definitions(SIMDJSON_DEVELOPMENT_CHECKS=1)
