"""Check the rendered Kubernetes bundle against the service itself, beyond what a schema can see.

    python deploy/k8s/validate.py            # render (deploy/k8s/render.py) and check; exit 1 on a problem

kubernetes-validate (deploy/check.sh) checks each built-in object against the API schema; it
has no schema for KEDA's ScaledObject and no idea what triage needs. This checks:
- every object: apiVersion, kind, metadata.name, namespace `triage`; names unique per kind;
- the ScaledObject (schema-light): its required fields, a target Deployment that exists, and
  a redis-streams trigger on the service's own stream (service.store.keys) in streamLength mode;
- pods: selectors match template labels; every ConfigMap, Secret, PVC and volume they use is
  defined (the Secret `triage-secrets` is created by hand, docs/deploy.md); probes name
  declared ports; arguments parse with the real `triage` command line (service.cli);
  requests and limits set; non-root, read-only root, no privilege escalation; a worker's CPU
  limit equals its TRIAGE_N_THREADS; no `latest` images;
- settings: every TRIAGE_* variable set anywhere is one service.settings reads (a typo would be
  silently ignored by the service);
- Services select pods that exist and target ports those pods declare; at most one autoscaler
  per Deployment.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import render  # noqa: E402  (deploy/k8s/render.py, beside this file)

NAMESPACE = "triage"
EXTERNAL_SECRETS = {"triage-secrets": {"ingest-tokens", "operator-tokens", "callback-secret"}}
NOT_SETTINGS = {"REDIS_URL", "MPLCONFIGDIR", "HOME"}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _settings_env() -> set[str]:
    from service.settings import ENV

    return set(ENV.values())


def _keys():
    from service.store import WORKER_GROUP, Keys

    return Keys, WORKER_GROUP


def _parse_triage_args(args: list[str]) -> str | None:
    """None if `triage ARGS` parses, else argparse's complaint."""
    import contextlib
    import io

    from service.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            build_parser().parse_args(args)
    except SystemExit:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        return lines[-1] if lines else "does not parse"
    return None


def _name(doc: dict) -> str:
    return f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"


def _containers(spec: dict) -> list[dict]:
    return list(spec.get("containers", [])) + list(spec.get("initContainers", []))


def _env_names(container: dict) -> set[str]:
    return {e.get("name", "") for e in container.get("env", [])}


def _cpu(value: object) -> float:
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def check_metadata(docs: list[dict]) -> list[str]:
    problems = []
    seen = Counter()
    for doc in docs:
        meta = doc.get("metadata") or {}
        for field in ("apiVersion", "kind"):
            if not doc.get(field):
                problems.append(f"{_name(doc)}: {field} missing")
        name = meta.get("name", "")
        if not name or not DNS_LABEL.match(name):
            problems.append(f"{_name(doc)}: metadata.name {name!r} is not a DNS label")
        if doc.get("kind") != "Namespace" and meta.get("namespace") != NAMESPACE:
            problems.append(f"{_name(doc)}: namespace is {meta.get('namespace')!r}, expected {NAMESPACE!r}")
        seen[(doc.get("kind"), name)] += 1
    problems += [f"{kind}/{name}: defined {n} times" for (kind, name), n in seen.items() if n > 1]
    return problems


def check_scaled_objects(docs: list[dict], prefix: str) -> list[str]:
    keys_cls, group = _keys()
    stream = keys_cls(prefix).stream
    deployments = {d["metadata"]["name"] for d in docs if d.get("kind") == "Deployment"}
    redis_services = {
        d["metadata"]["name"] for d in docs if d.get("kind") == "Service" and "redis" in d["metadata"]["name"]
    }
    problems = []
    for doc in docs:
        if doc.get("kind") != "ScaledObject":
            continue
        name = _name(doc)
        if doc.get("apiVersion") != "keda.sh/v1alpha1":
            problems.append(f"{name}: apiVersion must be keda.sh/v1alpha1")
        spec = doc.get("spec") or {}
        target = (spec.get("scaleTargetRef") or {}).get("name")
        if target not in deployments:
            problems.append(f"{name}: scaleTargetRef.name {target!r} is not a Deployment here")
        low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high):
            problems.append(f"{name}: need 0 <= minReplicaCount <= maxReplicaCount")
        triggers = spec.get("triggers") or []
        if not triggers:
            problems.append(f"{name}: no triggers")
        for trigger in triggers:
            meta = trigger.get("metadata") or {}
            if trigger.get("type") != "redis-streams":
                problems.append(f"{name}: trigger type {trigger.get('type')!r}, expected redis-streams")
                continue
            if meta.get("stream") != stream:
                problems.append(f"{name}: stream {meta.get('stream')!r}, the service writes {stream!r}")
            # Workers XDEL finished entries, so XLEN is the outstanding work, while the group's
            # lag turns NULL (read as 0 by KEDA) once entries finish out of order: see keda.yaml.
            if "consumerGroup" in meta or "lagCount" in meta:
                problems.append(
                    f"{name}: scale on streamLength without consumerGroup/lagCount "
                    f"(group {group!r} lag is NULL after out-of-order XDELs)"
                )
            if "streamLength" not in meta:
                problems.append(f"{name}: streamLength missing (scale on outstanding work)")
            for field in ("streamLength", "activationStreamLength"):
                if field in meta and not (isinstance(meta[field], str) and meta[field].isdigit()):
                    problems.append(f"{name}: {field} must be a quoted integer")
            address = meta.get("address", "")
            host = address.split(":")[0].split(".")[0]
            if not address or host not in redis_services:
                problems.append(f"{name}: address {address!r} is not the Redis Service")
    return problems


