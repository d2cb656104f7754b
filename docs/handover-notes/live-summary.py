#!/usr/bin/env python3
"""Medians over the runs measure-live.py printed (files given), with the agent's own log
times (seconds from the relabel): DRA registered, slices published, allocatable patched,
the device plugin unregistered; and back: slices deleted, the DRA plugin unregistered.
Usage: live-summary.py FILE..."""
import json, sys

recs = []
for f in sys.argv[1:]:
    txt, i, dec = open(f).read(), 0, json.JSONDecoder()
    while (j := txt.find("{\n", i)) >= 0:
        o, e = dec.raw_decode(txt[j:]); recs.append(o); i = j + e


def logt(r, text, after=0.0):
    for l in r["agent_log_from_T0"]:
        t = float(l[:8])
        if t >= after and text in l:
            return t
    return None


rows = []
for r in recs:
    R = r["run"]; m1 = r["1_from_relabel"]; t2 = r["T2_relabel_plugin_from_T0"]; t3 = r["T3_late_delete_from_T0"]
    back = lambda text, base: None if logt(r, text, base) is None else round(logt(r, text, base) - base, 2)
    rows.append({
        "run": R,
        "log: allocatable 0 patched": logt(r, "allocatable of the device plugin's resources is 0"),
        "log: device plugin unregistered": logt(r, "device plugin unregistered"),
        "log: DRA registered": logt(r, "registered with the kubelet as a DRA driver"),
        "log: publishing ResourceSlices": logt(r, "publishing ResourceSlices"),
        "poll: allocatable 0": m1.get("alloc=0"),
        "poll: slices with 6 devices": m1.get("slices_devices=6"),
        f"early: end": m1.get(f"early-{R}_end"), "early: phase": r[f"early-{R}"]["phase"],
        f"late: Running": m1.get(f"late-{R}_end"), "late: device": r[f"late-{R}"]["claim_devices"],
        "held GPUs in slices": len(r["held_in_slices"]), "holders after": r["holders_after_1"],
        "holders deleted -> slices 8": r["2_from_holder_delete"].get("slices_devices=8"),
        "back: log slices deleted": back("ResourceSlices deleted", t2),
        "back: poll slices 0": r["3_from_relabel_plugin"].get("slices_devices=0"),
        "back: allocatable 7": r["3_from_relabel_plugin"].get("alloc=7"),
        "late deleted -> log claims unprepared, DRA plugin unregistered": back("every DRA claim on this node is unprepared", t3),
        "late deleted -> allocatable 8": r["4_from_late_delete"].get("alloc=8"),
    })
for row in rows:
    print(json.dumps(row))
print()
for k in rows[0]:
    vals = [x[k] for x in rows]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        s = sorted(vals)
        print(f"{k}: runs={len(s)} values={s} median={s[len(s) // 2]}")
    else:
        print(f"{k}: {vals}")
