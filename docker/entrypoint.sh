#!/usr/bin/env bash
# Container entry point: the API applies migrations before it starts, then the app takes over PID 1.
set -euo pipefail

is_true() {
  case "${1,,}" in
    1 | true | yes | on) return 0 ;;
    *) return 1 ;;
  esac
}

if [[ "${1:-}" == "api" ]] && is_true "${RUN_MIGRATIONS:-true}"; then
  python -m app migrate
fi

exec python -m app "$@"
