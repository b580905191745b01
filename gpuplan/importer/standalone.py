"""NVIDIA device plugins and mig-managers that run without the GPU Operator.

A cluster without a ClusterPolicy may still run NVIDIA's device plugin as its own DaemonSet (its
static manifest, NVIDIA/k8s-device-plugin@v0.20.0 deployments/static/nvidia-device-plugin.yml:18-19
``nvidia-device-plugin-daemonset`` in kube-system, image ``nvcr.io/nvidia/k8s-device-plugin``, or
its Helm chart) and mig-manager beside it. gpuplan's draft installs the GPU Operator, whose own
device plugin registers ``nvidia.com/gpu`` with the same kubelet: the kubelet keeps one client and
one endpoint per resource name, a later registration replacing the earlier one
(kubernetes/kubernetes@v1.36.3 pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go:83-110
``s.clients[name] = c``; manager.go:228-239 ``m.endpoints[resourceName] = ...``), so the two
plugins take the node's GPUs from each other as each restarts. Each such DaemonSet is a GP943
naming the move: remove it before the first sync.

Its configuration still describes the fleet: the ConfigMap the DaemonSet mounts (the chart's
``available-configs`` volume and the config-manager's ``DEFAULT_CONFIG``, deployments/helm/
nvidia-device-plugin/templates/daemonset-device-plugin.yml:75-82 and 256-260; the plugin reads
``--config-file`` / ``CONFIG_FILE``, cmd/nvidia-device-plugin/main.go:175-180) is read as the
device-plugin configs when the operator's namespace has none, so time-slicing and MPS are still
drafted; a mig-manager's mounted ConfigMap likewise as the mig-parted configs. Only DaemonSets
are read (a tenant may create one in its namespace only where it may run privileged pods), and
only from the namespace of the DaemonSet itself.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.artifacts import dig
from gpuplan.diagnostics import show
from gpuplan.importer import codes as C
from gpuplan.importer import draft as I
from gpuplan.importer.read import Obj, yaml_payload

DEVICE_PLUGIN_IMAGE = "k8s-device-plugin"  # nvcr.io/nvidia/k8s-device-plugin
MIG_MANAGER_IMAGE = "k8s-mig-manager"  # nvcr.io/nvidia/cloud-native/k8s-mig-manager


@dataclass
class Standalone:
    device_plugins: list[Obj] = field(default_factory=list)
    mig_managers: list[Obj] = field(default_factory=list)

    @property
    def objects(self) -> list[Obj]:
        return self.device_plugins + self.mig_managers


def _containers(o: Obj) -> list[dict]:
    spec = dig(o.data, "spec", "template", "spec")
    spec = spec if isinstance(spec, dict) else {}
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or () if isinstance(c, dict)]


def _image(o: Obj, name: str) -> int | None:
    """Index of the first container running ``name``'s image."""
    for i, c in enumerate(dig(o.data, "spec", "template", "spec", "containers") or ()):
        image = c.get("image") if isinstance(c, dict) else None
        if isinstance(image, str) and image.rsplit("/", 1)[-1].split(":")[0].split("@")[0] == name:
            return i
    return None


def _operator_owned(o: Obj) -> bool:
    refs = o.meta.get("ownerReferences")
    return any(isinstance(r, dict) and r.get("kind") == "ClusterPolicy" for r in refs or ()) if isinstance(refs, list) else False


def _env(o: Obj, name: str) -> str | None:
    for c in _containers(o):
        for e in c.get("env") or ():
            if isinstance(e, dict) and e.get("name") == name and isinstance(e.get("value"), str):
                return e["value"]
    return None


def _mounted(o: Obj, objs: list[Obj]) -> list[Obj]:
    vols = dig(o.data, "spec", "template", "spec", "volumes") or ()
    names = {dig(v, "configMap", "name") for v in vols if isinstance(v, dict)}
    return [c for c in objs if c.kind == "ConfigMap" and not c.api_group and c.namespace == o.namespace
            and c.name in names]


