# Writes the file IN (with INLINE_JS, see below) as a C++ char array SYMBOL (namespace tracedb::shell) into OUT, so that the
# binary carries it (the report page; nothing is loaded at run time). cmake -P script.
# With INLINE_JS, the marker /*TRACEDB_INLINE_JS*/ in IN is replaced by that file (the web
# pages' shared view/web/units.js: the report page is one offline file and loads nothing).
if(INLINE_JS)
  file(READ "${IN}" text)
  file(READ "${INLINE_JS}" js)
  string(FIND "${text}" "/*TRACEDB_INLINE_JS*/" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${IN} has no /*TRACEDB_INLINE_JS*/ marker for ${INLINE_JS}")
  endif()
  string(REPLACE "/*TRACEDB_INLINE_JS*/" "${js}" text "${text}")
  string(HEX "${text}" content)
else()
  file(READ "${IN}" content HEX)
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE "${OUT}" "// Generated from ${IN} by shell/embed_file.cmake; do not edit.\n"
     "namespace tracedb::shell {\nextern const char ${SYMBOL}[];\n"
     "const char ${SYMBOL}[] = {${bytes} 0x00};\n}  // namespace tracedb::shell\n")
