#!/usr/bin/env bash
# s28 call 8: call5.sh run again on a build of queue2.patch in .device/q (same tests, same benches).
exec bash "$(dirname "${BASH_SOURCE[0]}")/call5.sh"
