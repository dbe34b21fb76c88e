#!/usr/bin/env bash
# Builds the Python wheel that carries the comfy-bisect binary (pyproject.toml, maturin
# `bindings = "bin"`), installs it into a fresh venv without the network, and checks what a user
# gets: `comfy-bisect` on the venv's PATH, `--version` and `demo` (in a temp folder) working,
# `python -m comfy_bisect` working, and the wheel's metadata (name, version = Cargo's, licence).
# Prints the wheel's size. Issue #37, item 2; docs/install.md.
#
#   scripts/wheel-check.sh                  the release wheel (what a release would publish)
#   scripts/wheel-check.sh --profile dev    the dev profile: reuses what `cargo test` built (CI)
#
# Needs python3 (with venv) and maturin: $MATURIN, else `maturin` on PATH, else it is installed
# once from PyPI into target/wheel-check/tools (the only step that needs the network). The wheel
# goes to target/wheel-check/dist; the venv and the demo's folder are temporary and removed.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profile="${2:?--profile needs dev or release}"; shift 2 ;;
        --profile=*) profile="${1#--profile=}"; shift ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "wheel-check: unknown argument $1 (try --profile dev|release)" >&2; exit 2 ;;
    esac
done
case "$profile" in
    dev|release) ;;
    *) echo "wheel-check: --profile is dev or release, not $profile" >&2; exit 2 ;;
esac

fail() { echo "wheel-check: FAILED: $*" >&2; exit 1; }

python=${PYTHON:-python3}
command -v "$python" >/dev/null || fail "no $python: the check needs Python 3 with the venv module"
target_dir=$(cargo metadata --no-deps --format-version 1 |
    "$python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
work="$target_dir/wheel-check"
mkdir -p "$work"

# maturin: given, on PATH, or installed once into a venv of its own under target/.
maturin=${MATURIN:-}
if [ -z "$maturin" ]; then
    if command -v maturin >/dev/null; then
        maturin=maturin
    else
        if [ ! -x "$work/tools/bin/maturin" ]; then
            echo "== installing maturin into $work/tools (once)"
            "$python" -m venv "$work/tools"
            "$work/tools/bin/python" -m pip install --quiet --disable-pip-version-check 'maturin>=1.9,<2.0'
        fi
        maturin="$work/tools/bin/maturin"
    fi
fi
echo "== $("$maturin" --version)"

cargo_version=$(cargo metadata --no-deps --format-version 1 | "$python" -c '
import json, sys
print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "comfy-bisect"))')
cargo_license=$(cargo metadata --no-deps --format-version 1 | "$python" -c '
import json, sys
print(next(p["license"] for p in json.load(sys.stdin)["packages"] if p["name"] == "comfy-bisect"))')

dist="$work/dist"
rm -rf "$dist"
echo "== maturin build --profile $profile"
start=$(date +%s)
"$maturin" build --profile "$profile" --out "$dist"
echo "   built in $(( $(date +%s) - start )) s"
wheels=("$dist"/comfy_bisect-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || fail "expected one wheel in $dist, found: ${wheels[*]}"
wheel=${wheels[0]}

echo "== metadata of $(basename "$wheel")"
"$python" - "$wheel" "$cargo_version" "$cargo_license" <<'PY'
import email.parser, sys, zipfile
wheel, version, license = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
    meta = email.parser.Parser().parsestr(z.read(meta_name).decode())
    scripts = [n for n in names if ".data/scripts/" in n]
    binary = next((z.getinfo(n) for n in scripts if n.rsplit("/", 1)[1] in ("comfy-bisect", "comfy-bisect.exe")), None)
problems = []
if meta["Name"] != "comfy-bisect":
    problems.append(f"Name is {meta['Name']!r}, not 'comfy-bisect'")
if meta["Version"] != version:
    problems.append(f"Version is {meta['Version']!r}, Cargo.toml says {version!r}")
licence = meta["License-Expression"] or meta["License"]
if licence != license:
    problems.append(f"licence is {licence!r}, Cargo.toml says {license!r}")
if binary is None:
    problems.append(f"no comfy-bisect binary under .data/scripts/ (scripts: {scripts})")
for problem in problems:
    print("wheel-check: FAILED:", problem, file=sys.stderr)
if problems:
    sys.exit(1)
print(f"   Name {meta['Name']}, Version {meta['Version']} (= Cargo.toml), licence {licence}")
print(f"   binary {binary.filename}: {binary.file_size:,} bytes, {binary.compress_size:,} compressed")
PY

tmp=$(mktemp -d "${TMPDIR:-/tmp}/wheel-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "== fresh venv, pip install (no index: the wheel alone)"
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index "$wheel"

# As an activated venv does: its bin folder first on PATH, and nothing else named comfy-bisect.
export PATH="$tmp/venv/bin:$PATH"
found=$(command -v comfy-bisect) || fail "comfy-bisect is not on the venv's PATH"
[ "$found" = "$tmp/venv/bin/comfy-bisect" ] || fail "comfy-bisect resolves to $found, not the venv's"
echo "== comfy-bisect --version"
got=$(cd "$tmp" && comfy-bisect --version)
echo "   $got"
[ "$got" = "comfy-bisect $cargo_version" ] || fail "--version printed '$got', expected 'comfy-bisect $cargo_version'"
got=$(cd "$tmp" && python -m comfy_bisect --version)
[ "$got" = "comfy-bisect $cargo_version" ] || fail "python -m comfy_bisect --version printed '$got'"
echo "   python -m comfy_bisect --version: $got"

echo "== comfy-bisect demo (in $tmp/demo)"
mkdir "$tmp/demo"
status=0
(cd "$tmp/demo" && comfy-bisect demo) > "$tmp/demo.log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    cat "$tmp/demo.log" >&2
    fail "comfy-bisect demo exited with status $status"
fi
tail -n 3 "$tmp/demo.log" | sed 's/^/   /'
reports=$(find "$tmp/demo/runs" -name report.md | wc -l)
[ "$reports" -ge 3 ] || fail "demo wrote $reports report.md under runs/, expected one per example (3)"
echo "   $reports reports under runs/"

size=$(wc -c < "$wheel")
echo "== wheel: $(basename "$wheel"), $size bytes ($(( (size + 524288) / 1048576 )) MiB), profile $profile"
echo "wheel-check: OK"
