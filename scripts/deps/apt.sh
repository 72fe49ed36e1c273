#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# audiokv_apt_install TAG PACKAGE...: installs the Debian packages that are not installed yet,
# printing what it installs (or that all are present). Sourced by the other deps scripts.

audiokv_apt_install() {
  local tag=$1 missing=() p
  shift
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    echo "[deps/$tag] apt packages present ($*)"
    return 0
  fi
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "[deps/$tag] apt-get update && apt-get install -y ${missing[*]}"
  $sudo apt-get update -qq || return 1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
}
