"""Hardware inventory: the NVML node probe and the NodeInventory model.

- ``gpuplan.probe.inventory``: pydantic models, JSON Schema; ``gpuplan.probe.reader``: ``load_inventory``
  (imports neither pynvml nor ruamel at import time);
- ``gpuplan.probe.facts``: answers the fleet rules need from one inventory;
- ``gpuplan.probe.collect``: ``probe_node(nvml, ...)`` (NVML module injected);
- ``gpuplan.probe.fake``: a fixture-driven stand-in for pynvml;
- ``gpuplan.probe.publish`` / ``pull``: node-probe ConfigMaps in and out;
- ``gpuplan.probe.codes``: GP701-GP707.

Stage: report (docs/architecture.md)."""
