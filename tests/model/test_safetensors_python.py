#!/usr/bin/env python3
"""Cross-checks fp4moe's safetensors code against the Python `safetensors` library, both directions.

1. C++ -> Python: runs the gtest SafetensorsPyInterop.WriteForPython (FP4MOE_INTEROP_OUT=<tmp file>), then
   loads the file with `safetensors` and checks names, dtypes, shapes, values, metadata and the layout.
2. Python -> C++: writes a fresh fixture with this machine's `safetensors` (make_fixtures.py) and runs the
   gtest SafetensorsInterop.ReadsPythonFixture on it (needs ml_dtypes; skipped without it).

Exit codes: 0 pass, 1 fail, 77 skip (numpy or safetensors missing).
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run_gtest(binary, test, env_extra):
    env = dict(os.environ, **env_extra)
    p = subprocess.run([binary, f"--gtest_filter={test}"], env=env, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    if p.returncode != 0 or "[  PASSED  ] 1 test" not in out or "SKIPPED" in out:
        print(out)
        fail(f"{test} did not pass (rc {p.returncode})")


def check_cpp_written(path):
    import numpy as np
    import safetensors
    from safetensors import safe_open

    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header_bytes = raw[8 : 8 + n]
    if n % 8 != 0:
        fail(f"header length {n} is not a multiple of 8")
    if not header_bytes.rstrip(b" ").endswith(b"}") or len(header_bytes) - len(header_bytes.rstrip(b" ")) >= 8:
        fail(f"header is not JSON padded with fewer than 8 spaces: {header_bytes[-16:]!r}")
    header_text = header_bytes.decode("utf-8")
    header = json.loads(header_text)  # keeps file order
    names = [k for k in header if k != "__metadata__"]
    expected_order = ["f64", "f32", "f16", "bf16", "f8_e4m3", "f8_e5m2", "i64", "i32", "i16", "i8", "u64", "u32",
                      "u16", "u8", "bool", "scalar", "empty", "unicode.\u00e4"]
    if names != expected_order:
        fail(f"tensor order {names}")
    end = 0
    for k in names:  # contiguous, in the given order
        b, e = header[k]["data_offsets"]
        if b != end:
            fail(f"{k}: data starts at {b}, expected {end}")
        end = e
    if 8 + n + end != len(raw):
        fail(f"file is {len(raw)} bytes, header and data account for {8 + n + end}")

    expected = {
        "f64": ("F64", [2, 3], np.array([[-1.0, -0.75, -0.5], [-0.25, 0.0, 0.25]], np.float64)),
        "f32": ("F32", [4], np.array([-2.0, -0.5, 1.0, 2.5], np.float32)),
        "f16": ("F16", [4], np.array([1.0, -2.0, 0.5, 65504.0], np.float16)),
        "bf16": ("BF16", [3], np.array([0x3F80, 0xC000, 0x4049], np.uint16)),
        "f8_e4m3": ("F8_E4M3", [4], np.array([0x38, 0x7E, 0xB8, 0x00], np.uint8)),
        "f8_e5m2": ("F8_E5M2", [2], np.array([0x3C, 0xC0], np.uint8)),
        "i64": ("I64", [3], np.array([-(2**63), -1, 2**63 - 1], np.int64)),
        "i32": ("I32", [2, 2], np.array([[-7, 0], [7, 2**31 - 1]], np.int32)),
        "i16": ("I16", [2], np.array([-32768, 32767], np.int16)),
        "i8": ("I8", [3], np.array([-128, 0, 127], np.int8)),
        "u64": ("U64", [2], np.array([0, 2**64 - 1], np.uint64)),
        "u32": ("U32", [2], np.array([1, 2**32 - 1], np.uint32)),
        "u16": ("U16", [2], np.array([2, 65535], np.uint16)),
        "u8": ("U8", [3], np.array([0, 128, 255], np.uint8)),
        "bool": ("BOOL", [3], np.array([True, False, True])),
        "scalar": ("F32", [], np.array(2.5, np.float32)),
        "empty": ("I32", [0, 3], np.zeros((0, 3), np.int32)),
        "unicode.\u00e4": ("U8", [1], np.array([42], np.uint8)),
    }
    # The library's own parser, raw bytes (covers the dtypes numpy cannot name).
    parsed = {name: t for name, t in safetensors.deserialize(raw)}
    if set(parsed) != set(expected):
        fail(f"tensor names {sorted(parsed)}")
    for name, (dt, shape, values) in expected.items():
        t = parsed[name]
        if t["dtype"] != dt or list(t["shape"]) != shape:
            fail(f"{name}: {t['dtype']} {t['shape']}, expected {dt} {shape}")
        if bytes(t["data"]) != values.tobytes():
            fail(f"{name}: bytes {bytes(t['data']).hex()} != {values.tobytes().hex()}")

    numpy_native = {"F64", "F32", "F16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL"}
    with safe_open(path, framework="np") as f:
        meta = f.metadata()
        if meta != {"format": "pt", "writer": "fp4moe", "quote": 'a "b" \\ c'}:
            fail(f"metadata {meta}")
        for name, (dt, shape, values) in expected.items():
            if dt not in numpy_native:
                continue
            a = f.get_tensor(name)
            if a.dtype != values.dtype or list(a.shape) != shape or not np.array_equal(a, values):
                fail(f"{name}: numpy gives {a.dtype} {a.shape} {a}, expected {values}")
    try:
        import ml_dtypes

        bf = np.frombuffer(bytes(parsed["bf16"]["data"]), dtype=ml_dtypes.bfloat16).astype(np.float32)
        e4 = np.frombuffer(bytes(parsed["f8_e4m3"]["data"]), dtype=ml_dtypes.float8_e4m3fn).astype(np.float32)
        if bf.tolist() != [1.0, -2.0, 3.140625] or e4.tolist() != [1.0, 448.0, -1.0, 0.0]:
            fail(f"ml_dtypes decodes bf16 {bf} e4m3 {e4}")
    except ImportError:
        print("note: ml_dtypes missing, BF16/F8 checked as raw bytes only")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4moe")
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        print(f"skip: {e.name} is not importable (python3 -m pip install numpy safetensors)")
        return 77

    binary = os.path.join(args.build_dir, "tests", "test_model")
    if not os.path.exists(binary):
        fail(f"{binary} not built")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "from_cpp.safetensors")
        run_gtest(binary, "SafetensorsPyInterop.WriteForPython", {"FP4MOE_INTEROP_OUT": out})
        check_cpp_written(out)
        print("C++ -> Python: ok")

        try:
            import ml_dtypes  # noqa: F401
        except ImportError:
            print("note: ml_dtypes missing, Python -> C++ with this safetensors version not checked")
            return 0
        script = os.path.join(args.source_dir, "tests", "model", "fixtures", "make_fixtures.py")
        subprocess.run([sys.executable, script, "--out-dir", tmp], check=True, timeout=120)
        run_gtest(binary, "SafetensorsInterop.ReadsPythonFixture",
                  {"FP4MOE_INTEROP_IN": os.path.join(tmp, "pysafetensors.safetensors"),
                   "FP4MOE_INTEROP_SIDECAR": os.path.join(tmp, "pysafetensors.json")})
        print("Python -> C++: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
