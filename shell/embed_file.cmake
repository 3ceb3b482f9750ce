# Writes the file IN as a C++ char array SYMBOL (namespace tracedb::shell) into OUT, so that the
# binary carries it (the report page; nothing is loaded at run time). cmake -P script.
file(READ "${IN}" content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE "${OUT}" "// Generated from ${IN} by shell/embed_file.cmake; do not edit.\n"
     "namespace tracedb::shell {\nextern const char ${SYMBOL}[];\n"
     "const char ${SYMBOL}[] = {${bytes} 0x00};\n}  // namespace tracedb::shell\n")
