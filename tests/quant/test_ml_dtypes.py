#!/usr/bin/env python3
"""Cross-checks fp4moe's NVFP4 reference codecs and quantizer against ml_dtypes.

ml_dtypes (float4_e2m1fn, float8_e4m3fn) is an independent implementation of the two element formats. This
script computes its answers, applies the differences fp4moe documents on purpose (listed in DIFFERENCES below
and asserted here, so a change in ml_dtypes shows up), writes them to <build-dir>/ml_dtypes_ref.bin, and runs
`test_quant --gtest_filter=MlDtypes*` with FP4MOE_MLDTYPES_REF pointing at it; that gtest compares every entry.

The quantizer is checked against a numpy float32 transcription of ModelOpt's NVFP4QTensor recipe
(nvfp4.md section 1.5) with ml_dtypes doing the FP8 cast and ModelOpt's own searchsorted E2M1 rounding.

Exit status: 0 pass, 1 fail, 77 skipped (numpy or ml_dtypes missing).
"""
import argparse
import os
import struct
import subprocess
import sys

try:
    import numpy as np
    import ml_dtypes
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (install with: python3 -m pip install numpy ml_dtypes)")
    sys.exit(77)

F32 = np.float32
E2M1 = ml_dtypes.float4_e2m1fn
E4M3 = ml_dtypes.float8_e4m3fn

# Where fp4moe's codecs intentionally differ from ml_dtypes (see include/fp4moe/nvfp4.h):
DIFFERENCES = """
E4M3 encode, |x| > 464 or Inf: ml_dtypes gives NaN (0x7F/0xFF, no saturation); fp4moe saturates to +-448
  (0x7E/0xFE) like __nv_fp8_e4m3 with __NV_SATFINITE. (448 < |x| <= 464 round to 448 in both: 464 is the
  tie between 448 and the would-be 480, and 448 has the even mantissa.)
E2M1 encode, NaN: ml_dtypes gives 0x8 for +NaN and 0x0 for -NaN; fp4moe gives 0x7 (+6) like ModelOpt.
(E2M1 overflow and Inf saturate to +-6 in both.)
"""


def u8(a):
    return np.ascontiguousarray(a).view(np.uint8)


def ml_encode(x, dtype):
    return u8(np.asarray(x, dtype=F32).astype(dtype))


def e4m3_expected(x):
    x = np.asarray(x, dtype=F32)
    codes = ml_encode(x, E4M3).copy()
    sign = np.signbit(x).astype(np.uint8) << 7
    over = ~np.isnan(x) & (np.abs(x) > F32(464))
    assert np.all((codes[over] & 0x7F) == 0x7F), "ml_dtypes no longer gives NaN on E4M3 overflow"
    assert np.all(codes[over] == (sign[over] | 0x7F)), "ml_dtypes E4M3 overflow NaN lost its sign"
    codes[over] = sign[over] | 0x7E
    nan = np.isnan(x)
    assert np.all(codes[nan] == (sign[nan] | 0x7F))
    return codes


def e2m1_expected(x):
    x = np.asarray(x, dtype=F32)
    codes = ml_encode(x, E2M1).copy()
    nan = np.isnan(x)
    assert np.all((codes[nan] & 0x7) == 0), "ml_dtypes no longer maps NaN to a zero E2M1 code"
    codes[nan] = 0x7
    big = ~nan & (np.abs(x) > F32(6))
    assert np.all((codes[big] & 0x7) == 0x7), "ml_dtypes no longer saturates E2M1"
    return codes


def with_neighbours(v):
    v = np.asarray(v, dtype=F32)
    with np.errstate(over="ignore"):  # nextafter(max, inf) is inf, which is wanted
        v = np.concatenate([v, np.nextafter(v, F32(np.inf)), np.nextafter(v, F32(-np.inf))])
    return np.concatenate([v, -v])


def sweep(lo_exp, hi_exp, stride, rng):
    """Every `stride`-th float32 between 2^lo_exp and 2^hi_exp, plus random bit patterns in that range."""
    lo = np.array([2.0**lo_exp], dtype=F32).view(np.uint32)[0]
    hi = np.array([2.0**hi_exp], dtype=F32).view(np.uint32)[0]
    dense = np.arange(lo, hi, stride, dtype=np.uint32)
    rand = rng.integers(lo, hi, size=200_000, dtype=np.uint32)
    return np.concatenate([dense, rand]).view(F32)


def encode_inputs(values, lo_exp, hi_exp, stride, rng, extra):
    values = np.asarray(values, dtype=F32)
    finite = values[np.isfinite(values)]
    fs = np.sort(np.unique(np.abs(finite)))
    mids = (fs[:-1] + fs[1:]) / F32(2)  # exact: neighbours have few significant bits
    assert np.all(mids.astype(np.float64) == (fs[:-1].astype(np.float64) + fs[1:]) / 2)
    special = np.array([0.0, np.inf, np.nan, np.finfo(F32).max, np.finfo(F32).tiny, 1e-45] + extra, dtype=F32)
    s = sweep(lo_exp, hi_exp, stride, rng)
    return np.concatenate([with_neighbours(fs), with_neighbours(mids), with_neighbours(special), s, -s])


# ---- ModelOpt NVFP4QTensor, transcribed to numpy float32 ----------------------------------------------------
E2M1_BOUNDS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=F32)


