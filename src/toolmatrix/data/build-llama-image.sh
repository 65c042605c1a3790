#!/usr/bin/env bash
# Build the local llama.cpp server image toolmatrix/llama-server:bNNNN with no registry (issue 3, item 7):
# a rootfs holding the built llama-server, every library ldd lists for it (with their version symlinks), the
# dynamic loader, a minimal /etc and /tmp, imported with `docker import`. The GGUF and the chat template are
# not in the image: the docker launcher mounts them read-only (engines/llamacpp.yaml, variant `local`).
# The tag names the llama.cpp build the image holds (issue 46): bNNNN is the "version" of the binaries' build
# record, llama-server.build.json beside them (build-llama-server.sh writes it); no record, no image.
# Idempotent: an image of the same build (binary and libraries) is kept unless --force; another build's is replaced.
#   usage: build-llama-image.sh [--force] [--print-image] [LLAMA_SERVER_BINARY]
#     binary default: $TOOLMATRIX_LLAMACPP_BIN, else ${TOOLMATRIX_CACHE:-~/.cache/toolmatrix}/bin/llama-server
#     (`toolmatrix install llamacpp` builds it there)
#     --print-image: print the image reference it would build, and stop (no docker needed)
#   env: TOOLMATRIX_LLAMA_IMAGE (default toolmatrix/llama-server:<the build record's version>)
set -euo pipefail
force=0
print_image=0
binary=""
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --print-image) print_image=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "build-llama-image.sh: unknown option $arg" >&2; exit 2 ;;
    *) binary="$arg" ;;
  esac
done
binary="${binary:-${TOOLMATRIX_LLAMACPP_BIN:-${TOOLMATRIX_CACHE:-$HOME/.cache/toolmatrix}/bin/llama-server}}"

if [ ! -x "$binary" ]; then
  echo "build-llama-image.sh: no llama-server at $binary (build it: toolmatrix install llamacpp)" >&2
  exit 1
fi
binary="$(readlink -f "$binary")"
if [ -n "${TOOLMATRIX_LLAMA_IMAGE:-}" ]; then
  image="$TOOLMATRIX_LLAMA_IMAGE"
else
  # The tag is the build the binaries are, as their record says: "version": "b11434" (llama.cpp's tag).
  record="$(dirname "$binary")/llama-server.build.json"
  if [ ! -f "$record" ]; then
    echo "build-llama-image.sh: no build record $record beside llama-server, so no tag that names its build" \
         "(rebuild it: toolmatrix install llamacpp; or name the image: TOOLMATRIX_LLAMA_IMAGE)" >&2
    exit 1
  fi
  build="$(sed -nE 's/.*"version": *"(b[0-9]+)".*/\1/p' "$record" | head -n 1)"
  if [ -z "$build" ]; then
    echo "build-llama-image.sh: $record names no llama.cpp build (\"version\": \"bNNNN\")" \
         "(rebuild it: toolmatrix install llamacpp; or name the image: TOOLMATRIX_LLAMA_IMAGE)" >&2
    exit 1
  fi
  image="toolmatrix/llama-server:$build"
fi
if [ "$print_image" = 1 ]; then
  echo "$image"
  exit 0
fi

if ! docker info >/dev/null 2>&1; then
  echo "build-llama-image.sh: no docker daemon answers (start one: start-dockerd.sh)" >&2
  exit 1
fi
# What the image holds: the binary and every library beside it (the portable build's CPU modules among them). An
# image of another build (an older -march=native one, say) is replaced, not kept.
build_sha="$( (cat "$binary"; find "$(dirname "$binary")" -maxdepth 1 -name 'lib*.so*' -print0 | LC_ALL=C sort -z |
  xargs -0 -r cat) | sha256sum | cut -d' ' -f1)"
held="$(docker image inspect -f '{{index .Config.Labels "toolmatrix.llama-server.build"}}' "$image" 2>/dev/null || true)"
if [ "$force" = 0 ] && [ "$held" = "$build_sha" ]; then
  echo "image $image already holds this build ($(docker image inspect -f '{{.Id}}' "$image")); --force rebuilds it"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp" "$root/root" "$root/models"
chmod 1777 "$root/tmp"

