#!/usr/bin/env python3
"""Times a plugin -> DRA handover on the real 1.36 node, by hand, N runs.

Each run: plugin-mode agent (docs/handover-notes/run-plugin-agent.sh) until the Node shows
nvidia.com/gpu 8; pod `holder-R` asks nvidia.com/gpu: 1 and runs; the
kubelet's PodResources List is read. T0: SIGTERM to the plugin agent (it
unregisters: the kubelet's ListAndWatch stream ends), a DRA-mode agent starts
at once (docs/handover-notes/run-dra-agent.sh), pod `early-R` (nvidia.com/gpu: 1, no claim)
is created right away. The Node is polled every 100 ms: when allocatable
nvidia.com/gpu reaches 0, pod `late-R` is created. Recorded, from T0: plugin
exited, allocatable 0, capacity 0, early-R and late-R Running (and whether
through the DRA claim), holder-R still Running, PodResources after.
With --patch-allocatable: as soon as the plugin agent has exited, the Node's
status.allocatable nvidia.com/gpu is patched to 0 (what an operator or the
agent can do instead of waiting for the kubelet's next status update), and
only then is early-R created.
With --dra-first: the DRA-mode agent starts BEFORE the SIGTERM, and T0 waits
until the kubelet has registered it (its log says so): pods that reach the
kubelet right after T0 find the DRA driver there.
Usage: measure-handover.py BUILD_DIR RUNS [--no-capacity-wait] [--patch-allocatable] [--dra-first]
"""
import json, os, ssl, subprocess, sys, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
WAIT_CAPACITY = "--no-capacity-wait" not in sys.argv
PATCH = "--patch-allocatable" in sys.argv
DRA_FIRST = "--dra-first" in sys.argv
API = "https://127.0.0.1:6470"
CA = os.path.expanduser("~/peers/modern/pki/ca.crt")
HDR = {"Authorization": "Bearer modern-admin-token", "Content-Type": "application/json"}
CTX = ssl.create_default_context(cafile=CA)
NODE = "gpu-node-1"
RUN = "/tmp/modern"


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


def gpu(node):
    st = node["status"]
    return st.get("capacity", {}).get("nvidia.com/gpu"), st.get("allocatable", {}).get("nvidia.com/gpu")


def pod(name, gpus=1):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "docker.io/local/busybox:1",
                                     "command": ["sh", "-c", "ls /dev/nvidia*; sleep 3600"],
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def phase(name):
    p = api("GET", "/api/v1/namespaces/default/pods/" + name)
    return (p or {}).get("status", {}).get("phase"), p


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


def registered(log):
    # The DRA agent's log says the kubelet took its registration.
    return os.path.exists(log) and "registered with the kubelet as a DRA driver" in open(log).read()


def pid(name):
    with open(f"{RUN}/agent-{name}.pid") as f:
        return int(f.read())


def alive(p):
    # A zombie (exited, not yet reaped by init, whose child it became) counts as gone.
    try:
        with open(f"/proc/{p}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def delete_pods(names):
    for n in names:
        api("DELETE", "/api/v1/namespaces/default/pods/" + n)
    wait("pods gone", lambda: all(phase(n)[1] is None for n in names), 120)


def one(r):
    rec = {"run": r}
    subprocess.run([os.path.join(HERE, "run-plugin-agent.sh"), BUILD], check=True)
    wait("nvidia.com/gpu 8 on the Node", lambda: gpu(api("GET", "/api/v1/nodes/" + NODE)) == ("8", "8"), 60)
    holder, early, late = f"holder-{r}", f"early-{r}", f"late-{r}"
    api("POST", "/api/v1/namespaces/default/pods", pod(holder))
    wait(holder + " Running", lambda: phase(holder)[0] == "Running", 60)
    rec["podresources_before"] = podresources()
    plugin = pid("plugin")
    if DRA_FIRST:
        subprocess.run([os.path.join(HERE, "run-dra-agent.sh"), BUILD], check=True)
        wait("DRA driver registered", lambda: registered(RUN + "/agent-dra.log"), 30)
    t0 = time.time()
    os.kill(plugin, 15)
    rec["t0"] = time.strftime("%H:%M:%S", time.gmtime(t0)) + ".%03d" % (t0 % 1 * 1000)
    if not DRA_FIRST:
        subprocess.run([os.path.join(HERE, "run-dra-agent.sh"), BUILD], check=True)
    if PATCH:
        wait("plugin agent exit", lambda: not alive(plugin), 10)
        api("PATCH", f"/api/v1/nodes/{NODE}/status", {"status": {"allocatable": {"nvidia.com/gpu": "0"}}},
            "application/merge-patch+json")
        rec["t_patched"] = round(time.time() - t0, 2)
    api("POST", "/api/v1/namespaces/default/pods", pod(early))
    rec["t_early_created"] = round(time.time() - t0, 2)
    marks = {}
    while True:
        now = time.time() - t0
        if "plugin_exit" not in marks and not alive(plugin):
            marks["plugin_exit"] = now
        cap, alloc = gpu(api("GET", "/api/v1/nodes/" + NODE))
        if "alloc0" not in marks and alloc in ("0", None):
            marks["alloc0"] = now
            api("POST", "/api/v1/namespaces/default/pods", pod(late))
        if "cap0" not in marks and cap in ("0", None):
            marks["cap0"] = now
        for n in (early, late):
            if n + "_end" in marks:
                continue
            ph, p = phase(n)
            if ph in ("Running", "Failed", "Succeeded"):
                marks[n + "_end"] = now
                st = p["status"]
                rec[n] = {"phase": ph, "reason": st.get("reason"), "message": st.get("message"),
                          "extendedResourceClaimStatus": st.get("extendedResourceClaimStatus")}
        done = ("alloc0" in marks and early + "_end" in marks and late + "_end" in marks
                and ("cap0" in marks or not WAIT_CAPACITY))
        if done or now > 400:
            break
        time.sleep(0.1)
    rec["seconds_from_sigterm"] = {k: round(v, 2) for k, v in marks.items()}
    rec["holder_after"] = phase(holder)[0]
    rec["podresources_after"] = podresources()
    print(json.dumps(rec, indent=1), flush=True)
    delete_pods([holder, early, late])
    os.kill(pid("dra"), 15)
    wait("DRA agent exit", lambda: not alive(pid("dra")), 20)
    return rec


def summary(recs, keys):
    for key in keys:
        vals = sorted(x["seconds_from_sigterm"].get(key.replace("X", str(x["run"]))) for x in recs
                      if key.replace("X", str(x["run"])) in x["seconds_from_sigterm"])
        if vals:
            print(f"{key}: runs={len(vals)} values={vals} median={vals[len(vals) // 2]}", flush=True)


if __name__ == "__main__":
    summary([one(r) for r in range(1, int(sys.argv[2]) + 1)],
            ("plugin_exit", "alloc0", "cap0", "early-X_end", "late-X_end"))
