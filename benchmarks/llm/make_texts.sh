#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The English texts of the llama.cpp benchmarks, from the Debian package bible-kjv-text (the King
# James Version, public domain; read with the bible-kjv program), as plain prose: verse numbers
# and chapter headings removed, one paragraph per chapter.
#   build/texts/genesis.txt   the test text (Genesis, about 50k tokens; the runs use a prefix)
#   build/texts/exodus.txt    the dev text (Exodus): every adapter setting is chosen on it
#   build/texts/exodus_narrative.txt  Exodus 3-14 (narrative, no genealogy), the dev text of
#                             the text-frame rule (its opening behaves like the test text's)
# Idempotent; safe to `source` or to run.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/deps/apt.sh"

audiokv_llm_texts() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  local dir="$root/build/texts"
  if [[ -s "$dir/genesis.txt" && -s "$dir/exodus.txt" && -s "$dir/exodus_narrative.txt" ]]; then
    echo "[llm/texts] texts present ($dir)"
    return 0
  fi
  audiokv_apt_install llm_texts bible-kjv bible-kjv-text || return 1
  mkdir -p "$dir" || return 1
  # bible prints "Book N" headings and verses as "  N text" wrapped over lines.
  local prose='/^[A-Z][a-z]* [0-9]+$/ { if (p != "") print p "\n"; p = ""; next }
               /^$/ { next }
               { sub(/^ *[0-9]+ /, ""); p = (p == "" ? $0 : p " " $0) }
               END { if (p != "") print p }'
  bible "gen1:1-gen50:26" | awk "$prose" >"$dir/genesis.txt" || return 1
  bible "ex1:1-ex40:38" | awk "$prose" >"$dir/exodus.txt" || return 1
  bible "ex3:1-ex14:31" | awk "$prose" >"$dir/exodus_narrative.txt" || return 1
  echo "[llm/texts] wrote $dir/genesis.txt (test) and $dir/exodus.txt (dev)"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  audiokv_llm_texts
  exit $?
else
  audiokv_llm_texts
fi