# copy PATH into the rootfs at the same path; a symlink is kept as a symlink and its target copied too.
copy_path() {
  local path="$1"
  while :; do
    [ -e "$root$path" ] || [ -L "$root$path" ] && return 0
    mkdir -p "$root$(dirname "$path")"
    if [ -L "$path" ]; then
      local target
      target="$(readlink "$path")"
      cp -P "$path" "$root$path"
      case "$target" in /*) path="$target" ;; *) path="$(dirname "$path")/$target" ;; esac
    else
      cp "$path" "$root$path"
      return 0
    fi
  done
}

# The binary, and any shared libraries built beside it (a BUILD_SHARED_LIBS build: libllama.so, libggml*.so),
# go to /usr/local/bin together, so an $ORIGIN rpath and ggml's backend loading still find them.
cp "$binary" "$root/usr/local/bin/llama-server"
objects=("$binary")
for lib in "$(dirname "$binary")"/lib*.so*; do
  [ -e "$lib" ] || continue
  cp -P "$lib" "$root/usr/local/bin/"
  [ -L "$lib" ] || objects+=("$lib")
done

# Every library ldd lists for them, at the path ldd resolved (the /lib -> /usr/lib merge is flattened to a real
# directory in the image), plus the loader. A library ldd cannot find stops the build: the image would not run.
libs="$(ldd "${objects[@]}" 2>&1)" || true
if grep -q "not found" <<<"$libs"; then
  echo "build-llama-image.sh: ldd cannot resolve every library:" >&2
  grep "not found" <<<"$libs" >&2
  exit 1
fi
while read -r path; do
  case "$path" in "$(dirname "$binary")"/*) continue ;; esac  # already beside the binary
  copy_path "$path"  # ldd lists the soname link; copy_path keeps it and copies its target, as on the host
done < <(grep -oE '(=> )?/[^ ]+ \(0x' <<<"$libs" | sed -E 's/^=> //; s/ \(0x$//' | sort -u)
interp="$(grep -oE '/lib(64)?/ld-linux[^ ]*' <<<"$libs" | head -n 1)"
copy_path "${interp:-/lib64/ld-linux-x86-64.so.2}"

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/false
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
echo "hosts: files dns" >"$root/etc/nsswitch.conf"

# The rootfs must run on its own: start the binary through the copied loader and libraries only.
if ! env -i "$root${interp:-/lib64/ld-linux-x86-64.so.2}" --library-path "$root/usr/local/bin:$(
     find "$root" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)" "$root/usr/local/bin/llama-server" --version \
     >"$work/version.txt" 2>&1; then
  echo "build-llama-image.sh: the rootfs's llama-server does not start:" >&2
  cat "$work/version.txt" >&2
  exit 1
fi
# "version: 0.6.0-dev (build 11434, commit C)": written as the server's /props build_info is, b11434-C.
version="$(sed -nE 's/^version: .*\(build ([0-9]+), commit ([^)]+)\).*/b\1-\2/p' "$work/version.txt" | head -n 1)"
if [ -n "${build:-}" ] && [ "${version%%-*}" != "$build" ]; then  # the tag must name the build the binary is
  echo "build-llama-image.sh: llama-server says it is ${version:-no build}, its record $record says $build" >&2
  exit 1
fi
sha="$(sha256sum "$binary" | cut -d' ' -f1)"
lib_path="/usr/local/bin:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib64"

previous="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
tar -C "$root" --numeric-owner --owner=0 --group=0 -c . | docker import \
  -c "ENV LD_LIBRARY_PATH=$lib_path" \
  -c 'ENTRYPOINT ["/usr/local/bin/llama-server"]' \
  -c 'EXPOSE 8080' \
  -c "LABEL toolmatrix.llama-server.sha256=$sha" \
  -c "LABEL toolmatrix.llama-server.build=$build_sha" \
  -c "LABEL toolmatrix.llama-server.version=\"$version\"" \
  -m "toolmatrix: llama-server $sha from $binary" - "$image" >/dev/null
current="$(docker image inspect -f '{{.Id}}' "$image")"
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  docker image rm "$previous" >/dev/null 2>&1 || true  # the replaced image, unless a container still uses it
fi
echo "built $image ($(docker image inspect -f '{{.Id}}' "$image"), $(du -sh "$root" | cut -f1) rootfs," \
     "llama-server $version)"
