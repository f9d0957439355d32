# testlib.sh — what every cli_*.sh test shares, sourced at its top:
# the pass and fail counters, ok and bad (one check passed; one failed, with
# its message on stdout), has (a text holds a string), lines (a text's line
# count, 0 for empty) and finish (the summary line; the script's exit status
# when it is the last command: 0 only when no check failed), and usage_error
# (a refused command line: needs the script's own `run`).
# shellcheck shell=bash
fail=0; pass=0
ok()  { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
has() { grep -qF -- "$2" <<<"$1"; }
lines() { if [ -z "$1" ]; then echo 0; else printf '%s\n' "$1" | wc -l; fi; }
# finish [NAME]: "NAME: N passed, M failed"; true when M is 0.
finish() { echo "${1:+$1: }$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
# usage_error WHAT LINE ARGS...: `run ARGS...` (the script's own) exits 2 with
# nothing on stdout, LINE as the first line of stderr, and every string of the
# array usage_marks (the usage text the script expects) after it.
usage_error() {
  local what=$1 line=$2 mark; shift 2
  run "$@"
  [ "$rc" -eq 2 ] && ok || bad "$what: exit $rc, expected 2"
  [ -z "$out" ] && ok || bad "$what: wrote to stdout: $out"
  [ "$(head -1 <<<"$err")" = "$line" ] && ok || bad "$what: stderr starts '$(head -1 <<<"$err")', expected '$line'"
  for mark in "${usage_marks[@]}"; do
    has "$err" "$mark" || { bad "$what: no '$mark' on stderr: $err"; return; }
  done
  ok
}
