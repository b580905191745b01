"""The test control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
KWOK built from the Go module proxy (``tests/cluster/go.mod``) and run as processes on
127.0.0.1, with no container runtime. The Kueue manager, Karpenter's KWOK provider and NVIDIA's
KAI Scheduler (its own module, ``tests/cluster/kai/go.mod``) are started on demand by the tests
that need them.

    python tests/cluster/controlplane.py build          # or scripts/control-plane build
    python tests/cluster/controlplane.py up DIR [--admission-plugins A,B]
    python tests/cluster/controlplane.py down DIR

``build`` compiles every component (then the KAI Scheduler's, unless ``--no-kai``) into a cache
directory keyed by the pinned versions (``$GPUPLAN_CONTROL_PLANE_CACHE``, else
``$XDG_CACHE_HOME/gpuplan/control-plane``, else ``~/.cache/gpuplan/control-plane``), never into
the repository; a finished build is reused.
``up`` starts the processes, installs the pinned upstream CRDs (``crds.json``, read from the
Go module cache), writes ``DIR/kubeconfig``, puts ``kubectl`` beside it and prints
``kubeconfig: DIR/kubeconfig`` once the API server is ready; ``down`` stops every process
``up`` started. Only the standard library and ``cryptography`` (the test extra) are used."""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
KUBERNETES_VERSION = "v1.36.3"  # k8s.io/kubernetes in go.mod; the staging modules at v0.36.3

# the version stamp `--version` prints (k8s.io/component-base/version, as hack/lib/version.sh sets it)
_K8S_STAMP = [
    f"-X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSION}",
    "-X k8s.io/component-base/version.gitMajor=1",
    "-X k8s.io/component-base/version.gitMinor=36",
    "-X k8s.io/component-base/version.gitTreeState=clean",
    "-X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z",
    f"-X k8s.io/client-go/pkg/version.gitVersion={KUBERNETES_VERSION}",
    "-X k8s.io/client-go/pkg/version.gitMajor=1",
    "-X k8s.io/client-go/pkg/version.gitMinor=36",
    "-X k8s.io/client-go/pkg/version.gitTreeState=clean",
]
# name -> (Go package, ldflags)
COMPONENTS: dict[str, tuple[str, list[str]]] = {
    "etcd": ("./cmd/etcd", []),
    "kube-apiserver": ("k8s.io/kubernetes/cmd/kube-apiserver", _K8S_STAMP),
    "kube-controller-manager": ("k8s.io/kubernetes/cmd/kube-controller-manager", _K8S_STAMP),
    "kube-scheduler": ("k8s.io/kubernetes/cmd/kube-scheduler", _K8S_STAMP),
    "kubectl": ("k8s.io/kubernetes/cmd/kubectl", _K8S_STAMP),
    "kwok": ("sigs.k8s.io/kwok/cmd/kwok", []),
    "kueue": ("sigs.k8s.io/kueue/cmd/kueue", []),
    "karpenter-kwok": ("sigs.k8s.io/karpenter/kwok", []),
}
CORE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

# NVIDIA's KAI Scheduler (github.com/NVIDIA/KAI-scheduler v0.20.1), built from a module of its own
# (kai/go.mod): KAI requires k8s.io/kubernetes v1.34.1 and its staging modules at v0.34, which one
# module graph with the Kubernetes 1.36 components above would raise to v0.36. Its binaries have their
# own cache directory and key (kai/go.mod, kai/go.sum, these packages, the Go version), so a KAI
# change never rebuilds the core and the core tests never wait for KAI. Started on demand by
# tests/e2e/kai.py. name -> (Go package, ldflags)
KAI_MODULE_DIR = HERE / "kai"
KAI_VERSION = "v0.20.1"
KAI_COMPONENTS: dict[str, tuple[str, list[str]]] = {
    "kai-scheduler": ("github.com/NVIDIA/KAI-scheduler/cmd/scheduler", []),
    "kai-binder": ("github.com/NVIDIA/KAI-scheduler/cmd/binder", []),
    "kai-podgrouper": ("github.com/NVIDIA/KAI-scheduler/cmd/podgrouper", []),
}