def find(objs: list[Obj], cfg: Any, draft: I.Draft) -> Standalone:
    """The device plugins and mig-managers no ClusterPolicy owns; their configs into ``cfg``
    where the operator's namespace gave none."""
    out = Standalone()
    for o in sorted((o for o in objs if o.kind == "DaemonSet" and o.api_group == "apps"),
                    key=lambda o: (o.namespace, o.name)):
        if _operator_owned(o):
            continue
        if _image(o, DEVICE_PLUGIN_IMAGE) is not None:
            out.device_plugins.append(o)
            if cfg.dp_cm is None:
                _read_dp(o, objs, cfg, draft)
        elif _image(o, MIG_MANAGER_IMAGE) is not None:
            out.mig_managers.append(o)
            if cfg.mig_cm is None:
                _read_mig(o, objs, cfg, draft)
    for o in out.objects:
        what = "device plugin" if o in out.device_plugins else "mig-manager"
        i = _image(o, DEVICE_PLUGIN_IMAGE if what == "device plugin" else MIG_MANAGER_IMAGE)
        both = " with a ClusterPolicy in the input" if cfg.policy is not None else ""
        draft.diagnostics.append(I.diag(
            C.W_STANDALONE, f"DaemonSet {show(o.namespace)}/{show(o.name)} runs NVIDIA's {what} outside the GPU "
            f"Operator{both}; the draft installs the operator, whose {what} would run beside it on every GPU node"
            + (" (both register nvidia.com/gpu with the kubelet)" if what == "device plugin" else ""),
            o, "spec", "template", "spec", "containers", i, "image",
            hint=f"before the first sync: kubectl delete daemonset -n {show(o.namespace)} {show(o.name)} (or "
                 "helm uninstall its release); its configs are drafted as the operator's"))
    return out


def _read_dp(o: Obj, objs: list[Obj], cfg: Any, draft: I.Draft) -> None:
    for cm in _mounted(o, objs):
        data = cm.data.get("data") if isinstance(cm.data.get("data"), dict) else {}
        parsed = {k: yaml_payload(v) for k, v in sorted(data.items())}
        configs = {k: v for k, v in parsed.items() if I.is_dp_config(v)}
        if not configs:
            continue
        cfg.dp_cm, cfg.dp = cm, configs
        # find_configs reported it as a GP965 (outside the operator's namespace); it is configuration: the
        # plugin that advertises the node's GPUs reads it
        draft.diagnostics[:] = [d for d in draft.diagnostics if not (
            d.code == C.W_NOT_TRUSTED.code and d.message.startswith(f"ConfigMap {show(cm.namespace)}/{show(cm.name)} "))]
        default = _env(o, "DEFAULT_CONFIG")
        cfg.dp_default = default if default in configs else next(iter(configs)) if len(configs) == 1 else None
        if cfg.dp_default is None:
            draft.diagnostics.append(I.diag(
                C.I_TODO, f"ConfigMap {show(cm.namespace)}/{show(cm.name)} holds {len(configs)} device-plugin configs "
                f"and DaemonSet {show(o.namespace)}/{show(o.name)} names no DEFAULT_CONFIG: nodes without the "
                "nvidia.com/device-plugin.config label are drafted exclusive", cm, "data"))
        return


def _read_mig(o: Obj, objs: list[Obj], cfg: Any, draft: I.Draft) -> None:
    for cm in _mounted(o, objs):
        for k, v in sorted((cm.data.get("data") or {}).items()):
            parsed = yaml_payload(v)
            if I.is_mig_config(parsed):
                cfg.mig_cm, cfg.mig_key = cm, k
                draft.diagnostics[:] = [d for d in draft.diagnostics if not (
                    d.code == C.W_NOT_TRUSTED.code and d.message.startswith(f"ConfigMap {show(cm.namespace)}/{show(cm.name)} "))]
                cfg.mig = {n: e for n, e in parsed["mig-configs"].items() if isinstance(n, str) and isinstance(e, list)}
                default = _env(o, "DEFAULT_MIG_CONFIG")
                cfg.mig_default = default if default in cfg.mig else "all-disabled" if "all-disabled" in cfg.mig else None
                return


def operator_settings(found: Standalone, cfg: Any, op: dict[str, Any], draft: I.Draft) -> None:
    """A stand-alone device plugin needs the driver and container toolkit on the host: without a
    ClusterPolicy to say otherwise, the draft keeps both (preinstalled)."""
    if not found.device_plugins or cfg.policy is not None:
        return
    o = found.device_plugins[0]
    at = ("spec", "cluster", "gpuOperator")
    if "driver" not in op and "driverVersion" not in op:
        op["driver"] = "preinstalled"
        draft.note(at + ("driver",), f"DaemonSet {o.namespace}/{o.name} runs the device plugin without the "
                   "operator: the nodes' own driver")
    if "toolkit" not in op:
        op["toolkit"] = "preinstalled"
        draft.note(at + ("toolkit",), f"DaemonSet {o.namespace}/{o.name} runs the device plugin without the "
                   "operator: the nodes' own container toolkit")
