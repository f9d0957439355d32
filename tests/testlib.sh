# testlib.sh — what every cli_*.sh test shares, sourced at its top:
# the pass and fail counters, ok and bad (one check passed; one failed, with
# its message on stdout), has (a text holds a string), lines (a text's line
# count, 0 for empty) and finish (the summary line; the script's exit status
# when it is the last command: 0 only when no check failed).
# shellcheck shell=bash
fail=0; pass=0
ok()  { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
has() { grep -qF -- "$2" <<<"$1"; }
lines() { if [ -z "$1" ]; then echo 0; else printf '%s\n' "$1" | wc -l; fi; }
# finish [NAME]: "NAME: N passed, M failed"; true when M is 0.
finish() { echo "${1:+$1: }$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
