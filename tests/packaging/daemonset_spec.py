#!/usr/bin/env python3
# What a rendered DaemonSet runs, as files a shell can use: the first
# container's args (shell-quoted, one line, each "$(NAME)" expanded as the
# kubelet does from the container's env, the downward API's status.podIP
# being POD_IP), its literal env (NAME=value, shell-quoted), and its mounts,
# one a line: "host HOSTPATH MOUNTPATH ro|rw" for a hostPath, "file
# MOUNTPATH/KEY" for each key of a ConfigMap volume, whose text goes to
# OUTDIR/cm-KEY.
#   daemonset_spec.py RENDERED.yaml OUTDIR [POD_IP]   (POD_IP: 127.0.0.1)
import re, shlex, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = [d for d in docs if d["kind"] == "DaemonSet"]
cms = [d for d in docs if d["kind"] == "ConfigMap"]
assert len(ds) == 1, "one DaemonSet"
pod = ds[0]["spec"]["template"]["spec"]
c = pod["containers"][0]
out = sys.argv[2]
pod_ip = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
fields = {"status.podIP": pod_ip, "spec.nodeName": "node-1"}
env = {}
for e in c.get("env", []):
    if "value" in e:
        env[e["name"]] = str(e["value"])
    elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") in fields:
        env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]


def expand(arg):
    # "$$" is a "$"; "$(NAME)" of a name the env lacks stays as written.
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), arg)


with open(out + "/args", "w") as f:
    f.write(" ".join(shlex.quote(expand(a)) for a in c.get("args", [])))
with open(out + "/env", "w") as f:
    for e in c.get("env", []):
        if "value" in e:
            f.write(shlex.quote(e["name"] + "=" + str(e["value"])) + " ")
volumes = {v["name"]: v for v in pod.get("volumes", [])}
with open(out + "/mounts", "w") as f:
    for m in c.get("volumeMounts", []):
        v = volumes[m["name"]]
        if "hostPath" in v:
            f.write("host %s %s %s\n" % (v["hostPath"]["path"], m["mountPath"], "ro" if m.get("readOnly") else "rw"))
        elif "configMap" in v:
            for cm in cms:
                if cm["metadata"]["name"] == v["configMap"]["name"]:
                    for k, text in cm["data"].items():
                        f.write("file %s/%s\n" % (m["mountPath"], k))
                        with open(out + "/cm-" + k, "w") as t:
                            t.write(text)
