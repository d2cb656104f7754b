#!/usr/bin/env python3
"""Times the LIVE handover on the real 1.36 node: ONE agent (run-live-agent.sh, already
running, plugin mode, node label nvidia.com/device-plugin.config absent or `plugin`) moved by
relabelling the node. Each run R:
 1. pods holder-a-R, holder-b-R (nvidia.com/gpu: 1) run through the device plugin; the
    kubelet's PodResources List gives their GPUs. T0: the label set to `dra`; pod early-R
    (nvidia.com/gpu: 1, no claim) created at once; late-R once allocatable reads 0. Polled
    every 100 ms through the API server: allocatable 0, the node's slices (first seen, device
    count), early/late Running, the GpuAgentMode condition's changes. Which device each DRA
    pod's claim got, and the GPUs the slices hold, against the holders' UUIDs.
 2. holders deleted (T1): time until the slices hold 8 devices; early-R deleted.
 3. T2: the label set to `plugin` with late-R running (its claim prepared): slices gone,
    allocatable 7; T3: late-R deleted: allocatable 8.
The agent's log lines from T0 on (seconds from T0) are printed, health-check noise left out.
Usage: measure-live.py BUILD_DIR RUNS
"""
import json, os, ssl, subprocess, sys, time, urllib.request

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
API = "https://127.0.0.1:6470"
CA = os.path.expanduser("~/peers/modern/pki/ca.crt")
HDR = {"Authorization": "Bearer modern-admin-token"}
CTX = ssl.create_default_context(cafile=CA)
NODE = "gpu-node-1"
RUN = "/tmp/modern"
LOG = RUN + "/agent-live.log"
LABEL = "nvidia.com/device-plugin.config"
DRIVER = "gpu.gpu-agent.github.io"


