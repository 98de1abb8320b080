#!/usr/bin/env bash
# Prepares DIR as a "fresh machine" for a copy of the Makefile (see makefile-compiler.test):
#   DIR/bin    the only PATH make gets: make and basic tools, an old `clang++`/`clang` (the image's
#              clang 14) and a `cmake` that records its arguments in DIR/cmake-args and
#              writes build/CMakeCache.txt (the C++ compiler it was given) and build.ninja
#   DIR/repo   the Makefile and a scripts/setup.sh that "installs" clang++-22 and clang-22
#              into DIR/bin, as the real one installs them into /usr/bin
#   fresh-machine.sh DIR MAKEFILE
set -euo pipefail
dir="$1"
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/repo/scripts"
cp "$2" "$dir/repo/Makefile"
for tool in make sh bash sed cat mkdir chmod cp nproc; do
  ln -s "$(command -v "$tool")" "$dir/bin/$tool"
done
for old in clang++ clang; do
  printf '#!/bin/sh\necho "clang version 14.0.6"\n' >"$dir/bin/$old"
  chmod +x "$dir/bin/$old"
done
cat >"$dir/repo/scripts/setup.sh" <<SETUP
for new in clang++-22 clang-22; do
  printf '#!/bin/sh\n' > "$dir/bin/\$new"
  chmod +x "$dir/bin/\$new"
done
SETUP
cat >"$dir/bin/cmake" <<CMAKE
#!/bin/sh
echo "\$@" > "$dir/cmake-args"
mkdir -p "$dir/repo/build"
for arg; do
  case "\$arg" in
    -DCMAKE_CXX_COMPILER=*) echo "CMAKE_CXX_COMPILER:FILEPATH=\${arg#*=}" > "$dir/repo/build/CMakeCache.txt";;
  esac
done
: > "$dir/repo/build/build.ninja"
CMAKE
chmod +x "$dir/bin/cmake"
