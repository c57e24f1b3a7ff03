"""The Kubernetes bundle: deploy/k8s/ plus rules/ and prompts/ as ConfigMaps, checked by validate.py."""

from __future__ import annotations

import copy
import shutil
import sys

import pytest
import yaml

from tests.deploy import support as h

sys.path.insert(0, str(h.DEPLOY / "k8s"))
import render  # noqa: E402
import validate  # noqa: E402


@pytest.fixture(scope="module")
def bundle() -> list[dict]:
    return render.render(optional=["model-volume"])


@pytest.fixture
def tmp_root(tmp_path):
    """A project root with the real prompts/ and a small rules/ of our own."""
    shutil.copytree(h.ROOT / "prompts", tmp_path / "prompts", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "rules" / "packs").mkdir(parents=True)
    (tmp_path / "rules" / "pack.yaml").write_text("version: 1\n")
    (tmp_path / "rules" / "packs" / "security.yaml").write_text("rules: []\n")
    return tmp_path


def _find(docs, kind, name):
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_the_repository_bundle_has_no_problem(bundle):
    assert validate.check(bundle) == []


def test_the_bundle_has_every_part(bundle):
    kinds = {(d["kind"], d["metadata"]["name"]) for d in bundle}
    assert {
        ("Deployment", "triage-api"),
        ("Deployment", "triage-worker"),
        ("Service", "triage-api"),
        ("ConfigMap", "triage-rules"),
        ("ConfigMap", "triage-prompts"),
        ("CronJob", "triage-recalibrate"),
        ("CronJob", "triage-audit"),
        ("ScaledObject", "triage-worker"),
    } <= kinds


def test_configmap_items_put_every_file_back_at_its_path(tmp_root):
    docs = render.render(root=tmp_root)
    worker = _find(docs, "Deployment", "triage-worker")
    volumes = {v["name"]: v for v in worker["spec"]["template"]["spec"]["volumes"]}
    for volume, folder in (("rules", "rules"), ("prompts", "prompts")):
        items = volumes[volume]["configMap"]["items"]
        expected = sorted(
            p.relative_to(tmp_root / folder).as_posix() for p in (tmp_root / folder).rglob("*") if p.is_file()
        )
        assert sorted(i["path"] for i in items) == expected
        data = _find(docs, "ConfigMap", f"triage-{folder}")["data"]
        for item in items:
            assert data[item["key"]] == (tmp_root / folder / item["path"]).read_text()
    assert {"key": "packs__security.yaml", "path": "packs/security.yaml"} in volumes["rules"]["configMap"]["items"]


def test_a_prompt_change_changes_the_pod_checksum(tmp_root):
    def checksum():
        docs = render.render(root=tmp_root)
        meta = _find(docs, "Deployment", "triage-worker")["spec"]["template"]["metadata"]
        return meta["annotations"][render.CHECKSUM_ANNOTATION]

    before = checksum()
    (tmp_root / "prompts" / "context.md").write_text("changed\n")
    assert checksum() != before


def test_images_are_substituted(tmp_root):
    docs = render.render(
        root=tmp_root,
        image="reg.example/triage:1.2.3",
        bundled_image="reg.example/triage:1.2.3-bundled",
        jobs_image="reg.example/triage-jobs:1.2.3-bundled",
    )
    images = {
        c["image"]
        for d in docs
        if render.pod_spec(d)
        for c in render.pod_spec(d)["containers"]
        if "triage" in c["image"]
    }
    assert images == {
        "reg.example/triage:1.2.3",
        "reg.example/triage:1.2.3-bundled",
        "reg.example/triage-jobs:1.2.3-bundled",
    }


def test_offline_jobs_run_the_jobs_image_and_serving_never_does(tmp_root):
    # recalibrate and audit import scikit-learn/scipy/matplotlib, which the serving images lack
    for doc in render.render(root=tmp_root):
        spec = render.pod_spec(doc)
        if spec is None:
            continue
        for container in spec["containers"]:
            if "triage" not in container["image"]:
                continue
            jobs = doc["kind"] == "CronJob"
            assert (container["image"] == render.JOBS_IMAGE) is jobs, (doc["metadata"]["name"], container["image"])