def api(method, path, body=None, ctype="application/json"):
    req = urllib.request.Request(API + path, method=method, headers=dict(HDR, **{"Content-Type": ctype}),
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, context=CTX, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def node():
    return api("GET", "/api/v1/nodes/" + NODE)


def alloc(n):
    return n["status"].get("allocatable", {}).get("nvidia.com/gpu")


def mode_cond(n):
    for c in n["status"].get("conditions", []):
        if c["type"] == "GpuAgentMode":
            return f'{c["status"]} {c.get("reason")}: {c.get("message")}'
    return None


def relabel(v):
    api("PATCH", "/api/v1/nodes/" + NODE, {"metadata": {"labels": {LABEL: v}}}, "application/merge-patch+json")


def slices():
    l = api("GET", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName=" + NODE)
    devs = []
    for s in l["items"]:
        if s["spec"]["driver"] != DRIVER:
            continue
        for d in s["spec"].get("devices", []):
            uuid = next((v.get("string") for k, v in d.get("attributes", {}).items() if k.endswith("uuid")), None)
            devs.append((d["name"], uuid))
    return len([s for s in l["items"] if s["spec"]["driver"] == DRIVER]), sorted(devs)


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "docker.io/local/busybox:1",
                                     "command": ["sh", "-c", "ls /dev/nvidia*; sleep 3600"],
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def create(name):
    api("POST", "/api/v1/namespaces/default/pods", pod(name))


def phase(name):
    p = api("GET", "/api/v1/namespaces/default/pods/" + name)
    return (p or {}).get("status", {}).get("phase"), p


def claim_devices(p):
    st = (p or {}).get("status", {}).get("extendedResourceClaimStatus")
    if not st:
        return None
    c = api("GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/" + st["resourceClaimName"])
    res = (((c or {}).get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
    return [r["device"] for r in res]


def wait(what, cond, timeout):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise SystemExit("timed out waiting for " + what)


def podresources():
    out = subprocess.run([os.path.join(BUILD, "podresources-list"),
                          RUN + "/kubelet/pod-resources/kubelet.sock"], capture_output=True, text=True)
    return (out.stdout + out.stderr).strip()


def delete(names):
    for n in names:
        api("DELETE", "/api/v1/namespaces/default/pods/" + n)


def gone(names):
    return all(phase(n)[1] is None for n in names)


def stamp(t):
    return time.strftime("%H:%M:%S", time.gmtime(t)) + ".%03d" % (t % 1 * 1000)


def log_from(t0, start_off):
    out = []
    with open(LOG) as f:
        f.seek(start_off)
        for line in f:
            if "GPU health check off" in line or "GPU health check" in line and "not supported" in line:
                continue
            ts = line[:24]
            try:
                t = time.mktime(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + float("0" + ts[19:23])
                out.append("%+7.2f %s" % (t - t0, line.rstrip()))
            except ValueError:
                out.append("        " + line.rstrip())
    return out


def poll(t0, marks, rec, until, timeout, extra=None):
    """Polls every 100 ms until until(marks) or timeout; records first times."""
    last_cond = None
    while True:
        now = time.time() - t0
        n = node()
        a = alloc(n)
        if marks.get("alloc_last") != a:
            marks.setdefault("alloc=" + str(a), round(now, 2))
            marks["alloc_last"] = a
        c = mode_cond(n)
        if c != last_cond:
            rec.setdefault("condition_changes", []).append([round(now, 2), c])
            last_cond = c
        ns, devs = slices()
        key = "slices_devices=%d" % len(devs)
        if key not in marks:
            marks[key] = round(now, 2)
            rec.setdefault("slice_changes", []).append([round(now, 2), ns, devs])
        if extra:
            extra(now, marks, rec)
        if until(marks) or now > timeout:
            return
        time.sleep(0.1)


def one(r):
    rec = {"run": r}
    ha, hb, early, late = f"holder-a-{r}", f"holder-b-{r}", f"early-{r}", f"late-{r}"
    wait("allocatable 8", lambda: alloc(node()) == "8", 60)
    create(ha); create(hb)
    wait("holders Running", lambda: phase(ha)[0] == "Running" and phase(hb)[0] == "Running", 90)
    pr = podresources()
    rec["podresources_before"] = pr
    held = [l.split()[-1] for l in pr.splitlines() if "holder-" in l and "nvidia.com/gpu" in l]
    rec["held_uuids"] = held
    off = os.path.getsize(LOG)
    # ---- 1: plugin -> dra
    t0 = time.time(); relabel("dra"); create(early)
    rec["T0_relabel_dra"] = stamp(t0)
    m1 = {}

    def pods1(now, marks, rec):
        if "alloc=0" in marks and "late_created" not in marks:
            create(late); marks["late_created"] = round(now, 2)
        for n in (early, late):
            if n + "_end" in marks or (n == late and "late_created" not in marks):
                continue
            ph, p = phase(n)
            if ph in ("Running", "Failed", "Succeeded"):
                marks[n + "_end"] = round(now, 2)
                rec[n] = {"phase": ph, "reason": p["status"].get("reason"), "message": p["status"].get("message"),
                          "claim_devices": claim_devices(p)}
    poll(t0, m1, rec, lambda m: early + "_end" in m and late + "_end" in m and any(
        k.startswith("slices_devices=") and k != "slices_devices=0" for k in m), 200, pods1)
    time.sleep(1)
    n = node()
    rec["1_from_relabel"] = {k: v for k, v in m1.items() if k != "alloc_last"}
    ns, devs = slices()
    rec["slices_after_1"] = devs
    rec["held_in_slices"] = [d for d in devs if d[1] in held]
    rec["holders_after_1"] = [phase(ha)[0], phase(hb)[0]]
    rec["podresources_after_1"] = podresources()
    rec["node_condition_after_1"] = mode_cond(n)
    # ---- 2: holders end
    t1 = time.time(); delete([ha, hb])
    m2 = {}
    poll(t1, m2, rec.setdefault("2", {}), lambda m: "slices_devices=8" in m, 120)
    rec["2_from_holder_delete"] = {k: v for k, v in m2.items() if k != "alloc_last"}
    wait("holders gone", lambda: gone([ha, hb]), 60)
    delete([early]); wait("early gone", lambda: gone([early]), 60)
    time.sleep(2)
    rec["condition_before_3"] = mode_cond(node())
    # ---- 3: dra -> plugin, late still running
    t2 = time.time(); relabel("plugin")
    m3 = {}
    poll(t2, m3, rec.setdefault("3", {}), lambda m: "slices_devices=0" in m and "alloc=7" in m, 120)
    rec["3_from_relabel_plugin"] = {k: v for k, v in m3.items() if k != "alloc_last"}
    rec["podresources_in_3"] = podresources()
    t3 = time.time(); delete([late])
    m4 = {}
    poll(t3, m4, rec.setdefault("4", {}), lambda m: "alloc=8" in m, 120)
    rec["4_from_late_delete"] = {k: v for k, v in m4.items() if k != "alloc_last"}
    wait("late gone", lambda: gone([late]), 60)
    time.sleep(3)
    rec["condition_end"] = mode_cond(node())
    rec["T2_relabel_plugin_from_T0"] = round(t2 - t0, 2)
    rec["T3_late_delete_from_T0"] = round(t3 - t0, 2)
    rec["agent_log_from_T0"] = log_from(t0, off)
    print(json.dumps(rec, indent=1), flush=True)
    return rec


def summary(recs):
    for sec in ("1_from_relabel", "2_from_holder_delete", "3_from_relabel_plugin", "4_from_late_delete"):
        norm = lambda x: {k.replace("-%d_" % x["run"], "-R_"): v for k, v in x.get(sec, {}).items()}
        for k in sorted({k for x in recs for k in norm(x)}):
            vals = sorted(norm(x)[k] for x in recs if k in norm(x))
            print(f"{sec} {k}: runs={len(vals)} values={vals} median={vals[len(vals) // 2]}", flush=True)


if __name__ == "__main__":
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    recs = [one(r) for r in range(first, first + int(sys.argv[2]))]
    summary(recs)
