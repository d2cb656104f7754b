#!/usr/bin/env python3
"""Writes the hand-made seed inputs of every fuzz target into
tests/fuzz/<target>/corpus/seed-*, and its libFuzzer dictionary into
tests/fuzz/<target>/dict (config and CLI words from the settings table). Deterministic; run again after changing a
target's input format. Regression inputs (crash-*, slow-*, oom-*) sit in the
same folders and are not touched. The device-plugin requests are protobuf
bytes made with `protoc --encode` from src/deviceplugin/api.proto."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "tests", "fuzz")


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def write(target, name, data):
    d = os.path.join(FUZZ, target, "corpus")
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def clear_seeds(target):
    d = os.path.join(FUZZ, target, "corpus")
    if os.path.isdir(d):
        for f in os.listdir(d):
            if f.startswith("seed-"):
                os.remove(os.path.join(d, f))


TARGETS = ["config", "cli", "kubeconfig", "exec_credential", "node_json", "watch_stream",
           "api_error", "json_patch", "device_selector", "duration_quantity", "mig_minors",
           "deviceplugin_rpc", "deviceplugin_socket", "cdi_names", "log_json", "slotted_file",
           "slice_watch", "dra_claim"]
for t in TARGETS:
    clear_seeds(t)

# config: "<yaml>\0<env>\0<flags>"
for f in ["plugin.yaml", "static.yaml", "time-slicing.yaml", "mig-mixed.yaml"]:
    write("config", f, read("config/" + f))
NVIDIA = b"""version: v1
flags:
  migStrategy: "single"
  failOnInitError: true
  nvidiaDriverRoot: "/run/nvidia/driver"
  plugin:
    passDeviceSpecs: true
    deviceListStrategy:
      - envvar
      - cdi-annotations
    deviceIDStrategy: index
    containerDriverRoot: /driver-root
  gfd:
    oneshot: false
    sleepInterval: 60s
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: false
    resources:
    - name: nvidia.com/gpu
      replicas: 10
      devices: [0, 1, GPU-8d0a1b2c]
"""
write("config", "nvidia-v1.yaml", NVIDIA)
write("config", "env-and-flags",
      b"version: v1\nmode: static\nnodeName: gpu-node-1\n\0"
      b"MIG_STRATEGY=mixed\nDP_DISABLE_HEALTHCHECKS=xids,48\nDP_ENABLE_HEALTHCHECKS=13\n"
      b"GPU_AGENT_INCLUDE_DEVICES=index:0,uuid:GPU-1,pci:0x20b2,name:*A100*\n\0"
      b"resync-interval=1h30m\nmig-strategy=single\ndevices.max=2\nwatch-timeout=90s\n")
write("config", "devices",
      b"version: v1\ndevices:\n  include: [\"index:0\", \"name:*H100*\"]\n  exclude: [pci:0x233110de]\n"
      b"  max: 1\nhealth:\n  recoveryPeriod: 2m\n  ignoredXids: [13, 31]\nlog:\n  format: json\n")
write("config", "bad-typo", b"version: v1\nflags:\n  migStrategi: mixed\n")
write("config", "env-only", b"\0NODE_NAME=n1\nGPU_AGENT_MODE=static\nGPU_AGENT_DRIVER_WAIT_TIMEOUT=10m\n\0")

# cli: NUL-separated arguments
for args in [["version"], ["config", "--mig-strategy", "mixed", "--device-list-strategy", "envvar,cdi-cri"],
             ["run", "--mode", "static", "--node-name", "n1", "--proxy"],
             ["capacity", "set", "--node", "n1", "--count", "4", "--dry-run", "--proxy"],
             ["capacity", "get", "--node", "n1", "-o", "json", "--kubeconfig", "/nonexistent"],
             ["cdi", "generate", "-o", "json", "--output-file", "/dev/null"],
             ["devices", "-o", "yaml", "--include-devices", "index:0"],
             ["--help"], ["config", "--config", "/dev/null"], ["runn"],
             ["run", "--server", "https://10.0.0.1:6443", "--proxy", "http://127.0.0.1:8001"],
             ["config", "--resync-interval", "99999999999h", "--fail-on-init-error=false"]]:
    write("cli", "-".join(a.strip("-").replace("/", "_") for a in args[:3]) or "empty",
          "\0".join(args))

# kubeconfig: "<context>\0<a>\0<b>\0<c>"
KC = b"""apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUI=
    tls-server-name: kubernetes
