#!/bin/sh
# Every citation in the tree resolves inside it: no comment or document may
# point at material that does not ship with the repository (the spec and its
# section numbers, errata, issue numbers, design files, the shared reference
# folders). The vLLM behaviour the code follows is cited as
# docs/semantics.md §N. Citations broken over a comment's line break count
# too (the source is read whole). The vLLM-oracle and golden generators,
# which read vLLM's sources when they are re-run by hand, may name where.
SRC=${1:?usage: test_citations.sh SOURCE_ROOT}
cd "$SRC" || exit 1
files=$(find api cpu vk cl cuda shaders tools comm python docs tests scripts examples README.md meson.build \
          -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cc' -o -name '*.comp' \
          -o -name '*.glsl' -o -name '*.cl' -o -name '*.py' -o -name '*.sh' -o -name '*.md' -o -name 'meson.build' \
          -o -name '*.txt' \) 2>/dev/null | grep -v -e '__pycache__' -e '^tests/fuzz/corpus' | sort)
[ -n "$files" ] || { echo "no sources under $SRC"; exit 1; }
bad=$(perl -0777 -ne '
  my $f = $ARGV;
  my $gen = $f =~ m{^tests/(golden/gen_|vllm_oracle/)};
  while (/(\bspec(?:\s|\*|\/\/|#)*\d+(?:\.\d+)+|\berrata\b|\bissues?\s*#?\d+|DESIGN\.md|STYLE\.md|TOOLCHAIN\.md|BACKEND_BRIEF|\bshared\/(?:spec|design|reference|seeds)\b)/gi) {
    my $m = $1; next if $gen && $m =~ /^shared\/reference/i;
    my $line = 1 + (substr($_, 0, $-[1]) =~ tr/\n//);
    $m =~ s/\s+/ /g; print "$f:$line: $m\n";
  }' $files)
# test_citations.sh itself names the patterns it looks for
bad=$(printf '%s\n' "$bad" | grep -v '^tests/test_citations.sh:' | grep -v '^$')
if [ -n "$bad" ]; then
  echo "citations that point outside the tree (say the reason, or cite docs/semantics.md):"
  printf '%s\n' "$bad"
  exit 1
fi
echo "ok: $(echo "$files" | wc -l) files, no citation outside the tree"
