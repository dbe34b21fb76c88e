#!/usr/bin/env bash
# Checks the workspace for Windows (x86_64-pc-windows-gnu) on a Debian 12 (bookworm) x86_64 machine,
# where rustup cannot download the Windows standard library.
#
#   scripts/windows-check.sh [check|tests|full] [-j N] [-w DIR] [--no-apt]
#
#   check  (default; what .ci/run runs) compile every crate and every target (tests, benches) for
#          Windows with warnings as errors: `cargo check --workspace --all-targets --locked` under
#          RUSTFLAGS="-D warnings". This is the lint step too: rustup's clippy-driver cannot be
#          mixed with Debian's rustc, so rustc's own warnings (dead code off Linux, unused imports
#          behind a cfg, ...) are what "lint clean" means here; clippy itself runs on Linux in CI.
#   tests  check, then build every crate's unit tests and every integration test (session,
#          client, sim, graph, structure, cli, report: the driver and the client end to end
#          against the simulator, workflows, hashing, the binary's commands, the reports) for
#          Windows and run each test .exe under wine; every test must pass but ten that call Unix
#          tools (`kill`, `sha256sum`, `sh`, `git`), skipped by name and said so.
#   full   tests, then `cargo build --release --bin comfy-bisect` for Windows and run the .exe
#          under wine: `--version`, `--help`, `demo` (which must exit 0 and write its reports) and
#          `runs` over what demo recorded.
#   -j N   cargo jobs (default 2)          -w DIR  work folder (default /tmp/comfy-bisect-windows)
#   --no-apt  do not call apt-get (the packages below are already there)
#
# How it works: the Windows std is compiled from source (-Zbuild-std). The compiler is Debian's
# rustc-web from bookworm-security with its matching library sources (rust-web-src); the packages
# are fetched with `apt-get download` and unpacked into WORK/toolchain (never installed, so they do
# not shadow rustup's rustc), which makes WORK/toolchain/usr a sysroot with the std sources in
# lib/rustlib/src. RUSTC_BOOTSTRAP=1 lets that stable compiler and the cargo on PATH take -Z flags.
# MinGW (apt) supplies dlltool, which even `cargo check` needs (std links by raw-dylib), and the
# linker. Wine 8 (apt: wine64) lacks bcryptprimitives.dll, which Rust's std imports: the tests and full
# modes build scripts/bcryptprimitives-stub.c into a stand-in DLL next to the test and release .exe files.
# Everything lands in the work folder (toolchain, target dir, wine prefix, logs); the repository
# is only read. Exit status 0 when every step passed.
set -uo pipefail

MODE=check
JOBS=2
WORK=/tmp/comfy-bisect-windows
APT=1
while [ $# -gt 0 ]; do
  case "$1" in
    check | tests | full) MODE=$1 ;;
    -j) JOBS=$2; shift ;;
    -w) WORK=$2; shift ;;
    --no-apt) APT=0 ;;
    -h | --help) sed -n '2,31p' "$0" | cut -c3-; exit 0 ;;
    *) echo "windows-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

REPO=$(cd "$(dirname "$0")/.." && pwd)
TARGET=x86_64-pc-windows-gnu
START=$(date +%s)
mkdir -p "$WORK/logs" && WORK=$(cd "$WORK" && pwd)
LOGS=$WORK/logs
FAILED=0
elapsed() { echo "$(($(date +%s) - START))s"; }
step() { echo "== $* ($(elapsed))"; }
ok() { echo "   ok: $*"; }
bad() { echo "   FAILED: $*"; FAILED=1; }
finish() {
  echo "== windows-check $MODE: $([ $FAILED = 0 ] && echo passed || echo FAILED) in $(elapsed)"
  exit $FAILED
}
give_up() { bad "$*"; finish; }
# Stops this prefix's wineserver (keyed by WINEPREFIX: no other wine is touched).
stop_wine() {
  local server
  server=$(command -v wineserver || ls /usr/lib/wine/wineserver64 /usr/lib/wine/wineserver 2>/dev/null | head -1)
  [ -n "$server" ] && "$server" -k 2> /dev/null
  return 0
}
sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- 1. packages -------------------------------------------------------------------------------
if [ $APT = 1 ]; then
  step "apt: MinGW, the libraries Debian's rustc links to$([ $MODE != check ] && echo ', wine')"
  packages=(binutils-mingw-w64-x86-64 gcc-mingw-w64-x86-64 libedit2 libffi8 libxml2 libz3-4 libzstd1 zlib1g)
  [ $MODE != check ] && packages+=(wine64)
  sudo_if_needed apt-get update -qq > "$LOGS/apt.log" 2>&1
  DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get install -y -qq --no-install-recommends \
    "${packages[@]}" >> "$LOGS/apt.log" 2>&1 || give_up "apt-get install (log: $LOGS/apt.log)"
fi
command -v x86_64-w64-mingw32-dlltool > /dev/null || give_up "no MinGW binutils (apt-get install binutils-mingw-w64-x86-64)"

