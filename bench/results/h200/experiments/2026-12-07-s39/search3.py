# Search (thirty-ninth session): packed-word layouts where register 0 sits at its bf16 bits, registers 1 and 2 are
# rotations (a funnel shift + a mask), and register 3 is ((w & M) * K) & kPair with K a sum of 1-4 powers of two,
# exact for all 256 values of its bits (brute force). Prints every layout found. Run: python3 search3.py
import itertools, random
A = [6,7,8,15,22,23,24,31]; Aset = set(A)
def landings(L, D):
    cnt, src = {}, {}
    for l in L:
        for d in D:
            p = l + d
            if p >= 32: continue
            cnt[p] = cnt.get(p, 0) + 1
            src.setdefault(p, []).append((l, d))
    return cnt, src
def check_exact(L, D, mapping):
    # brute force over all 256 values of the 8 source bits
    K = sum(1 << d for d in D)
    M_A = sum(1 << a for a in A)
    for v in range(256):
        t = 0
        for i, l in enumerate(L):
            if v >> i & 1: t |= 1 << l
        out = (t * K) & 0xFFFFFFFF & M_A
        want = 0
        for a, l in mapping.items():
            if t >> l & 1: want |= 1 << a
        if out != want: return False
    return True
def kind(s):
    P = [a - s for a in A]
    if all(0 <= p <= 31 for p in P): return 'shl' if s > 0 else 'shr'
    return 'rot'
res = []
for s1 in range(1, 32):
    for s2 in range(s1 + 1, 32):
        P1 = [(a - s1) % 32 for a in A]; P2 = [(a - s2) % 32 for a in A]
        used = Aset | set(P1) | set(P2)
        if len(used) != 24: continue
        L = sorted(set(range(32)) - used)
        cand = sorted({a - l for a in A for l in L if a - l >= 0})
        for r in range(1, 5):
            for D in itertools.combinations(cand, r):
                cnt, src = landings(L, D)
                if not all(cnt.get(a, 0) == 1 for a in A): continue
                mapping = {a: src[a][0][0] for a in A}
                if len(set(mapping.values())) != 8: continue
                if check_exact(L, D, mapping):
                    k1 = kind(s1) if kind(s1) != 'shr' else 'shr'
                    s1e = s1 if kind(s1) != 'shr' else s1
                    res.append((kind(s1), s1, kind((s2 - 32)) if kind(s2)=='rot' and kind(s2-32)!='rot' else kind(s2), s2, D, sum(1<<d for d in D), L, mapping))
print(len(res))
for x in res: print(x)
