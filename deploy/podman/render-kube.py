#!/usr/bin/env python3
"""Render deploy/k8s (kustomize) into files `podman kube play` runs, one per stage.

Podman reads neither kustomize nor every kind (4.3 plays Pods, Deployments, ConfigMaps and
PersistentVolumeClaims), so this does what the cluster would, as plainly as it can:

- the resources of kustomization.yaml, in its order; `--secrets FILE` replaces the Secrets of
  the same names (deploy/make-secrets writes FILE); `--image OLD=NEW` swaps an image;
- a Secret becomes a ConfigMap of the same name and keys, and each use of it (a volume, an
  env's secretKeyRef) the ConfigMap's;
- a Deployment becomes its replicas as Pods named `NAME` (one replica) or `NAME-0`, `NAME-1`...;
  a Job becomes one Pod named after it; the Pod's name is its name in DNS on the network it is
  played on, so the Pod of the Deployment a Service selects is named after the Service;
- a gRPC probe becomes an exec probe running `bergen health` inside the container;
- `--publish NAME=PORT,PORT...` gives each replica of Deployment NAME a host port on 127.0.0.1
  for its first port; the other container ports are left out (podman would publish them on
  every address of the host);
- Services and PodDisruptionBudgets are left out (podman has neither);
- `--prefix P` puts P before every name (Pods, ConfigMaps, volumes), so that two installations
  can run side by side on one machine (their database URLs then name the host `Ppostgres`).

It writes DIR/1-database.yaml (the database and its volume), DIR/2-migrate.yaml (the Job) and
DIR/3-server.yaml (the rest), each with every ConfigMap, to be played in that order.

    render-kube.py deploy/k8s OUT_DIR [--secrets FILE] [--image OLD=NEW]... [--publish N=P,P]
                   [--prefix P]
"""

from __future__ import annotations

import argparse
import base64
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

Doc = dict[str, Any]


def load(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def secret_as_configmap(secret: Doc) -> Doc:
    data = {k: str(v) for k, v in (secret.get("stringData") or {}).items()}
    for k, v in (secret.get("data") or {}).items():
        data[k] = base64.b64decode(v).decode("utf-8")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": secret["metadata"], "data": data}


def grpc_to_exec(probe: Doc) -> Doc:
    probe = copy.deepcopy(probe)
    grpc = probe.pop("grpc", None)
    if grpc is not None:
        command = ["bergen", "health", "--server", f"127.0.0.1:{grpc['port']}"]
        if grpc.get("service"):
            command += ["--service", grpc["service"]]
        probe["exec"] = {"command": command}
    return probe


def pod_spec(spec: Doc, images: dict[str, str], secrets: set[str], prefix: str) -> Doc:
    spec = copy.deepcopy(spec)
    for volume in spec.get("volumes", []):
        secret = volume.pop("secret", None)
        if secret is not None:
            volume["configMap"] = {"name": secret["secretName"]}
            if "defaultMode" in secret:
                volume["configMap"]["defaultMode"] = secret["defaultMode"]
        if "configMap" in volume:
            volume["configMap"]["name"] = prefix + volume["configMap"]["name"]
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]
            claim["claimName"] = prefix + claim["claimName"]
    for container in spec.get("initContainers", []) + spec["containers"]:
        container["image"] = images.get(container["image"], container["image"])
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).pop("secretKeyRef", None)
            if ref is not None:
                if ref["name"] not in secrets:
                    raise SystemExit(f"render-kube: no Secret {ref['name']!r}")
                env["valueFrom"]["configMapKeyRef"] = {**ref, "name": prefix + ref["name"]}
        # podman 4.3 publishes a containerPort on every host address unless told a hostPort:
        # only the ports given one (--publish) are kept.
        ports = [p for p in container.get("ports", []) if "hostPort" in p]
        container.pop("ports", None)
        if ports:
            container["ports"] = ports
        for name in ("readinessProbe", "livenessProbe", "startupProbe"):
            if name in container:
                container[name] = grpc_to_exec(container[name])
    return spec


def pod(name: str, labels: dict[str, str], spec: Doc) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def renamed(doc: Doc, prefix: str) -> Doc:
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
    return doc


def render(
    k8s: Path,
    secrets_file: Path | None,
    images: dict[str, str],
    publish: dict[str, list[int]],
    prefix: str = "",
) -> dict[str, list[Doc]]:
    kustomization = yaml.safe_load((k8s / "kustomization.yaml").read_text(encoding="utf-8"))
    docs = [d for r in kustomization["resources"] for d in load(k8s / r)]
    if secrets_file is not None:
        given = {d["metadata"]["name"]: d for d in load(secrets_file) if d["kind"] == "Secret"}
        docs = [given.pop(d["metadata"]["name"], d) if d["kind"] == "Secret" else d for d in docs]
        docs += given.values()
    secrets = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    configmaps = [secret_as_configmap(d) if d["kind"] == "Secret" else d for d in docs]
    configmaps = [renamed(d, prefix) for d in configmaps if d["kind"] == "ConfigMap"]
    stages: dict[str, list[Doc]] = {"1-database": [], "2-migrate": [], "3-server": []}
    for stage in stages.values():
        stage.extend(configmaps)
    for d in docs:
        kind, name = d["kind"], d["metadata"]["name"]
        labels = d["metadata"].get("labels", {})
        stage = "1-database" if labels.get("app.kubernetes.io/component") == "database" else None
        if kind == "PersistentVolumeClaim":
            stages[stage or "1-database"].append(renamed(d, prefix))
        elif kind == "Job":
            template = d["spec"]["template"]
            spec = pod_spec(template["spec"], images, secrets, prefix)
            stages["2-migrate"].append(pod(prefix + name, template["metadata"]["labels"], spec))
        elif kind == "Deployment":
            template = d["spec"]["template"]
            replicas = int(d["spec"].get("replicas", 1))
            ports = publish.get(name, [])
            if ports and len(ports) != replicas:
                raise SystemExit(f"render-kube: {name} has {replicas} replicas, {len(ports)} ports")
            for i in range(replicas):
                template_spec = copy.deepcopy(template["spec"])
                if ports:
                    first = template_spec["containers"][0]["ports"][0]
                    first["hostPort"], first["hostIP"] = ports[i], "127.0.0.1"
                spec = pod_spec(template_spec, images, secrets, prefix)
                pod_name = prefix + (name if replicas == 1 else f"{name}-{i}")
                labels = template["metadata"]["labels"]
                stages[stage or "3-server"].append(pod(pod_name, labels, spec))
        elif kind in ("Secret", "ConfigMap", "Service", "PodDisruptionBudget"):
            continue
        else:
            raise SystemExit(f"render-kube: cannot render a {kind} ({name})")
    return stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("k8s", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--secrets", type=Path)
    parser.add_argument("--image", action="append", default=[], metavar="OLD=NEW")
    parser.add_argument("--publish", action="append", default=[], metavar="NAME=PORT,PORT")
    parser.add_argument("--prefix", default="", help="put this before every name")
    args = parser.parse_args(argv)
    images = dict(i.split("=", 1) for i in args.image)
    publish = {
        n: [int(p) for p in ports.split(",")]
        for n, ports in (p.split("=", 1) for p in args.publish)
    }
    stages = render(args.k8s, args.secrets, images, publish, args.prefix)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, docs in stages.items():
        path = args.out / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