ADMIN_TOKEN = "gpuplan-test-admin"
# the scheduler acts as itself, as on a real cluster (kubeadm's scheduler.conf: user system:kube-scheduler,
# bound by the API server's bootstrap RBAC, kubernetes v1.36.3
# plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go): admission policies see its user
SCHEDULER_TOKEN = "gpuplan-test-scheduler"


class ControlPlaneError(RuntimeError):
    pass


# --- build -----------------------------------------------------------------------------------


def cache_root() -> Path:
    env = os.environ.get("GPUPLAN_CONTROL_PLANE_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "gpuplan" / "control-plane" if xdg else Path.home() / ".cache" / "gpuplan" / "control-plane"


def go_binary() -> str:
    go = shutil.which("go")
    if go is None:
        raise ControlPlaneError("Go is not installed: the test control plane is built from tests/cluster/go.mod "
                                "with Go >= 1.26 (https://go.dev/doc/install, or Debian's golang package)")
    return go


def build_key() -> str:
    """The pinned versions and sources: go.mod, go.sum, the module's own Go files, this file's
    ldflags and the Go version. A change of any gives a new cache directory."""
    h = hashlib.sha256()
    for p in sorted([HERE / "go.mod", HERE / "go.sum", *HERE.glob("cmd/**/*.go")]):
        h.update(p.relative_to(HERE).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(json.dumps(COMPONENTS, sort_keys=True).encode())
    out = subprocess.run([go_binary(), "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout
    h.update(out.strip().encode())
    return h.hexdigest()[:16]


def bin_dir() -> Path:
    return cache_root() / build_key() / "bin"


def kai_build_key() -> str:
    """The KAI group's key: kai/go.mod, kai/go.sum, KAI_COMPONENTS and the Go version."""
    h = hashlib.sha256()
    for p in (KAI_MODULE_DIR / "go.mod", KAI_MODULE_DIR / "go.sum"):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(json.dumps(KAI_COMPONENTS, sort_keys=True).encode())
    out = subprocess.run([go_binary(), "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout
    h.update(out.strip().encode())
    return h.hexdigest()[:16]


def kai_bin_dir() -> Path:
    return cache_root() / f"kai-{kai_build_key()}" / "bin"


def kai_built() -> Path | None:
    d = kai_bin_dir()
    return d if all((d / c).is_file() for c in KAI_COMPONENTS) else None


# KWOK's own stages (sigs.k8s.io/kwok kustomize/stage/): nodes initialised and kept Ready with
# heartbeats, pods created, Running and Ready, Job pods completed, deleted pods removed
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat/node-heartbeat.yaml",
    "kustomize/stage/pod/general/pod-create.yaml",
    "kustomize/stage/pod/general/pod-init-container-running.yaml",
    "kustomize/stage/pod/general/pod-init-container-completed.yaml",
    "kustomize/stage/pod/general/pod-ready.yaml",
    "kustomize/stage/pod/general/pod-complete.yaml",
    "kustomize/stage/pod/general/pod-delete.yaml",
)
STAGES_FILE = "kwok-stages.yaml"


def built() -> Path | None:
    d = bin_dir()
    return d if all((d / c).is_file() for c in (*COMPONENTS, STAGES_FILE)) else None


def module_dir(module: str, env: dict[str, str] | None = None, cwd: Path = HERE) -> Path:
    """Where the Go module cache holds ``module`` at the version go.mod (of ``cwd``) pins."""
    r = subprocess.run([go_binary(), "list", "-m", "-f", "{{.Dir}}", module], cwd=cwd, capture_output=True,
                       text=True, env=env or {**os.environ, "GOFLAGS": "-mod=mod"})
    if r.returncode != 0 or not r.stdout.strip():
        raise ControlPlaneError(f"cannot find {module} in the Go module cache: {r.stderr.strip()}")
    return Path(r.stdout.strip())


def _go_build(d: Path, module: Path, components: dict[str, tuple[str, list[str]]], names: tuple[str, ...],
              log) -> None:
    go = go_binary()
    d.mkdir(parents=True, exist_ok=True)
    # the module graph exactly as go.mod and go.sum pin it; no VCS stamp (the module is not a release)
    env = {**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false"}
    for i, name in enumerate(names, 1):
        target = d / name
        if target.is_file():
            log(f"[{i}/{len(names)}] {name}: cached")
            continue
        pkg, ldflags = components[name]
        start = time.monotonic()
        tmp = d / f".{name}.tmp"
        cmd = [go, "build", "-trimpath", "-o", str(tmp), "-ldflags", " ".join(["-s", "-w", *ldflags]), pkg]
        r = subprocess.run(cmd, cwd=module, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise ControlPlaneError(f"building {name} ({pkg}) failed:\n{r.stderr[-4000:]}")
        tmp.replace(target)
        log(f"[{i}/{len(names)}] {name}: built in {time.monotonic() - start:.0f} s")


def build(components: tuple[str, ...] = tuple(COMPONENTS), log=print) -> Path:
    """Build each component (a progress line each) into the cache; reuse finished ones."""
    d = bin_dir()
    env = {**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false"}
    total = time.monotonic()
    _go_build(d, HERE, COMPONENTS, components, log)
    if not (d / STAGES_FILE).is_file():
        kwok = module_dir("sigs.k8s.io/kwok", env)
        text = "".join((kwok / f).read_text() if (kwok / f).read_text().startswith("---") else
                       "---\n" + (kwok / f).read_text() for f in KWOK_STAGES)
        (d / f".{STAGES_FILE}.tmp").write_text(text)
        (d / f".{STAGES_FILE}.tmp").replace(d / STAGES_FILE)
    log(f"control plane binaries in {d} ({time.monotonic() - total:.0f} s)")
    return d


def build_kai(log=print) -> Path:
    """Build the KAI Scheduler's components from kai/go.mod into their own cache directory."""
    d = kai_bin_dir()
    total = time.monotonic()
    _go_build(d, KAI_MODULE_DIR, KAI_COMPONENTS, tuple(KAI_COMPONENTS), log)
    log(f"KAI Scheduler {KAI_VERSION} binaries in {d} ({time.monotonic() - total:.0f} s)")
    return d


# --- certificates ----------------------------------------------------------------------------


def _pki(root: Path) -> None:
    """A CA, the API server's serving certificate (127.0.0.1, localhost), a serving
    certificate for local webhook servers, and the service-account key pair."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    import ipaddress

    root.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    later = now + datetime.timedelta(days=7)

    def key():
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def write_key(k, path: Path) -> None:
        path.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                         serialization.NoEncryption()))

    ca_key = key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuplan-test-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(later)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    write_key(ca_key, root / "ca.key")
    (root / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for name in ("apiserver", "webhook"):
        k = key()
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])).issuer_name(ca_name)
                .public_key(k.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(later)
                .add_extension(x509.SubjectAlternativeName([
                    x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        write_key(k, root / f"{name}.key")
        (root / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        # controller-runtime's webhook server reads tls.crt / tls.key
        if name == "webhook":
            (root / "webhook-certs").mkdir(exist_ok=True)
            shutil.copy(root / "webhook.crt", root / "webhook-certs" / "tls.crt")
            shutil.copy(root / "webhook.key", root / "webhook-certs" / "tls.key")
    sa = key()
    write_key(sa, root / "sa.key")
    (root / "sa.pub").write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                               serialization.PublicFormat.SubjectPublicKeyInfo))
    (root / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n'
                                     f'{SCHEDULER_TOKEN},system:kube-scheduler,system:kube-scheduler\n')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the running control plane -----------------------------------------------------------------


@dataclass
class ControlPlane:
    dir: Path
    bin: Path
    port: int = 0
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None, exe: Path | None = None) -> None:
        """Start ``exe`` (default: the component ``name`` among the built binaries) as ``name``."""
        log = open(self.dir / f"{name}.log", "ab")
        p = subprocess.Popen([str(exe or self.bin / name), *args], stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=self.dir, env={**os.environ, **(env or {})},
                             start_new_session=True)
        log.close()
        self.procs[name] = p
        pids = self._pids()
        pids[name] = p.pid
        (self.dir / "pids.json").write_text(json.dumps(pids, sort_keys=True))

    def _pids(self) -> dict[str, int]:
        f = self.dir / "pids.json"
        return json.loads(f.read_text()) if f.exists() else {}

    def log_tail(self, name: str, n: int = 3000) -> str:
        f = self.dir / f"{name}.log"
        return f.read_bytes()[-n:].decode(errors="replace") if f.exists() else ""

    def start(self, admission_plugins: tuple[str, ...] = (), crds: list[dict] | None = None,
              timeout: float = 120, admission_config: dict | None = None) -> None:
        """``admission_config``: an ``apiserver.config.k8s.io/v1`` AdmissionConfiguration, written
        beside the logs and handed to kube-apiserver's ``--admission-control-config-file`` (the
        plugins' own settings, e.g. the ResourceQuota plugin's ``limitedResources``)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        pki = self.dir / "pki"
        _pki(pki)
        etcd_port, peer_port, self.port = _free_port(), _free_port(), _free_port()
        self._spawn("etcd", [
            "--name=test", f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}", f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=test=http://127.0.0.1:{peer_port}", "--log-level=warn",
            "--unsafe-no-fsync",  # a throw-away test store: no fsync per write
            "--quota-backend-bytes=2147483648",
        ])
        plugins = ",".join(admission_plugins)
        config_flag = []
        if admission_config is not None:
            config_file = self.dir / "admission-config.json"
            config_file.write_text(json.dumps(admission_config, sort_keys=True))
            config_flag = [f"--admission-control-config-file={config_file}"]
        self._spawn("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}", f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16",  # allocation only: nothing here sends traffic to it
            "--allow-privileged=true",
            *( [f"--enable-admission-plugins={plugins}"] if plugins else []),
            *config_flag,
            "--profiling=false", "--v=0",
        ])
        self.write_kubeconfig()
        self._wait_ready(timeout)
        self._spawn("kube-controller-manager", [
            f"--kubeconfig={self.kubeconfig}", "--leader-elect=false", "--secure-port=0",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=true", "--controllers=*,-nodeipam,-cloud-node-lifecycle",
            "--concurrent-namespace-syncs=10", "--v=0",
        ])
        scheduler = self.dir / "scheduler.kubeconfig"
        self.write_kubeconfig(scheduler, SCHEDULER_TOKEN)
        self._spawn("kube-scheduler", [f"--kubeconfig={scheduler}", "--leader-elect=false", "--secure-port=0", "--v=0"])
        self._spawn("kwok", [
            f"--kubeconfig={self.kubeconfig}", "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--config={self.bin / STAGES_FILE}", "--node-ip=127.0.0.1", "--cidr=10.244.0.0/16",  # pod IPs are labels here: nothing is sent to them
        ])
        shutil.copy(self.bin / "kubectl", self.dir / "kubectl")
        if crds:
            self.install_crds(crds)
        # the default ServiceAccount appears once the controller manager runs; pods need it
        self.wait(lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default") is not None, timeout,
                  "the default ServiceAccount (kube-controller-manager)")

    def write_kubeconfig(self, path: Path | None = None, token: str = ADMIN_TOKEN) -> None:
        ca = self.dir / "pki" / "ca.crt"
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.server, "certificate-authority": str(ca)}}],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
        }
        (path or self.kubeconfig).write_text(json.dumps(cfg, indent=1))

    # --- REST -------------------------------------------------------------------------------

    def _ssl(self) -> ssl.SSLContext:
        ctx = getattr(self, "_ctx", None)
        if ctx is None:
            ctx = ssl.create_default_context(cafile=str(self.dir / "pki" / "ca.crt"))
            self._ctx = ctx
        return ctx

    def request(self, method: str, path: str, body: object | None = None, *, content_type: str = "application/json",
                impersonate: str | None = None, groups: tuple[str, ...] = (), timeout: float = 60) -> tuple[int, dict]:
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {ADMIN_TOKEN}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if impersonate:
            req.add_header("Impersonate-User", impersonate)
            for g in groups:
                req.add_header("Impersonate-Group", g)
        try:
            with urllib.request.urlopen(req, context=self._ssl(), timeout=timeout) as r:
                raw = r.read()
                try:
                    return r.status, json.loads(raw) if raw else {}
                except ValueError:  # /readyz and friends answer text
                    return r.status, {"text": raw.decode(errors="replace")}
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"message": raw.decode(errors="replace")}

    def get(self, path: str) -> dict | None:
        """The object (or list) at ``path``; None where the API server says it is not there (404).
        Any other answer is no reading at all: an overloaded server's 429 or 5xx is asked again
        for a while, then raised, never read as an absent object or an empty list."""
        end = time.monotonic() + 30
        while True:
            code, body = self.request("GET", path)
            if code == 200:
                return body
            if code == 404:
                return None
            if code not in (429, 500, 502, 503, 504) or time.monotonic() > end:
                raise ControlPlaneError(f"GET {path}: {code} {body.get('message', body)}")
            time.sleep(0.5)

    def wait(self, pred, timeout: float, what: str, interval: float = 0.2) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise ControlPlaneError(f"{name} exited with {p.returncode} while waiting for {what}:\n"
                                            f"{self.log_tail(name)}")
            time.sleep(interval)
        raise ControlPlaneError(f"timed out after {timeout:.0f} s waiting for {what}")

    def _wait_ready(self, timeout: float) -> None:
        def ready() -> bool:
            try:
                code, _ = self.request("GET", "/readyz", timeout=5)
            except (OSError, ssl.SSLError):
                return False
            return code == 200
        self.wait(ready, timeout, "kube-apiserver /readyz")

    def install_crds(self, crds: list[dict], timeout: float = 120) -> None:
        for crd in crds:
            code, body = self.apply(crd)
            if code >= 300:
                raise ControlPlaneError(f"CRD {crd['metadata']['name']} refused ({code}): {body.get('message')}")

        def established() -> bool:
            code, body = self.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
            if code != 200:
                return False
            done = {c["metadata"]["name"] for c in body.get("items", [])
                    if any(x["type"] == "Established" and x["status"] == "True"
                           for x in (c.get("status") or {}).get("conditions") or [])}
            return all(c["metadata"]["name"] in done for c in crds)
        self.wait(established, timeout, "the CRDs to be established")

    def path_of(self, obj: dict, *, collection: bool = False) -> str:
        """The REST path of an object (or of its collection), from the server's discovery."""
        api = obj["apiVersion"]
        base = f"/api/{api}" if "/" not in api else f"/apis/{api}"
        plural, namespaced = self.resource(api, obj["kind"])
        ns = (obj.get("metadata") or {}).get("namespace")
        if namespaced:
            base += f"/namespaces/{ns or 'default'}"
        base += f"/{plural}"
        return base if collection else f"{base}/{obj['metadata']['name']}"

    def resource(self, api: str, kind: str) -> tuple[str, bool]:
        cache = self.__dict__.setdefault("_discovery", {})
        if (api, kind) not in cache:
            path = f"/api/{api}" if "/" not in api else f"/apis/{api}"
            body = self.get(path)
            if body is None:
                raise ControlPlaneError(f"the API server serves no {api}")
            for r in body.get("resources", []):
                if "/" not in r["name"]:
                    cache[(api, r["kind"])] = (r["name"], r["namespaced"])
            if (api, kind) not in cache:
                raise ControlPlaneError(f"the API server serves no {kind} in {api}")
        return cache[(api, kind)]

    def forget_discovery(self) -> None:
        self.__dict__.pop("_discovery", None)

    def apply(self, obj: dict, *, manager: str = "gpuplan-test", dry_run: bool = False,
              impersonate: str | None = None) -> tuple[int, dict]:
        """Server-side apply, as Argo CD (``ServerSideApply=true``) and Flux apply."""
        # strict field validation, as `kubectl apply --server-side` sends it: an unknown field is an error, not pruned
        q = f"?fieldManager={manager}&force=true&fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")
        return self.request("PATCH", self.path_of(obj) + q, obj, content_type="application/apply-patch+yaml",
                            impersonate=impersonate)

    def create(self, obj: dict, *, dry_run: bool = False, impersonate: str | None = None,
               groups: tuple[str, ...] = ()) -> tuple[int, dict]:
        q = "?dryRun=All" if dry_run else ""
        return self.request("POST", self.path_of(obj, collection=True) + q, obj, impersonate=impersonate, groups=groups)

    def delete(self, obj: dict) -> tuple[int, dict]:
        return self.request("DELETE", self.path_of(obj), {"propagationPolicy": "Background"})

    def wait_admission_policies(self, timeout: float = 60) -> None:
        """Wait until every ValidatingAdmissionPolicy and binding written so far is in force.

        The API server enforces them some time after they are written: its admission plugin
        compiles them from informers in a loop that runs once a second (k8s.io/apiserver@v0.36.3
        pkg/admission/plugin/policy/generic/policy_source.go:47 ``policyRefreshIntervalDefault``,
        ``refreshPolicies`` at :238). A marker policy and binding written now deny a marker
        ConfigMap once they are compiled; each informer delivers its kind's events in order and a
        refresh compiles the whole list, so by then so is everything written before them."""
        n = self.__dict__["_markers"] = self.__dict__.get("_markers", 0) + 1
        name = f"gpuplan-test-marker-{n}"
        api = "admissionregistration.k8s.io/v1"
        policy = {"apiVersion": api, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
                  "spec": {"failurePolicy": "Fail",
                           "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                                   "operations": ["CREATE"], "resources": ["configmaps"]}]},
                           "validations": [{"expression": "false", "message": name}]}}
        binding = {"apiVersion": api, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
                   "spec": {"policyName": name, "validationActions": ["Deny"],
                            "matchResources": {"objectSelector": {"matchLabels": {"gpuplan-test/marker": str(n)}}}}}
        for o in (policy, binding):
            code, body = self.apply(o, manager="gpuplan-test-setup")
            if code >= 300:
                raise ControlPlaneError(f"marker {o['kind']} refused ({code}): {body.get('message')}")
        probe = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": name, "namespace": "default", "labels": {"gpuplan-test/marker": str(n)}}}

        def in_force() -> bool:
            code, body = self.create(probe, dry_run=True)
            return code >= 400 and name in body.get("message", "")
        try:
            self.wait(in_force, timeout, "the admission policies to be in force", interval=0.1)
        finally:
            for o in (binding, policy):
                self.delete(o)

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
                              input=input, capture_output=True, text=True)

    def stop(self) -> None:
        stop_pids(self.dir)
        self.procs.clear()


