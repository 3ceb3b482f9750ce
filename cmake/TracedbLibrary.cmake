# Helpers for the folders that are libraries (docs/architecture.md, "Folder map").
#
# tracedb_extension_objects(<library>): the SQL-surface libraries (engine/db, query/sql,
# query/analysis, query/views) are also linked into the loadable SQLite extension tracedb_sqlite
# (query/views/CMakeLists.txt). There every sqlite3_* call must go through the host's API table
# (engine/db/sqlite_api.h, TRACEDB_SQLITE_EXTENSION), so their sources are compiled once more as
# the object library <library>_ext: the same source list (read from the library itself, never
# written twice), the same usage requirements, the extension's define and hidden symbols.
# Call it in the library's own CMakeLists.txt, after its sources and links are complete.
function(tracedb_extension_objects lib)
  get_target_property(srcs ${lib} SOURCES)
  get_target_property(libs ${lib} LINK_LIBRARIES)
  add_library(${lib}_ext OBJECT ${srcs})
  if(libs)
    target_link_libraries(${lib}_ext PRIVATE ${libs})
  endif()
  target_include_directories(${lib}_ext PRIVATE $<TARGET_PROPERTY:${lib},INCLUDE_DIRECTORIES>)
  target_compile_definitions(${lib}_ext PRIVATE TRACEDB_SQLITE_EXTENSION)
  set_target_properties(${lib}_ext PROPERTIES CXX_VISIBILITY_PRESET hidden
                                              VISIBILITY_INLINES_HIDDEN ON)
endfunction()
