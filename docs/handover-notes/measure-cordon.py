#!/usr/bin/env python3
"""The relabel to dra with the node cordoned across it: cordon; T0 relabel to `dra`; pod
`cearly-R` (nvidia.com/gpu: 1) created at once; when the agent's allocatable 0 is seen, uncordon;
time until cearly-R runs (and through which path); then back to `plugin`. No holders.
Usage: measure-cordon.py BUILD_DIR RUNS"""
import json, sys, time
sys.argv = sys.argv[:1] + ["build"] + sys.argv[2:] if len(sys.argv) > 1 else sys.argv
import importlib.util, os
spec = importlib.util.spec_from_file_location("ml", os.path.join(os.path.dirname(os.path.abspath(__file__)), "measure-live.py"))
ml = importlib.util.module_from_spec(spec); spec.loader.exec_module(ml)


def cordon(v):
    ml.api("PATCH", "/api/v1/nodes/" + ml.NODE, {"spec": {"unschedulable": v}}, "application/merge-patch+json")


def one(r):
    name = f"cearly-{r}"; rec = {"run": r}
    ml.wait("allocatable 8", lambda: ml.alloc(ml.node()) == "8", 60)
    cordon(True)
    t0 = time.time(); ml.relabel("dra"); ml.create(name)
    rec["created"] = round(time.time() - t0, 2)
    ml.wait("allocatable 0", lambda: ml.alloc(ml.node()) == "0", 30)
    cordon(False); rec["uncordoned"] = round(time.time() - t0, 2)
    ph = ml.wait(name + " ends", lambda: (lambda p: p if p[0] in ("Running", "Failed") else None)(ml.phase(name)), 120)
    rec["end"] = round(time.time() - t0, 2); rec["phase"] = ph[0]
    rec["reason"] = ph[1]["status"].get("reason"); rec["claim_devices"] = ml.claim_devices(ph[1])
    print(json.dumps(rec), flush=True)
    ml.delete([name]); ml.wait("gone", lambda: ml.gone([name]), 60)
    ml.relabel("plugin"); time.sleep(2)
    return rec


if __name__ == "__main__":
    recs = [one(r) for r in range(1, int(sys.argv[2]) + 1)]
    s = sorted(x["end"] for x in recs)
    print(f"cearly Running: runs={len(s)} values={s} median={s[len(s) // 2]}")
