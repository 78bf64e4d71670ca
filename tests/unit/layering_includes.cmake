# ctest's layering_includes_have_no_dot_dot (cmake -DSOURCE_DIR=... -P):
# no #include in cdc/ or schema/ names a path with "..". The include roots
# (CMakeLists.txt, walwatch_include_root) keep watchserver/ out of cdc/ for
# paths from the top of the tree; "../watchserver/x.h", relative to the
# including file, or "cdc/../watchserver/x.h", through a root's link, would
# get around them.
file(GLOB_RECURSE files
     ${SOURCE_DIR}/cdc/*.h ${SOURCE_DIR}/cdc/*.cc
     ${SOURCE_DIR}/schema/*.h ${SOURCE_DIR}/schema/*.cc
     ${SOURCE_DIR}/schema/*.in)
set(found "")
foreach(f IN LISTS files)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<][^\">]*\\.\\.")
  foreach(line IN LISTS lines)
    string(APPEND found "\n  ${f}: ${line}")
  endforeach()
endforeach()
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "no sources found under ${SOURCE_DIR}/cdc")
endif()
if(found)
  message(FATAL_ERROR "includes with \"..\" in cdc/ or schema/:${found}")
endif()
message(STATUS "${count} files of cdc/ and schema/ checked")