# --- 2. the compiler and std sources ---------------------------------------------------------------
TOOLCHAIN=$WORK/toolchain
if [ ! -x "$TOOLCHAIN/usr/bin/rustc" ]; then
  step "Debian rustc-web + rust-web-src, unpacked into $TOOLCHAIN"
  # libstd-rust-web-X.Y and libllvmN are versioned package names: read them off the dependencies.
  std_pkg=$(apt-cache depends libstd-rust-web-dev | awk '/Depends: libstd-rust-web-[0-9]/ { print $2; exit }')
  llvm_pkg=$(apt-cache depends "$std_pkg" | awk '/Depends: libllvm[0-9]/ { print $2; exit }')
  [ -n "$std_pkg" ] && [ -n "$llvm_pkg" ] || give_up "rustc-web is not in apt's lists (bookworm-security enabled? apt-get update?)"
  rm -rf "$WORK/debs" && mkdir -p "$WORK/debs" "$TOOLCHAIN"
  (cd "$WORK/debs" && apt-get download rustc-web libstd-rust-web-dev "$std_pkg" rust-web-src "$llvm_pkg") \
    > "$LOGS/download.log" 2>&1 || give_up "apt-get download (log: $LOGS/download.log)"
  for deb in "$WORK"/debs/*.deb; do dpkg-deb -x "$deb" "$TOOLCHAIN" || give_up "unpacking $deb"; done
fi
export LD_LIBRARY_PATH=$TOOLCHAIN/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUSTC=$TOOLCHAIN/usr/bin/rustc RUSTDOC=$TOOLCHAIN/usr/bin/rustdoc RUSTC_BOOTSTRAP=1
export RUSTC_WRAPPER= RUSTC_WORKSPACE_WRAPPER= CARGO_INCREMENTAL=0 CARGO_TERM_COLOR=never
export CARGO_TARGET_DIR=$WORK/target
"$RUSTC" -vV > /dev/null 2>&1 || give_up "the unpacked rustc does not run: $("$RUSTC" -vV 2>&1 | tail -1)"
[ -f "$("$RUSTC" --print sysroot)/lib/rustlib/src/rust/library/std/Cargo.toml" ] || give_up "no std sources in the unpacked sysroot"
command -v cargo > /dev/null || give_up "no cargo on PATH (rustup's stable cargo is fine)"
ok "$("$RUSTC" --version), $(cargo --version)"
BUILD_STD=(-Zbuild-std=std,panic_abort --target "$TARGET" --locked -j "$JOBS")
cd "$REPO"

# --- 3. compile and lint ---------------------------------------------------------------------------
step "cargo check --workspace --all-targets for $TARGET, -D warnings (log: $LOGS/check.log)"
t=$(date +%s)
if RUSTFLAGS="-D warnings" nice -n 10 cargo check --workspace --all-targets --keep-going "${BUILD_STD[@]}" > "$LOGS/check.log" 2>&1; then
  ok "compiles and is warning-free for Windows ($(($(date +%s) - t))s)"
else
  bad "cargo check for Windows ($(($(date +%s) - t))s); the project's errors and warnings:"
  grep -E -A4 '^(error|warning)' "$LOGS/check.log" | grep -E '^(error|warning)|-->' | grep -v rustlib | head -60
fi
[ $MODE = check ] && finish
[ $FAILED = 0 ] || give_up "not going on: the check failed"

# --- 4. wine -------------------------------------------------------------------------------------
WINE=$(command -v wine64 || command -v wine || ls /usr/lib/wine/wine64 2>/dev/null)
[ -n "$WINE" ] || give_up "no wine (apt-get install wine64)"
export WINEPREFIX=$WORK/wineprefix WINEDEBUG=${WINEDEBUG:--all} WINEDLLOVERRIDES="mscoree,mshtml=" DISPLAY=
step "wine: $("$WINE" --version), prefix $WINEPREFIX"
nice -n 10 "$WINE" wineboot --init > "$LOGS/wineboot.log" 2>&1
# Puts the bcryptprimitives.dll stand-in into folder $1 when this wine lacks the DLL.
stand_in() {
  [ -f "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" ] && return 0
  x86_64-w64-mingw32-gcc -O2 -shared -o "$1/bcryptprimitives.dll" "$REPO/scripts/bcryptprimitives-stub.c" -ladvapi32 \
    || give_up "building the bcryptprimitives.dll stand-in"
}

# --- 5. the unit tests under wine ----------------------------------------------------------------
step "cargo test --workspace --lib --bins --tests --no-run for $TARGET, then each under wine (logs: $LOGS/unit-*.log)"
# A target folder of its own, as for the release build below.
export CARGO_TARGET_DIR=$WORK/target-test
t=$(date +%s)
nice -n 10 cargo test --workspace --lib --bins --tests --no-run --message-format=json "${BUILD_STD[@]}" \
  > "$LOGS/unit-build.json" 2> "$LOGS/unit-build.log" \
  || { tail -20 "$LOGS/unit-build.log"; give_up "building the unit tests"; }
ok "built ($(($(date +%s) - t))s)"
UNIT=$WORK/unit
rm -rf "$UNIT" && mkdir -p "$UNIT"
stand_in "$UNIT"
# The integration tests start the binary cargo built beside them (CARGO_BIN_EXE_comfy-bisect).
stand_in "$CARGO_TARGET_DIR/$TARGET/debug"
# Tests that cannot run here, by name: the client's and the simulator's signal tests send
# SIGINT/SIGTERM with `kill`; the digest tests compare with GNU coreutils' `sha256sum`; the
# `git bisect run` tests need git; two server-control tests start the simulator through `sh`.
skip_for() {
  case "$1" in
    client) echo "--skip ctrl_c_interrupts_only_our_prompt_records_the_run_and_exits_130" ;;
    graph) echo "--skip generated_file_matches_sha256sum_and_one_shot_digest" ;;
    cli) echo "--skip sim_cli::serves_until_ctrl_c --skip sim_cli::comfyui_flags_show_in_argv_and_sigterm_frees_the_port" \
      "--skip hashing_cli::json_output_matches_sha256sum --skip hashing_cli::table_output_shows_size_sha256_and_autov2" \
      "--skip check_cli::a_complete_product_exits_0_with_the_version_and_commit_recorded" \
      "--skip check_cli::git_bisect_run_names_the_commit_that_broke_the_workflow" \
      "--skip check_cli::bisect_starts_a_server_that_is_down_at_its_first_connection" \
      "--skip mitigate_cli::a_server_control_runs_through_launch_cmd_and_the_server_is_put_back" ;;
  esac
}
# Each test executable cargo reported, named after its target.
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"])
' "$LOGS/unit-build.json" > "$UNIT/list.txt" || give_up "reading cargo's list of test executables"
[ -s "$UNIT/list.txt" ] || give_up "cargo built no unit test executable"
while read -r name exe; do
  cp "$exe" "$UNIT/$name.exe"
  t=$(date +%s)
  # From the repository, as cargo runs them (fixtures are read by relative paths).
  skip=$(skip_for "$name")
  # shellcheck disable=SC2086 # $skip is empty or `--skip NAME`
  (cd "$REPO" && nice -n 10 timeout 1500 "$WINE" "$UNIT/$name.exe" --test-threads 2 $skip) > "$LOGS/unit-$name.log" 2>&1
  rc=$?
  result=$(grep -E '^test result:' "$LOGS/unit-$name.log" | tail -1)
  if [ $rc = 0 ]; then
    ok "$name: ${result:-no result line} ($(($(date +%s) - t))s)${skip:+; skipped: ${skip//--skip /}}"
  else
    bad "$name exited $rc ($(($(date +%s) - t))s): ${result:-no result line}; failures:"
    grep -E '^    [a-z_:]+$|panicked at' "$LOGS/unit-$name.log" | head -20 | sed 's/^/      /'
  fi
done < "$UNIT/list.txt"
if [ $MODE = tests ]; then
  stop_wine
  finish
fi

# --- 6. the release .exe, run under wine -----------------------------------------------------------
step "cargo build --release --bin comfy-bisect for $TARGET (log: $LOGS/build.log)"
# A target folder of its own: the check's RUSTFLAGS differ, and sharing one would rebuild the
# build scripts and proc-macros of both on every switch.
export CARGO_TARGET_DIR=$WORK/target-release
t=$(date +%s)
nice -n 10 cargo build --release --bin comfy-bisect "${BUILD_STD[@]}" > "$LOGS/build.log" 2>&1 \
  || { tail -20 "$LOGS/build.log"; give_up "release build"; }
EXE=$CARGO_TARGET_DIR/$TARGET/release/comfy-bisect.exe
ok "$EXE, $(du -h "$EXE" | cut -f1) ($(($(date +%s) - t))s)"
RUN=$WORK/run
rm -rf "$RUN" && mkdir -p "$RUN"
cp "$EXE" "$RUN/"
stand_in "$RUN"
cd "$RUN"
# Runs the .exe under wine with a time limit; its output goes to logs/wine-NAME.log.
under_wine() {
  local name=$1 limit=$2 t rc
  shift 2
  t=$(date +%s)
  nice -n 10 timeout "$limit" "$WINE" ./comfy-bisect.exe "$@" > "$LOGS/wine-$name.log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    ok "comfy-bisect.exe $* ($(($(date +%s) - t))s)"
  else
    bad "comfy-bisect.exe $* exited $rc ($(($(date +%s) - t))s); last lines of $LOGS/wine-$name.log:"
    tail -8 "$LOGS/wine-$name.log" | sed 's/^/      /'
  fi
  return $rc
}
under_wine version 120 --version && sed 's/^/      /' "$LOGS/wine-version.log"
under_wine help 120 --help
if under_wine demo 900 demo; then
  reports=$(find "$RUN/runs" -name report.md | wc -l)
  [ "$reports" -gt 0 ] && ok "demo wrote $reports report.md under $RUN/runs" || bad "demo wrote no report.md"
  under_wine runs 120 runs --runs-dir runs && head -5 "$LOGS/wine-runs.log" | sed 's/^/      /'
fi
cd "$REPO"
stop_wine
finish