def check_autoscalers(docs: list[dict]) -> list[str]:
    targets = Counter()
    for doc in docs:
        if doc.get("kind") == "ScaledObject":
            targets[(doc["spec"].get("scaleTargetRef") or {}).get("name")] += 1
        elif doc.get("kind") == "HorizontalPodAutoscaler":
            targets[(doc["spec"].get("scaleTargetRef") or {}).get("name")] += 1
    return [f"Deployment/{t}: {n} autoscalers (KEDA and an HPA fight); keep one" for t, n in targets.items() if n > 1]


def check_pods(docs: list[dict], settings_env: set[str]) -> list[str]:
    configmaps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    claims = {d["metadata"]["name"] for d in docs if d.get("kind") == "PersistentVolumeClaim"}
    problems = []
    for doc in docs:
        spec = render.pod_spec(doc)
        if spec is None:
            continue
        name = _name(doc)
        template = render.pod_template(doc) or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if doc.get("kind") in ("Deployment", "StatefulSet"):
            selector = ((doc.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                problems.append(f"{name}: selector {selector} does not match template labels")
        pod_security = spec.get("securityContext") or {}
        if not pod_security.get("runAsNonRoot"):
            problems.append(f"{name}: pod securityContext.runAsNonRoot is not true")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for claim_template in (doc.get("spec") or {}).get("volumeClaimTemplates", []):
            volumes[claim_template["metadata"]["name"]] = {"name": claim_template["metadata"]["name"]}
        for volume in volumes.values():
            if "configMap" in volume and volume["configMap"].get("name") not in configmaps:
                problems.append(
                    f"{name}: volume {volume['name']} uses ConfigMap {volume['configMap'].get('name')!r}, not defined"
                )
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and claim not in claims:
                problems.append(f"{name}: volume {volume['name']} uses PVC {claim!r}, not defined")
        for container in _containers(spec):
            cname = f"{name} container {container.get('name')}"
            problems += _check_container(cname, container, volumes, configmaps, settings_env)
    return problems


def _check_container(cname: str, container: dict, volumes: dict, configmaps: dict, settings_env: set[str]) -> list[str]:
    problems = []
    image = container.get("image", "")
    if not image or image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]:
        problems.append(f"{cname}: image {image!r} must carry an explicit tag")
    for mount in container.get("volumeMounts", []):
        if mount.get("name") not in volumes:
            problems.append(f"{cname}: volumeMount {mount.get('name')!r} has no volume")
    env_values: dict[str, str] = {}
    for source in container.get("envFrom", []):
        ref = (source.get("configMapRef") or {}).get("name")
        if ref is not None:
            if ref not in configmaps:
                problems.append(f"{cname}: envFrom ConfigMap {ref!r} not defined")
            else:
                env_values.update(configmaps[ref].get("data") or {})
        if "secretRef" in source:
            problems.append(f"{cname}: envFrom a whole Secret hides which keys are used")
    for entry in container.get("env", []):
        env_values[entry["name"]] = entry.get("value", "")
        secret = (entry.get("valueFrom") or {}).get("secretKeyRef")
        if secret:
            known = EXTERNAL_SECRETS.get(secret.get("name"))
            if known is None or secret.get("key") not in known:
                problems.append(
                    f"{cname}: secretKeyRef {secret.get('name')}/{secret.get('key')} is not a documented Secret key"
                )
    for variable in env_values:
        if variable.startswith("TRIAGE_") and variable not in settings_env:
            problems.append(f"{cname}: {variable} is not a setting (service/settings.py ENV)")
    resources = container.get("resources") or {}
    for part in ("requests", "limits"):
        if "memory" not in (resources.get(part) or {}):
            problems.append(f"{cname}: resources.{part}.memory missing")
    if "cpu" not in (resources.get("requests") or {}):
        problems.append(f"{cname}: resources.requests.cpu missing")
    security = container.get("securityContext") or {}
    if security.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{cname}: allowPrivilegeEscalation must be false")
    if security.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{cname}: readOnlyRootFilesystem must be true")
    if "ALL" not in ((security.get("capabilities") or {}).get("drop") or []):
        problems.append(f"{cname}: capabilities must drop ALL")
    ports = {p.get("name") for p in container.get("ports", [])} | {
        p.get("containerPort") for p in container.get("ports", [])
    }
    for probe_name in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = container.get(probe_name) or {}
        for kind in ("httpGet", "tcpSocket"):
            if kind in probe and probe[kind].get("port") not in ports:
                problems.append(f"{cname}: {probe_name} port {probe[kind].get('port')!r} is not declared")
    if image.split("/")[-1].startswith("triage:"):
        problems += _check_triage_container(cname, container, env_values)
    return problems


def _check_triage_container(cname: str, container: dict, env_values: dict) -> list[str]:
    problems = []
    args = [str(a) for a in container.get("args", [])]
    if container.get("command"):
        problems.append(f"{cname}: keep the image's entrypoint (`triage`); pass args only")
    complaint = _parse_triage_args(args) if args else "no args: say which sub-command"
    if complaint:
        problems.append(f"{cname}: `triage {' '.join(args)}`: {complaint}")
    if args[:1] == ["worker"]:
        limit = ((container.get("resources") or {}).get("limits") or {}).get("cpu")
        threads = env_values.get("TRIAGE_N_THREADS")
        if limit is None or threads is None or _cpu(limit) != float(threads):
            problems.append(
                f"{cname}: TRIAGE_N_THREADS ({threads}) must equal the CPU limit "
                f"({limit}); os.cpu_count() in a container sees the whole node"
            )
    if args[:1] == ["serve"]:
        for variable in ("TRIAGE_INGEST_TOKENS", "TRIAGE_OPERATOR_TOKENS"):
            if variable not in env_values:
                problems.append(f"{cname}: {variable} not set (`triage serve` refuses to start)")
    return problems


def check_services(docs: list[dict]) -> list[str]:
    pods = []
    for doc in docs:
        spec = render.pod_spec(doc)
        if spec is not None and doc.get("kind") in ("Deployment", "StatefulSet"):
            labels = ((render.pod_template(doc) or {}).get("metadata") or {}).get("labels") or {}
            ports = {p.get("name") for c in spec.get("containers", []) for p in c.get("ports", [])}
            ports |= {p.get("containerPort") for c in spec.get("containers", []) for p in c.get("ports", [])}
            pods.append((labels, ports))
    problems = []
    for doc in docs:
        if doc.get("kind") != "Service":
            continue
        selector = (doc.get("spec") or {}).get("selector") or {}
        matched = [ports for labels, ports in pods if selector and all(labels.get(k) == v for k, v in selector.items())]
        if not matched:
            problems.append(f"{_name(doc)}: selector {selector} matches no pod template")
            continue
        for port in doc["spec"].get("ports", []):
            target = port.get("targetPort", port.get("port"))
            if not any(target in ports for ports in matched):
                problems.append(f"{_name(doc)}: targetPort {target!r} is not a port of its pods")
    return problems


def check(docs: list[dict]) -> list[str]:
    env = next(
        (
            d.get("data") or {}
            for d in docs
            if d.get("kind") == "ConfigMap" and d["metadata"].get("name") == "triage-env"
        ),
        {},
    )
    prefix = env.get("TRIAGE_REDIS_PREFIX", "triage")
    problems = check_metadata(docs)
    problems += check_scaled_objects(docs, prefix)
    problems += check_autoscalers(docs)
    problems += check_pods(docs, _settings_env())
    problems += check_services(docs)
    return problems


def main(argv: Iterable[str] | None = None) -> int:
    try:
        docs = render.render(optional=["model-volume"])
    except render.RenderError as error:
        print(f"validate: {error}")
        return 1
    problems = check(docs)
    for problem in problems:
        print(f"validate: {problem}")
    kinds = Counter(d.get("kind") for d in docs)
    print(
        f"validate: {len(docs)} objects ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), "
        f"{len(problems)} problem(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
