#!/usr/bin/env python3
"""Writes deployments/helm/gpu-agent/README.md from the chart's values.schema.json
(each key's type and description) and values.yaml (its default), so the README
lists exactly the keys the chart takes.

  scripts/chart-readme.py           rewrite the README
  scripts/chart-readme.py --check   exit 1 (and say so) when the README is not what
                                    the schema and values make (the chart test runs it)
"""
import json
import os
import sys

import yaml

CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deployments", "helm",
                     "gpu-agent")

HEAD = """\
# gpu-agent Helm chart

<!-- Made by scripts/chart-readme.py from values.schema.json and values.yaml: edit those and
run it again; the chart test fails when this file is out of date. -->

Installs gpu-agent in one mode: `plugin` (the kubelet's device-plugin API, the default),
`static` (`nvidia.com/gpu` in the Node's capacity, for clusters without device plugins) or
`dra` (Dynamic Resource Allocation, with its DeviceClasses). It renders the objects of the
kustomize overlays under `manifests/` for the same choices (a test compares them object by
object), and takes a values file written for NVIDIA's `nvidia-device-plugin` chart (v0.17 to
v0.20) unchanged.

```sh
helm install gpu-agent deployments/helm/gpu-agent -n kube-system --set mode=plugin
helm install gpu-agent deployments/helm/gpu-agent -n kube-system -f values.yaml  # NVIDIA's values file
```

Keys NVIDIA's chart has and gpu-agent has no use for are accepted and not used; keys that
ask for something gpu-agent does not do (`mps.enabled`, `nfd.enabled`, `gdsEnabled: true`,
`sharing.mps` in a config, ...) stop the install with a message that names the key and what
to do; unknown keys are refused. See [install](../../../docs/install.md) and
[moving from NVIDIA's device plugin](../../../docs/moving-from-nvidia.md).

## Values

| key | type | default | what it does |
|---|---|---|---|
"""


def type_of(schema):
    t = schema.get("type", "any")
    types = t if isinstance(t, list) else [t]
    text = " or ".join(types)
    if "enum" in schema:
        text += ": " + ", ".join("`%s`" % json.dumps(e) if e is not None else "`null`"
                                 for e in schema["enum"] if e is not None)
    return text


def default_of(values, path):
    node = values
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return "(none)"
        node = node[key]
    text = json.dumps(node, separators=(", ", ": "))
    if len(text) > 60:
        return "see values.yaml"
    return "`%s`" % text.replace("|", "\\|")


def rows(schema, values, path):
    for key, sub in schema.get("properties", {}).items():
        here = path + [key]
        if sub.get("type") == "object" and "properties" in sub and \
                sub.get("additionalProperties") is False:
            for row in rows(sub, values, here):
                yield row
            continue
        desc = sub.get("description", "").replace("|", "\\|").replace("\n", " ")
        yield "| `%s` | %s | %s | %s |" % (".".join(here), type_of(sub), default_of(values, here),
                                          desc)


def render():
    with open(os.path.join(CHART, "values.schema.json")) as f:
        schema = json.load(f)
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    return HEAD + "\n".join(rows(schema, values, [])) + "\n"


def main():
    path = os.path.join(CHART, "README.md")
    text = render()
    if sys.argv[1:] == ["--check"]:
        try:
            with open(path) as f:
                current = f.read()
        except FileNotFoundError:
            current = ""
        if current != text:
            print("chart-readme: %s is not what values.schema.json and values.yaml make; run "
                  "scripts/chart-readme.py" % os.path.relpath(path), file=sys.stderr)
            return 1
        print("chart-readme: README.md matches values.schema.json")
        return 0
    if sys.argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    with open(path, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