def test_missing_rules_folder_is_a_clear_error(tmp_path):
    shutil.copytree(h.ROOT / "prompts", tmp_path / "prompts")
    with pytest.raises(render.RenderError, match="rules"):
        render.render(root=tmp_path)


def test_rendered_yaml_round_trips(tmp_root):
    docs = render.render(root=tmp_root)
    assert list(yaml.safe_load_all(render.dump(docs))) == docs


# ------------------------------------------------------------------ the validator catches mistakes


def _mutated(docs, mutate):
    docs = copy.deepcopy(docs)
    mutate(docs)
    return validate.check(docs)


def _worker(docs):
    return _find(docs, "Deployment", "triage-worker")["spec"]["template"]["spec"]["containers"][0]


MUTATIONS = {
    "wrong stream": (
        lambda d: _find(d, "ScaledObject", "triage-worker")["spec"]["triggers"][0]["metadata"].update(stream="tickets"),
        "stream",
    ),
    "group lag": (
        lambda d: _find(d, "ScaledObject", "triage-worker")["spec"]["triggers"][0]["metadata"].update(
            consumerGroup="workers", lagCount="20"
        ),
        "NULL",
    ),
    "unquoted length": (
        lambda d: _find(d, "ScaledObject", "triage-worker")["spec"]["triggers"][0]["metadata"].update(streamLength=20),
        "quoted integer",
    ),
    "scale target": (
        lambda d: _find(d, "ScaledObject", "triage-worker")["spec"]["scaleTargetRef"].update(name="triage-workers"),
        "scaleTargetRef",
    ),
    "setting typo": (
        lambda d: _find(d, "ConfigMap", "triage-env")["data"].update(TRIAGE_L2_TIMEOUT="30"),
        "TRIAGE_L2_TIMEOUT is not a setting",
    ),
    "threads": (lambda d: _worker(d)["env"][0].update(value="4"), "TRIAGE_N_THREADS"),
    "sub-command": (lambda d: _worker(d).update(args=["wroker"]), "invalid choice"),
    "secret key": (
        lambda d: _find(d, "Deployment", "triage-api")["spec"]["template"]["spec"]["containers"][0]["env"][0][
            "valueFrom"
        ]["secretKeyRef"].update(key="ingest"),
        "secretKeyRef",
    ),
    "latest": (lambda d: _worker(d).update(image="triage:latest"), "explicit tag"),
    "root fs": (lambda d: _worker(d)["securityContext"].update(readOnlyRootFilesystem=False), "readOnlyRootFilesystem"),
    "probe port": (
        lambda d: _find(d, "Deployment", "triage-api")["spec"]["template"]["spec"]["containers"][0]["readinessProbe"][
            "httpGet"
        ].update(port="web"),
        "port",
    ),
    "selector": (
        lambda d: _find(d, "Service", "triage-api")["spec"]["selector"].update({"app.kubernetes.io/name": "api"}),
        "matches no pod",
    ),
    "pvc": (lambda d: d.remove(_find(d, "PersistentVolumeClaim", "triage-calibration")), "triage-calibration"),
    "namespace": (lambda d: _find(d, "CronJob", "triage-audit")["metadata"].update(namespace="default"), "namespace"),
    "two autoscalers": (
        lambda d: d.append(
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "triage-worker", "namespace": "triage"},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "triage-worker"}},
            }
        ),
        "autoscalers",
    ),
}


@pytest.mark.parametrize("case", sorted(MUTATIONS))
def test_the_validator_catches(case, tmp_root):
    mutate, expected = MUTATIONS[case]
    docs = render.render(root=tmp_root)
    assert validate.check(docs) == []
    problems = _mutated(docs, mutate)
    assert any(expected in p for p in problems), problems
