import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cells = {}
for d in rows:
    k = (d["test"], d["progress"], d["variant"])
    cells.setdefault(k, []).append(d)
def med(xs):
    xs = [x for x in xs if x is not None]
    return (st.median(xs), min(xs), max(xs), len(xs)) if xs else None
def fmt(m, p=3):
    return "–" if m is None else f"{m[0]:.{p}g} [{m[1]:.{p}g}–{m[2]:.{p}g}]"
print("| test | progress | variant | n | p50 µs / MB/s | CPU µs/op (both processes) |")
print("| --- | --- | --- | ---: | ---: | ---: |")
out = {}
for k in sorted(cells):
    ds = cells[k]
    key = "p50_us" if k[0].endswith("lat") else "mb_per_s"
    m = med([d.get(key) for d in ds])
    c = med([(d.get("cpu_client_us_per_op") or 0) + (d.get("cpu_server_us_per_op") or 0) for d in ds])
    out[k] = m
    print(f"| {k[0]} | {k[1]} | {k[2]} | {len(ds)} | {fmt(m)} | {fmt(c)} |")
print()
print("| test | progress | uring ÷ base (median) | rounds uring better |")
print("| --- | --- | ---: | ---: |")
for (t, p) in sorted({(k[0], k[1]) for k in cells}):
    b, u = out.get((t, p, "base")), out.get((t, p, "uring"))
    if not b or not u: continue
    lower = t.endswith("lat")
    bb = {d["round"]: d.get("p50_us" if lower else "mb_per_s") for d in cells[(t, p, "base")]}
    uu = {d["round"]: d.get("p50_us" if lower else "mb_per_s") for d in cells[(t, p, "uring")]}
    wins = sum(1 for r in bb if r in uu and ((uu[r] < bb[r]) if lower else (uu[r] > bb[r])))
    both = sum(1 for r in bb if r in uu)
    print(f"| {t} | {p} | {u[0]/b[0]:.3f} | {wins} of {both} |")
