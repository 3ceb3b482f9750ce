#!/usr/bin/env bash
# `tracedb shell` and the program's exit codes, through the real binary: output modes (box, line,
# headers, nullvalue, width), .output/.read, .dump checked against the stock sqlite3 (a copy
# loaded from our dump must .dump exactly as the original does), the pager and tab completion on
# a terminal (tmux; skipped without tmux, a failure when CI=true).
# Environment: TRACEDB_BIN, TRACEDB_SOURCE_DIR, TRACEDB_TEST_TMP.
set -euo pipefail
bin="${TRACEDB_BIN:?}"
src="${TRACEDB_SOURCE_DIR:?}"
tmp="${TRACEDB_TEST_TMP:-/tmp}/shell-$$"
rm -rf "$tmp"
mkdir -p "$tmp"
session="tracedb-shell-test-$$"
cleanup() { tmux kill-session -t "$session" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # name got want
  [ "$2" = "$3" ] || { printf '%s: got\n%s\nwant\n%s\n' "$1" "$2" "$3"; fail "$1"; }
}

db="$tmp/small.tdb"
"$bin" import "$src/fixtures/shell/small.json" -o "$db" --input-format chrome -q
q="SELECT name, count(*) AS n, sum(dur) AS total, max(bytes) AS b FROM events GROUP BY name ORDER BY name;"

# ---- exit codes: 0 ok, 1 the work failed, 2 usage ----
code() { set +e; "$@" >/dev/null 2>"$tmp/err"; echo $?; set -e; }
expect "--version" "$("$bin" --version)" "tracedb $(sed -n 's/.*kTracedbVersion = "\(.*\)".*/\1/p' "$src/engine/util/version.h")"
expect "exit: no subcommand" "$(code "$bin")" 2
expect "exit: unknown subcommand" "$(code "$bin" frobnicate)" 2
grep -q "^tracedb: unknown subcommand 'frobnicate' (see tracedb --help)$" "$tmp/err" || fail "message: $(cat "$tmp/err")"
expect "exit: missing argument" "$(code "$bin" query "$db")" 2
grep -q "^tracedb query: .* (see tracedb query --help)$" "$tmp/err" || fail "message: $(cat "$tmp/err")"
expect "exit: missing db" "$(code "$bin" query "$tmp/none.tdb" "SELECT 1")" 1
expect "exit: bad SQL" "$(code "$bin" query "$db" "SELEC 1")" 1
expect "exit: ok" "$(code "$bin" query "$db" "SELECT 1")" 0
expect "exit: -q -v" "$(code "$bin" -q -v query "$db" "SELECT 1")" 2

# ---- the manual page: written by the program from its option definitions (--help-man); the
# checked-in docs/tracedb.1 is the same text (TRACEDB_REWRITE_EXPECTED=1 rewrites it) ----
"$bin" --help-man >"$tmp/tracedb.1"
expect "exit: --help-man" "$(code "$bin" --help-man)" 0
if [ "${TRACEDB_REWRITE_EXPECTED:-}" = 1 ]; then cp "$tmp/tracedb.1" "$src/docs/tracedb.1"; fi
cmp -s "$tmp/tracedb.1" "$src/docs/tracedb.1" ||
  { diff "$src/docs/tracedb.1" "$tmp/tracedb.1" | head -20
    fail "docs/tracedb.1 is not what tracedb --help-man writes (TRACEDB_REWRITE_EXPECTED=1 rewrites it)"; }
if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$tmp/tracedb.1" 2>&1)
  [ -z "$warnings" ] || fail "groff warns about tracedb.1: $warnings"
  groff -man -Tutf8 "$tmp/tracedb.1" 2>/dev/null | sed 's/.\x08//g' >"$tmp/tracedb.txt"
else
  [ "${CI:-}" != true ] || fail "groff is missing"
  cp "$tmp/tracedb.1" "$tmp/tracedb.txt"
fi

