#!/usr/bin/env bash
# Installs tracedb into a temporary prefix (cmake --install, components tracedb_runtime and
# tracedb_development), then builds examples/downstream against it twice, with
# find_package(tracedb) and with pkg-config, runs both, and checks what they recorded with the
# installed `tracedb` (compact, then SQL counts against the counts the program printed).
# Also: the manual page is installed and is what the installed program writes; only the public
# headers are installed, the package, tracedb.pc and `tracedb --version`
# agree on the version, and the installed files hold no path into the build tree.
# Environment: TRACEDB_BUILD_DIR, TRACEDB_SOURCE_DIR, TRACEDB_TEST_TMP.
set -euo pipefail
build="${TRACEDB_BUILD_DIR:?}"
src="${TRACEDB_SOURCE_DIR:?}"
tmp="${TRACEDB_TEST_TMP:-/tmp}/install-$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

prefix="$tmp/prefix"
for component in tracedb_runtime tracedb_development; do
  cmake --install "$build" --prefix "$prefix" --component "$component" >"$tmp/install.log" ||
    { cat "$tmp/install.log"; fail "cmake --install --component $component"; }
done
(cd "$prefix" && find . -type f -o -type l | sort) | tee "$tmp/files"

# The Python package, when built, goes under the prefix too, never into the interpreter's own
# site-packages (TRACEDB_PYTHON_SITE is relative to the prefix): every file cmake installed is
# under $prefix, and the package is importable from there.
if grep -q '^TRACEDB_PYTHON_SITE:' "$build/CMakeCache.txt"; then
  pyprefix="$tmp/pyprefix"
  cmake --install "$build" --prefix "$pyprefix" --component python >"$tmp/install.log" ||
    { cat "$tmp/install.log"; fail "cmake --install --component python"; }
  outside=$(grep -v "^$pyprefix/" "$build/install_manifest_python.txt" || true)
  [ -z "$outside" ] || fail "the python component installed outside the prefix: $outside"
  init=$(cd "$pyprefix" && find . -path '*/tracedb/__init__.py' | head -n 1)
  [ -n "$init" ] || fail "no tracedb/__init__.py under $pyprefix"
  site="$pyprefix/$(dirname "$(dirname "${init#./}")")"
  python=$(sed -n 's/^TRACEDB_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt")
  [ "$(cd / && PYTHONPATH="$site" "$python" -c 'import tracedb, os; print(os.path.dirname(tracedb.__file__))')" = \
    "$site/tracedb" ] || fail "the package installed in $site is not the one imported"
fi

# The public headers and nothing else.
headers=$(cd "$prefix/include" && find . -type f | sort | tr '\n' ' ')
[ "$headers" = "./tracedb/recorder.h ./tracedb/recorder.hpp " ] || fail "installed headers: $headers"
libdir=$(dirname "$(cd "$prefix" && find . -name 'libtracedb.so' | head -n 1)")
[ -n "$libdir" ] && [ "$libdir" != "." ] || fail "no libtracedb.so installed"
libdir="$prefix/${libdir#./}"
[ -x "$prefix/bin/tracedb" ] || fail "no bin/tracedb"
[ -f "$prefix/share/bash-completion/completions/tracedb" ] || fail "no bash completion"
[ -f "$prefix/share/zsh/site-functions/_tracedb" ] || fail "no zsh completion"
# The manual page, written by the program from its own option definitions (tracedb --help-man).
[ -f "$prefix/share/man/man1/tracedb.1" ] || fail "no share/man/man1/tracedb.1"
"$prefix/bin/tracedb" --help-man | cmp -s - "$prefix/share/man/man1/tracedb.1" ||
  fail "the installed tracedb.1 is not what the installed tracedb --help-man writes"
if command -v man >/dev/null; then
  [ "$(man -M "$prefix/share/man" -w tracedb)" = "$prefix/share/man/man1/tracedb.1" ] ||
    fail "man -M PREFIX/share/man does not find tracedb(1)"
fi
[ -f "$libdir/cmake/tracedb/tracedbConfig.cmake" ] || fail "no tracedbConfig.cmake"
[ -f "$libdir/pkgconfig/tracedb.pc" ] || fail "no tracedb.pc"
[ -f "$libdir/tracedb/libtracedb_sqlite.so" ] || fail "no sqlite extension in lib/tracedb"
# The injected libraries find the installed libtracedb.so.0 (RUNPATH $ORIGIN/..), not the build's.
for plugin in "$libdir"/tracedb/libtracedb_mpi.so "$libdir"/tracedb/libnccl-profiler-tracedb.so; do
  [ -f "$plugin" ] || continue
  found=$(ldd "$plugin" | awk '$1 == "libtracedb.so.0" { print $3 }')
  [ -n "$found" ] && [ "$(readlink -f "$found")" = "$(readlink -f "$libdir/libtracedb.so.0")" ] ||
    { ldd "$plugin"; fail "$plugin does not resolve libtracedb.so.0 in $libdir"; }
done
# (The temporary prefix itself may lie under the build tree: its own paths are fine.)
leaks=$(grep -rhoI --exclude='*.so*' -e "$build[^\" ;]*" "$prefix" | grep -v "^$tmp" || true)
[ -z "$leaks" ] || fail "build-tree paths in the installed files: $leaks"

# One version everywhere: the program, pkg-config, the CMake package (printed by the example).
version=$("$prefix/bin/tracedb" --version)
echo "tracedb --version: $version"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pc_version=$(pkg-config --modversion tracedb)
[ "$version" = "tracedb $pc_version" ] || fail "--version '$version' vs tracedb.pc '$pc_version'"

# Checks a recording of STEPS steps: the counts printed, then the compacted DB, by SQL.
check_recording() {  # name program steps
  local name=$1 program=$2 steps=$3
  local out spans records dropped
  out=$("$program" "$tmp/$name-trace" "$steps")
  echo "$name: $out"
  read -r _ spans _ records _ dropped <<<"$out"
  [ "$spans" -eq $((3 * steps)) ] && [ "$records" -gt 0 ] && [ "$dropped" -eq 0 ] ||
    fail "$name: $out"
  "$prefix/bin/tracedb" compact "$tmp/$name-trace" -o "$tmp/$name.tdb" -q ||
    fail "$name: compact"
  local got
  got=$("$prefix/bin/tracedb" query "$tmp/$name.tdb" --format csv \
        "SELECT name, count(*), min(step), max(step), sum(bytes) FROM events GROUP BY name ORDER BY name")
  local want
  want=$(printf 'name,count(*),min(step),max(step),sum(bytes)\nallreduce,%d,0,%d,%d\ncompute,%d,0,%d,\nstep,%d,0,%d,\n' \
         "$steps" $((steps - 1)) $((4096 * steps * (steps + 1) / 2)) \
         "$steps" $((steps - 1)) "$steps" $((steps - 1)))
  [ "$got" = "$want" ] || { printf 'got:\n%s\nwant:\n%s\n' "$got" "$want"; fail "$name: events"; }
}

# 1. CMake: find_package(tracedb) -> tracedb::recorder, from a copy of the example outside the tree.
cp -r "$src/examples/downstream" "$tmp/downstream-src"
cmake -S "$tmp/downstream-src" -B "$tmp/downstream-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" || { cat "$tmp/configure.log"; fail "configure"; }
grep "tracedb .* found in" "$tmp/configure.log"
grep -q "tracedb $pc_version found in $libdir/cmake/tracedb" "$tmp/configure.log" ||
  fail "find_package gave another version or place"
cmake --build "$tmp/downstream-cmake" >"$tmp/build.log" || { cat "$tmp/build.log"; fail "build"; }
check_recording cmake "$tmp/downstream-cmake/downstream" 50
# A version the package does not claim to be compatible with is refused.
sed -i 's/find_package(tracedb 0.1 REQUIRED)/find_package(tracedb 99.0 REQUIRED)/' \
    "$tmp/downstream-src/CMakeLists.txt"
if cmake -S "$tmp/downstream-src" -B "$tmp/downstream-v99" -DCMAKE_PREFIX_PATH="$prefix" \
     >"$tmp/v99.log" 2>&1; then
  fail "find_package(tracedb 99.0) succeeded"
fi

# 2. pkg-config, with the prefix moved: the .pc file's paths follow ${prefix}.
mv "$prefix" "$tmp/moved"
prefix="$tmp/moved"
libdir="${libdir/$tmp\/prefix/$prefix}"
cflags=$(pkg-config --define-prefix --cflags tracedb --with-path="$libdir/pkgconfig")
libs=$(pkg-config --define-prefix --libs tracedb --with-path="$libdir/pkgconfig")
echo "pkg-config: $cflags $libs"
[[ "$cflags" == *"-I$prefix/include"* ]] || fail "cflags $cflags"
# shellcheck disable=SC2086
c++ -std=c++17 -O1 "$src/examples/downstream/main.cc" $cflags $libs -Wl,-rpath,"$libdir" \
    -o "$tmp/downstream-pc"
check_recording pkgconfig "$tmp/downstream-pc" 30
echo "ok"