def modelopt_cast_fp4(y):
    sign = (y < 0).astype(np.uint8)
    a = np.abs(y)
    ordinal = np.searchsorted(E2M1_BOUNDS, a, side="left").astype(np.uint8)  # torch.searchsorted default
    ordinal += np.isin(a, np.array([0.75, 1.75, 3.5], dtype=F32)).astype(np.uint8)
    return (sign << 3) | ordinal


def modelopt_quantize(w, amax=None):
    n, k = w.shape
    amax = F32(np.abs(w).max()) if amax is None else F32(amax)
    ws2 = F32(amax / F32(6.0 * 448.0))
    blocks = w.reshape(n, k // 16, 16)
    bamx = np.abs(blocks).max(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = bamx / (F32(6.0) * ws2)
        s[s == 0] = F32(1.0)
        sf = s.astype(E4M3)
        assert not np.any(np.isnan(sf.astype(F32))), "case outside the compared domain (scale overflow)"
        y = blocks / (sf.astype(F32) * ws2)[..., None]
    codes = modelopt_cast_fp4(y.astype(F32)).reshape(n, k)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return ws2, u8(sf).reshape(n, k // 16), packed.astype(np.uint8)


def quant_cases(rng):
    cases = []
    for n, k, scale in [(1, 16, 1.0), (3, 32, 1e-3), (17, 64, 7.0), (64, 256, 1.0), (5, 128, 1e30), (4, 48, 1e-30)]:
        w = rng.standard_normal((n, k)).astype(F32) * F32(scale)
        w *= np.exp2(rng.uniform(-6, 6, size=(n, 1))).astype(F32)  # rows of different magnitudes
        w[rng.random((n, k)) < 0.05] = F32(0.0)
        w[rng.random((n, k)) < 0.02] = F32(-0.0)
        if k >= 32:
            w[0, 16:32] = 0.0  # an all-zero block
        cases.append((w, None))
    # Exact ties: with amax = 2688 the global scale is 1 and a block holding 2688 has scale 448 exactly.
    t = np.zeros((2, 32), dtype=F32)
    t[:, 0] = 2688
    t[0, 1:8] = F32(448) * np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=F32)
    t[1, 1:8] = -t[0, 1:8]
    t[:, 16:] = rng.standard_normal((2, 16)).astype(F32)
    cases.append((t, None))
    # Blocks far below the global amax: subnormal and zero E4M3 scales (ModelOpt's degenerate path).
    d = rng.standard_normal((3, 64)).astype(F32)
    d[0, 16:32] *= F32(1e-4)
    d[1, 32:48] *= F32(3e-5)
    d[2, 48:64] *= F32(1e-9)
    d[2, 50] = 0.0
    cases.append((d, None))
    # amax override (fused siblings): larger than the matrix's own.
    cases.append((rng.standard_normal((8, 32)).astype(F32), 11.5))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4moe")
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir")
    args = ap.parse_args()
    rng = np.random.default_rng(20240611)

    codes16 = np.arange(16, dtype=np.uint8)
    codes256 = np.arange(256, dtype=np.uint8)
    dec2 = codes16.view(E2M1).astype(F32)
    dec8 = codes256.view(E4M3).astype(F32)

    x8 = encode_inputs(dec8, -13, 10, 211, rng, [449.0, 463.9, 464.0, 465.0, 480.0, 1e9, 2.0**-10, 3 * 2.0**-10])
    x2 = encode_inputs(dec2, -4, 5, 1013, rng, [6.1, 7.0, 100.0, 1e9])
    c8, c2 = e4m3_expected(x8), e2m1_expected(x2)

    path = os.path.join(args.build_dir, "ml_dtypes_ref.bin")
    with open(path, "wb") as f:
        f.write(b"FP4MLDT1")
        for dec in (dec2, dec8):
            f.write(struct.pack("<I", len(dec)) + dec.astype("<f4").tobytes())
        for x, c in ((x2, c2), (x8, c8)):
            f.write(struct.pack("<I", len(x)) + x.astype("<f4").tobytes() + c.tobytes())
        cases = quant_cases(rng)
        f.write(struct.pack("<I", len(cases)))
        for w, amax in cases:
            ws2, sf, packed = modelopt_quantize(w, amax)
            n, k = w.shape
            f.write(struct.pack("<qqff", n, k, -1.0 if amax is None else amax, ws2))
            f.write(w.astype("<f4").tobytes() + sf.tobytes() + packed.tobytes())
    print(f"wrote {path}: {len(x2)} E2M1 and {len(x8)} E4M3 encode inputs, {len(cases)} quantize cases")
    print("documented differences:" + DIFFERENCES)

    exe = os.path.join(args.build_dir, "tests", "test_quant")
    if not os.path.exists(exe):
        print(f"FAIL: {exe} not built")
        return 1
    env = dict(os.environ, FP4MOE_MLDTYPES_REF=path)
    proc = subprocess.run([exe, "--gtest_filter=MlDtypes*"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    print(proc.stdout[-20000:])
    if proc.returncode != 0 or "SKIPPED" in proc.stdout or "[  PASSED  ]" not in proc.stdout:
        print("FAIL: MlDtypes gtests did not all pass")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
