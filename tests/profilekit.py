"""A tuned profile for tests, as `edgepilot tune` would save it for a model on this machine."""

from __future__ import annotations

from edgepilot.tuned.identity import device_id, model_id
from edgepilot.tuned.pinning import allowed_cpus
from edgepilot.tuned.profiles import Profile


def make_profile(path, root=None, **kw) -> Profile:
    device = device_id(root) if root is not None else device_id()
    model = model_id(path)
    values = dict(
        device_fingerprint=device.fingerprint,
        device=device.description,
        model_key=model.key,
        model_name=model.name,
        model_size=model.size,
        n_threads=1,
        n_threads_batch=2,
        cpus=[allowed_cpus()[0]],
        n_ubatch=256,
        flash_attn=True,
        gen_tps=50.0,
        prompt_tps=300.0,
        created="2026-11-29T12:00:00Z",
    )
    values.update(kw)
    return Profile(**values)
