"""Render the Kubernetes bundle: the manifests in deploy/k8s/ plus ConfigMaps built from rules/ and prompts/.

    python deploy/k8s/render.py | kubectl apply -f -
    python deploy/k8s/render.py --image registry.example/triage:0.1.0 \
        --bundled-image registry.example/triage:0.1.0-bundled \
        --jobs-image registry.example/triage-jobs:0.1.0-bundled --out build/triage.yaml
    python deploy/k8s/render.py --optional model-volume   # also optional/model-volume.yaml

Why a script and not kustomize: ConfigMap keys cannot contain "/", and prompts/ has sub-folders
(prompts/judge/). Each file becomes a flat key ("judge__rubric.yaml") and every pod volume that
mounts the ConfigMap gets the `items` that put it back at its path. A checksum of rules and
prompts is stamped on each pod template, so a change rolls the pods (the service also reloads
rules on SIGHUP, but a rollout is what makes every replica agree).
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import sys
from collections.abc import Iterable
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NAMESPACE = "triage"
BASE_IMAGE = "triage:0.1.0"
BUNDLED_IMAGE = "triage:0.1.0-bundled"
# The offline jobs (recalibrate, audit) need scikit-learn, scipy and matplotlib: the Dockerfile's
# `offline-bundled` target, i.e. the jobs' stack plus the model.
JOBS_IMAGE = "triage-jobs:0.1.0-bundled"
CONFIGMAP_SOURCES = {"triage-rules": "rules", "triage-prompts": "prompts"}
CHECKSUM_ANNOTATION = "triage/config-checksum"
# etcd refuses objects over ~1.5 MB; stay well under it.
CONFIGMAP_MAX_BYTES = 900 * 1024
SKIP_NAMES = {"__pycache__", ".DS_Store"}


class RenderError(RuntimeError):
    """The bundle cannot be rendered; the message says which file or folder."""


def flat_key(relative: str) -> str:
    return relative.replace("/", "__")


def source_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise RenderError(f"{folder} is not a folder: the ConfigMap needs it")
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not (set(p.relative_to(folder).parts) & SKIP_NAMES) and not p.name.endswith(".pyc")
    )
    if not files:
        raise RenderError(f"{folder} has no files")
    return files


def configmap(name: str, folder: Path) -> tuple[dict, list[dict]]:
    """The ConfigMap for `folder` and the volume `items` that restore its layout."""
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    items: list[dict] = []
    total = 0
    for path in source_files(folder):
        relative = path.relative_to(folder).as_posix()
        key = flat_key(relative)
        if key in data or key in binary:
            raise RenderError(f"{folder}: two files map to the ConfigMap key {key!r}")
        raw = path.read_bytes()
        total += len(raw)
        try:
            data[key] = raw.decode("utf-8")
        except UnicodeDecodeError:
            binary[key] = base64.b64encode(raw).decode("ascii")
        items.append({"key": key, "path": relative})
    if total > CONFIGMAP_MAX_BYTES:
        raise RenderError(f"{folder}: {total} bytes is too large for one ConfigMap")
    manifest: dict = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/part-of": "triage"}},
        "data": data,
    }
    if binary:
        manifest["binaryData"] = binary
    return manifest, items


def load_documents(paths: Iterable[Path]) -> list[dict]:
    docs: list[dict] = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise RenderError(f"{path}: a document is not a mapping")
            docs.append(doc)
    return docs


def pod_spec(doc: dict) -> dict | None:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return spec.get("template", {}).get("spec")
    if kind == "CronJob":
        return spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
    return None


def pod_template(doc: dict) -> dict | None:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return spec.get("template")
    if kind == "CronJob":
        return spec.get("jobTemplate", {}).get("spec", {}).get("template")
    return None


def render(
    *,
    root: Path = ROOT,
    image: str = BASE_IMAGE,
    bundled_image: str = BUNDLED_IMAGE,
    jobs_image: str = JOBS_IMAGE,
    optional: Iterable[str] = (),
) -> list[dict]:
    manifests = sorted(HERE.glob("*.yaml"))
    manifests += [HERE / "optional" / f"{name}.yaml" for name in optional]
    for path in manifests:
        if not path.is_file():
            raise RenderError(f"{path} does not exist")
    docs = load_documents(manifests)
    maps: list[dict] = []
    items: dict[str, list[dict]] = {}
    digest = hashlib.sha256()
    for name, folder in CONFIGMAP_SOURCES.items():
        manifest, its = configmap(name, root / folder)
        maps.append(manifest)
        items[name] = its
        digest.update(yaml.safe_dump(manifest, sort_keys=True).encode())
    checksum = digest.hexdigest()[:16]
    for doc in docs:
        spec = pod_spec(doc)
        if spec is None:
            continue
        for volume in spec.get("volumes", []):
            source = volume.get("configMap")
            if source and source.get("name") in items:
                source["items"] = copy.deepcopy(items[source["name"]])
        template = pod_template(doc)
        template.setdefault("metadata", {}).setdefault("annotations", {})[CHECKSUM_ANNOTATION] = checksum
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            if container.get("image") == BASE_IMAGE:
                container["image"] = image
            elif container.get("image") == BUNDLED_IMAGE:
                container["image"] = bundled_image
            elif container.get("image") == JOBS_IMAGE:
                container["image"] = jobs_image
    # Namespace first, then the ConfigMaps the pods mount, then the rest in file order.
    namespaces = [d for d in docs if d.get("kind") == "Namespace"]
    others = [d for d in docs if d.get("kind") != "Namespace"]
    return namespaces + maps + others


def dump(docs: list[dict]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=BASE_IMAGE, help="runtime image (API)")
    parser.add_argument("--bundled-image", default=BUNDLED_IMAGE, help="image with the model baked in (workers)")
    parser.add_argument(
        "--jobs-image", default=JOBS_IMAGE, help="offline jobs' image with the model baked in (recalibrate, audit)"
    )
    parser.add_argument(
        "--optional",
        action="append",
        default=[],
        choices=sorted(p.stem for p in (HERE / "optional").glob("*.yaml")),
        help="also include deploy/k8s/optional/NAME.yaml",
    )
    parser.add_argument("--out", default="-", help="file to write (default stdout)")
    args = parser.parse_args(argv)
    try:
        text = dump(
            render(
                image=args.image, bundled_image=args.bundled_image, jobs_image=args.jobs_image, optional=args.optional
            )
        )
    except (RenderError, yaml.YAMLError) as error:
        print(f"render: {error}", file=sys.stderr)
        return 1
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
