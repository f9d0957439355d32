#!/usr/bin/env bash
# cli_skips.sh — scripts/test lists the tests ctest skipped, each with its
# reason (the "SKIP: ..." line of its output, else its last line), after the
# run and whatever its result, so that a skip is seen without ctest -V. Runs
# scripts/test --ctest on a small CMake project of its own.
# Usage: cli_skips.sh VDEV DATA
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
. "${BASH_SOURCE%/*}/testlib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# project FILE-OF-TESTS: a project in $tmp/p whose tests are those lines.
project() {
  rm -rf "$tmp/p" && mkdir -p "$tmp/p"
  { echo 'cmake_minimum_required(VERSION 3.20)'
    echo 'project(skips NONE)'
    echo 'enable_testing()'
    cat
  } >"$tmp/p/CMakeLists.txt"
  cmake -S "$tmp/p" -B "$tmp/p/build" >/dev/null 2>&1 || bad "the test project does not configure"
}
project <<'CMAKE'
add_test(NAME passes COMMAND sh -c "echo fine")
add_test(NAME needs_widget COMMAND sh -c "echo looking; echo 'SKIP: no widget here'; echo after; exit 77")
add_test(NAME needs_tool COMMAND sh -c "echo 'python3 not found: skipped'; exit 77")
add_test(NAME says_nothing COMMAND sh -c "exit 77")
set_tests_properties(needs_widget needs_tool says_nothing PROPERTIES SKIP_RETURN_CODE 77)
CMAKE
out=$("$src/scripts/test" --ctest "$tmp/p/build" 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "scripts/test --ctest: exit $rc: $out"
want="== $tmp/p/build: skipped tests
  needs_widget: no widget here
  needs_tool: python3 not found: skipped
  says_nothing: (no reason given)"
[ "$(sed -n '/: skipped tests$/,$p' <<<"$out")" = "$want" ] && ok || bad "summary: $out"

# A failing test: the summary still comes, and the status says it failed.
project <<'CMAKE'
add_test(NAME breaks COMMAND sh -c "echo broken; exit 1")
add_test(NAME needs_gpu COMMAND sh -c "echo 'SKIP: no GPU'; exit 77")
set_tests_properties(needs_gpu PROPERTIES SKIP_RETURN_CODE 77)
CMAKE
out=$("$src/scripts/test" --ctest "$tmp/p/build" 2>&1); rc=$?
[ $rc -ne 0 ] && ok || bad "a failing test: exit 0"
[ "$(tail -2 <<<"$out")" = "== $tmp/p/build: skipped tests
  needs_gpu: no GPU" ] && ok || bad "a failing test: summary: $out"
grep -q "^broken$" <<<"$out" && ok || bad "a failing test: its output is not shown: $out"

# Nothing skipped: said in one line.
project <<'CMAKE'
add_test(NAME passes COMMAND sh -c "echo fine")
CMAKE
out=$("$src/scripts/test" --ctest "$tmp/p/build" 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "nothing skipped: exit $rc"
[ "$(tail -1 <<<"$out")" = "== $tmp/p/build: no test skipped" ] && ok || bad "nothing skipped: $out"
finish