- name: lab
  cluster:
    server: http://[fd00::1]:8001/prefix/
    insecure-skip-tls-verify: true
contexts:
- name: prod
  context: {cluster: prod, user: admin}
- name: lab
  context: {cluster: lab, user: robot}
users:
- name: admin
  user:
    client-certificate-data: aGVsbG8=
    client-key-data: d29ybGQ=
- name: robot
  user:
    tokenFile: robot.token
"""
KC2 = b"""current-context: other
clusters:
- name: extra
  cluster: {server: https://extra.example.com}
contexts:
- name: extra
  context: {cluster: extra, user: exec-user}
users:
- name: exec-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./get-token.sh
      args: [--cluster, extra]
      env: [{name: FOO, value: bar}]
"""
write("kubeconfig", "one", b"\0" + KC)
write("kubeconfig", "merged", b"extra\0" + KC + b"\0" + KC2)
write("kubeconfig", "lab-missing-middle", b"lab\0" + KC + b"\0\0" + KC2)
write("kubeconfig", "bad-base64", b"\0" + KC.replace(b"aGVsbG8=", b"AB=C"))

# exec_credential
write("exec_credential", "v1",
      b'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
      b'"status":{"token":"abc","expirationTimestamp":"2030-01-02T03:04:05Z"}}')
write("exec_credential", "offset",
      b'{"kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"2030-01-02T03:04:05.123+01:00"}}')
write("exec_credential", "cert",
      b'{"kind":"ExecCredential","status":{"clientCertificateData":"x","clientKeyData":"y"}}')

# node_json (and the watch lines, which share the parser)
NODE = (b'{"kind":"Node","apiVersion":"v1","metadata":{"name":"gpu-node-1","resourceVersion":"12345",'
        b'"labels":{"kubernetes.io/hostname":"gpu-node-1"}},"spec":{},"status":{"capacity":'
        b'{"cpu":"64","memory":"527971204Ki","nvidia.com/gpu":"8","pods":"110"},"allocatable":'
        b'{"cpu":"63","nvidia.com/gpu":"8","pods":"110"}}}')
write("node_json", "node", NODE)
write("node_json", "node-no-status", b'{"kind":"Node","metadata":{"name":"n","resourceVersion":"1"}}')
write("node_json", "list",
      b'{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"999"},"items":[' + NODE + b']}')
WATCH = [b'{"type":"ADDED","object":' + NODE + b'}',
         b'{"type":"MODIFIED","object":' + NODE.replace(b'"8"', b'"0"') + b'}',
         b'{"type":"BOOKMARK","object":{"kind":"Node","metadata":{"resourceVersion":"12400"}}}',
         b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
         b'"message":"too old resource version: 1 (12345)","reason":"Expired","code":410}}',
         b'{"type":"DELETED","object":' + NODE + b'}']
for i, w in enumerate(WATCH):
    write("node_json", "watch-%d" % i, w)
write("watch_stream", "stream", b"\x12\x34" + b"\n".join(WATCH) + b"\n")
write("watch_stream", "partial", b"\x00\x01" + WATCH[0] + b"\n\n" + WATCH[2][:30])

# api_error: two bytes of status, then the body
STATUS422 = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
             b'"the server rejected our request due to an error in our request","reason":"Invalid",'
             b'"details":{},"code":422}')
for code, body in [(422, STATUS422),
                   (403, b'{"kind":"Status","status":"Failure","message":"nodes \\"n\\" is forbidden: User '
                         b'\\"u\\" cannot patch resource \\"nodes/status\\" in API group \\"\\" at the '
                         b'cluster scope","reason":"Forbidden","code":403}'),
                   (404, b'{"kind":"Status","message":"nodes \\"n\\" not found","code":404}'),
                   (401, b"Unauthorized"), (409, b'{"message":"conflict"}'),
                   (429, b""), (503, b"<html><body>Service Unavailable</body></html>"),
                   (200, NODE), (415, b'{"message":"unsupported media type"}')]:
    write("api_error", str(code), bytes([code >> 8, code & 0xff]) + body)

# json_patch: NUL-separated tokens
for name, fields in [("gpu", [b"nvidia.com/gpu"]), ("tilde", [b"a~b/c", b"~1", b"~0~"]),
                     ("mixed", [b"status", b"capacity", b"nvidia.com/mig-1g.10gb", b"", b"x\xffy"])]:
    write("json_patch", name, b"\0".join(fields))

# device_selector: "<include lines>\0<exclude lines>\0<max>"
write("device_selector", "forms", b"index:0\nuuid:GPU-1b2c3d4e-0000-1111-2222-333344445551\n"
      b"pci:0x20b2\nname:*A100*\n3\nGPU-2b2c3d4e\n0x233110de\0name:*t4*\0\x02")
write("device_selector", "overlap", b"index:1\0name:*A100*\0")
write("device_selector", "bad", b"idx:1\nuuid:MIG-1\npci:0xZZ\nindex:-1\0\0")

# duration_quantity
for s in ["0", "250ms", "1h30m", "1.5s", "90s", "5m", "-5s", "inf", "1us", "87600h", "87601h",
          "1099511627775h1099511627775h1099511627775h", "+7", "007", "nvidia.com/gpu",
          "gpu-node-1.example.com", "requests.nvidia.com/gpu"]:
    write("duration_quantity", s.replace("/", "_").replace(".", "_")[:40], s)

# mig_minors (the full fixture, tests/fixtures/proc/mig-minors, is read as a
# seed folder by scripts/fuzz.sh, not copied here)
write("mig_minors", "bad", b"config 1\ngpu0/gi1/access\ngpu0/gi1/access 2\ngpu0/gi1/access 3\n")

# cdi_names: "<vendor>\0<class>\0<name>"
for v, c, n in [("nvidia.com", "gpu", "0"), ("gpu-agent.github.io", "gpu", "GPU-1:2"),
                ("example.com", "mig.1g", "all"), ("-bad", "gpu", "x")]:
    write("cdi_names", v + "-" + c, "\0".join([v, c, n]))

# log_json: "<message>\0<key>\0<value>..."
write("log_json", "plain", b"node capacity set\0node\0gpu-node-1\0resources\0nvidia.com/gpu=8")
write("log_json", "invalid-utf8", b"bad \xff\xfe bytes\0error\0\xc3\x28 \xe2\x82 \xf0\x90\x80\0k\0\xed\xa0\x80")
write("log_json", "valid-utf8", "caf\u00e9 \u20ac \U0001F600\0k\0\u00b5s".encode())

# slotted_file: the DRA checkpoint's file (src/base/slotted_file.h), two
# slots of one size, each a header line, its record and spaces.
def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def slot(seq, record, size):
    text = b'{"slot":{"seq":%d,"length":%d,"crc32c":"%08x"}}\n' % (seq, len(record), crc32c(record))
    text += record + b"\n"
    return text + b" " * (size - 1 - len(text)) + b"\n"


CKPT = (b'{"version":1,"claims":{"u1":{"namespace":"ns","name":"one","devices":[{"requests":["r"],'
        b'"pool":"node-a","device":"gpu-0","cdiIds":["gpu-agent.github.io/claim=u1-gpu-0"]}]}}}')
EMPTY_SLOT = b" " * 511 + b"\n"
write("slotted_file", "one-slot", slot(1, CKPT, 512) + EMPTY_SLOT)
write("slotted_file", "newest-second", slot(7, b'{"version":1,"claims":{}}', 512) + slot(8, CKPT, 512))
spoilt = bytearray(slot(3, CKPT, 512) + slot(4, CKPT, 512))
spoilt[512 + 100] ^= 0x20
write("slotted_file", "newest-spoilt", bytes(spoilt))
write("slotted_file", "cut-short", (slot(2, CKPT, 512) + EMPTY_SLOT)[:300] + b" " * 724)
write("slotted_file", "plain", CKPT)
write("slotted_file", "odd", b"{}\n")

# slice_watch: a ResourceSlice watch body, one event a line.
SLICE = ('{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":'
         '"node-a-gpu.gpu-agent.github.io-0","resourceVersion":"42"},"spec":{"driver":'
         '"gpu.gpu-agent.github.io","nodeName":"node-a","pool":{"name":"node-a","generation":3,'
         '"resourceSliceCount":1},"devices":[{"name":"gpu-0","attributes":{"uuid":{"string":'
         '"GPU-0"}},"taints":[{"key":"gpu.gpu-agent.github.io/unhealthy","effect":"NoSchedule"}]}]}}')
write("slice_watch", "added", '{"type":"ADDED","object":' + SLICE + '}\n')
write("slice_watch", "modified-deleted", '{"type":"MODIFIED","object":' + SLICE + '}\n'
      '{"type":"DELETED","object":' + SLICE + '}\n')
write("slice_watch", "bookmark", '{"type":"BOOKMARK","object":{"kind":"ResourceSlice",'
      '"metadata":{"resourceVersion":"77"}}}\n')
write("slice_watch", "gone", '{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1",'
      '"status":"Failure","message":"too old resource version: 1 (9)","reason":"Expired",'
      '"code":410}}\n')
write("slice_watch", "deep", '{"type":"ADDED","object":{"x":' + "[" * 200 + "]" * 200 + '}}\n')
write("slice_watch", "garbage", '{"type":"ADDED","object":[}\n{"type":7}\n\n')
write("slice_watch", "empty-type", '{"type":"","object":{"kind":10}}\n')

# dra_claim: <namespace>\0<name>\0<uid>\0<claim JSON>.
CLAIM = ('{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c",'
         '"namespace":"ns","uid":"u1"},"status":{"allocation":{"devices":{"results":['
         '{"request":"gpus/big","driver":"gpu.gpu-agent.github.io","pool":"node-a","device":"gpu-0"},'
         '{"request":"r","driver":"other.example.com","pool":"node-a","device":"gpu-1"}],'
         '"config":[{"source":"FromClaim","requests":["gpus"],"opaque":{"driver":'
         '"gpu.gpu-agent.github.io","parameters":{"apiVersion":"gpu.gpu-agent.github.io/v1alpha1",'
         '"kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":'
         '"Long"}}}}}]}}}}')
write("dra_claim", "allocated", "ns\0c\0u1\0" + CLAIM)
write("dra_claim", "uid-mismatch", "ns\0c\0u2\0" + CLAIM)
write("dra_claim", "path-names", "default/../../api\0../secrets\0../x\0" + CLAIM)
write("dra_claim", "deep-config", "ns\0c\0u1\0" + CLAIM.replace('"Long"', "[" * 300 + "]" * 300))
write("dra_claim", "unallocated", 'ns\0c\0u1\0{"metadata":{"uid":"u1"},"status":{}}')
write("dra_claim", "share", "ns\0c\0u1\0" + CLAIM.replace(
    '"device":"gpu-0"}', '"device":"gpu-0","shareID":"s-1","consumedCapacity":{"shares":"2"}}'))

# deviceplugin_rpc: one choice byte, then the protobuf request
PROTO = os.path.join(ROOT, "src", "deviceplugin", "api.proto")


def encode(message, text):
    return subprocess.run(["protoc", "--proto_path=" + os.path.join(ROOT, "src"),
                           "--encode=v1beta1." + message, PROTO],
                          input=text.encode(), capture_output=True, check=True).stdout


U = ["GPU-%da1b2c3-0000-1111-2222-333344445555" % g for g in range(8)]
alloc = encode("AllocateRequest",
               'container_requests { devices_ids: "%s" devices_ids: "%s" } '
               'container_requests { devices_ids: "%s" }' % (U[0], U[1], U[3]))
alloc_bad = encode("AllocateRequest",
                   'container_requests { devices_ids: "%s" devices_ids: "%s" devices_ids: "nope" }'
                   % (U[2], U[2]))
alloc_shared = encode("AllocateRequest",
                      'container_requests { devices_ids: "%s::0" devices_ids: "%s::3" }' % (U[0], U[7]))
pref = encode("PreferredAllocationRequest",
              'container_requests { %s must_include_deviceIDs: "%s" allocation_size: 4 }'
              % (" ".join('available_deviceIDs: "%s"' % u for u in U), U[6]))
pref_shared = encode("PreferredAllocationRequest",
                     'container_requests { %s allocation_size: 5 }'
                     % " ".join('available_deviceIDs: "%s::%d"' % (u, r) for u in U for r in range(4)))
prestart = encode("PreStartContainerRequest", 'devices_ids: "%s"' % U[0])
for name, choice, body in [("allocate", 0x00, alloc), ("allocate-cdi-specs", 0x30, alloc),
                           ("allocate-bad", 0x00, alloc_bad), ("allocate-shared", 0x74, alloc_shared),
                           ("preferred", 0x01, pref), ("preferred-shared", 0x05, pref_shared),
                           ("preferred-packed", 0x09, pref_shared), ("prestart", 0x02, prestart)]:
    write("deviceplugin_rpc", name, bytes([choice]) + body)
# deviceplugin_socket: the method in the low 2 bits (0 Allocate, 1 preferred,
# 2 PreStartContainer, 3 GetDevicePluginOptions), then the request; the
# server serves the replicas, so shared IDs are the ones it knows.
for name, choice, body in [("allocate", 0, alloc_shared), ("allocate-bad", 0, alloc_bad),
                           ("preferred", 1, pref_shared), ("prestart", 2, prestart),
                           ("options", 3, b""), ("not-a-message", 0, b"\x0a\xff\xff\xff\x0f")]:
    write("deviceplugin_socket", name, bytes([choice]) + body)


# Dictionaries. libFuzzer's format: name="bytes", with \\, \" and \xNN escapes.
def dict_file(target, words):
    lines = ["# libFuzzer dictionary for fuzz_%s (tests/fuzz/make_seeds.py)" % target]
    for i, w in enumerate(sorted(set(words))):
        b = w.encode("latin-1") if isinstance(w, str) else w
        esc = "".join(chr(c) if 0x20 <= c < 0x7f and c not in (0x22, 0x5c) else "\\x%02X" % c
                      for c in b)
        lines.append('kw%d="%s"' % (i, esc))
    with open(os.path.join(FUZZ, target, "dict"), "w") as f:
        f.write("\n".join(lines) + "\n")


import re
src = read("src/agent/config/config_schema.cc").decode()
keys, flags, envs, choices = set(), set(), set(), set()
for m in re.finditer(r'\{\s*"([A-Za-z.]+)",\s*"([a-z0-9-]*)",\s*"([A-Z0-9_]*)"', src):
    keys.add(m.group(1))
    if m.group(2):
        flags.add(m.group(2))
    if m.group(3):
        envs.add(m.group(3))
for m in re.finditer(r'\{((?:"[a-z0-9.-]+"(?:, )?)+)\}', src):
    choices.update(re.findall(r'"([a-z0-9.-]+)"', m.group(1)))
parts = {p for k in keys for p in k.split(".")}
YAML = [": ", "- ", "\n  ", "\n    ", "[", "]", "{", "}", ", ", '"', "'", "#", "---", "\n", "&a",
        "*a", "!!str ", "|\n", ">\n", "~", "null", "true", "false"]
JSON = ["{", "}", "[", "]", ":", ",", '"', '\\"', "\\u0000", "\\ud800", "null", "true", "false",
        "0", "-1", "1e999", '""']
NODE = ['"kind"', '"Node"', '"NodeList"', '"metadata"', '"name"', '"resourceVersion"',
        '"status"', '"capacity"', '"allocatable"', '"nvidia.com/gpu"', '"items"', '"type"',
        '"object"', '"ADDED"', '"MODIFIED"', '"DELETED"', '"BOOKMARK"', '"ERROR"', '"code"',
        '"message"', "410"]
dict_file("config", list(parts) + list(choices) + YAML + [e + "=" for e in envs] +
          [f + "=" for f in flags] + ["\0", "version: v1\n", "resources:", "replicas: ", "devices: ",
                                       "rename: ", "DP_DISABLE_HEALTHCHECKS=",
                                       "DP_ENABLE_HEALTHCHECKS=", "xids", "all", "1h30m", "250ms",
                                       "uuid:", "index:", "pci:0x", "name:*"])
dict_file("cli", ["--" + f for f in flags] + list(choices) +
          ["--config", "--help", "--help-all", "run", "devices", "config", "cdi", "generate",
           "version", "capacity", "set", "get", "remove", "--node", "--count", "--discover",
           "--resource", "--dry-run", "-o", "--output", "--format", "json", "yaml", "table", "text",
           "\0", "=", "--proxy", "true", "false"])
dict_file("kubeconfig", YAML + ["apiVersion", "kind: Config", "current-context", "clusters",
                                "cluster", "contexts", "context", "users", "user", "name",
                                "server", "certificate-authority", "certificate-authority-data",
                                "insecure-skip-tls-verify", "tls-server-name", "token",
                                "tokenFile", "client-certificate", "client-key",
                                "client-certificate-data", "client-key-data", "exec", "command",
                                "args", "env", "value", "https://", "http://", "[::1]", ":6443",
                                "/prefix", "\0", "==", "="])
dict_file("exec_credential", JSON + ['"kind"', '"ExecCredential"', '"status"', '"token"',
                                     '"expirationTimestamp"', '"clientCertificateData"',
                                     '"apiVersion"', "T", "Z", "+01:00", "-00:00", ".123456789",
                                     "2030-01-02T03:04:05Z", "9999-12-31T23:59:59Z",
                                     "0001-01-01T00:00:00Z"])
dict_file("node_json", JSON + NODE)
dict_file("watch_stream", JSON + NODE + ["\n"])
dict_file("api_error", JSON + ['"kind"', '"Status"', '"message"', '"code"', '"reason"',
                               '"details"', "<html>"])
dict_file("json_patch", ["~", "~0", "~1", "/", "\0", "\\", '"', "\xff", "\xc3\xa9"])
dict_file("device_selector", ["uuid:", "index:", "pci:", "name:", "GPU-", "MIG-", "0x", "*", "?",
                              "[", "[!", "]", "\\", "\n", "\0", "A100", "H100", "T4", "0x20b2",
                              "0x20b210de", "1b2c3d4e-0000-1111-2222-333344445551"])
dict_file("duration_quantity", ["ns", "us", "\xc2\xb5s", "ms", "s", "m", "h", ".", "+", "-", "inf",
                                "0", "9223372036854775807", "87600h", "/", "nvidia.com",
                                "kubernetes.io", "requests."])
dict_file("mig_minors", ["gpu", "/gi", "/ci", "/access", "config", "monitor", " ", "\t", "\n", "0",
                         "4294967295", "-1"])
dict_file("cdi_names", [".", "-", "_", ":", "/", "=", "\0", "nvidia.com", "gpu", "all", "0"])
dict_file("log_json", ["\0", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\xa0\x80",
                       "\xc0\x80", "\xf4\x90\x80\x80", "\xff", '"', "\\", "\n", "\t", "\x7f"])
dict_file("deviceplugin_rpc", ["\x0a", "\x12", "\x18", "GPU-0a1b2c3-0000-1111-2222-333344445555",
                               "::0", "::3", "\x00", "\x01", "\x02", "\x05", "\x30"])
dict_file("deviceplugin_socket", ["\x0a", "\x12", "\x18", "\x00", "\x01", "\x02", "\x03",
                                  "GPU-0a1b2c3-0000-1111-2222-333344445555", "::0", "::3"])
dict_file("slotted_file", ['{"slot":{"seq":', ',"length":', ',"crc32c":"', '"}}', "\n", " ",
                           '{"version"', "00000000", "ffffffff", "18446744073709551615"])
dict_file("slice_watch", ['{"type":"', 'ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR',
                          '"object":', '"metadata":', '"name":"', '"resourceVersion":"', '"code":410',
                          "\n", "[", "{", '"'])
dict_file("dra_claim", ["\0", '"results":[', '"request":"', '"driver":"gpu.gpu-agent.github.io"',
                        '"pool":"node-a"', '"device":"', '"config":[', '"opaque":', '"parameters":',
                        '"GpuConfig"', '"TimeSlicing"', '"interval":"', "Default", "Short", "Medium",
                        "Long", '"uid":"', "/", "..", '"shareID":"', '"consumedCapacity":',
                        '"shares":"'])

# metrics_request: two bytes that seed the chunk sizes, then what a client of
# the metrics endpoint sends (agent/run/http_request_reader).
clear_seeds("metrics_request")
for name, sent in [
        ("kubelet-probe", b"GET /healthz HTTP/1.1\r\nHost: 10.244.1.7:9400\r\n"
                          b"User-Agent: kube-probe/1.34\r\nAccept: */*\r\nConnection: close\r\n\r\n"),
        ("prometheus", b"GET /metrics HTTP/1.1\r\nHost: 10.244.1.7:9400\r\nUser-Agent: Prometheus/3.1.0\r\n"
                       b"Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;"
                       b"version=0.0.4;q=0.3,*/*;q=0.1\r\nAccept-Encoding: gzip\r\n"
                       b"X-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n"),
        ("pipelined", b"GET /metrics HTTP/1.1\r\n\r\nHEAD /healthz HTTP/1.1\r\n\r\n"
                      b"GET /readyz?x=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /nope HTTP/1.1\r\n\r\n"),
        ("bare-lf", b"\nGET http://h:9400/readyz HTTP/1.1\nconnection: CLOSE\n\n"),
        ("body", b"GET /metrics HTTP/1.1\r\nContent-Length: 100000000000\r\n\r\nxxxx"),
        ("chunked", b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("obs-fold", b"GET /metrics HTTP/1.1\r\nX: a\r\n b\r\n\r\n"),
        ("post", b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
        ("http2", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        ("headers", b"GET /metrics HTTP/1.1\r\n" + b"X-Flood: " + b"a" * 200 + b"\r\n" * 1 +
                    b"X: y\r\n" * 20),
]:
    write("metrics_request", name, b"\x12\x34" + sent)
dict_file("metrics_request", ["GET ", "HEAD ", "POST ", " HTTP/1.1", " HTTP/1.0", " HTTP/2.0",
                              "\r\n", "\n", "\r", "\r\n\r\n", ": ", ":", " ", "\t", "/metrics",
                              "/healthz", "/readyz", "http://", "https://", "?", "*", "Host:",
                              "Connection:", "close", "keep-alive", "Content-Length:",
                              "Transfer-Encoding:", "chunked", "0", "100000000000", ",", "\0",
                              "\x7f", "\xff"])
print("seeds and dictionaries written under", FUZZ)
