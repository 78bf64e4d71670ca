// The layering tests (tests/CMakeLists.txt, layering_*) compile this file
// with the include directories of one library of cdc/ and the header
// WALWATCH_PROBE_HEADER: one it may include must compile, one of a layer
// above it must be "No such file or directory". This is what keeps
// watchserver/ out of cdc/ (CMakeLists.txt, walwatch_include_root).
#include WALWATCH_PROBE_HEADER