# ---- docs/cli.md and the manual page name every subcommand and every long option of each ----
subcommands() { "$bin" "$@" --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'; }
check_doc() {  # subcommand words...
  local opt
  grep -q "tracedb $*" "$src/docs/cli.md" || fail "docs/cli.md does not describe 'tracedb $*'"
  grep -q "^\.SS \"tracedb $*\"$" "$tmp/tracedb.1" || fail "tracedb.1 has no section 'tracedb $*'"
  for opt in $("$bin" "$@" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
    [ "$opt" = --help ] && continue
    grep -qF -- "$opt" "$src/docs/cli.md" || fail "docs/cli.md does not document 'tracedb $* $opt'"
    # In the section of this subcommand (up to the next .SS), as roff writes it (\-\-name).
    awk -v sec=".SS \"tracedb $*\"" '$0 == sec { on = 1; next } /^\.S[SH] / { on = 0 } on' \
        "$tmp/tracedb.1" | grep -qF -- "\\fB${opt//-/\\-}\\fR" ||
      fail "tracedb.1 does not document 'tracedb $* $opt'"
  done
  local sub
  for sub in $(subcommands "$@"); do check_doc "$@" "$sub"; done
}
for sub in $(subcommands); do check_doc "$sub"; done

# The global options are in the page too.
for opt in $("$bin" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
  [ "$opt" = --help ] && continue
  grep -qF -- "${opt//-/\\-}" "$tmp/tracedb.1" || fail "tracedb.1 does not document 'tracedb $opt'"
done

# ---- one flag style: -q/-v after every subcommand that prints more than results, one-line
# errors that name the subcommand, -f/--format for output, --input-format for import ----
for sub in compact import export query info diff "report mpi" "report stragglers" "report html" \
           record shell; do
  # shellcheck disable=SC2086
  expect "exit: $sub -q -v" "$(code "$bin" $sub -q -v)" 2
  # shellcheck disable=SC2086
  grep -qx "tracedb $sub: -q and -v exclude each other (see tracedb $sub --help)" "$tmp/err" ||
    fail "$sub -q -v: $(cat "$tmp/err")"
done
expect "exit: -q before, -v after" "$(code "$bin" -q query "$db" "SELECT 1" -v)" 2
# --format for import: a deprecated alias of --input-format, with one note (none with -q).
"$bin" import "$src/fixtures/shell/small.json" -o "$tmp/alias.tdb" --format chrome >/dev/null 2>"$tmp/err"
expect "import --format note" "$(cat "$tmp/err")" \
  "tracedb import: note: --format is deprecated here, use --input-format chrome"
"$bin" import "$src/fixtures/shell/small.json" -o "$tmp/alias2.tdb" --format chrome -q >"$tmp/out" 2>"$tmp/err"
[ ! -s "$tmp/err" ] && [ ! -s "$tmp/out" ] || fail "import -q printed: $(cat "$tmp/out" "$tmp/err")"
expect "alias imports the same" "$("$bin" query "$tmp/alias.tdb" "SELECT count(*) FROM events" -f csv)" "count(*)
5"
expect "exit: --format and --input-format disagree" \
  "$(code "$bin" import "$src/fixtures/shell/small.json" -o "$tmp/x.tdb" --format chrome --input-format kineto)" 2
grep -qx "tracedb import: --format chrome and --input-format kineto disagree" "$tmp/err" || fail "$(cat "$tmp/err")"
expect "exit: info -f bad" "$(code "$bin" info "$db" -f yaml)" 2
grep -qx "tracedb info: unknown format 'yaml' (text, json)" "$tmp/err" || fail "$(cat "$tmp/err")"
[ "$("$bin" info "$db" -f json)" = "$("$bin" info "$db" --json)" ] || fail "info -f json != --json"
expect "exit: export -f bad" "$(code "$bin" export "$db" -o "$tmp/x.json" -f perfetto)" 2
grep -qx "tracedb export: unknown format 'perfetto' (chrome)" "$tmp/err" || fail "$(cat "$tmp/err")"
# -v says what was read, on stderr; stdout stays the results alone.
"$bin" query "$db" "SELECT 1 AS x" -f csv -v >"$tmp/out" 2>"$tmp/err"
expect "query -v stdout" "$(cat "$tmp/out")" "x
1"
grep -q "^tracedb query: opened $db in [0-9.]* s$" "$tmp/err" || fail "query -v: $(cat "$tmp/err")"
"$bin" import "$src/fixtures/shell/small.json" -o "$tmp/v.tdb" -v >/dev/null 2>"$tmp/err"
grep -q "^tracedb import: $src/fixtures/shell/small.json: chrome (detected), 5 events, 0 skipped, into $tmp/v.tdb in [0-9.]* s$" "$tmp/err" ||
  fail "import -v: $(cat "$tmp/err")"

# ---- the progress line: on a terminal only, unless TRACEDB_PROGRESS=1; never with -q ----
"$bin" export "$db" -o "$tmp/p.json" -f chrome 2>"$tmp/err"
grep -q $'\r' "$tmp/err" && fail "progress on a pipe: $(cat -A "$tmp/err")"
TRACEDB_PROGRESS=1 "$bin" export "$db" -o "$tmp/p.json" -f chrome 2>"$tmp/err"
# The line ("export: 5 events, 1.4 KB, …/s"), then blanks over it, then the summary.
grep -qE $'^\rexport: [0-9,]+ events, ' "$tmp/err" || fail "no progress line: $(cat -A "$tmp/err")"
grep -qE $'\r +\rexported 5 of 5 events' "$tmp/err" || fail "progress not cleared: $(cat -A "$tmp/err")"
TRACEDB_PROGRESS=1 "$bin" import "$src/fixtures/shell/small.json" -o "$tmp/p.tdb" 2>"$tmp/err" >/dev/null
grep -qE $'^\rimport: file 1/1, 0 events, [0-9.]+ [KM]?B of [0-9.]+ [KM]?B' "$tmp/err" ||
  fail "no import progress: $(cat -A "$tmp/err")"
TRACEDB_PROGRESS=1 "$bin" -q export "$db" -o "$tmp/p.json" -f chrome 2>"$tmp/err"
[ ! -s "$tmp/err" ] || fail "progress or summary with -q: $(cat -A "$tmp/err")"

# ---- output modes ----
got=$(printf '.mode box\n%s\n' "$q" | "$bin" shell "$db")
expect "box" "$got" "┌─────────────┬───┬────────┬───┐
│ name        │ n │  total │ b │
├─────────────┼───┼────────┼───┤
│ allreduce   │ 2 │  50000 │   │
│ forward     │ 2 │ 110000 │   │
│ it's quoted │ 1 │   5000 │   │
└─────────────┴───┴────────┴───┘"
got=$(printf '.mode line\n%s\n' "SELECT name, dur AS duration, bytes FROM events ORDER BY ts LIMIT 2;" |
      "$bin" shell "$db")
expect "line" "$got" "    name = forward
duration = 50000
   bytes = 

    name = forward
duration = 60000
   bytes = "
got=$(printf '.headers off\n.nullvalue (null)\n.width 12 0 8\n%s\n.mode csv\n%s\n' "$q" "$q" |
      "$bin" shell "$db")
expect "headers off, nullvalue, width" "$got" "allreduce     2     50000  (null)
forward       2    110000  (null)
it's quoted   1      5000  (null)
allreduce,2,50000,(null)
forward,2,110000,(null)
it's quoted,1,5000,(null)"
# A width that is no number is refused, and the widths stay as they were.
set +e
printf '.width 5 x\n.show\n' | "$bin" shell "$db" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
expect ".width x: exit" "$rc" 1
grep -q "'x' is not a width" "$tmp/err" && grep -q "width: $" "$tmp/out" || fail ".width x"
# The strict integer policy (engine/parse_number.h): '+5' is refused too (strtol took it).
set +e
printf '.width +5\n' | "$bin" shell "$db" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
expect ".width +5: exit" "$rc" 1
grep -q "'+5' is not a width" "$tmp/err" || fail ".width +5"
# A mode that does not exist is refused, never replaced by another.
set +e
printf '.mode html\nSELECT 1;\n' | "$bin" shell "$db" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
expect "unknown mode: exit" "$rc" 1
grep -q "unknown mode 'html' (table, box, line, csv, json, markdown)" "$tmp/err" || fail "$(cat "$tmp/err")"

# ---- .output and .read (nested), .show ----
cat >"$tmp/inner.sql" <<SQL
.mode csv
SELECT count(*) AS n
  FROM events;
SQL
cat >"$tmp/outer.sql" <<SQL
.output $tmp/result.csv
.read $tmp/inner.sql
SELECT 'after' AS x
SQL
got=$(printf '.read %s\n.output\nSELECT 42 AS back;\n.show\n' "$tmp/outer.sql" | "$bin" shell "$db")
# outer.sql's last statement had no ';': it ran at the end of that file, into the file.
expect ".output file" "$(cat "$tmp/result.csv")" "n
5
x
after"
# `.output` alone: back to stdout (in the mode inner.sql set, which lasts, as in sqlite3).
echo "$got" | grep -qx "42" || fail "after .output: $got"
echo "$got" | grep -q "output: stdout" || fail ".show: $got"
echo "$got" | grep -q "mode: csv" || fail ".show: $got"
set +e
printf '.read %s/missing.sql\n' "$tmp" | "$bin" shell "$db" 2>"$tmp/err"
rc=$?
set -e
expect ".read missing: exit" "$rc" 1
grep -q "cannot open $tmp/missing.sql" "$tmp/err" || fail "$(cat "$tmp/err")"

# ---- .dump: the stock sqlite3 loads it into a database that it dumps exactly as the original ----
printf '.output %s\n.dump\n' "$tmp/dump.sql" | "$bin" shell "$db"
sqlite3 "$tmp/copy.db" <"$tmp/dump.sql"
sqlite3 "$db" .dump >"$tmp/original.dump"
sqlite3 "$tmp/copy.db" .dump >"$tmp/copy.dump"
cmp "$tmp/original.dump" "$tmp/copy.dump" || { diff "$tmp/original.dump" "$tmp/copy.dump" | head; fail ".dump"; }
[ "$(grep -c '^INSERT' "$tmp/dump.sql")" -gt 5 ] || fail ".dump wrote no rows"
# A pattern dumps only the matching tables.
printf '.dump meta\n' | "$bin" shell "$db" >"$tmp/meta.sql"
[ "$(grep '^CREATE TABLE' "$tmp/meta.sql" | wc -l)" -eq 1 ] || fail ".dump meta: $(cat "$tmp/meta.sql")"

# ---- the bash completion script (reads the subcommands and options from --help) ----
got=$(bash -c '
  source "$1/shell/completions/tracedb.bash"
  comp() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _tracedb; echo "${COMPREPLY[*]}"; }
  comp "$2" co; comp "$2" query --fo; comp "$2" query x.tdb -f b; comp "$2" report s
  comp "$2" report mpi --al; comp "$2" import --format hor' _ "$src" "$bin")
expect "bash completion" "$got" "compact
--format
box
stragglers
--all-ranks
horovod"

# ---- no pager when the output is not a terminal ----
PAGER="touch $tmp/pager-ran" "$bin" shell "$db" <<<"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 500) SELECT i FROM c;" >/dev/null
[ ! -e "$tmp/pager-ran" ] || fail "the pager ran on a pipe"

# ---- on a terminal: tab completion and the pager (tmux) ----
if ! command -v tmux >/dev/null; then
  [ "${CI:-}" != true ] || fail "tmux is missing (scripts/setup-deps.sh installs it)"
  echo "SKIP: no tmux: completion and pager not checked"
  echo ok
  exit 0
fi
screen() { tmux capture-pane -p -t "$session"; }
wait_for() {  # text
  for _ in $(seq 100); do screen | grep -qF -- "$1" && return 0; sleep 0.1; done
  screen
  fail "the terminal never showed '$1'"
}
tmux new-session -d -s "$session" -x 120 -y 30 \
  "env HOME=$tmp PAGER='cat > $tmp/paged.txt' $bin shell $db"
wait_for "tracedb>"
tmux send-keys -t "$session" "SELECT trac" Tab
wait_for "SELECT track"          # columns: track, track_name
tmux send-keys -t "$session" C-u "SELECT count(*) FROM span_st" Tab
wait_for "FROM span_stats"       # a view
tmux send-keys -t "$session" C-u "SELECT human_by" Tab
wait_for "SELECT human_bytes"    # tracedb's own SQL function
tmux send-keys -t "$session" C-u ".mo" Tab
wait_for ".mode"
tmux send-keys -t "$session" "bo" Tab  # ".mo" completed to ".mode "
wait_for ".mode box"
tmux send-keys -t "$session" Enter
# A short result prints on the terminal; a long one goes to the pager.
type_line() {  # literal text (tmux would take a trailing ';' as its own separator), then Enter
  tmux send-keys -t "$session" -l "$1 "
  tmux send-keys -t "$session" Enter
}
type_line "SELECT 'short' || 'result' AS s;"
wait_for "shortresult"
type_line "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 200) SELECT i FROM c;"
for _ in $(seq 100); do [ -s "$tmp/paged.txt" ] && break; sleep 0.1; done
[ "$(grep -c '│' "$tmp/paged.txt")" -eq 201 ] || fail "paged: $(wc -l <"$tmp/paged.txt") lines"
grep -q "shortresult" "$tmp/paged.txt" && fail "the short result went to the pager"
type_line ".quit"

# The progress line on a real terminal: rewritten in place and cleared, so that the summary is
# all the screen keeps (TRACEDB_PROGRESS=1: a 5-event export is over before the half second).
tmux kill-session -t "$session" 2>/dev/null || true
tmux new-session -d -s "$session" -x 120 -y 30 \
  "env TRACEDB_PROGRESS=1 $bin export $db -o $tmp/tty.json -f chrome; echo export-finished; sleep 30"
wait_for "export-finished"
screen | grep -q "^exported 5 of 5 events from " || { screen; fail "no summary on the terminal"; }
screen | grep -q "export: 5 events" && { screen; fail "the progress line was left on the terminal"; }
# ---- the zsh completion script, in an interactive zsh on the terminal ----
if ! command -v zsh >/dev/null; then
  [ "${CI:-}" != true ] || fail "zsh is missing (scripts/setup-deps.sh installs it)"
  echo "SKIP: no zsh: its completion not checked"
else
  tmux kill-session -t "$session" 2>/dev/null || true
  tmux new-session -d -s "$session" -x 120 -y 30 \
    "env -i HOME=$tmp TERM=xterm PATH=$(dirname "$bin"):/usr/bin:/bin zsh -f"
  tmux send-keys -t "$session" -l "fpath=($src/shell/completions \$fpath); autoload -U compinit; compinit -u; PROMPT='zsh> '"
  tmux send-keys -t "$session" Enter
  wait_for "zsh> "
  for line in "tracedb comp|tracedb compact" "tracedb query x.tdb -f bo|-f box" \
      "tracedb import --input-format hor|--input-format horovod" \
      "tracedb archive --keep-st|--keep-steps"; do
    tmux send-keys -t "$session" C-u "${line%%|*}" Tab
    wait_for "${line#*|}"
  done
fi
echo ok
