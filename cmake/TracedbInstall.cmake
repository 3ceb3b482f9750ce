# Install rules and the package files that let other projects use tracedb (docs/cli.md, "Install").
#
# Components:
#   tracedb_runtime      bin/tracedb, lib/libtracedb.so.*, and the injected libraries under
#                        lib/tracedb/ (MPI interposer, NCCL profiler plugin, CUPTI and NVTX capture,
#                        the sqlite3 loadable extension)
#   tracedb_development  include/tracedb/recorder.h(pp), the libtracedb.so link, the CMake package
#                        (find_package(tracedb) -> tracedb::recorder) and lib/pkgconfig/tracedb.pc
# The Python package is its own component, `python` (python/CMakeLists.txt).
#
# Included at the end of the top-level CMakeLists.txt, once every target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The version of the package files is the version `tracedb --version` prints (engine/util/version.h):
# the two must not drift.
file(STRINGS ${CMAKE_SOURCE_DIR}/engine/util/version.h _tracedb_version_line
     REGEX "kTracedbVersion = \"[0-9.]+\"")
string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" _tracedb_header_version "${_tracedb_version_line}")
if(NOT _tracedb_header_version STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "engine/util/version.h says ${_tracedb_header_version} but project() says "
                      "${PROJECT_VERSION}: change both together")
endif()

set(TRACEDB_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tracedb CACHE STRING
    "Where the CMake package files go, relative to the prefix")
# The libraries `tracedb record` injects (found from bin/ as ../lib/tracedb/, shell/cmd_record.cc).
set(TRACEDB_INSTALL_PLUGINDIR ${CMAKE_INSTALL_LIBDIR}/tracedb)

# ---- the recorder library: tracedb::recorder ----
# The same name in the build tree, so that a project that adds tracedb with add_subdirectory()
# links the same target as one that uses find_package().
add_library(tracedb::recorder ALIAS tracedb)
set_target_properties(tracedb PROPERTIES EXPORT_NAME recorder)
target_include_directories(tracedb INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS tracedb EXPORT tracedbTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT tracedb_runtime NAMELINK_COMPONENT tracedb_development)
# Only the public headers: the C ABI and its header-only C++ wrapper.
install(FILES recorder/include/tracedb/recorder.h recorder/include/tracedb/recorder.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tracedb COMPONENT tracedb_development)

# ---- the program ----
install(TARGETS tracedb_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tracedb_runtime)

# tracedb(1), written after every link of the program (shell/CMakeLists.txt).
install(FILES ${CMAKE_BINARY_DIR}/man/tracedb.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
  COMPONENT tracedb_runtime)
# `tracedb compact --mpi` execs it from beside the program.
if(TARGET tracedb_mpi_compact)
  install(TARGETS tracedb_mpi_compact RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# ---- injected libraries (each links libtracedb.so.0, found one directory up) ----
foreach(plugin tracedb_mpi tracedb_nccl_profiler tracedb_cuda tracedb_nvtx)
  if(TARGET ${plugin})
    set_target_properties(${plugin} PROPERTIES INSTALL_RPATH "$ORIGIN/..")
    # NAMELINK_SKIP would leave `tracedb record` (it looks for libtracedb_mpi.so) nothing to find.
    install(TARGETS ${plugin} LIBRARY DESTINATION ${TRACEDB_INSTALL_PLUGINDIR}
            COMPONENT tracedb_runtime)
  endif()
endforeach()
# The loadable extension for the stock sqlite3 (".load /PREFIX/lib/tracedb/libtracedb_sqlite").
install(TARGETS tracedb_sqlite LIBRARY DESTINATION ${TRACEDB_INSTALL_PLUGINDIR}
        COMPONENT tracedb_runtime)

# ---- shell completion scripts ----
if(EXISTS ${CMAKE_SOURCE_DIR}/shell/completions/tracedb.bash)
  install(FILES shell/completions/tracedb.bash
    DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME tracedb
    COMPONENT tracedb_runtime)
endif()
if(EXISTS ${CMAKE_SOURCE_DIR}/shell/completions/_tracedb)
  install(FILES shell/completions/_tracedb DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions
    COMPONENT tracedb_runtime)
endif()

# ---- the CMake package: find_package(tracedb [0.1]) ----
install(EXPORT tracedbTargets NAMESPACE tracedb:: FILE tracedbTargets.cmake
  DESTINATION ${TRACEDB_INSTALL_CMAKEDIR} COMPONENT tracedb_development)
configure_package_config_file(cmake/tracedbConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/tracedbConfig.cmake
  INSTALL_DESTINATION ${TRACEDB_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the ABI, so only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/tracedbConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/tracedbConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/tracedbConfigVersion.cmake
  DESTINATION ${TRACEDB_INSTALL_CMAKEDIR} COMPONENT tracedb_development)

# ---- pkg-config: `pkg-config --cflags --libs tracedb` ----
# Paths relative to ${prefix}, so that the installed tree can be moved (pkg-config's
# --define-prefix, or PKG_CONFIG_SYSROOT_DIR); an absolute GNUInstallDirs setting is kept as is.
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(TRACEDB_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(TRACEDB_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(TRACEDB_PC_PREFIX "@TRACEDB_PC_PREFIX@")  # filled in at install time, below
configure_file(cmake/tracedb.pc.in ${CMAKE_BINARY_DIR}/cmake/tracedb.pc.in.configured @ONLY)
# The prefix is the one given at install time (cmake --install --prefix), not at configure time.
install(CODE "
  set(_tracedb_pc_prefix \"\${CMAKE_INSTALL_PREFIX}\")
  file(READ \"${CMAKE_BINARY_DIR}/cmake/tracedb.pc.in.configured\" _tracedb_pc)
  string(REPLACE \"@TRACEDB_PC_PREFIX@\" \"\${_tracedb_pc_prefix}\" _tracedb_pc \"\${_tracedb_pc}\")
  file(WRITE \"${CMAKE_BINARY_DIR}/cmake/tracedb.pc\" \"\${_tracedb_pc}\")
" COMPONENT tracedb_development)
install(FILES ${CMAKE_BINARY_DIR}/cmake/tracedb.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT tracedb_development)