def stop_pids(d: Path, grace: float = 10) -> None:
    """Stop every process ``up`` started in ``d``: SIGTERM to each process group, then SIGKILL."""
    f = d / "pids.json"
    if not f.exists():
        return
    pids = json.loads(f.read_text())
    for pid in pids.values():
        try:
            os.killpg(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    end = time.monotonic() + grace
    for pid in pids.values():
        while time.monotonic() < end:
            try:
                os.killpg(pid, 0)
            except (ProcessLookupError, PermissionError):
                break
            try:  # reap our own children
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.05)
        else:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    f.unlink()


def pinned_crds() -> list[dict]:
    sys.path.insert(0, str(HERE))
    from crds import crd_documents  # noqa: E402

    return crd_documents()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="control-plane", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build every component into the cache (reused when built), "
                                     "then the KAI Scheduler's")
    b.add_argument("--no-kai", action="store_true", help="build only the core components, not the KAI Scheduler's")
    p = sub.add_parser("path", help="print the directory of the built binaries")
    p.add_argument("--kai", action="store_true", help="the KAI Scheduler's binaries instead")
    up = sub.add_parser("up", help="start a control plane in DIR")
    up.add_argument("dir", type=Path)
    up.add_argument("--admission-plugins", default="", help="extra admission plugins, e.g. ExtendedResourceToleration")
    up.add_argument("--no-crds", action="store_true", help="do not install the pinned CRDs")
    down = sub.add_parser("down", help="stop the control plane started in DIR")
    down.add_argument("dir", type=Path)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "build":
            build()
            if not a.no_kai:
                build_kai()
        elif a.cmd == "path":
            d = kai_built() if a.kai else built()
            if d is None:
                print("not built: run `scripts/control-plane build`", file=sys.stderr)
                return 1
            print(d)
        elif a.cmd == "up":
            d = built() or build()
            cp = ControlPlane(a.dir.resolve(), d)
            try:
                cp.start(tuple(p for p in a.admission_plugins.split(",") if p), None if a.no_crds else pinned_crds())
            except BaseException:
                cp.stop()
                raise
            print(f"kubeconfig: {cp.kubeconfig}", flush=True)
        elif a.cmd == "down":
            stop_pids(a.dir.resolve())
    except (ControlPlaneError, RuntimeError) as exc:  # crds.CRDError too
        print(f"control-plane: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
