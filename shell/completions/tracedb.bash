# bash completion for tracedb. Install as
#   /usr/share/bash-completion/completions/tracedb (cmake --install does, under its prefix)
# or `source` it from ~/.bashrc. Subcommands and options are read from `tracedb … --help` when
# completing, so they always match the installed program.

# Prints the subcommands listed in the help text of "tracedb $*".
_tracedb_subcommands() {
  "${_tracedb_bin}" "$@" --help 2>/dev/null |
    awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'
}

# Prints the long and short options listed in the help text of "tracedb $*".
_tracedb_options() {
  "${_tracedb_bin}" "$@" --help 2>/dev/null |
    awk '/^Options:/ { on = 1; next } /^[A-Za-z]/ { on = 0 }
         on && /^  +-/ { n = split($1, a, ","); for (i = 1; i <= n; i++) print a[i] }'
}

_tracedb() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=${COMP_WORDS[COMP_CWORD-1]}
  local _tracedb_bin=${COMP_WORDS[0]}
  COMPREPLY=()
  # The subcommand path typed so far (e.g. "report mpi"); stops at the first non-subcommand word.
  local path=() i word subs
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    [[ $word == -* ]] && continue
    subs=$(_tracedb_subcommands "${path[@]}")
    if grep -qx -- "$word" <<<"$subs"; then path+=("$word"); else break; fi
  done
  # Option values with a fixed set of choices. -f/--format names each subcommand's output
  # formats; import's deprecated --format (now --input-format) an input format.
  [[ ${path[0]} == import && $prev == --format ]] && prev=--input-format
  case $prev in
    -f|--format)
      local formats
      case "${path[*]}" in
        query|shell) formats="table box line csv json markdown" ;;
        info|explain) formats="text json" ;;
        export) formats="chrome" ;;
        diff|"report mpi") formats="text csv json" ;;
        "report stragglers") formats="text csv json markdown" ;;
        *) formats="table box line csv json markdown text" ;;
      esac
      COMPREPLY=($(compgen -W "$formats" -- "$cur"))
      return ;;
    --input-format)
      COMPREPLY=($(compgen -W "auto chrome horovod byteps bluefog kineto mpitrace mpip" -- "$cur"))
      return ;;
    -o|--output)
      COMPREPLY=($(compgen -f -- "$cur"))
      return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(_tracedb_options "${path[@]}")" -- "$cur"))
    return
  fi
  subs=$(_tracedb_subcommands "${path[@]}")
  if [[ -n $subs && $i -ge $COMP_CWORD ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    return
  fi
  # Positional arguments: trace databases, directories and input files.
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -o bashdefault -F _tracedb tracedb
