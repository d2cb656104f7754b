#!/usr/bin/env python3
"""Times a DRA -> plugin rollback on the real 1.36 node, by hand, N runs.

Each run: the Node's allocatable nvidia.com/gpu is 0 (patched, if the plugin
of the run before left it up); the DRA-mode agent runs and pod `dholder-R`
(nvidia.com/gpu: 1, no claim) runs through DRA. T0: SIGTERM to the DRA agent,
the plugin-mode agent starts at once, pod `rearly-R` is created. The Node and
the node's ResourceSlices are polled every 100 ms; when allocatable reads 8
pod `rlate-R` is created. Recorded, from T0: allocatable 8, slices gone (the
agent leaves them on SIGTERM), rearly-R and rlate-R Running (through DRA or
the plugin) or stuck, dholder-R still Running, PodResources after. Then the
DRA agent comes back so that dholder-R's claim can be unprepared.
With --delete-slices: the node's ResourceSlices are deleted right after the
SIGTERM (what the agent's rollback is to do), before rearly-R is created.
Usage: measure-rollback.py BUILD_DIR RUNS [--delete-slices]
"""
import importlib.util, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("mh", os.path.join(HERE, "measure-handover.py"))
mh = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mh)
BUILD = sys.argv[1]
DELETE_SLICES = "--delete-slices" in sys.argv


def slices():
    got = mh.api("GET", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D" + mh.NODE)
    return len(got["items"])


def outcome(p):
    st = p["status"]
    return {"phase": st.get("phase"), "reason": st.get("reason"),
            "via": "DRA" if st.get("extendedResourceClaimStatus") else "plugin",
            "waiting": [c["state"]["waiting"] for c in st.get("containerStatuses", [])
                        if "waiting" in c.get("state", {})]}


def one(r):
    rec = {"run": r}
    node = lambda: mh.gpu(mh.api("GET", "/api/v1/nodes/" + mh.NODE))
    if node()[1] not in ("0", None):
        mh.api("PATCH", f"/api/v1/nodes/{mh.NODE}/status",
               {"status": {"allocatable": {"nvidia.com/gpu": "0"}}}, "application/merge-patch+json")
    subprocess.run([os.path.join(HERE, "run-dra-agent.sh"), BUILD], check=True)
    mh.wait("DRA driver registered", lambda: mh.registered(mh.RUN + "/agent-dra.log"), 30)
    holder, early, late = f"dholder-{r}", f"rearly-{r}", f"rlate-{r}"
    mh.api("POST", "/api/v1/namespaces/default/pods", mh.pod(holder))
    mh.wait(holder + " Running", lambda: mh.phase(holder)[0] == "Running", 60)
    rec["holder_via"] = outcome(mh.phase(holder)[1])["via"]
    dra = mh.pid("dra")
    t0 = time.time()
    os.kill(dra, 15)
    subprocess.run([os.path.join(HERE, "run-plugin-agent.sh"), BUILD], check=True)
    if DELETE_SLICES:
        mh.api("DELETE", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D" + mh.NODE)
        rec["t_slices_deleted"] = round(time.time() - t0, 2)
    mh.api("POST", "/api/v1/namespaces/default/pods", mh.pod(early))
    marks = {}
    while True:
        now = time.time() - t0
        if "alloc8" not in marks and node()[1] == "8":
            marks["alloc8"] = now
            mh.api("POST", "/api/v1/namespaces/default/pods", mh.pod(late))
        if "slices_gone" not in marks and slices() == 0:
            marks["slices_gone"] = now
        for n in (early, late):
            ph, p = mh.phase(n)
            if n + "_running" not in marks and ph == "Running":
                marks[n + "_running"] = now
            if p is not None:
                rec[n] = outcome(p)
        if ("alloc8" in marks and "slices_gone" in marks and late + "_running" in marks) or now > 90:
            break
        time.sleep(0.1)
    rec["seconds_from_sigterm"] = {k: round(v, 2) for k, v in marks.items()}
    rec["holder_after"] = mh.phase(holder)[0]
    rec["podresources_after"] = mh.podresources()
    print(mh.json.dumps(rec, indent=1), flush=True)
    # The holder's claim is unprepared by a DRA driver: bring one back for the cleanup.
    os.kill(mh.pid("plugin"), 15)
    subprocess.run([os.path.join(HERE, "run-dra-agent.sh"), BUILD], check=True)
    mh.delete_pods([holder, early, late])
    os.kill(mh.pid("dra"), 15)
    mh.wait("DRA agent exit", lambda: not mh.alive(mh.pid("dra")), 20)
    return rec


if __name__ == "__main__":
    mh.summary([one(r) for r in range(1, int(sys.argv[2]) + 1)],
               ("alloc8", "slices_gone", "rearly-X_running", "rlate-X_running"))
