#!/usr/bin/env python3
"""Watches the node's ResourceSlices through the API server and prints each event with the
local receive time: type, resourceVersion, generation, pool generation, device count, the
managedFields' managers. Run beside measure-live.py to tell the agent's own writes from
anyone else's. Usage: live2-slice-watch.py  (until killed)"""
import json, os, ssl, time, urllib.request

API = "https://127.0.0.1:6470"
CTX = ssl.create_default_context(cafile=os.path.expanduser("~/peers/modern/pki/ca.crt"))
url = API + "/apis/resource.k8s.io/v1/resourceslices?watch=1&fieldSelector=spec.nodeName=gpu-node-1"
req = urllib.request.Request(url, headers={"Authorization": "Bearer modern-admin-token"})
with urllib.request.urlopen(req, context=CTX) as r:
    for line in r:
        e = json.loads(line); o = e["object"]; t = time.time()
        mf = [(m.get("manager"), m.get("operation"), m.get("time")) for m in o["metadata"].get("managedFields", [])]
        print(time.strftime("%H:%M:%S", time.gmtime(t)) + ".%03d" % (t % 1 * 1000), e["type"],
              o["metadata"].get("resourceVersion"), "gen", o["metadata"].get("generation"),
              "pool.gen", o["spec"]["pool"]["generation"], "devices", len(o["spec"].get("devices", [])), mf, flush=True)
