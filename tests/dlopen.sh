#!/bin/sh
# dlopen.sh - libmla.so needs only libc (and libm), uses no initial-exec
# TLS (no STATIC_TLS flag), and works when dlopen()ed (Python ctypes): two
# threads' refused values leave each thread its own message.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}
lib=$(ls "$top_builddir"/lib/.libs/libmla.so.1.* 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "dlopen: library not built" >&2; exit 99; }
command -v readelf >/dev/null 2>&1 || { echo "dlopen: readelf not found"; exit 77; }
if readelf -d "$lib" | grep -q STATIC_TLS; then
    readelf -d "$lib" | grep FLAGS
    echo "dlopen: $lib uses initial-exec TLS (STATIC_TLS): dlopen() may fail" >&2
    exit 1
fi
echo "dlopen: no STATIC_TLS flag"
# Sanitizer builds need their runtime too.
if [ "${MLA_SANITIZERS:-no}" = no ]; then
    extra=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
        grep -v -e '^libc\.so' -e '^libm\.so' -e '^libpthread\.so')
    if [ -n "$extra" ]; then
        echo "dlopen: $lib needs more than libc: $extra" >&2
        exit 1
    fi
    echo "dlopen: needs only libc and libm"
fi
# A sanitizer runtime must come first in the process: not under python.
if [ "${MLA_SANITIZERS:-no}" != no ]; then
    echo "dlopen: sanitizer build, dlopen check skipped"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || { echo "dlopen: python3 not found, dlopen check skipped"; exit 0; }
python3 - "$lib" <<'PY' || exit 1
import ctypes, sys, threading
lib = ctypes.CDLL(sys.argv[1])
lib.mla_config_last_error.restype = ctypes.c_char_p
lib.mla_config_set_int.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64]
cfg = ctypes.c_void_p()
assert lib.mla_config_create(ctypes.byref(cfg)) == 0
out = {}
def refuse(value):
    st = lib.mla_config_set_int(cfg, 7, value)  # MLA_PARAM_PAGE_SIZE
    out[value] = (st, lib.mla_config_last_error(cfg).decode())
ts = [threading.Thread(target=refuse, args=(v,)) for v in (48, 3000)]
for t in ts: t.start()
for t in ts: t.join()
for v in (48, 3000):
    st, msg = out[v]
    want = "mla_config_set_int: MLA_PARAM_PAGE_SIZE = %d: want a power of two in [1, 1024]" % v
    assert st == 1 and msg == want, (st, msg)
lib.mla_config_destroy(cfg)
lib.mla_last_error.restype = ctypes.c_char_p
assert lib.mla_context_create(None, -1) == 1
assert lib.mla_last_error().decode() == "mla_context_create: ctx is NULL", lib.mla_last_error()
print("dlopen: loaded with dlopen, per-thread messages in two threads")
PY
